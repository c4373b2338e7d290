"""Every script of the gallery (examples/) runs and passes its own checks.

Each script compares its result with an independent reference (a closed form, hand-written code, SciPy,
finite differences) and raises when they disagree; this test runs each in a fresh process (some set
SCIPY_ARRAY_API, which SciPy reads once, at import) on the numpy backend, with its figure written to a
temporary folder, and checks the figure is a PNG. The scripts need SciPy and matplotlib (the test extra).
"""

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))

# the scripts pin the numpy backend: run them once, in the numpy lane of `make test`
pytestmark = pytest.mark.skipif(
    os.environ.get("POLYAD_BACKEND", "numpy") != "numpy", reason="the gallery runs in the numpy lane"
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start every script at once (they take a few seconds each, mostly importing SciPy and matplotlib:
    running them side by side keeps the gallery's share of `make test` small); each test waits on its own."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("scipy")
    started = {}
    for script in SCRIPTS:
        folder = tmp_path_factory.mktemp(script.stem)
        env = dict(os.environ, POLYAD_BACKEND="numpy", POLYAD_GALLERY_DIR=str(folder), MPLBACKEND="Agg")
        env.pop("SCIPY_ARRAY_API", None)  # the script that needs it sets it itself
        process = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)  # fmt: skip
        started[script] = (process, folder)
    yield started
    for process, _ in started.values():
        if process.poll() is None:
            process.kill()


def test_gallery_is_not_empty():
    assert len(SCRIPTS) >= 7, [p.name for p in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_gallery_script(script, runs):
    process, folder = runs[script]
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, f"{script.name} failed:\n{output}"
    figures = list(folder.glob("*.png"))
    assert [f.name for f in figures] == [f"{script.stem}.png"], figures
    assert figures[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""The structure ARCHITECTURE.md promises, checked on the code's own imports (polyad/testing/structure.py):
imports run one way through the layers, no circle, no import inside a function except of optional
libraries, no source file over 800 lines, no private name used across modules, no backend's library,
folder or name outside polyad/backends/; and ARCHITECTURE.md lists the layers the checker enforces."""

import pathlib
import re

from polyad.testing import structure


def test_structure_rules_hold():
    problems = structure.check()
    assert not problems, "\n".join(problems)


def test_architecture_lists_the_layers_the_checker_enforces():
    # each layer is a numbered line of ARCHITECTURE.md: "1. **backends** (`polyad.backends`) ..."
    text = (pathlib.Path(structure.ROOT) / "ARCHITECTURE.md").read_text()
    documented = []
    for m in re.finditer(r"^\d+\. \*\*(\w+)\*\* \(([^)]*)\)", text, re.M):
        documented.append((m.group(1), tuple(re.findall(r"`([\w.]+)`", m.group(2)))))
    assert documented == [(name, prefixes) for name, prefixes in structure.LAYERS]


def test_checker_finds_a_circle_an_upward_import_and_a_private_name(tmp_path):
    # the checker itself: a two-file circle, an import from a higher layer, one inside a function, and a
    # private name imported from another module
    ops = tmp_path / "polyad" / "ops"
    ops.mkdir(parents=True)
    (ops / "a.py").write_text("from polyad.ops import b\n_x = 1\n")
    (ops / "b.py").write_text(
        "from polyad.ops import a\nfrom polyad import api\nfrom polyad.ops.a import _x\n"
    )
    (tmp_path / "polyad" / "api.py").write_text("def f():\n    import polyad.ops.a\n")
    files = {
        "polyad.ops.a": ops / "a.py",
        "polyad.ops.b": ops / "b.py",
        "polyad.api": tmp_path / "polyad" / "api.py",
    }
    root, structure.ROOT = structure.ROOT, tmp_path
    try:
        problems = structure.check(files)
    finally:
        structure.ROOT = root
    circles = [p for p in problems if p.startswith("import circle:")]
    assert len(circles) == 1 and "polyad.ops.a -> polyad.ops.b" in circles[0]
    assert any("from a higher layer (ops -> api)" in p for p in problems)
    assert any("imports polyad.ops.a inside a function" in p for p in problems)
    assert any("uses polyad.ops.a._x, private to its module" in p for p in problems)


def test_checker_finds_backend_imports_and_name_tests_outside_backends(tmp_path):
    # outside polyad/backends/: a cupyx import, an import of one backend's folder and a test of a
    # backend's name are refused; the same lines inside polyad/backends/, a module-name test and an op
    # table of polyad/testing/ pass
    (tmp_path / "polyad" / "api").mkdir(parents=True)
    (tmp_path / "polyad" / "backends").mkdir()
    (tmp_path / "polyad" / "testing").mkdir()
    leaky = (
        "def f(b, x, setting):\n"
        "    import cupyx.scipy.sparse\n"
        "    from polyad.backends.numpy import compiler\n"
        "    if b.name == 'numpy' or setting.output in ('dask', 'array'):\n"
        "        return type(x).__module__ == 'numpy'\n"
    )
    clean = "def f(x, module):\n    return type(x).__module__ == 'numpy' or module == 'numpy'\n"
    files = {
        "polyad.api.leaky": tmp_path / "polyad" / "api" / "leaky.py",
        "polyad.api.clean": tmp_path / "polyad" / "api" / "clean.py",
        "polyad.backends.own": tmp_path / "polyad" / "backends" / "own.py",
        "polyad.testing.table_toy": tmp_path / "polyad" / "testing" / "table_toy.py",
    }
    files["polyad.api.leaky"].write_text(leaky)
    files["polyad.api.clean"].write_text(clean)
    files["polyad.backends.own"].write_text(leaky)
    files["polyad.testing.table_toy"].write_text("ROWS = [r for r in () if r.backend == 'cupy']\n")
    found = {m: structure.backend_leaks(m, p) for m, p in files.items()}
    assert [what for _, what in found["polyad.api.leaky"]] == [
        "imports cupyx.scipy.sparse",
        "imports polyad.backends.numpy, one backend's folder",
        "tests a backend's name (b.name == 'numpy')",
        "tests a backend's name (setting.output in ('dask', 'array'))",
    ]
    for module in ("polyad.api.clean", "polyad.backends.own", "polyad.testing.table_toy"):
        assert found[module] == [], module

"""The structure ARCHITECTURE.md promises, checked on the code's own imports (scripts/check_structure.py):
imports run one way (backends -> core -> ops -> transforms -> api), no circle, no import inside a function
except of optional libraries, no source file over 800 lines."""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "check_structure", pathlib.Path(__file__).resolve().parent.parent / "scripts" / "check_structure.py"
)
structure = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(structure)


def test_structure_rules_hold():
    problems = structure.check()
    assert not problems, "\n".join(problems)


def test_checker_finds_a_circle_and_an_upward_import(tmp_path):
    # the checker itself: a two-file circle, an import from a higher layer and one inside a function
    ops = tmp_path / "polyad" / "ops"
    ops.mkdir(parents=True)
    (ops / "a.py").write_text("from polyad.ops import b\n")
    (ops / "b.py").write_text("from polyad.ops import a\nfrom polyad import api\n")
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

"""The structure ARCHITECTURE.md promises, checked on the code's own imports (polyad/testing/structure.py):
imports run one way through the layers, no circle, no import inside a function except of optional
libraries, no source file over 800 lines, no private name used across modules, no backend's library,
folder or name outside polyad/backends/; and ARCHITECTURE.md lists the layers the checker enforces."""

import importlib
import pathlib
import re

import pytest

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


def test_checker_keeps_the_root_numpy_distributed_and_private_modules_rules(tmp_path):
    # a module loose in the package root, numpy imported directly, Dask's distributed outside the cluster
    # runner, and a private module imported from another package (its own package may import it)
    base = tmp_path / "polyad"
    for folder in ("api", "ops"):
        (base / folder).mkdir(parents=True)
    sources = {
        "polyad.helpers": (base / "helpers.py", "x = 1\n"),
        "polyad.ops.a": (base / "ops" / "a.py", "import numpy as np\nimport distributed\n"),
        "polyad.api._private": (base / "api" / "_private.py", "y = 2\n"),
        "polyad.api.grad": (base / "api" / "grad.py", "from polyad.api._private import y\n"),
        "polyad.scipy.optimize": (base / "scipy_optimize.py", "from polyad.api import _private\n"),
        "polyad.testing.table_x": (base / "table_x.py", "import numpy as np\n"),
    }
    for path, text in sources.values():
        path.write_text(text)
    files = {module: path for module, (path, _) in sources.items()}
    root, structure.ROOT = structure.ROOT, tmp_path
    try:
        problems = structure.check(files)
    finally:
        structure.ROOT = root
    assert any(p.startswith("polyad/helpers.py sits in the package root") for p in problems)
    assert [p for p in problems if "imports numpy" in p] == [
        "polyad/ops/a.py:1 imports numpy: use ``from polyad.backends.host import np``"
    ]
    assert any("polyad/ops/a.py:2 imports Dask's distributed" in p for p in problems)
    private = [p for p in problems if "private to polyad.api" in p]
    assert private == ["polyad/scipy_optimize.py:1 imports polyad.api._private, private to polyad.api"]


def test_layers_have_no_catch_all():
    # the package root's __init__ is a layer of its own; a module no layer names belongs to none
    assert structure.LAYERS[structure.layer_of("polyad")][0] == "root"
    assert structure.layer_of("polyad.scipy.integrate.bdf") > structure.layer_of("polyad.api.jacobians")
    with pytest.raises(ValueError, match="polyad.helpers belongs to no layer"):
        structure.layer_of("polyad.helpers")


def test_the_import_graph_has_no_arrow_running_back_up():
    counts = structure.arrow_counts()
    assert counts["upward"] == 0 and counts["running_back_up"] == 0 and counts["folder_circles"] == []
    assert counts["arrows"] > counts["between_layers"] > 0


def test_former_paths_keep_working_or_name_the_new_one():
    import polyad as pa

    # public paths: the very modules, their submodules too
    for old, new in [
        ("polyad.optimize", "polyad.scipy.optimize"),
        ("polyad.integrate", "polyad.scipy.integrate"),
        ("polyad.integrate.driver", "polyad.scipy.integrate.driver"),
        ("polyad.linalg", "polyad.scipy.linalg"),
        ("polyad.sparse.linalg", "polyad.scipy.sparse.linalg"),
        ("polyad.library", "polyad.custom.library"),
        ("polyad.custom_ops", "polyad.custom.ops"),
        ("polyad.fused", "polyad.custom.ops"),
        ("polyad.dispatch", "polyad.core.dispatch"),
    ]:
        assert importlib.import_module(old) is importlib.import_module(new), old
    from polyad.integrate import solve_ivp
    from polyad.sparse.linalg import spsolve

    assert solve_ivp is pa.integrate.solve_ivp and spsolve is pa.sparse.linalg.spsolve
    # internal paths: the error names the new one (a moved folder's, for a module in it)
    for old, message in [
        ("polyad.ops.numpy.ufuncs", "polyad.ops.numpy moved to polyad.interop.numpy"),
        ("polyad.control.implicit", "polyad.control.implicit moved to polyad.custom.implicit"),
        ("polyad.chunking.plan", "polyad.chunking moved to polyad.parallel"),
        ("polyad.api.arguments", "polyad.api.arguments moved to polyad.api._arguments"),
    ]:
        with pytest.raises(ModuleNotFoundError, match=message):
            importlib.import_module(old)


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

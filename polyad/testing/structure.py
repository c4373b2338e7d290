"""The import graph of polyad, drawn from the code's own imports, and the rules it must keep.

Rules (ARCHITECTURE.md, whose list of layers ``tests/test_structure.py`` holds against ``LAYERS``):
- imports run one way, layer by layer (``LAYERS``, lowest first), the package root included;
- no import circle, between any two files;
- no import inside a function, except of optional libraries (cupy, scipy, dask, ...);
- no source file over 800 lines;
- no name with a leading underscore imported from another module, nor read as ``module._name``;
- outside ``polyad/backends/``, no import of cupy, cupyx or numba, nor of one backend's folder, and no test
  of a backend's name (``b.name == "numpy"``, ``output in ("dask", ...)``): what differs between libraries is
  a field of the backend contract (``polyad.backends.contract``).
- the package root holds only ``ROOT_MODULES`` and folders; NumPy only through ``polyad.backends.host``
  (``NUMPY_ALLOWED`` aside); Dask's ``distributed`` only in the cluster runner; a private module (a name
  with a leading underscore: ``api/_arguments.py``) imported only inside its package.

``python -m polyad.testing.structure`` prints each layer with its files and their imports of polyad
modules, then every rule broken (exit status 1 if any). ``tests/test_structure.py`` runs the same checks.

Example:
    >>> from polyad.testing.structure import layer_of
    >>> layer_of("polyad.transforms.reverse"), layer_of("polyad.api.grad")
    (4, 9)
"""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent  # the repository (polyad/testing/ -> ..)
MAX_LINES = 800
# libraries a user may not have: importing them inside the function that needs them keeps them optional
OPTIONAL = {"cupy", "cupyx", "scipy", "dask", "distributed", "numexpr", "numba", "matplotlib", "tqdm",
            "sklearn", "array_api_strict", "networkx", "torch", "jax", "cloudpickle", "IPython",
            "mpmath"}  # fmt: skip
# libraries only a backend imports, and the built-in backends' names, which only a backend compares against
BACKEND_LIBRARIES = {"cupy", "cupyx", "numba"}
BACKEND_NAMES = {"numpy", "cupy", "dask", "array_api_strict"}
# modules outside polyad/backends/ that may still name a backend: the op tables (their rows list what
# fails on which backend), and for a backend's folder also the rest of polyad.testing (the vecmath accuracy
# checks) and the info command (the CuPy wheel advice of backends/cupy/driver.py); the cluster runner is
# Dask's by design (its output="dask")
NAME_EXEMPT = ("polyad.testing.table_", "polyad.parallel.cluster")
FOLDER_EXEMPT = ("polyad.testing.", "polyad.__main__")
# lowest first: one folder each (a root module goes with the layer it serves); a module belongs to the first
# layer naming it or a package above it. ``polyad`` names the package root's __init__.py only: no catch-all.
LAYERS = [
    ("backends", ("polyad.backends",)),
    ("core", ("polyad.core", "polyad.config")),
    ("ops", ("polyad.ops", "polyad.xp")),
    ("interop", ("polyad.interop",)),
    ("transforms", ("polyad.transforms", "polyad.random")),
    ("graph", ("polyad.graph",)),
    ("control", ("polyad.control",)),
    ("custom", ("polyad.custom",)),
    ("parallel", ("polyad.parallel",)),
    ("api", ("polyad.api",)),
    ("scipy", ("polyad.scipy",)),
    ("root", ("polyad", "polyad.moved", "polyad.__main__")),
    ("testing", ("polyad.testing",)),
]
# what the package root may hold besides folders: the public faces and switches, and the former paths
ROOT_MODULES = {"__init__", "__main__", "config", "xp", "random", "moved"}
# NumPy is reached through ``polyad.backends.host`` (``from polyad.backends.host import np``) outside the
# backends; the op tables compare with NumPy's own functions
NUMPY_ALLOWED = ("polyad.backends", "polyad.testing.table_")
HOST_LIBRARY = {"numpy"}
# Dask's distributed client: only the cluster runner
DISTRIBUTED_ALLOWED = ("polyad.parallel.cluster",)


def layer_of(module):
    """The index in ``LAYERS`` of the layer ``module`` belongs to: the first naming it or a package above
    it (``polyad`` itself names the package root's ``__init__.py`` only)."""
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or (p != "polyad" and module.startswith(p + ".")) for p in prefixes):
            return i
    raise ValueError(f"{module} belongs to no layer")


def _is_private_module(module):
    """Whether ``module`` is private to its package: a name with one leading underscore in its path."""
    return any(_private(part) for part in module.split(".")[1:])


def _private_owner(module):
    """The package that may import a private module: the one holding its first private part."""
    parts = module.split(".")
    first = next(i for i, part in enumerate(parts) if i and _private(part))
    return ".".join(parts[:first])


def source_files():
    """``{module name: path}`` of polyad's source files."""
    files = {}
    base = ROOT / "polyad"
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(["polyad", *parts])] = path
    return files


def _resolve(module, node, is_package):
    """The absolute module names an import statement in ``module`` names (candidates, longest first)."""
    if isinstance(node, ast.Import):
        return [[a.name] for a in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([base] if base else []))
    return [[f"{base}.{a.name}", base] for a in node.names]


_TREES = {}  # (path, mtime, size) -> (syntax tree, line count): check and arrow_counts parse each file once


def _parsed(path):
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _TREES:
        text = path.read_text()
        _TREES[key] = (ast.parse(text, filename=str(path)), len(text.splitlines()))
    return _TREES[key]


def _imports_of(module, path, files):
    """``[(target, line, inside_function)]`` of one file's import statements."""
    is_package = path.name == "__init__.py"
    found = []
    stack = [(node, False) for node in ast.iter_child_nodes(_parsed(path)[0])]
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            for candidates in _resolve(module, node, is_package):
                target = next((c for c in candidates if c in files), candidates[-1])
                found.append((target, node.lineno, in_function))
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return sorted(found, key=lambda f: f[1])


def private_uses(module, path, files):
    """``[(line, "module._name")]``: names with one leading underscore that ``module`` imports from another
    polyad module, or reads as an attribute of a polyad module it imported (``dispatch._state``)."""
    tree = _parsed(path)[0]
    is_package = path.name == "__init__.py"
    aliases = {}  # local name -> polyad module it is bound to
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, node, is_package)[0][-1]
            if not base.startswith("polyad"):
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                if full in files:
                    aliases[a.asname or a.name] = full
                elif _private(a.name):
                    uses.append((node.lineno, full))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("polyad") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
            target = aliases.get(node.value.id)
            if target is not None and target != module:
                uses.append((node.lineno, f"{target}.{node.attr}"))
    return sorted(uses)


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _strings(node):
    """The string constants of ``node``: itself, or the elements of a tuple, list or set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _is_module_name(node):
    """Whether ``node`` reads a Python module's name (``x.__module__``, ``getattr(x, "__module__")``, a
    variable ``module``): a test of where a function comes from, not of a backend."""
    text = ast.unparse(node)
    return "__module__" in text or isinstance(node, ast.Name) and node.id == "module"


def backend_leaks(module, path):
    """``[(line, what)]``: where ``module``, outside ``polyad/backends/``, imports a backend's library
    (``BACKEND_LIBRARIES``) or one backend's folder, or compares a value with a backend's name."""
    if module == "polyad.backends" or module.startswith("polyad.backends."):
        return []
    text = path.read_text()
    quoted = any(f"{q}{name}{q}" in text for name in BACKEND_NAMES for q in "'\"")
    if not quoted and "polyad.backends" not in text and not any(lib in text for lib in BACKEND_LIBRARIES):
        return []  # nothing to look for: most files, without walking their tree
    found = []
    for node in ast.walk(_parsed(path)[0]):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.module == "polyad.backends":
                names = [f"polyad.backends.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] in BACKEND_LIBRARIES:
                    found.append((node.lineno, f"imports {name}"))
                elif name.split(".")[:3][-1] in BACKEND_NAMES and name.startswith("polyad.backends."):
                    if not module.startswith(FOLDER_EXEMPT):
                        found.append((node.lineno, f"imports {name}, one backend's folder"))
        elif isinstance(node, ast.Compare) and not module.startswith(NAME_EXEMPT):
            sides = [node.left, *node.comparators]
            named = set().union(*map(_strings, sides)) & BACKEND_NAMES
            if named and not any(_is_module_name(side) for side in sides):
                found.append((node.lineno, f"tests a backend's name ({ast.unparse(node)})"))
    return sorted(found)


_GRAPHS = {}  # the last few import graphs drawn, by the files and their versions


def imports(files):
    """``{module: [(target, line, inside_function)]}`` for every file's imports."""
    key = tuple((m, str(p), p.stat().st_mtime_ns) for m, p in sorted(files.items()))
    if key not in _GRAPHS:
        if len(_GRAPHS) > 3:  # the package's graph and a test's small ones
            _GRAPHS.pop(next(iter(_GRAPHS)))
        _GRAPHS[key] = {module: _imports_of(module, path, files) for module, path in files.items()}
    return _GRAPHS[key]


def _is_optional(target):
    return target.split(".")[0] in OPTIONAL or target in ("array_api_compat.cupy", "array_api_compat.dask")


def check(files=None):
    """Every broken rule, as a list of sentences (empty when the structure is sound)."""
    files = files or source_files()
    graph = imports(files)
    # a polyad module that imports an optional library at its top is itself optional (backends/cupy/*)
    optional = {m for m, found in graph.items() if any(_is_optional(t) and not f for t, _, f in found)}
    problems = []
    for module, path in files.items():
        n = _parsed(path)[1]
        if n > MAX_LINES:
            problems.append(f"{path.relative_to(ROOT)} has {n} lines (at most {MAX_LINES})")
        for target, line, in_function in graph[module]:
            if in_function and not (_is_optional(target) or target in optional):
                problems.append(f"{path.relative_to(ROOT)}:{line} imports {target} inside a function")
            if target in files and layer_of(target) > layer_of(module):
                problems.append(
                    f"{path.relative_to(ROOT)}:{line} imports {target} from a higher layer "
                    f"({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})"
                )
            if target in files and _is_private_module(target) and not _is_private_module(module):
                owner = _private_owner(target)
                if not module.startswith(owner + "."):
                    problems.append(f"{path.relative_to(ROOT)}:{line} imports {target}, private to {owner}")
            top = target.split(".")[0]
            if top in HOST_LIBRARY and not module.startswith(NUMPY_ALLOWED):
                hint = "use ``from polyad.backends.host import np``"
                problems.append(f"{path.relative_to(ROOT)}:{line} imports numpy: {hint}")
            if top == "distributed" and module not in DISTRIBUTED_ALLOWED:
                problems.append(
                    f"{path.relative_to(ROOT)}:{line} imports Dask's distributed: only "
                    f"{', '.join(DISTRIBUTED_ALLOWED)} may"
                )
        for line, name in private_uses(module, path, files):
            problems.append(f"{path.relative_to(ROOT)}:{line} uses {name}, private to its module")
        for line, what in backend_leaks(module, path):
            problems.append(
                f"{path.relative_to(ROOT)}:{line} {what} outside polyad/backends/ (a field of the backend "
                "contract says what differs between libraries)"
            )
        if module.count(".") == (0 if path.name == "__init__.py" else 1) and path.stem not in ROOT_MODULES:
            problems.append(
                f"{path.relative_to(ROOT)} sits in the package root, which holds only "
                f"{', '.join(sorted(ROOT_MODULES))} and folders"
            )
    for cycle in cycles({m: {t for t, _, _ in e if t in files and t != m} for m, e in graph.items()}):
        problems.append("import circle: " + " -> ".join(cycle + [cycle[0]]))
    return problems


def cycles(edges):
    """The strongly connected components with more than one module (Tarjan), each as a list."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def describe(files=None):
    """The graph layer by layer: each file, its line count and the polyad modules it imports."""
    files = files or source_files()
    graph = imports(files)
    lines = []
    for i, (name, _) in reversed(list(enumerate(LAYERS))):
        lines.append(f"{name}:")
        for module in sorted(m for m in files if layer_of(m) == i):
            n = len(files[module].read_text().splitlines())
            targets = sorted({t for t, _, _ in graph[module] if t in files and t != module})
            lines.append(f"  {module} ({n} lines) -> {', '.join(targets) or '-'}")
    return "\n".join(lines)


def arrow_counts(files=None):
    """How the import graph runs, counted: ``modules``; ``arrows`` (one per pair of polyad modules, one
    importing the other); ``between_layers`` (those whose two ends are in different layers) and
    ``layer_pairs`` (the distinct ordered pairs of layers they join); ``upward`` (those pointing to a
    higher layer); ``folder_arrows`` (distinct pairs of top-level folders or root modules, one importing
    the other) and ``running_back_up`` (the folder arrows that lie on a circle of folders: whichever order
    the folders are put in, one of them points back up).

    Example:
        >>> from polyad.testing.structure import arrow_counts
        >>> arrow_counts()["upward"]
        0
    """
    files = files or source_files()
    graph = imports(files)
    arrows = {(m, t) for m, found in graph.items() for t, _, _ in found if t in files and t != m}
    crossing = [(m, t) for m, t in arrows if layer_of(m) != layer_of(t)]
    folder = {m: ".".join(m.split(".")[:2]) for m in files}  # polyad.ops.linalg.x -> polyad.ops
    folder_arrows = {(folder[m], folder[t]) for m, t in arrows if folder[m] != folder[t]}
    edges = {}
    for a, b in folder_arrows:
        edges.setdefault(a, set()).add(b)
    circles = [set(c) for c in cycles(edges)]
    return {
        "modules": len(files),
        "arrows": len(arrows),
        "between_layers": len(crossing),
        "layer_pairs": len({(layer_of(m), layer_of(t)) for m, t in crossing}),
        "upward": sum(layer_of(t) > layer_of(m) for m, t in crossing),
        "folder_arrows": len(folder_arrows),
        "running_back_up": sum(any(a in c and b in c for c in circles) for a, b in folder_arrows),
        "folder_circles": sorted(sorted(c) for c in circles),
    }


if __name__ == "__main__":
    print(describe())
    print("\narrows:", ", ".join(f"{k} {v}" for k, v in arrow_counts().items()))
    problems = check()
    print(f"\n{len(problems)} problem(s)")
    for p in problems:
        print(" -", p)
    sys.exit(1 if problems else 0)

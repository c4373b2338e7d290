"""Where a traced value became a Python number, and whether that use can lose a derivative.

``float(x)`` of a traced ``x`` hands out a plain Python float (CPython insists on an exact float), so polyad
cannot follow what is computed from it. Most such numbers are harmless: a comparison (``if float(err) <
tol:``), a branch, an integer, a message. The one that loses a derivative is arithmetic: ``2 *
math.log(abs(lmb))`` in ``scipy.stats.boxcox_llf``. ``classify`` reads the source of the call that
converted the value (the calling frame's position, as Python's tracebacks do) and says which it is:

- **control**: the conversion, or the conversion's result, only meets comparisons, ``not``/``and``/``or``,
  the test of an ``if``/``while``/``assert``/conditional expression, a function returning a bool or an
  integer (``math.isnan``, ``math.floor``, ``int``, ``round(x)``, ``len``, ``range``), or text (f-strings,
  ``str``, ``repr``, ``format``, ``print``). Such a use has derivative zero almost everywhere, as polyad
  gives: nothing is lost.
- **value** otherwise, including a number stored in a variable that is later used in arithmetic (a
  variable only compared later counts as control: the function's uses of the name are read).

Where the source cannot be read (interactive input, generated code) a use counts as value: the warning
that may follow says so. This is a reading of the code, not of what runs; it errs towards warning.
"""

import ast
import linecache
import sys

_CONTROL_CALLS = frozenset(
    ("int", "bool", "len", "range", "str", "repr", "format", "print", "isinstance", "hash", "id",
     "math.isnan", "math.isinf", "math.isfinite", "math.isclose", "math.floor", "math.ceil", "math.trunc",
     "np.isnan", "np.isinf", "np.isfinite", "numpy.isnan", "numpy.isinf", "numpy.isfinite")
)  # fmt: skip
_TREES = {}  # filename -> (tree, parents) or None where it cannot be parsed
_SITES = {}  # (code, lasti) -> (where, callee, control)
_POSITIONS = {}  # code -> list of positions, one per code unit


def classify(depth, skip=()):
    """``(where, callee, control)`` for the call that converted a value, ``depth`` frames above the
    caller (``skip``: file names of polyad's own code to look past). ``where`` is ``"file:line"``,
    ``callee`` the called expression's source (``"float"``, ``"math.log"``) or None, ``control`` whether
    the use cannot lose a derivative (see the module)."""
    frame = sys._getframe(depth + 1)
    while frame.f_back is not None and frame.f_code.co_filename in skip:
        frame = frame.f_back
    return classify_frame(frame)


def classify_frame(frame):
    """``classify`` of the call ``frame`` is making."""
    code, lasti = frame.f_code, frame.f_lasti
    key = (code, lasti)
    site = _SITES.get(key)
    if site is None:
        site = _SITES[key] = _classify(code, lasti, frame.f_lineno)
        if len(_SITES) > 4096:
            _SITES.clear()
    return site


def _classify(code, lasti, lineno):
    filename = code.co_filename
    where = f"{filename}:{lineno}"
    pos = _position(code, lasti)
    parsed = _tree(filename)
    if pos is None or parsed is None:
        return where, None, False
    tree, parents = parsed
    call = _call_at(tree, pos)
    if call is None:
        return where, None, False
    callee = _name(call.func)
    return where, callee, _is_control(call, parents, tree)


def _position(code, lasti):
    positions = _POSITIONS.get(code)
    if positions is None:
        positions = _POSITIONS[code] = list(code.co_positions())
        if len(_POSITIONS) > 1024:
            _POSITIONS.clear()
    i = lasti // 2
    if not 0 <= i < len(positions) or None in positions[i]:
        return None
    return positions[i]


def _tree(filename):
    if filename not in _TREES:
        source = "".join(linecache.getlines(filename))
        try:
            tree = ast.parse(source) if source else None
        except (SyntaxError, ValueError):
            tree = None
        if tree is None:
            _TREES[filename] = None
        else:
            parents = {}
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    parents[child] = node
            _TREES[filename] = (tree, parents)
    return _TREES[filename]


def _call_at(tree, pos):
    """The ``ast.Call`` spanning exactly ``pos`` (line, end line, column, end column), else None."""
    line, end_line, col, end_col = pos
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and node.lineno == line
            and node.col_offset == col
            and node.end_lineno == end_line
            and node.end_col_offset == end_col
        ):
            return node
    return None


def _name(node):
    """``a.b.c`` for a dotted name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_control(node, parents, tree, seen=None):
    """Whether the value of expression ``node`` only decides, counts or describes (see the module)."""
    if isinstance(node, ast.Call) and _name(node.func) in _CONTROL_CALLS:
        return True
    child, parent = node, parents.get(node)
    while parent is not None and isinstance(parent, ast.expr) and not isinstance(parent, ast.Lambda):
        if isinstance(parent, ast.Compare | ast.BoolOp | ast.JoinedStr | ast.FormattedValue):
            return True
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return True
        if isinstance(parent, ast.IfExp) and parent.test is child:
            return True
        if isinstance(parent, ast.Call) and _name(parent.func) in _CONTROL_CALLS:
            return True
        if isinstance(parent, ast.Call) and _name(parent.func) == "round" and len(parent.args) == 1:
            return True
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.If | ast.While | ast.Assert) and parent.test is child:
        return True
    if (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return _name_only_controls(parent.targets[0].id, parent, parents, tree, seen or set())
    return False


def _name_only_controls(name, assign, parents, tree, seen):
    """Whether every later read of variable ``name`` (assigned by ``assign``) in its function decides,
    counts or describes."""
    if name in seen:
        return False
    seen.add(name)
    scope = assign
    while scope is not None and not isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        scope = parents.get(scope)
    body = scope if scope is not None else tree
    reads = [
        n
        for n in ast.walk(body)
        if isinstance(n, ast.Name)
        and n.id == name
        and isinstance(n.ctx, ast.Load)
        and n.lineno >= assign.lineno
    ]
    return all(_is_control(n, parents, tree, seen) for n in reads)  # no read at all: nothing computed

"""Arrays a ``pa.jit`` function closes over, watched for in-place changes between calls.

An array that reaches a traced op (``W @ x``) is an input of the graph, read at each call
(``polyad.graph.tracing``). One the function hands to its library directly while tracing (``W * 2.0``
with a NumPy ``W`` is NumPy's own product, which polyad never sees) leaves only its result in the graph,
computed at the first call. For those, ``watched`` keeps a copy of each array the function names (its
closure cells, the globals its code reads, and the arrays one level inside lists, tuples and dicts
there) that did not become an input; ``changed`` compares them at each call, and a change traces the
function again, so the call computes what it would eagerly. The comparison costs a pass over those
arrays only; functions that close over nothing, or whose arrays all reach traced ops, pay nothing.
"""

import functools
import types

import polyad.core.dispatch as dispatch
from polyad.core import Tensor


def _arrays_in(value, out):
    if isinstance(value, Tensor) and value._interp is None:
        value = value._value
    if dispatch.backend_of_array(value) is not None:
        out.append(value)
    elif isinstance(value, list | tuple):
        out.extend(v for v in value if dispatch.backend_of_array(v) is not None)
    elif isinstance(value, dict):
        out.extend(v for v in value.values() if dispatch.backend_of_array(v) is not None)


def _names(code):
    """The global names a code object reads, its nested functions' included."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


def referenced_arrays(func, depth=3, seen=None):
    """The backend arrays ``func`` names: in its closure cells and the globals its code reads, and in
    those of the functions it names there (``depth`` levels: ``pa.jit(pa.grad(loss))`` reaches
    ``loss``'s)."""
    seen = set() if seen is None else seen
    out = []
    while isinstance(func, types.MethodType | functools.partial):
        if isinstance(func, functools.partial):
            for a in (*func.args, *func.keywords.values()):
                _arrays_in(a, out)
        func = func.func if isinstance(func, functools.partial) else func.__func__
    code = getattr(func, "__code__", None)
    if code is None or id(func) in seen:
        return out
    seen.add(id(func))
    values = []
    for cell in func.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    glob = getattr(func, "__globals__", {})
    values += [glob[name] for name in _names(code) if name in glob]
    wrapped = getattr(func, "__wrapped__", None)
    if wrapped is not None:
        values.append(wrapped)
    for v in values:
        if isinstance(v, types.FunctionType | types.MethodType | functools.partial):
            if depth > 0:
                out += referenced_arrays(v, depth - 1, seen)
        else:
            _arrays_in(v, out)
    return out


def watched(func, inputs):
    """``[(array, copy)]`` for the arrays ``func`` names that are not among the graph's ``inputs``."""
    seen = {id(a) for a in inputs}
    out = []
    for a in referenced_arrays(func):
        if id(a) not in seen:
            seen.add(id(a))
            out.append((a, dispatch.backend_of_array(a).xp.asarray(a, copy=True)))
    return out


def changed(watch):
    """Whether any watched array differs from its copy (NaNs equal to NaNs)."""
    for a, copy in watch:
        xp = dispatch.backend_of_array(a).xp
        if tuple(a.shape) != tuple(copy.shape) or a.dtype != copy.dtype:
            return True
        same = (a == copy) | ((a != a) & (copy != copy))
        if not bool(xp.all(same)):
            return True
    return False

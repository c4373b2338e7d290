"""NumPy's functions on polyad tensors (NEP 18, ``__array_function__``): ``np.diag(t)``,
``np.linalg.solve(A, t)``, ``np.einsum("ij,j", A, t)`` run polyad's implementation of the function
(``common.FUNCTIONS``), so every transform follows them.

NumPy calls this when one of the arguments it dispatches on is a polyad tensor (``np.take`` dispatches on
``a``, not ``indices``: ``np.take(W, traced_index)`` with a NumPy ``W`` never reaches polyad). Then:
- a tensor of a transform among any of the arguments (also those NumPy does not dispatch on, such as
  ``np.fill_diagonal``'s ``val`` once ``a`` is a tensor): polyad's implementation; a function polyad has
  none of raises TypeError naming it, why, and what fits instead;
- only plain ``pa.Tensor``s (and arrays made inside a transform): polyad's implementation where there is
  one, else NumPy's own on the arrays underneath (nothing is carried, so nothing is lost);
- only arrays made inside a transform (``FreshTensor``): NumPy's own on the arrays underneath, as their
  ufuncs do (they are constants).
"""

import difflib

import polyad.xp as pxp
from polyad.core import FreshTensor, Tensor
from polyad.interop.numpy.common import FUNCTIONS, dispatched_on, entry_of, refuse

# NumPy functions refused on traced values, each with the reason and what fits instead
refuse("histogram", "bin counts are integers, with no derivative: count with np.bincount(np.digitize(x, "
                    "bins) - 1), or call np.histogram on plain arrays outside the transform")  # fmt: skip
refuse("histogram2d", "bin counts are integers: count with np.bincount of combined np.digitize indices")
refuse("histogramdd", "bin counts are integers: count with np.bincount of combined np.digitize indices")
refuse("histogram_bin_edges", "the edges are np.linspace(x.min(), x.max(), bins + 1)")
refuse("ix_", "build the open mesh with reshapes: a[:, None], b[None, :]")
refuse("choose", "use np.select or np.where")
refuse("packbits", "bit packing has no polyad op: call it on plain arrays outside the transform")
refuse("unpackbits", "bit packing has no polyad op: call it on plain arrays outside the transform")
refuse("save", "saving drops the derivative or batch: save the transform's result")
refuse("savez", "saving drops the derivative or batch: save the transform's result")
refuse("savetxt", "saving drops the derivative or batch: save the transform's result")
refuse("array2string", "formatting reads values: print the transform's result, or format(float(x))")
refuse("array_repr", "formatting reads values: print the transform's result, or repr(x)")
refuse("array_str", "formatting reads values: print the transform's result, or str(x)")
refuse("datetime_as_string", "datetimes are not arrays of polyad's dtypes")
refuse("busday_count", "datetimes are not arrays of polyad's dtypes")
refuse("polydiv", "polynomial division has no polyad op; for a known divisor, solve for the quotient")


def _unwrap(value):
    """``value`` with polyad's plain tensors replaced by the arrays underneath (through lists, tuples and
    dicts), for NumPy's own implementation."""
    if isinstance(value, Tensor):
        return value.concrete() if type(value) in (Tensor, FreshTensor) else value
    if isinstance(value, list | tuple):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


def _path(func):
    module = getattr(func, "__module__", "numpy") or "numpy"
    prefix = module.removeprefix("numpy").lstrip(".")
    return f"{prefix}.{func.__name__}" if prefix else func.__name__


def _suggestion(func):
    name = func.__name__
    namespace = [n for n in dir(pxp) if not n.startswith("_")]
    close = difflib.get_close_matches(name, namespace, n=2, cutoff=0.75)
    table = difflib.get_close_matches(
        name, [key[1] for key in FUNCTIONS if FUNCTIONS[key].impl], n=2, cutoff=0.75
    )
    hints = [f"np.{n}" for n in table if n != name] + [f"pa.xp.{n}" for n in close]
    return f"; close: {', '.join(hints)}" if hints else ""


def refused(func, tensor):
    """The TypeError for NumPy's ``func`` reaching a tensor of a transform with no polyad implementation."""
    entry = entry_of(func)
    path = _path(func)
    interp = tensor._interp
    where = f"a value inside {interp.transform}" if interp is not None else "a polyad tensor"
    if entry is not None and entry.refused:
        return TypeError(f"np.{path} got {where}, and polyad cannot compute it: {entry.refused}")
    return TypeError(
        f"np.{path} got {where}, and polyad has no implementation of it: NumPy would convert the value "
        f"and drop the {getattr(interp, 'carries', 'derivative')} it carries. Write it with NumPy functions "
        "polyad covers (the table in the docs' 'Coming from NumPy') or polyad.xp functions"
        + _suggestion(func)
    )


def array_function(self, func, types, args, kwargs):
    """``Tensor.__array_function__``: NumPy's function ``func`` on polyad tensors, by polyad's
    implementation (see the module)."""
    # every argument counts, not only those NumPy dispatches on (np.fill_diagonal(a, val) names only a)
    tensors = [a for a in _flat(args, kwargs) if isinstance(a, Tensor)]
    traced = [t for t in tensors if type(t) is not Tensor and type(t) is not FreshTensor]
    if not traced and all(type(t) is FreshTensor for t in tensors):
        return func(*_unwrap(args), **_unwrap(kwargs))  # constants made inside a transform: NumPy's own
    entry = entry_of(func)
    if entry is None or entry.impl is None:
        if not traced:
            return func(*_unwrap(args), **_unwrap(kwargs))  # plain tensors: nothing to carry
        raise refused(func, traced[0])
    with dispatched_on(tensors[0]):
        return entry.impl(*args, **kwargs)


def _flat(args, kwargs):
    stack = list(args) + list(kwargs.values())
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        else:
            yield v

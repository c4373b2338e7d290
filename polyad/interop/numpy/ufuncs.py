"""NumPy's ufuncs on polyad tensors (NEP 13, ``__array_ufunc__``): ``np.exp(t)``, ``W @ x`` with a NumPy
``W`` (NumPy's operators call their ufunc), ``np.add(a, b, out=t, where=mask)``, ``np.add.reduce``,
``np.multiply.outer``, ``np.add.at``.

Each ufunc NumPy has maps to the polyad function that computes it (``UFUNCS``, keyed by the ufunc's name),
or is refused with its reason. As in NumPy, booleans and integers given to a floating ufunc (``np.sqrt``,
``np.divide``) are computed in the default float dtype. ``out=`` into a polyad tensor is a functionalised
write (``out[...] = result``, the path every in-place write takes); ``out=`` into a NumPy array, which
cannot hold a traced value, is refused, and so is NumPy's in-place operator on a NumPy array
(``W += x``: NumPy calls ``np.add(W, x, out=W)``). ``where=`` keeps ``out``'s values where it is False
(zeros when there is no ``out``: NumPy leaves those elements uninitialised).
"""

import math

import polyad.xp as pxp
from polyad.core import Tensor
from polyad.interop.numpy.common import (
    EXACT,
    NONE_DISCRETE,
    ZERO,
    Entry,
    arr,
    astype,
    dispatched_on,
    floating,
    is_array,
    is_complex,
    write_out,
    xp_of,
)
from polyad.ops.elementwise import stop_gradient
from polyad.ops.indexing import index_add, split_key

UFUNCS: dict[str, Entry] = {}  # ufunc.__name__ -> entry


def _add(name, impl, derivative=EXACT, how=""):
    UFUNCS[name] = Entry("ufunc." + name, impl, derivative, how)


def _refuse(name, why):
    UFUNCS[name] = Entry("ufunc." + name, None, "", refused=why)


# NumPy's name -> the standard's, for the ufuncs that are the same function
_SAME = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "negative": "negative",
    "positive": "positive", "absolute": "abs", "sign": "sign", "square": "square", "conjugate": "conj",
    "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "round", "floor_divide": "floor_divide",
    "remainder": "remainder", "power": "pow", "maximum": "maximum", "minimum": "minimum",
    "copysign": "copysign", "matmul": "matmul", "reciprocal": "reciprocal",
}  # fmt: skip
# floating functions: booleans and integers computed in the default float dtype, as NumPy does
_FLOATING = {
    "exp": "exp", "expm1": "expm1", "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p",
    "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "divide": "divide", "arctan2": "atan2", "hypot": "hypot",
    "logaddexp": "logaddexp", "fabs": "abs",
}  # fmt: skip
_DISCRETE = {
    "isfinite": "isfinite", "isinf": "isinf", "isnan": "isnan", "signbit": "signbit", "equal": "equal",
    "not_equal": "not_equal", "less": "less", "less_equal": "less_equal", "greater": "greater",
    "greater_equal": "greater_equal", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "logical_not": "logical_not", "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift",
}  # fmt: skip


def _floating_args(f):
    def unary_or_binary(x, *more):
        # integers and booleans to the default float (NumPy's np.sqrt(2)): one cached dtype lookup each
        x = floating(x) if isinstance(x, Tensor) or is_array(x) else x
        if not more:
            return f(x)
        (y,) = more
        return f(x, floating(y) if isinstance(y, Tensor) or is_array(y) else y)

    return unary_or_binary


for _np_name, _name in _SAME.items():
    _add(_np_name, getattr(pxp, _name), how=f"xp.{_name}")
for _np_name, _name in _FLOATING.items():
    _add(_np_name, _floating_args(getattr(pxp, _name)), how=f"xp.{_name}")
for _np_name, _name in _DISCRETE.items():
    _add(_np_name, getattr(pxp, _name), NONE_DISCRETE, how=f"xp.{_name}")

_LN2 = math.log(2.0)


def _float_power(x1, x2):
    x1, x2 = arr(x1), arr(x2)
    ns = xp_of(x1 if is_array(x1) else x2)
    dtype = ns.complex128 if is_complex(x1) or is_complex(x2) else ns.float64
    return pxp.pow(astype(x1, dtype), astype(x2, dtype))


def _fmod(x1, x2):
    # C's fmod: the remainder has the sign of the dividend (NumPy's remainder takes the divisor's)
    x1, x2 = arr(x1), arr(x2)
    if pxp.isdtype(x1.dtype, "integral") and pxp.isdtype(x2.dtype, "integral"):
        q = pxp.where(x1 * x2 < 0, -((-x1) // x2), x1 // x2)
        return x1 - q * x2
    return x1 - x2 * pxp.trunc(x1 / x2)


def _fmax(x1, x2):
    # NumPy's fmax ignores a nan: the other operand wins
    x1, x2 = floating(x1), floating(x2)
    return pxp.where(pxp.isnan(x2), x1, pxp.where(pxp.isnan(x1), x2, pxp.maximum(x1, x2)))


def _fmin(x1, x2):
    x1, x2 = floating(x1), floating(x2)
    return pxp.where(pxp.isnan(x2), x1, pxp.where(pxp.isnan(x1), x2, pxp.minimum(x1, x2)))


def _heaviside(x1, x2):
    x1, x2 = floating(x1), floating(x2)
    zero = pxp.zeros_like(x1)
    return pxp.where(x1 < 0, zero, pxp.where(x1 > 0, zero + 1, x2 + zero))


def _spacing(x):
    # the distance to the next float away from zero: piecewise constant, its derivative zero
    x = floating(x)
    return stop_gradient(pxp.nextafter(x, pxp.copysign(pxp.full_like(x, math.inf), x)) - x)


def _matvec(x1, x2):
    return pxp.matmul(x1, x2[..., None])[..., 0]


def _vecmat(x1, x2):
    return pxp.matmul(pxp.conj(x1)[..., None, :], x2)[..., 0, :]


def _vecdot(x1, x2):
    return pxp.vecdot(x1, x2, axis=-1)


def _modf(x):
    x = floating(x)
    whole = pxp.trunc(x)
    return x - whole, whole


def _divmod(x1, x2):
    return pxp.floor_divide(x1, x2), pxp.remainder(x1, x2)


def _ldexp(x1, x2):
    return floating(x1) * pxp.pow(2.0, floating(x2))


_add("float_power", _float_power, how="xp.pow in float64 (complex128)")
_add("fmod", _fmod, how="x1 - x2 * trunc(x1 / x2)")
_add("fmax", _fmax, how="xp.where(isnan ...), xp.maximum")
_add("fmin", _fmin, how="xp.where(isnan ...), xp.minimum")
_add("heaviside", _heaviside, how="xp.where")
_add("spacing", _spacing, ZERO, how="xp.nextafter(x, copysign(inf, x)) - x")
_add("nextafter", pxp.nextafter, ZERO, how="xp.nextafter (an op without a derivative)")
_add("matvec", _matvec, how="xp.matmul")
_add("vecmat", _vecmat, how="xp.matmul of conj(x1)")
_add("vecdot", _vecdot, how="xp.vecdot")
_add("modf", _modf, how="(x - trunc(x), trunc(x))")
_add("divmod", _divmod, how="(xp.floor_divide, xp.remainder)")
_add("ldexp", _ldexp, how="x1 * 2.0 ** x2")
_add("exp2", _floating_args(lambda x: pxp.pow(2.0, x)), how="2.0 ** x")
_add("logaddexp2", _floating_args(lambda a, b: pxp.logaddexp(a * _LN2, b * _LN2) / _LN2), how="xp.logaddexp")
_add("cbrt", _floating_args(pxp.special.cbrt), how="xp.special.cbrt")
for _name in ("deg2rad", "radians"):
    _add(_name, _floating_args(lambda x: x * (math.pi / 180.0)), how="x * pi / 180")
for _name in ("rad2deg", "degrees"):
    _add(_name, _floating_args(lambda x: x * (180.0 / math.pi)), how="x * 180 / pi")
_refuse("frexp", "polyad has no frexp; np.log2(np.abs(x)) and np.floor give the exponent")
for _name in ("gcd", "lcm", "bitwise_count"):
    _refuse(_name, "integer-only, with no polyad op: compute it on plain NumPy arrays, outside the transform")
_refuse("isnat", "datetimes are not arrays of polyad's dtypes")

# ------------------------------------------------------------------------------ reduce, accumulate, outer, at

_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_and": "all",
           "logical_or": "any"}  # fmt: skip
_ACCUMULATE = {"add": "cumulative_sum", "multiply": "cumulative_prod"}
_NO_VALUE = object()


def _reduce(name, a, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
    f = getattr(pxp, _REDUCE[name])
    a = arr(a, dtype)
    if where is not True:
        identity = {"sum": 0, "prod": 1, "all": True, "any": False}.get(_REDUCE[name])
        if identity is None:
            raise TypeError(f"np.{name}.reduce(..., where=...) is supported for add, multiply, logical_*")
        a = pxp.where(arr(where), a, identity)
    if axis is None:
        a, axis = pxp.reshape(a, (-1,)), 0
    result = f(a, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
    if initial is not _NO_VALUE:
        combine = {"sum": pxp.add, "prod": pxp.multiply, "max": pxp.maximum, "min": pxp.minimum,
                   "all": pxp.logical_and, "any": pxp.logical_or}[_REDUCE[name]]  # fmt: skip
        result = combine(result, initial)
    return write_out(out, result)


def _accumulate(name, a, axis=0, dtype=None, out=None):
    a = arr(a, dtype)
    return write_out(out, getattr(pxp, _ACCUMULATE[name])(a, axis=axis))


def _outer(entry, a, b, **kwargs):
    a, b = arr(a), arr(b)
    a = pxp.reshape(a, tuple(a.shape) + (1,) * b.ndim)
    return _call(entry, (a, b), kwargs)


def _at(name, a, indices, b=None):
    from_name = {"add": 1, "subtract": -1}
    if name not in from_name:
        raise TypeError(f"np.{name}.at on a polyad tensor: only np.add.at and np.subtract.at are supported")
    if not isinstance(a, Tensor):
        raise TypeError(
            f"np.{name}.at writes into a {type(a).__name__}, which cannot hold a value computed from a "
            "polyad tensor: make the target a polyad tensor (np.zeros_like(x), pa.xp.zeros(...))"
        )
    key = indices if isinstance(indices, tuple) else (indices,)
    key = tuple(arr(k) if isinstance(k, list) else k for k in key)
    value = arr(b) if from_name[name] == 1 else -arr(b)
    # repeated indices accumulate: the transpose of indexing, then written into ``a`` as any write is
    structure, key_arrays = split_key(key)
    a[...] = index_add(a, value, *key_arrays, key=structure)


def method_support(name, method):
    """How polyad computes ``np.<name>.<method>`` (a ufunc's reduce, accumulate, outer, at), or None."""
    entry = UFUNCS.get(name)
    if entry is None or entry.impl is None:
        return None
    if method == "reduce":
        return f"xp.{_REDUCE[name]}" if name in _REDUCE else None
    if method == "accumulate":
        return f"xp.{_ACCUMULATE[name]}" if name in _ACCUMULATE else None
    if method == "outer":
        return f"{entry.how} of broadcast operands"
    if method == "at":
        return "index_add, then a functionalised write" if name in ("add", "subtract") else None
    return None


def _call(entry, inputs, kwargs):
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    dtype = kwargs.pop("dtype", None)
    signature = kwargs.pop("signature", None)
    casting = kwargs.pop("casting", "same_kind")
    for name, default in (("order", "K"), ("subok", True)):
        if kwargs.get(name, default) == default:
            kwargs.pop(name, None)
    if kwargs or signature is not None or casting not in ("same_kind", "unsafe", "safe"):
        given = ", ".join(sorted(kwargs) + (["signature"] if signature is not None else []))
        raise TypeError(f"np.{entry.name[6:]} on polyad tensors: the argument(s) {given} are not supported")
    if dtype is not None:
        inputs = [astype(arr(x), dtype) for x in inputs]
    else:
        inputs = [arr(x) if isinstance(x, list | tuple) else x for x in inputs]
    result = entry.impl(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    results = result if isinstance(result, tuple) else (result,)
    if where is not True:
        mask = arr(where)
        results = tuple(
            pxp.where(mask, r, pxp.zeros_like(r) if o is None else arr(o)) for r, o in zip(results, outs)
        )
    if out is None or all(o is None for o in outs):
        return results if isinstance(result, tuple) else results[0]
    written = tuple(write_out(o, r) for o, r in zip(outs, results))
    return written if isinstance(result, tuple) else written[0]


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """``Tensor.__array_ufunc__``: NumPy's ufunc ``ufunc`` (called as ``method``) on polyad tensors, in
    polyad ops; a ufunc polyad has no counterpart for raises TypeError naming it."""
    name = ufunc.__name__
    entry = UFUNCS.get(name)
    if entry is None or entry.impl is None:
        why = entry.refused if entry is not None else "polyad has no counterpart"
        raise TypeError(f"np.{name} on a polyad tensor ({type(self).__name__}): {why}")
    if method == "__call__" and not kwargs:  # NumPy's operators (W @ x) and plain calls: straight to the op
        for x in inputs:
            if isinstance(x, list | tuple):
                break
        else:
            return entry.impl(*inputs)
    with dispatched_on(self):
        return _dispatch(entry, name, method, inputs, kwargs)


def _dispatch(entry, name, method, inputs, kwargs):
    if method == "__call__":
        return _call(entry, inputs, dict(kwargs))
    if method == "reduce" and name in _REDUCE:
        return _reduce(name, *inputs, **kwargs)
    if method == "accumulate" and name in _ACCUMULATE:
        return _accumulate(name, *inputs, **kwargs)
    if method == "outer" and len(inputs) == 2:
        return _outer(entry, *inputs, **kwargs)
    if method == "at":
        return _at(name, *inputs)
    raise TypeError(
        f"np.{name}.{method} on a polyad tensor is not supported"
        + (
            f" (reduce: {', '.join(_REDUCE)}; accumulate: add, multiply)"
            if method in ("reduce", "accumulate")
            else ""
        )
    )

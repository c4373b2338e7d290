"""Namespaces that run every call inside a transform and check that the namespace is closed under it.

``namespace(mode)`` is an Array API namespace like ``polyad.xp`` whose every function, array operator and
array method (``x > 0``, ``x[idx]``, ``x[idx] = v``, ``x.mT``, ``x += y``) runs twice: once eagerly, and
once inside a transform (``mode``: "vmap", "jvp" or "vjp"; "eager" runs polyad eagerly only). Inside the
transform it checks **closure**: every array the call returns is a polyad tensor of that transform (an
integer or boolean result included), with the shape and dtype of the eager result; and after it, that the
values equal the eager ones (NaNs in the same places, zeros of the same sign; floats within a few ulps,
since a transform may compute by another kernel, a batched matmul). Arrays it hands out are
``CheckedArray``s, so that the operators of the caller's next step are checked too.

How each mode runs a call:

- "vmap": the first array argument is stacked twice along a new axis 0 and mapped, the others stay
  unbatched backend arrays (constants to vmap); both examples must equal the eager result;
- "jvp" / "vjp": floating array arguments are the primals of ``pa.jvp`` (tangents of ones) or ``pa.vjp``;
  integer and boolean ones enter as constants of that level (a tensor of the level with no derivative).
  Where the transform refuses loudly to differentiate the call (``NotImplementedError``), a
  ``DerivativeRefused`` warning says so and the call is checked again with constants only.

A call with no array argument (``zeros``, ``asarray`` of a list) runs inside the transform too, where it
must return a polyad tensor (a ``FreshTensor``). Conversions to Python scalars (``bool(x)``...) run inside
``jvp`` and ``vjp``, and eagerly under "vmap". The official conformance suite runs against these
namespaces (``make conformance``); ``tests/test_closure.py`` runs the op table through them.

Example:
    >>> import numpy as np
    >>> from polyad.testing.under_transform import namespace
    >>> xp = namespace("jvp")
    >>> x = xp.asarray(np.array([1.0, -2.0]))
    >>> bool(xp.all((x > 0) == xp.asarray([True, False])))
    True
"""

import functools
import math
import operator
import types
import warnings

import optree

import polyad as pa
import polyad.core as core
import polyad.core.dispatch as dispatch
import polyad.core.standard as standard
import polyad.xp as pxp
from polyad.core import Tensor
from polyad.core.avals import is_floating

MODES = ("eager", "vmap", "jvp", "vjp")


class ClosureError(AssertionError):
    """A call under a transform left the transform (a raw array, a tensor of another level), or its
    shape, dtype or values differ from the eager call's."""


# ------------------------------------------------------------------------------ running one call


def _raw(x):
    """The backend array behind an argument leaf, or None for a leaf that is not an array."""
    if isinstance(x, CheckedArray):
        return x.raw
    if isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None:
        return x
    return None


def _is_array(x):
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def _lower_eager(x):
    """An eager output as a backend array (a plain tensor or FreshTensor gives its array)."""
    return x._value if isinstance(x, Tensor) and x._interp is None else x


def run_under(mode, fn, args=(), kwargs=None, *, name=None, eager_lift=None, values=True):
    """``fn(*args, **kwargs)`` eagerly and under ``mode``; returns the eager result after checking that the
    transformed call is closed and equal to it (``ClosureError`` otherwise; an eager error is raised as is).

    Args:
        mode: one of ``MODES``.
        fn: the call; its array arguments may be backend arrays, ``CheckedArray``s or polyad tensors.
        args, kwargs: its arguments (pytrees: a list of arrays is looked into).
        name: what to call it in errors (default: ``fn``'s name).
        eager_lift: applied to each array argument of the eager call (``pa.Tensor`` for operators, so
            that polyad's operators run rather than the backend library's); default none.
        values: whether to compare values (False where they are undefined: ``empty``, ``empty_like``);
            shapes and dtypes are compared always.

    Returns:
        The eager result, arrays as backend arrays.
    """
    name = name or getattr(fn, "__name__", repr(fn))
    leaves, tree = optree.tree_flatten((tuple(args), dict(kwargs or {})), none_is_leaf=True)
    raws = [_raw(x) for x in leaves]
    arrays = [i for i, r in enumerate(raws) if r is not None]
    inputs = [x if r is None else r for x, r in zip(leaves, raws)]

    def call(substitute):
        a, k = optree.tree_unflatten(tree, [substitute.get(i, v) for i, v in enumerate(inputs)])
        return fn(*a, **k)

    lift = eager_lift or (lambda r: r)
    expected = optree.tree_map(_lower_eager, call({i: lift(inputs[i]) for i in arrays}), none_is_leaf=True)
    if mode == "eager":
        return expected
    exp_leaves, exp_tree = optree.tree_flatten(expected, none_is_leaf=True)
    where = f"{name} under {mode}"
    try:
        examples = _RUNNERS[mode](call, inputs, arrays, exp_leaves, where)
    except ClosureError:
        raise
    except Exception as exc:
        raise ClosureError(f"{where} raised {type(exc).__name__}: {exc} (the eager call did not)") from exc
    for j, got in enumerate(examples):
        for k, (g, e) in enumerate(zip(got, exp_leaves)):
            _assert_same(g, e, f"{where}, output {k}" + (f" of example {j}" if j else ""), values)
    return expected


def _check_outputs(out, level, has_arrays, expected, where):
    """Closure: the array outputs of a call made inside ``level`` are tensors of ``level`` (a FreshTensor
    where the call had no array argument) with the eager shapes and dtypes. Returns the output leaves."""
    leaves, _ = optree.tree_flatten(out, none_is_leaf=True)
    if len(leaves) != len(expected):
        raise ClosureError(f"{where}: {len(leaves)} output leaves, eager gives {len(expected)}")
    for k, (o, e) in enumerate(zip(leaves, expected)):
        if not _is_array(e):
            continue
        if not isinstance(o, Tensor):
            raise ClosureError(
                f"{where}: output {k} is a {type(o).__name__}, not a polyad tensor of the transform "
                f"(the namespace is not closed)"
            )
        if has_arrays and o._interp is not level:
            got = "a plain tensor" if o._interp is None else f"a tensor of level {o.level}"
            raise ClosureError(
                f"{where}: output {k} is {got} ({type(o).__name__}), not a tensor of the transform's level "
                f"{level.level}"
            )
        if tuple(o.shape) != tuple(e.shape) or o.dtype != e.dtype:
            raise ClosureError(
                f"{where}: output {k} has shape {tuple(o.shape)} and dtype {o.dtype} inside the transform, "
                f"eager gives {tuple(e.shape)} and {e.dtype}"
            )
    return leaves


def _innermost():
    return core.active_interpreters()[-1]


def _run_vmap(call, inputs, arrays, expected, where):
    size = 2
    mapped = arrays[:1]  # the first array argument is mapped; the others stay unbatched backend arrays
    batched = [_stack_copies(inputs[i], size) for i in mapped]
    dummy = pa.xp.zeros((size,))  # maps something even when the call has no array argument
    seen = []

    def body(_, *tracers):
        level = _innermost()
        out = call(dict(zip(mapped, tracers)))
        leaves = _check_outputs(out, level, bool(mapped), expected, where)
        seen.append([None if _is_array(e) else o for o, e in zip(leaves, expected)])
        return [o if _is_array(e) else None for o, e in zip(leaves, expected)]

    result = pa.vmap(body)(dummy, *batched)
    return [[s if r is None else r[j, ...] for r, s in zip(result, seen[0])] for j in range(size)]


def _stack_copies(array, size):
    xp = dispatch.backend_of_array(array).xp
    return xp.stack([array] * size)


class DerivativeRefused(UserWarning):
    """A transform refused to differentiate a call (NotImplementedError, e.g. ``svd`` with
    ``full_matrices=True`` of a non-square matrix): the call was checked again with every argument a
    constant of the level."""


def _run_differentiating(transform):
    def run(call, inputs, arrays, expected, where):
        try:
            return _differentiate(transform, call, inputs, arrays, expected, where, primal=is_floating)
        except NotImplementedError as exc:  # a loud refusal to differentiate, not a leak: check closure
            warnings.warn(f"{where}: {exc}", DerivativeRefused, stacklevel=2)
            return _differentiate(transform, call, inputs, arrays, expected, where, primal=lambda v: False)

    return run


def _differentiate(transform, call, inputs, arrays, expected, where, primal):
    """Run ``call`` inside ``pa.jvp`` or ``pa.vjp``: arrays ``primal`` accepts are its primals, the
    others constants of its level; returns the output leaves' primal inputs."""
    primal_at = [i for i in arrays if primal(inputs[i])]
    primals = [inputs[i] for i in primal_at] + [pa.xp.zeros(())]  # a level even without floating arrays
    captured = []

    def body(*tracers):
        level = _innermost()
        substitute = dict(zip(primal_at, tracers))
        for i in arrays:
            if i not in substitute:
                substitute[i] = level.constant(inputs[i])
        out = call(substitute)
        leaves = _check_outputs(out, level, bool(arrays), expected, where)
        captured.append([_primal(o) if _is_array(e) else o for o, e in zip(leaves, expected)])
        return tracers[-1], None

    if transform == "jvp":
        pa.jvp(body, tuple(primals), tuple(pa.xp.ones_like(p) for p in primals), has_aux=True)
    else:
        pa.vjp(body, *primals, has_aux=True)
    return captured


def _primal(t):
    """The backend array under a tensor of the innermost level (or a FreshTensor)."""
    return t._value


_RUNNERS = {"vmap": _run_vmap, "jvp": _run_differentiating("jvp"), "vjp": _run_differentiating("vjp")}


# ------------------------------------------------------------------------------ comparing values


def _assert_same(got, expected, where, values=True):
    if not _is_array(expected):
        if isinstance(expected, bool | int | float | complex) and not _same_scalar(got, expected):
            raise ClosureError(f"{where}: {got!r}, eager gives {expected!r}")
        return
    if not _is_array(got):
        raise ClosureError(f"{where}: a {type(got).__name__}, eager gives an array")
    if tuple(got.shape) != tuple(expected.shape) or got.dtype != expected.dtype:
        raise ClosureError(
            f"{where}: shape {tuple(got.shape)} and dtype {got.dtype}, eager gives {tuple(expected.shape)} "
            f"and {expected.dtype}"
        )
    if not values:
        return
    xp = dispatch.backend_of_array(expected).xp
    a, b = xp.asarray(got), xp.asarray(expected)
    same = a == b
    if is_floating(b) and math.prod(b.shape):
        # rounding may differ where a transform computes by another kernel (a batched matmul): a few ulps
        # of the result's magnitude; NaNs in the same places, zeros of the same sign
        finite = xp.isfinite(b)
        scale = xp.max(xp.where(finite, xp.abs(b), 0.0))
        tol = 64 * xp.finfo(b.dtype).eps * (xp.abs(b) + scale)
        ok = finite & xp.isfinite(a)
        close = ok & (xp.abs(xp.where(ok, a, 0.0) - xp.where(ok, b, 0.0)) <= tol)
        same = same | close | (xp.isnan(a) & xp.isnan(b))
        if not xp.isdtype(b.dtype, "complex floating"):
            same = same & ((b != 0) | (a != 0) | (xp.signbit(a) == xp.signbit(b)))
    if not bool(xp.all(same)):
        raise ClosureError(f"{where}: values differ from eager\n got {a!r}\n eager {b!r}")


def _same_scalar(a, b):
    """Python scalars equal, NaN (or a NaN part of a complex) matching NaN."""
    if isinstance(a, Tensor) or isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(b, complex):
        return _same_scalar(float(a.real), b.real) and _same_scalar(float(a.imag), b.imag)
    return a == b or (isinstance(b, float) and math.isnan(a) and math.isnan(b))


# ------------------------------------------------------------------------------ arrays and namespaces


class CheckedArray:
    """A backend array whose operators and methods run through ``run_under`` in its namespace's mode."""

    __slots__ = ("raw", "_ns")
    __array_ufunc__ = None  # NumPy defers to our reflected operators
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, raw, ns):
        self.raw = raw
        self._ns = ns

    shape = property(lambda self: tuple(self.raw.shape))
    dtype = property(lambda self: self.raw.dtype)
    device = property(lambda self: self.raw.device)
    ndim = property(lambda self: len(self.raw.shape))
    size = property(lambda self: math.prod(self.raw.shape))
    mT = property(lambda self: self._ns._method(lambda x: x.mT, "x.mT", self))
    T = property(lambda self: self._ns._method(lambda x: x.T, "x.T", self))

    def __array_namespace__(self, *, api_version=None):
        return self._ns

    def to_device(self, device, /, *, stream=None):
        return self._ns._method(lambda x: x.to_device(device, stream=stream), "x.to_device", self)

    def __getitem__(self, key):
        return self._ns._method(lambda x, k: x[k], "x[key]", self, key)

    def __setitem__(self, key, value):
        def setitem(x, k, v):
            x[k] = v
            return x

        self._update(self._ns._method(setitem, "x[key] = v", self, key, value).raw)

    def _update(self, result):
        """Make this array hold ``result`` (an in-place operation's outcome): written into the backend
        array itself where shape and dtype allow, so that views of it (``asarray(copy=False)``) see it, as
        they would with the backend's own in-place operators."""
        if tuple(result.shape) == self.shape and result.dtype == self.dtype:
            try:
                self.raw[...] = result
                return
            except (TypeError, ValueError):  # an immutable scalar
                pass
        self.raw = result

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        kwargs = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return self.raw.__dlpack__(**{k: v for k, v in kwargs.items() if v is not None})

    def __dlpack_device__(self):
        return self.raw.__dlpack_device__()

    def __repr__(self):
        return f"CheckedArray[{self._ns.mode}]({self.raw!r})"


def _install_operators():
    def binary(op, name):
        return lambda self, other: self._ns._method(op, name, self, other)

    def reflected(op, name):
        return lambda self, other: self._ns._method(lambda a, b: op(b, a), name, self, other)

    def inplace(op, name):
        def method(self, other):
            self._update(self._ns._method(op, name, self, other).raw)
            return self

        return method

    for short in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
                  "lshift", "rshift"):  # fmt: skip
        op = getattr(operator, short + ("_" if short in ("and", "or") else ""))
        iop = getattr(operator, f"i{short}")
        setattr(CheckedArray, f"__{short}__", binary(op, f"x.__{short}__"))
        setattr(CheckedArray, f"__r{short}__", reflected(op, f"x.__r{short}__"))
        setattr(CheckedArray, f"__i{short}__", inplace(iop, f"x.__i{short}__"))
    for short in ("eq", "ne", "lt", "le", "gt", "ge"):
        setattr(CheckedArray, f"__{short}__", binary(getattr(operator, short), f"x.__{short}__"))
    for short in ("neg", "pos", "abs", "invert"):
        op = getattr(operator, short)
        setattr(CheckedArray, f"__{short}__", lambda self, _op=op, _n=short: self._ns._method(_op, _n, self))
    for conv in (bool, int, float, complex, operator.index):
        name = f"__{'index' if conv is operator.index else conv.__name__}__"
        setattr(CheckedArray, name, lambda self, _c=conv, _n=name: self._ns._scalar(_c, _n, self))


_install_operators()


class TransformedNamespace(types.ModuleType):
    """``polyad.xp`` with every function run by ``run_under`` in ``mode`` (see the module docstring)."""

    def __init__(self, mode, name=None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        super().__init__(name or f"{__name__}.{mode}")
        self.mode = mode
        self.__array_api_version__ = pxp.__array_api_version__
        self.__array_namespace_info__ = pxp.__array_namespace_info__
        for n in standard.CONSTANTS:
            setattr(self, n, getattr(pxp, n))
        for n in standard.DTYPES:
            setattr(self, n, getattr(pxp, n))
        for n in standard.FUNCTIONS:
            if n != "__array_namespace_info__":
                setattr(self, n, self._wrap(getattr(pxp, n), n))
        for ext, names in (("linalg", standard.LINALG), ("fft", standard.FFT)):
            sub = types.ModuleType(f"{self.__name__}.{ext}")
            for n in names:
                setattr(sub, n, self._wrap(getattr(getattr(pxp, ext), n), f"{ext}.{n}"))
            setattr(self, ext, sub)

    def _wrap(self, f, name):
        values = name not in ("empty", "empty_like")  # their values are undefined

        @functools.wraps(f)  # keeps f's signature for inspection
        def wrapped(*args, **kwargs):
            return self._checked(run_under(self.mode, f, args, kwargs, name=name, values=values))

        return wrapped

    def _checked(self, out):
        """Backend arrays in ``out`` as CheckedArrays of this namespace (namedtuples and lists kept)."""
        return optree.tree_map(lambda o: CheckedArray(o, self) if _is_array(o) else o, out, none_is_leaf=True)

    def _method(self, fn, name, *args):
        return self._checked(run_under(self.mode, fn, args, name=name, eager_lift=pa.Tensor))

    def _scalar(self, conv, name, x):
        mode = "eager" if self.mode == "vmap" else self.mode  # vmap: a batched value has no Python value
        return run_under(mode, conv, (x,), name=name, eager_lift=pa.Tensor)


_NAMESPACES = {}


def namespace(mode):
    """The checking namespace of ``mode`` ("eager", "vmap", "jvp" or "vjp"), one per mode."""
    ns = _NAMESPACES.get(mode)
    if ns is None:
        ns = _NAMESPACES[mode] = TransformedNamespace(mode)
    return ns


eager, vmap, jvp, vjp = (namespace(m) for m in MODES)

__all__ = ["MODES", "CheckedArray", "ClosureError", "DerivativeRefused", "TransformedNamespace", "eager",
           "jvp", "namespace", "run_under", "vjp", "vmap"]  # fmt: skip

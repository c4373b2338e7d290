"""The discrete cosine and sine transforms of types 1-4 (SciPy's "real transforms"): ``dct``, ``idct``,
``dst``, ``idst`` and the n-dimensional ``dctn``, ``idctn``, ``dstn``, ``idstn``, with SciPy's signatures
and definitions. They are polyad extensions of the fft namespace (``polyad.xp.fft.dct``; the standard has
no such functions), and what polyad's backend for ``scipy.fft`` runs (``polyad/interop/scipy_fft.py``),
so that ``scipy.fft.dct`` differentiates and batches on polyad's tensors.

**Definitions** (SciPy's, ``norm="backward"``, along one axis of length N; ``M`` the matrix, ``y = M x``):
DCT-I ``y_k = x_0 + (-1)^k x_{N-1} + 2 sum_{n=1}^{N-2} x_n cos(pi k n / (N-1))`` (N >= 2); DCT-II
``2 sum x_n cos(pi k (2n+1) / 2N)``; DCT-III ``x_0 + 2 sum_{n>=1} x_n cos(pi (2k+1) n / 2N)``; DCT-IV
``2 sum x_n cos(pi (2k+1)(2n+1) / 4N)``; DST-I ``2 sum x_n sin(pi (k+1)(n+1) / (N+1))``; DST-II
``2 sum x_n sin(pi (k+1)(2n+1) / 2N)``; DST-III ``(-1)^k x_{N-1} + 2 sum_{n<N-1} x_n sin(pi (2k+1)(n+1) /
2N)``; DST-IV ``2 sum x_n sin(pi (2k+1)(2n+1) / 4N)``. ``norm="forward"`` divides by the factor ``c``
(2N; 2(N-1) for DCT-I, 2(N+1) for DST-I), ``"ortho"`` by ``sqrt(c)``. The orthogonalized variant
(SciPy's ``orthogonalize``, on by default exactly for ``"ortho"``) is ``O = W_out M W_in`` with diagonal
weights: ``W_in`` is sqrt(2) on the first input element (DCT-III), the last (DST-III) or both (DCT-I);
``W_out`` is 1/sqrt(2) on the first output element (DCT-II), the last (DST-II) or both (DCT-I); types IV
and DST-I have none. ``O^T O = c I``, and ``O_t^T = O_t*`` for the partner type ``t*`` (1, 3, 2, 4 for
1, 2, 3, 4). A transform along several axes is the 1-d one along each in turn (they commute).

**Ops.** One per family and type (``fft.dctn_type2``, ...), over ``axes`` with result lengths ``s`` (the
input truncated or zero-padded at the end), computing SciPy's default variant for its ``norm``
(orthogonalized exactly when ``norm="ortho"``). For a non-default ``orthogonalize`` the public functions
multiply by ``W_in^(+-1)`` before the op and by ``W_out^(+-1)`` after it. The
inverse transforms are the transforms of the inverse type (1, 3, 2, 4) with the mirrored norm (backward
<-> forward, ortho kept), the same ``orthogonalize`` (the op table checks this against SciPy).

**Derivatives.** Each op is linear (its JVP is the op on the tangent). It is a real matrix ``A``, so its
VJP is ``A^T`` applied to the cotangent, complex cotangents included (real and imaginary parts are
transformed alike):

- ``norm="ortho"`` (``A = O_t / sqrt(c)``): ``A^T`` is the partner type's op, norm "ortho";
- ``"backward"``/``"forward"`` (``A = M_t / c^p``; the scalar commutes): ``M_t^T = W_in^-2 M_t* W_out^-2``,
  that is: double the cotangent where ``W_out`` is 1/sqrt(2), apply the partner type's op with the same
  norm, halve where ``W_in`` is sqrt(2). (DCT-II's transpose is DCT-III of the cotangent with its first
  element doubled; DCT-III's is DCT-II with the first result halved; DCT-I's doubles both ends before and
  halves both after; types IV and DST-I are symmetric.)

``tests/test_scipy_fft_backend.py`` checks ``<A x, y> = <x, A^T y>`` for every type, norm and
``orthogonalize``.

**Kernels.** ``"cpu"``: ``scipy.fft.dctn``/``dstn`` on host copies (NumPy arrays go straight in; SciPy's
own backend is asked for explicitly, so whatever backends the user set for ``scipy.fft`` are not
consulted), except for a backend whose arrays are lazy graphs of NumPy chunks (Dask, which declares
``map_host``), where the generic kernel keeps the graph lazy. ``"cuda"``: ``cupyx.scipy.fft`` for the
types CuPy implements (2 and 3), declared by the CuPy backend (``backends/cupy/kernels.py``). Generic
(every other case, and CPU without SciPy): the Array API formulas below, each an FFT of the input
zero-padded to 2N (2(N-1), 2(N+1)) with real twiddle factors, so each needs ``xp.fft`` and no
concatenation along the transformed axis (Dask's FFT needs that axis in one chunk, as the input has it).

Input: real or complex floating arrays (complex ones are transformed part by part, as SciPy does);
integer and boolean arrays are cast to the default floating dtype, as SciPy computes them in float64.
"""

import math
import operator

from polyad.core import bind, dispatch
from polyad.core.avals import ShapeDtype, bottom, is_floating, xp_of
from polyad.ops.base import astype, reshape, where
from polyad.ops.common import define
from polyad.ops.creation import full
from polyad.ops.elementwise import equal, logical_or, multiply
from polyad.ops.fft import axes_batch, resize_axes
from polyad.ops.fills import arange
from polyad.ops.special.shared import host_call

FAMILIES = ("dct", "dst")
TYPES = (1, 2, 3, 4)
PARTNER = {1: 1, 2: 3, 3: 2, 4: 4}  # O_t^T = O_partner (and, with the mirrored norm, the inverse type)
_NORMS = ("backward", "ortho", "forward")
_MIRROR = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_SQRT2 = math.sqrt(2.0)

# the orthogonalization weights: (positions of W_in's sqrt(2), positions of W_out's 1/sqrt(2))
_EDGES = {
    ("dct", 1): (("first", "last"), ("first", "last")),
    ("dct", 2): ((), ("first",)),
    ("dct", 3): (("first",), ()),
    ("dct", 4): ((), ()),
    ("dst", 1): ((), ()),
    ("dst", 2): ((), ("last",)),
    ("dst", 3): (("last",), ()),
    ("dst", 4): ((), ()),
}


def _factor(family, t, n):
    """``c``: the factor ``norm="forward"`` divides by (its square root for ``"ortho"``)."""
    if (family, t) == ("dct", 1):
        return 2 * (n - 1)
    if (family, t) == ("dst", 1):
        return 2 * (n + 1)
    return 2 * n


# ------------------------------------------------------------------------------ generic kernel


def _complex_of(xp, dtype):
    return xp.complex64 if dtype == xp.float32 else xp.complex128


def _unnormalised(xp, family, t, x, n_len):
    """``M x`` of length ``n_len`` along the last axis of the real array ``x`` (norm "backward", not
    orthogonalized), ``x`` zero-padded from its length ``m <= n_len``. Each is an FFT of ``x`` zero-padded
    by the FFT itself (``n=``), with real twiddles: ``Re(e^{-ia} V) = cos(a) Re V + sin(a) Im V``,
    ``Im(e^{-ia} V) = cos(a) Im V - sin(a) Re V``."""
    m = x.shape[-1]
    j = xp.arange(m, dtype=x.dtype, device=x.device)  # input index
    k = xp.arange(n_len, dtype=x.dtype, device=x.device)  # output index
    cd = _complex_of(xp, x.dtype)
    half_at = lambda idx: 1 - 0.5 * xp.astype(idx, x.dtype)  # noqa: E731  (1/2 where idx, else 1)
    if (family, t) == ("dct", 1):  # 2 Re FFT_{2N-2}(w x), w = 1/2 at both ends
        v = xp.fft.rfft(x * half_at((j == 0) | (j == n_len - 1)), n=2 * n_len - 2, axis=-1)
        return 2 * xp.real(v)
    if (family, t) == ("dst", 1):  # -2 Im(e^{-i pi (k+1)/(N+1)} FFT_{2N+2}(x)_{k+1})
        v = xp.fft.rfft(x, n=2 * n_len + 2, axis=-1)[..., 1 : n_len + 1]
        a = (k + 1) * (math.pi / (n_len + 1))
        return -2 * (xp.cos(a) * xp.imag(v) - xp.sin(a) * xp.real(v))
    if (family, t) == ("dct", 2):  # 2 Re(e^{-i pi k / 2N} FFT_{2N}(x)_k)
        v = xp.fft.rfft(x, n=2 * n_len, axis=-1)[..., :n_len]
        a = k * (math.pi / (2 * n_len))
        return 2 * (xp.cos(a) * xp.real(v) + xp.sin(a) * xp.imag(v))
    if (family, t) == ("dst", 2):  # DST-II(x)_k = DCT-II((-1)^n x)_{N-1-k}
        return xp.flip(_unnormalised(xp, "dct", 2, x * (1 - 2 * (j % 2)), n_len), axis=-1)
    if t == 3:
        # DCT-III: 2 Re(sum_n z_n e^{2 pi i k n / 2N}), z = w x e^{i pi n / 2N}, w = 1/2 at n = 0;
        # DST-III: 2 Im(e^{i pi k / N} sum_n z_n e^{2 pi i k n / 2N}), z = u x e^{i pi (n+1) / 2N}, u = 1/2
        # at n = N-1
        dct = family == "dct"
        wx = x * half_at(j == 0 if dct else j == n_len - 1)
        a = (j if dct else j + 1) * (math.pi / (2 * n_len))
        z = xp.astype(wx * xp.cos(a), cd) + xp.astype(wx * xp.sin(a), cd) * 1j
        v = xp.fft.ifft(z, n=2 * n_len, axis=-1, norm="forward")[..., :n_len]
        if dct:
            return 2 * xp.real(v)
        b = k * (math.pi / n_len)
        return 2 * (xp.sin(b) * xp.real(v) + xp.cos(b) * xp.imag(v))
    # type 4: e^{-i pi (2k+1) / 4N} FFT_{2N}(x e^{-i pi n / 2N})_k, twice its real (DCT) or minus twice its
    # imaginary part (DST)
    a = j * (math.pi / (2 * n_len))
    z = xp.astype(x * xp.cos(a), cd) - xp.astype(x * xp.sin(a), cd) * 1j
    v = xp.fft.fft(z, n=2 * n_len, axis=-1)[..., :n_len]
    b = (2 * k + 1) * (math.pi / (4 * n_len))
    if family == "dct":
        return 2 * (xp.cos(b) * xp.real(v) + xp.sin(b) * xp.imag(v))
    return -2 * (xp.cos(b) * xp.imag(v) - xp.sin(b) * xp.real(v))


def _edge_vector(xp, length, n_len, positions, value, dtype, device):
    """A length-``length`` vector of ones with ``value`` at the edge ``positions`` ("first": index 0,
    "last": index ``n_len - 1``, present only when ``length == n_len``: a padded input's last element is
    a zero the weight does not reach)."""
    k = xp.arange(length, device=device)
    at = ((k == 0) & ("first" in positions)) | ((k == n_len - 1) & ("last" in positions))
    return 1 + (value - 1) * xp.astype(at, dtype)


def _along_last(xp, family, t, x, n_len, norm):
    edges_in, edges_out = _EDGES[family, t]
    if norm == "ortho" and edges_in:
        x = x * _edge_vector(xp, x.shape[-1], n_len, edges_in, _SQRT2, x.dtype, x.device)
    y = _unnormalised(xp, family, t, x, n_len)
    if norm == "ortho" and edges_out:
        y = y * _edge_vector(xp, n_len, n_len, edges_out, 1 / _SQRT2, y.dtype, y.device)
    c = _factor(family, t, n_len)
    if norm == "forward":
        y = y / c
    elif norm == "ortho":
        y = y / math.sqrt(c)
    return xp.astype(y, x.dtype)


def _generic_kernel(family, t):
    def kernel(xp, x, *, s, axes, norm):
        if xp.isdtype(x.dtype, "complex floating"):  # the real and imaginary parts, each on its own
            re = kernel(xp, xp.real(x), s=s, axes=axes, norm=norm)
            im = kernel(xp, xp.imag(x), s=s, axes=axes, norm=norm)
            return xp.astype(re, x.dtype) + xp.astype(im, x.dtype) * 1j
        for n_len, a in zip(s, axes):
            last = xp.moveaxis(x, a, -1)
            if last.shape[-1] > n_len:  # truncate (padding is the FFT's own, through n=)
                last = last[..., :n_len]
            x = xp.moveaxis(_along_last(xp, family, t, last, n_len, norm), -1, a)
        return x

    return kernel


# ------------------------------------------------------------------------------ SciPy kernel (cpu)


def _scipy_fft():
    """``scipy.fft``, or None without SciPy (the generic kernel then runs)."""
    try:
        import scipy.fft
    except ImportError:
        return None
    return scipy.fft


def _scipy_kernel(family, t, generic):
    def kernel(xp, x, *, s, axes, norm):
        sfft = _scipy_fft()
        if sfft is None or dispatch.backend_of([x]).map_host is not None:
            return generic(xp, x, s=s, axes=axes, norm=norm)
        f = getattr(sfft, family + "n")

        def on_host(a):
            # SciPy's own implementation, whatever backends the user set for scipy.fft
            with sfft.set_backend("scipy", only=True):
                return f(a, type=t, s=s, axes=axes, norm=norm)

        return host_call(on_host, (x,))

    return kernel


# ------------------------------------------------------------------------------ ops and their rules


def _weights(like, axes, lengths, positions, value):
    """Constant weights in ``like``'s real dtype: ``value`` at the edge ``positions`` along each of
    ``axes`` ("first": index 0; "last": index ``n - 1`` for the matching entry of ``lengths``, where
    ``like`` reaches it), 1 elsewhere; multiplied across axes and shaped to broadcast. None if
    ``positions`` is empty."""
    if not positions:
        return None
    xp = xp_of(like)
    device = bottom(like).device
    real_dtype = xp.float32 if like.dtype in (xp.float32, xp.complex64) else xp.float64
    ndim = len(like.shape)
    out = None
    for a, n_len in zip(axes, lengths):
        size = like.shape[a]
        k = arange(size, device=device)
        at = None
        for edge, index in (("first", 0), ("last", n_len - 1)):
            if edge in positions:
                at = equal(k, index) if at is None else logical_or(at, equal(k, index))
        w = where(at, full((size,), value, dtype=real_dtype, device=device), 1.0)
        w = reshape(w, (size,) + (1,) * (ndim - 1 - a))
        out = w if out is None else multiply(out, w)
    return out


def _scaled(x, axes, lengths, positions, value):
    """``x`` times the edge weights (unchanged where the type has none)."""
    w = _weights(x, axes, lengths, positions, value)
    return x if w is None else multiply(x, w)


def _vjp(family, t):
    edges_in, edges_out = _EDGES[family, t]

    def vjp(g, y, x, *, s, axes, norm):
        # A = T o pad: A^T = truncate o T^T (the partner's op on the cotangent, already of lengths s)
        partner = OPS[family, PARTNER[t]]
        if norm == "ortho":
            ct = bind(partner, g, s=s, axes=axes, norm=norm)
        else:
            g = _scaled(g, axes, s, edges_out, 2.0)  # W_out^-2
            ct = _scaled(bind(partner, g, s=s, axes=axes, norm=norm), axes, s, edges_in, 0.5)  # W_in^-2
        return (resize_axes(ct, axes, [x.shape[a] for a in axes]),)

    return vjp


def _abstract(xp, x, *, s, axes, norm):
    shape = list(x.shape)
    for n_len, a in zip(s, axes):
        shape[a] = n_len
    return ShapeDtype(shape, x.dtype, x.device)


OPS = {}
for _family in FAMILIES:
    for _t in TYPES:
        _generic = _generic_kernel(_family, _t)
        _op = define(f"fft.{_family}n_type{_t}", _generic, abstract_eval=_abstract, vjp=_vjp(_family, _t),
                     linear=True)  # fmt: skip
        _op.register_rule("batch", axes_batch(_op))
        _op.kernels.setdefault("cpu", _scipy_kernel(_family, _t, _generic))
        OPS[_family, _t] = _op


# ------------------------------------------------------------------------------ parameters


def _default_float(x):
    return xp_of(x).__array_namespace_info__().default_dtypes()["real floating"]


def _float_input(x, name):
    """``x`` as a floating array: integer and boolean arrays in the default floating dtype (SciPy computes
    them in float64)."""
    if not hasattr(x, "dtype") or not hasattr(x, "shape"):
        raise TypeError(f"fft.{name}: x must be an array, got {type(x).__name__}")
    return x if is_floating(x) else astype(x, _default_float(x))


def _check_type(t, name):
    if isinstance(t, bool) or t not in TYPES:
        raise ValueError(f"fft.{name}: type must be 1, 2, 3 or 4, got {t!r}")
    return int(t)


def _check_norm(norm, name):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"fft.{name}: norm must be None or one of {_NORMS}, got {norm!r}")
    return norm


def _ints(v, what, name):
    """An int or a sequence of ints as a tuple (None stays None)."""
    if v is None:
        return None
    items = (v,) if not hasattr(v, "__iter__") else tuple(v)
    if any(isinstance(i, bool) or not hasattr(i, "__index__") for i in items):
        raise TypeError(f"fft.{name}: {what} must be an int or a sequence of ints, got {v!r}")
    return tuple(operator.index(i) for i in items)


def _axes_and_lengths(x, s, axes, family, t, name):
    """SciPy's rules: no ``axes`` means all axes, or the last ``len(s)`` when ``s`` is given; no ``s``
    means the input's lengths, and -1 in ``s`` the input's length along that axis."""
    ndim = len(x.shape)
    if ndim == 0:
        raise ValueError(f"fft.{name} needs an array of at least one dimension, got a 0-d array")
    s, axes = _ints(s, "s", name), _ints(axes, "axes", name)
    if axes is None:
        if s is not None and len(s) > ndim:
            raise ValueError(f"fft.{name}: s has {len(s)} entries for a {ndim}-d array")
        axes = tuple(range(ndim)) if s is None else tuple(range(ndim - len(s), ndim))
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"fft.{name}: axis {a} is out of bounds for an array of dimension {ndim}")
    axes = tuple(a % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"fft.{name}: axes must be unique, got {axes}")
    if s is None:
        s = tuple(x.shape[a] for a in axes)
    elif len(s) != len(axes):
        raise ValueError(f"fft.{name}: s and axes must have the same length, got {s} and {axes}")
    s = tuple(x.shape[a] if n == -1 else n for n, a in zip(s, axes))
    least = 2 if (family, t) == ("dct", 1) else 1
    for n in s:
        if n < least:
            what = "DCT-I needs at least 2 points" if least == 2 else "lengths must be at least 1"
            raise ValueError(f"fft.{name}: invalid number of data points {n} ({what})")
    return axes, s


def _transform(family, t, x, s, axes, norm, orthogonalize, name, inverse=False):
    t = _check_type(t, name)
    norm = _check_norm(norm, name)
    orth = norm == "ortho" if orthogonalize is None else bool(orthogonalize)
    if inverse:  # the transform of the inverse type with the mirrored norm (module notes)
        t, norm = PARTNER[t], _MIRROR[norm]
    x = _float_input(x, name)
    axes, lengths = _axes_and_lengths(x, s, axes, family, t, name)
    op = OPS[family, t]
    if orth == (norm == "ortho"):  # SciPy's default variant: the op itself
        return bind(op, x, s=lengths, axes=axes, norm=norm)
    # the other variant: W_in^(+-1) before the op (on the input truncated to at most the lengths; the op
    # pads), W_out^(+-1) after it (+1 to orthogonalize, -1 to undo SciPy's default orthogonalization)
    edges_in, edges_out = _EDGES[family, t]
    x = resize_axes(x, axes, [min(x.shape[a], n) for a, n in zip(axes, lengths)])
    x = _scaled(x, axes, lengths, edges_in, _SQRT2 if orth else 1 / _SQRT2)
    y = bind(op, x, s=lengths, axes=axes, norm=norm)
    return _scaled(y, axes, lengths, edges_out, 1 / _SQRT2 if orth else _SQRT2)


def _axis(axis, name):
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"fft.{name}: axis must be an int, got {axis!r}")
    return (axis,)


def _length(n):
    return None if n is None else (n,)


# ------------------------------------------------------------------------------ public functions

_ARGS_1D = """    Args:
        x: a real or complex floating array (integer arrays are cast to the default floating dtype).
        type: the transform's type, 1, 2, 3 or 4 (default 2).
        n: the transform's length: ``x`` is truncated or zero-padded (at the end) to it along ``axis``
            (default: its length there).
        axis: the axis to transform (default -1).
        norm: None or "backward" (no scaling), "ortho" (scaled by ``1/sqrt(c)``) or "forward"
            (``1/c``), ``c`` the factor of the module notes.
        orthogonalize: use the orthogonalized variant (default: when ``norm == "ortho"``)."""

_ARGS_ND = """    Args:
        x: a real or complex floating array (integer arrays are cast to the default floating dtype).
        type: the transform's type, 1, 2, 3 or 4 (default 2).
        s: the lengths of the result along ``axes``: ``x`` is truncated or zero-padded to them (-1: the
            input's length); default: the input's lengths.
        axes: the axes to transform (default: the last ``len(s)`` axes, or all axes without ``s``).
        norm: None or "backward", "ortho" or "forward", applied along each axis as in the 1-d case.
        orthogonalize: use the orthogonalized variant (default: when ``norm == "ortho"``)."""


def _doc(summary, args, returns, example):
    return f"""{summary}

    SciPy's definitions and arguments (``scipy.fft``); differentiable to any order and batched by rule.

{args}

    Returns:
        {returns}

    Example:
        >>> import numpy as np
        >>> from polyad import xp
{example}
"""


def dct(x, /, *, type=2, n=None, axis=-1, norm=None, orthogonalize=None):
    return _transform("dct", type, x, _length(n), _axis(axis, "dct"), norm, orthogonalize, "dct")


def idct(x, /, *, type=2, n=None, axis=-1, norm=None, orthogonalize=None):
    return _transform("dct", type, x, _length(n), _axis(axis, "idct"), norm, orthogonalize, "idct", True)


def dst(x, /, *, type=2, n=None, axis=-1, norm=None, orthogonalize=None):
    return _transform("dst", type, x, _length(n), _axis(axis, "dst"), norm, orthogonalize, "dst")


def idst(x, /, *, type=2, n=None, axis=-1, norm=None, orthogonalize=None):
    return _transform("dst", type, x, _length(n), _axis(axis, "idst"), norm, orthogonalize, "idst", True)


def dctn(x, /, *, type=2, s=None, axes=None, norm=None, orthogonalize=None):
    return _transform("dct", type, x, s, axes, norm, orthogonalize, "dctn")


def idctn(x, /, *, type=2, s=None, axes=None, norm=None, orthogonalize=None):
    return _transform("dct", type, x, s, axes, norm, orthogonalize, "idctn", True)


def dstn(x, /, *, type=2, s=None, axes=None, norm=None, orthogonalize=None):
    return _transform("dst", type, x, s, axes, norm, orthogonalize, "dstn")


def idstn(x, /, *, type=2, s=None, axes=None, norm=None, orthogonalize=None):
    return _transform("dst", type, x, s, axes, norm, orthogonalize, "idstn", True)


_RETURNS = "The transformed array: ``x``'s dtype, its shape with the transformed lengths."
dct.__doc__ = _doc(
    "The discrete cosine transform of ``x`` along ``axis`` (types 1-4).",
    _ARGS_1D,
    _RETURNS,
    "        >>> xp.fft.dct(np.array([4.0, 3.0, 5.0, 10.0]), type=1)  # 30, -8, 6, -2 up to rounding\n"
    "        array([30., -8.,  6., -2.])",
)
idct.__doc__ = _doc(
    "The inverse of ``dct`` (the DCT of the inverse type, 1, 3, 2 or 4, with the mirrored ``norm``).",
    _ARGS_1D,
    _RETURNS,
    "        >>> x = np.array([1.0, 2.0, 0.5])\n"
    "        >>> bool(np.allclose(xp.fft.idct(xp.fft.dct(x, norm='ortho'), norm='ortho'), x))\n"
    "        True",
)
dst.__doc__ = _doc(
    "The discrete sine transform of ``x`` along ``axis`` (types 1-4).",
    _ARGS_1D,
    _RETURNS,
    "        >>> xp.fft.dst(np.array([1.0, 0.0]), type=2)\n        array([1.41421356, 2.        ])",
)
idst.__doc__ = _doc(
    "The inverse of ``dst`` (the DST of the inverse type, 1, 3, 2 or 4, with the mirrored ``norm``).",
    _ARGS_1D,
    _RETURNS,
    "        >>> x = np.array([1.0, 2.0, 0.5])\n"
    "        >>> bool(np.allclose(xp.fft.idst(xp.fft.dst(x, type=4), type=4), x))\n"
    "        True",
)
dctn.__doc__ = _doc(
    "The n-dimensional discrete cosine transform of ``x`` over ``axes`` (types 1-4).",
    _ARGS_ND,
    _RETURNS,
    "        >>> xp.fft.dctn(np.ones((2, 2)), norm='ortho')  # all the weight in the constant mode\n"
    "        array([[2., 0.],\n               [0., 0.]])",
)
idctn.__doc__ = _doc(
    "The inverse of ``dctn``.",
    _ARGS_ND,
    _RETURNS,
    "        >>> x = np.arange(6.0).reshape(2, 3)\n"
    "        >>> bool(np.allclose(xp.fft.idctn(xp.fft.dctn(x, type=1), type=1), x))\n"
    "        True",
)
dstn.__doc__ = _doc(
    "The n-dimensional discrete sine transform of ``x`` over ``axes`` (types 1-4).",
    _ARGS_ND,
    _RETURNS,
    "        >>> xp.fft.dstn(np.ones((1, 1)), type=1)\n        array([[4.]])",
)
idstn.__doc__ = _doc(
    "The inverse of ``dstn``.",
    _ARGS_ND,
    _RETURNS,
    "        >>> x = np.arange(6.0).reshape(2, 3)\n"
    "        >>> bool(np.allclose(xp.fft.idstn(xp.fft.dstn(x, axes=1), axes=1), x))\n"
    "        True",
)

NAMES = ("dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn")  # added to polyad.xp.fft

"""The fft extension of the standard: transforms, sample frequencies and shifts, with every transform rule.

Every transform is linear, so its JVP is the transform of the tangent (the ``linear`` marker) and its VJP
is its adjoint under polyad's complex convention (PyTorch's: the VJP of a linear map is its conjugate
transpose applied to the cotangent; for a map between real and complex arrays, the transpose for the real
inner product ``Re sum(conj(a) * b)``). With ``F`` the unnormalised forward DFT, ``F^H = N * inverse``,
so each transform's adjoint is its partner transform with the ``norm`` mode mirrored (backward <->
forward, ortho unchanged):

- ``fft``/``fftn`` <-> ``ifft``/``ifftn``;
- ``rfft``/``rfftn`` -> ``irfft``/``irfftn`` of the cotangent with the bins that stand for a conjugate pair
  (all but DC and, for even ``n``, Nyquist) halved: the real inverse counts each of them twice;
- ``irfft``/``irfftn`` -> ``rfft``/``rfftn`` of the cotangent with those bins doubled;
- ``hfft`` <-> ``ihfft`` the same way (``hfft(x) = irfft(conj(x))`` with the mirrored norm).

Padding or truncation by ``n``/``s`` is an internal linear op (``fft_resize``) whose transpose is the
resize back to the input's lengths.

Input dtypes (a superset of the standard): ``fft``, ``ifft``, ``fftn``, ``ifftn``, ``irfft``, ``irfftn``
and ``hfft`` accept real floating input as NumPy does and cast it to the complex dtype of the same
precision inside the kernel (array_api_strict accepts only complex input there); the cotangent of such a
real input is the real part of the adjoint. ``rfft``, ``rfftn`` and ``ihfft`` need real floating input.
Integer and boolean input is rejected with a TypeError, as are repeated axes (ValueError).

All parameters are normalised before binding (explicit ``s`` and non-negative ``axes``), so the ops and
their rules never depend on the backend's defaults.
"""

import operator

from polyad.core import bind
from polyad.core.avals import ShapeDtype, bottom, is_complex, is_floating, xp_of
from polyad.ops.base import real, reshape, where
from polyad.ops.common import define, on_device
from polyad.ops.creation import full
from polyad.ops.elementwise import equal, logical_or, multiply
from polyad.ops.fills import arange

_NORMS = ("backward", "ortho", "forward")
_MIRROR = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _complex_dtype(xp, dtype):
    return xp.complex64 if dtype in (xp.float32, xp.complex64) else xp.complex128


def _real_dtype(xp, dtype):
    return xp.float32 if dtype in (xp.float32, xp.complex64) else xp.float64


def remap_axes(axes, d):
    """Logical axes -> physical axes of a value whose batch dimension is at ``d``."""
    return tuple(a + (a >= d) for a in axes)


def axes_batch(op):
    """The batch rule of an op acting along ``axes=`` (the transforms, the shifts, the resize; dct's):
    the op once on the batched value, its axes moved past the batch dimension, which stays where it is.

    Args:
        op: the ``Op``; its one positional argument is the array, ``axes`` a tuple of logical axes among
            its keyword parameters (the others pass through).

    Returns:
        The rule ``rule(info, dims, x, *, axes, **params) -> (out, out_dim)``.

    Example:
        >>> import polyad as pa
        >>> x = pa.xp.reshape(pa.xp.arange(6.0), (2, 3))
        >>> rows = pa.vmap(lambda r: pa.xp.fft.fft(r))(x)  # vmap binds fft once, by this rule
        >>> bool(pa.xp.all(rows[1] == pa.xp.fft.fft(x[1])))
        True
    """

    def rule(info, dims, x, *, axes, **params):
        d = dims[0] % len(x.shape)
        return bind(op, x, axes=remap_axes(axes, d), **params), d

    return rule


# ------------------------------------------------------------------------------ resize (internal)


def _resize_kernel(xp, x, *, axes, sizes):
    for a, n in zip(axes, sizes):
        m = x.shape[a]
        if n < m:
            x = x[(slice(None),) * a + (slice(0, n), ...)]
        elif n > m:
            pad = tuple(x.shape[:a]) + (n - m,) + tuple(x.shape[a + 1 :])
            x = xp.concat([x, xp.zeros(pad, dtype=x.dtype, device=x.device)], axis=a)
    return x


def _resize_abstract(xp, x, *, axes, sizes):
    shape = list(x.shape)
    for a, n in zip(axes, sizes):
        shape[a] = n
    return ShapeDtype(shape, x.dtype, x.device)


_resize_op = define(
    "fft_resize",
    _resize_kernel,
    abstract_eval=_resize_abstract,
    vjp=lambda g, y, x, *, axes, sizes: (resize_axes(g, axes, [x.shape[a] for a in axes]),),
    linear=True,
)
_resize_op.register_rule("batch", axes_batch(_resize_op))


def resize_axes(x, axes, sizes):
    """Zero-pad or truncate ``x`` (at the end) along each of ``axes`` to ``sizes`` (used by rules)."""
    axes, sizes = tuple(axes), tuple(sizes)
    if all(x.shape[a] == n for a, n in zip(axes, sizes)):
        return x
    return bind(_resize_op, x, axes=axes, sizes=sizes)


# ------------------------------------------------------------------------------ transforms


def _transform_kernel(name, kind, one_d):
    def kernel(xp, x, *, s, axes, norm):
        if kind != "r2c" and not is_complex(x):
            x = xp.astype(x, _complex_dtype(xp, x.dtype))
        f = getattr(xp.fft, name)
        if one_d:
            return f(x, n=s[0], axis=axes[0], norm=norm)
        return f(x, s=s, axes=axes, norm=norm)

    return kernel


def _transform_abstract(kind):
    def rule(xp, x, *, s, axes, norm):
        shape = list(x.shape)
        for a, n in zip(axes, s):
            shape[a] = n
        if kind == "r2c":
            shape[axes[-1]] = s[-1] // 2 + 1
        dtype = _real_dtype(xp, x.dtype) if kind == "c2r" else _complex_dtype(xp, x.dtype)
        return ShapeDtype(shape, dtype, x.device)

    return rule


def _pair_weights(g, axis, n, pair, edge):
    """Weights along ``axis`` of a half spectrum of length ``n // 2 + 1`` (``n`` the full length):
    ``edge`` on the DC bin and, for even ``n``, the Nyquist bin; ``pair`` on the others (which stand for a
    conjugate pair of bins of the full spectrum). A constant of ``g``'s real dtype, shaped to broadcast."""
    h = n // 2 + 1
    device = bottom(g).device
    k = arange(h, device=device)
    is_edge = equal(k, 0)
    if n % 2 == 0:
        is_edge = logical_or(is_edge, equal(k, n // 2))
    w = where(is_edge, full((h,), edge, dtype=_real_dtype(xp_of(g), g.dtype), device=device), pair)
    return reshape(w, (h,) + (1,) * (len(g.shape) - 1 - axis))


def _transform_vjp(kind, partner):
    """The adjoint: ``partner`` (an op) with the mirrored norm, the Hermitian weights, the resize back."""

    def vjp(g, y, x, *, s, axes, norm):
        if kind == "r2c":
            g = multiply(g, _pair_weights(g, axes[-1], s[-1], 0.5, 1.0))
        ct = bind(partner(), g, s=s, axes=axes, norm=_MIRROR[norm])
        if kind == "c2r":
            ct = multiply(ct, _pair_weights(ct, axes[-1], s[-1], 2.0, 1.0))
        ct = resize_axes(ct, axes, [x.shape[a] for a in axes])
        if is_complex(ct) and not is_complex(x):
            ct = real(ct)
        return (ct,)

    return vjp


_OPS = {}


def _transform(name, kind, partner, one_d):
    op = define(
        f"fft.{name}",
        _transform_kernel(name, kind, one_d),
        abstract_eval=_transform_abstract(kind),
        vjp=_transform_vjp(kind, lambda: _OPS[partner]),
        linear=True,
    )
    op.register_rule("batch", axes_batch(op))
    _OPS[name] = op
    return op


_fft = _transform("fft", "c2c", "ifft", True)
_ifft = _transform("ifft", "c2c", "fft", True)
_fftn = _transform("fftn", "c2c", "ifftn", False)
_ifftn = _transform("ifftn", "c2c", "fftn", False)
_rfft = _transform("rfft", "r2c", "irfft", True)
_irfft = _transform("irfft", "c2r", "rfft", True)
_rfftn = _transform("rfftn", "r2c", "irfftn", False)
_irfftn = _transform("irfftn", "c2r", "rfftn", False)
_hfft = _transform("hfft", "c2r", "ihfft", True)
_ihfft = _transform("ihfft", "r2c", "hfft", True)

# ------------------------------------------------------------------------------ parameter normalisation


def _check_input(x, kind, name):
    if not hasattr(x, "dtype") or not is_floating(x):
        got = getattr(x, "dtype", type(x).__name__)
        raise TypeError(f"fft.{name} needs a floating-point array, got {got}")
    if kind == "r2c" and is_complex(x):
        raise TypeError(f"fft.{name} needs a real floating-point array, got {x.dtype}")


def _check_norm(norm, name):
    if norm not in _NORMS:
        raise ValueError(f"fft.{name}: norm must be one of {_NORMS}, got {norm!r}")


def _default_length(x, axis, kind, last):
    m = x.shape[axis]
    return 2 * (m - 1) if kind == "c2r" and last else m


def _params(x, s, axes, norm, kind, name):
    _check_input(x, kind, name)
    _check_norm(norm, name)
    ndim = len(x.shape)
    if ndim == 0:
        raise ValueError(f"fft.{name} needs an array of at least one dimension, got a 0-d array")
    if axes is None:
        axes = tuple(range(ndim)) if s is None else tuple(range(ndim - len(s), ndim))
        if s is not None and len(s) > ndim:
            raise ValueError(f"fft.{name}: s has {len(s)} entries for a {ndim}-d array")
    axes = tuple(axes)
    if not axes:
        raise ValueError(f"fft.{name}: axes must name at least one axis")
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"fft.{name}: axis {a} is out of bounds for an array of dimension {ndim}")
    axes = tuple(a % ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"fft.{name}: axes must be unique, got {axes}")
    last = len(axes) - 1
    if s is None:
        s = tuple(_default_length(x, a, kind, i == last) for i, a in enumerate(axes))
    else:
        s = tuple(s)
        if len(s) != len(axes):
            raise ValueError(f"fft.{name}: s and axes must have the same length, got {s} and {axes}")
        s = tuple(
            _default_length(x, a, kind, i == last) if n == -1 else int(n)
            for i, (n, a) in enumerate(zip(s, axes))
        )
    for n in s:
        if n < 1:
            raise ValueError(f"fft.{name}: invalid number of data points {n} (lengths must be at least 1)")
    return {"s": s, "axes": axes, "norm": norm}


def _params_1d(x, n, axis, norm, kind, name):
    return _params(x, None if n is None else (n,), (axis,), norm, kind, name)


# ------------------------------------------------------------------------------ public transforms


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    """One-dimensional discrete Fourier transform along ``axis`` (real input is cast to complex)."""
    return bind(_fft, x, **_params_1d(x, n, axis, norm, "c2c", "fft"))


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    """One-dimensional inverse discrete Fourier transform along ``axis`` (real input is cast to complex)."""
    return bind(_ifft, x, **_params_1d(x, n, axis, norm, "c2c", "ifft"))


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    """n-dimensional discrete Fourier transform over ``axes`` (real input is cast to complex)."""
    return bind(_fftn, x, **_params(x, s, axes, norm, "c2c", "fftn"))


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    """n-dimensional inverse discrete Fourier transform over ``axes`` (real input is cast to complex)."""
    return bind(_ifftn, x, **_params(x, s, axes, norm, "c2c", "ifftn"))


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    """One-dimensional discrete Fourier transform of real input: the ``n // 2 + 1`` non-negative bins."""
    return bind(_rfft, x, **_params_1d(x, n, axis, norm, "r2c", "rfft"))


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    """Inverse of ``rfft``: the real signal of length ``n`` (default ``2 * (m - 1)``) from a half spectrum."""
    return bind(_irfft, x, **_params_1d(x, n, axis, norm, "c2r", "irfft"))


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """n-dimensional discrete Fourier transform of real input (half spectrum along the last of ``axes``)."""
    return bind(_rfftn, x, **_params(x, s, axes, norm, "r2c", "rfftn"))


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """Inverse of ``rfftn``: a real array from a half spectrum along the last of ``axes``."""
    return bind(_irfftn, x, **_params(x, s, axes, norm, "c2r", "irfftn"))


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """Discrete Fourier transform of a signal with Hermitian symmetry given by its first half: real output."""
    return bind(_hfft, x, **_params_1d(x, n, axis, norm, "c2r", "hfft"))


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    """Inverse of ``hfft``: the half spectrum (``n // 2 + 1`` bins) of a real signal's inverse transform."""
    return bind(_ihfft, x, **_params_1d(x, n, axis, norm, "r2c", "ihfft"))


for _f, _op in (
    (fft, _fft),
    (ifft, _ifft),
    (fftn, _fftn),
    (ifftn, _ifftn),
    (rfft, _rfft),
    (irfft, _irfft),
    (rfftn, _rfftn),
    (irfftn, _irfftn),
    (hfft, _hfft),
    (ihfft, _ihfft),
):
    _f.op = _op  # type: ignore[union-attr]

# ------------------------------------------------------------------------------ sample frequencies


def _default_float(xp):
    return xp.__array_namespace_info__().default_dtypes()["real floating"]


def _freq(name, length):
    def kernel(xp, *, n, d, dtype, device):
        kwargs = {"d": d}
        if dtype is not None:
            kwargs["dtype"] = dtype
        if device is not None:
            kwargs["device"] = device
        return getattr(xp.fft, name)(n, **kwargs)

    def abstract(xp, *, n, d, dtype, device):
        return ShapeDtype((length(n),), dtype if dtype is not None else _default_float(xp), device)

    # no array argument: the ``device`` parameter picks the backend
    return define(f"fft.{name}", kernel, abstract_eval=abstract, nondiff=True, from_device=True)


def _check_n(n, name):
    try:
        k = operator.index(n)
    except TypeError:
        raise TypeError(f"fft.{name}: n must be an integer, got {n!r}") from None
    if isinstance(n, bool) or k < 1:
        raise ValueError(f"fft.{name}: n must be a positive integer, got {n!r}")
    return k


_fftfreq = _freq("fftfreq", lambda n: n)
_rfftfreq = _freq("rfftfreq", lambda n: n // 2 + 1)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point ``fft`` with sample spacing ``d`` (no derivative)."""
    n = _check_n(n, "fftfreq")
    return on_device(_fftfreq, n=n, d=d, dtype=dtype, device=device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point ``rfft`` with sample spacing ``d`` (no derivative)."""
    n = _check_n(n, "rfftfreq")
    return on_device(_rfftfreq, n=n, d=d, dtype=dtype, device=device)


fftfreq.op = _fftfreq
rfftfreq.op = _rfftfreq

# ------------------------------------------------------------------------------ shifts (linear)


def _shift(name, partner):
    def kernel(xp, x, *, axes):
        if not axes:
            return x  # nothing to roll (a 0-d array); NumPy's roll rejects an empty axes tuple
        return getattr(xp.fft, name)(x, axes=axes)

    op = define(
        f"fft.{name}",
        kernel,
        abstract_eval=lambda xp, x, *, axes: ShapeDtype(x.shape, x.dtype, x.device),
        vjp=lambda g, y, x, *, axes: (bind(_SHIFTS[partner], g, axes=axes),),
        linear=True,
    )
    op.register_rule("batch", axes_batch(op))
    return op


_SHIFTS = {}
_SHIFTS["fftshift"] = _fftshift = _shift("fftshift", "ifftshift")
_SHIFTS["ifftshift"] = _ifftshift = _shift("ifftshift", "fftshift")


def _shift_axes(x, axes, name):
    ndim = len(x.shape)
    if axes is None:
        return tuple(range(ndim))
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    for a in axes:
        if not -ndim <= a < max(ndim, 1) or ndim == 0:
            raise ValueError(f"fft.{name}: axis {a} is out of bounds for an array of dimension {ndim}")
    return tuple(a % ndim for a in axes)


def fftshift(x, /, *, axes=None):
    """Move the zero-frequency bin to the centre along ``axes`` (default: all axes)."""
    return bind(_fftshift, x, axes=_shift_axes(x, axes, "fftshift"))


def ifftshift(x, /, *, axes=None):
    """Inverse of ``fftshift``: move the centre bin back to index 0 along ``axes`` (default: all axes)."""
    return bind(_ifftshift, x, axes=_shift_axes(x, axes, "ifftshift"))


fftshift.op = _fftshift
ifftshift.op = _ifftshift

"""polyad's backend for ``scipy.fft``: SciPy's transforms on polyad's tensors, through SciPy's documented
backend mechanism (uarray's protocol: ``__ua_domain__ = "numpy.scipy.fft"`` and ``__ua_function__``).

``scipy.fft``'s functions are uarray multimethods: each call asks the active backends in turn, and SciPy's
own backend converts its input with ``np.asarray``, which a tensor of a transform refuses, as do CuPy's
arrays. polyad's backend, ``scipy_fft_backend``, takes the calls whose input ``x`` is a polyad tensor
(inside ``grad``, ``jvp``, ``vmap``, ``jit``, ...) or an array of another library than NumPy (CuPy's: the
transform runs on the GPU, by cuFFT and cupyx.scipy.fft, and the result stays there), and computes them
with ``polyad.xp.fft``, whose functions are ops with derivative and batching rules; for anything else it
returns ``NotImplemented``, so SciPy's backend runs as before (NumPy arrays, lists). Activate it with:

- ``with polyad.use_scipy_fft_backend():`` (the same as ``scipy.fft.set_backend(scipy_fft_backend)``): in
  the block, on the calling thread;
- ``scipy.fft.register_backend(polyad.scipy_fft_backend)``: for the whole process, tried before SciPy's
  own (which SciPy installs as its global backend with ``try_last=True``);
- ``scipy.fft.set_global_backend(polyad.scipy_fft_backend)`` replaces SciPy's own global backend: then
  also ``scipy.fft.register_backend("scipy")``, or NumPy input finds no backend.

What it handles (every ``scipy.fft`` multimethod but ``fht``/``ifht``):

- ``dct``, ``idct``, ``dst``, ``idst``, ``dctn``, ``idctn``, ``dstn``, ``idstn``: ``polyad.xp.fft``'s
  (``polyad/ops/dct.py``), all types, norms, ``n``/``s``, ``axis``/``axes`` and ``orthogonalize``;
- ``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft``, ``fftn``, ``ifftn``, ``rfftn``, ``irfftn``
  and the 2-d ``fft2``, ``ifft2``, ``rfft2``, ``irfft2``: the standard's functions of ``polyad.xp.fft``;
- ``hfftn``, ``hfft2``, ``ihfftn``, ``ihfft2``: ``irfftn`` of the conjugate and the conjugate of ``rfftn``,
  each with the mirrored norm (SciPy's definitions).

``overwrite_x`` and ``workers`` are permissions, not requirements (they never change a result), and are
ignored; a ``plan`` (a precomputed pocketfft plan) has no meaning here and is refused with a ValueError.
``fftfreq``, ``fftshift`` and the like are not multimethods: with ``SCIPY_ARRAY_API=1`` SciPy sends them
to ``polyad.xp.fft`` itself (``fftfreq(n, xp=polyad.xp)``).
"""

import inspect

import polyad.core.dispatch as dispatch
from polyad import xp as _xp
from polyad.core import Tensor

_MIRROR = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_REAL_TRANSFORMS = ("dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn")
_ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
_N_D = ("fftn", "ifftn", "rfftn", "irfftn")
_TWO_D = {"fft2": "fftn", "ifft2": "ifftn", "rfft2": "rfftn", "irfft2": "irfftn"}
_HERMITIAN_N_D = {"hfftn": "hfftn", "hfft2": "hfftn", "ihfftn": "ihfftn", "ihfft2": "ihfftn"}
HANDLED = _REAL_TRANSFORMS + _ONE_D + _N_D + tuple(_TWO_D) + tuple(_HERMITIAN_N_D)


def _tuple(v):
    """SciPy takes an int or a sequence for ``s`` and ``axes``."""
    if v is None or isinstance(v, tuple):
        return v
    return (v,) if isinstance(v, int) else tuple(v)


def _norm(norm):
    return "backward" if norm is None else norm


def _check_plan(name, arguments):
    if arguments.get("plan") is not None:
        raise ValueError(
            f"scipy.fft.{name}: plan= is a pocketfft plan, and polyad's backend (which computes this call "
            "because x is a polyad tensor) has no plans; call it without plan"
        )


def _compute(name, a):
    """``scipy.fft.<name>`` with the bound arguments ``a`` (a dict), by ``polyad.xp.fft``."""
    x = a["x"]
    if name in _REAL_TRANSFORMS:
        size = {"s": _tuple(a["s"]), "axes": _tuple(a["axes"])} if name.endswith("n") else {}
        if not size:
            size = {"n": a["n"], "axis": a["axis"]}
        f = getattr(_xp.fft, name)
        return f(x, type=a["type"], norm=a["norm"], orthogonalize=a["orthogonalize"], **size)
    _check_plan(name, a)
    norm = _norm(a["norm"])
    if name in _ONE_D:
        return getattr(_xp.fft, name)(x, n=a["n"], axis=a["axis"], norm=norm)
    s, axes = _tuple(a["s"]), _tuple(a["axes"])
    if name in _N_D or name in _TWO_D:
        return getattr(_xp.fft, _TWO_D.get(name, name))(x, s=s, axes=axes, norm=norm)
    if _HERMITIAN_N_D[name] == "hfftn":  # the real signal of a Hermitian spectrum's first half
        return _xp.fft.irfftn(_xp.conj(x), s=s, axes=axes, norm=_MIRROR[norm])
    return _xp.conj(_xp.fft.rfftn(x, s=s, axes=axes, norm=_MIRROR[norm]))


def _ours(x):
    """Whether polyad's backend computes a call on ``x``: a polyad tensor, or an array of a library other
    than NumPy (CuPy's, array_api_strict's on another device), which SciPy's own backend would convert
    with ``np.asarray``: CuPy refuses that, so polyad computes it by the array's own library (cuFFT for
    CuPy; the discrete cosine and sine transforms by cupyx.scipy.fft) and the result stays on its device."""
    if isinstance(x, Tensor):
        return True
    owner = dispatch.backend_of_array(x)
    return owner is not None and not owner.host_arrays


class ScipyFFTBackend:
    """The uarray backend for ``scipy.fft`` that computes on polyad's tensors (module notes).

    Calls whose input ``x`` is not a polyad tensor get ``NotImplemented``, so SciPy's own backend (or the
    next one) runs them. Use the instance ``polyad.scipy_fft_backend``.

    Example:
        >>> import numpy as np, scipy.fft, polyad as pa
        >>> def energy(x):  # |O x|^2, O orthogonal (norm="ortho"): its gradient is 2x
        ...     return pa.xp.sum(scipy.fft.dct(x, norm="ortho") ** 2)
        >>> with scipy.fft.set_backend(pa.scipy_fft_backend):
        ...     g = pa.grad(energy)(np.array([1.0, 2.0]))
        >>> bool(np.allclose(g, [2.0, 4.0]))
        True
    """

    __ua_domain__ = "numpy.scipy.fft"

    def __init__(self):
        self._signatures = {}

    def __ua_function__(self, method, args, kwargs):
        name = getattr(method, "__name__", None)
        # every multimethod polyad handles takes x first: NumPy input leaves before any binding
        if name not in HANDLED or not _ours(args[0] if args else kwargs.get("x")):
            return NotImplemented
        signature = self._signatures.get(name)
        if signature is None:
            signature = self._signatures[name] = inspect.signature(method)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return NotImplemented  # SciPy's backend raises its own error for a malformed call
        if not _ours(bound.arguments.get("x")):
            return NotImplemented
        bound.apply_defaults()
        return _compute(name, bound.arguments)

    def __repr__(self):
        return "polyad.scipy_fft_backend"


scipy_fft_backend = ScipyFFTBackend()


def use_scipy_fft_backend():
    """A context manager in which ``scipy.fft``'s functions accept polyad's tensors: polyad's backend is
    tried first, on the calling thread, and hands every other call to SciPy's own backend.

    The same as ``scipy.fft.set_backend(polyad.scipy_fft_backend)``; for the whole process use
    ``scipy.fft.register_backend(polyad.scipy_fft_backend)`` instead (module notes).

    Returns:
        The context manager (uarray's, from ``scipy.fft.set_backend``).

    Example:
        >>> import numpy as np, scipy.fft, polyad as pa
        >>> def energy(x):
        ...     return pa.xp.sum(scipy.fft.dst(x, type=1) ** 2)
        >>> with pa.use_scipy_fft_backend():
        ...     per_row = pa.vmap(pa.grad(energy))(np.eye(2))
        >>> per_row.shape
        (2, 2)
    """
    import scipy.fft

    return scipy.fft.set_backend(scipy_fft_backend)

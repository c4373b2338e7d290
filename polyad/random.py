"""Random numbers: seedable generators on every backend, and how they behave inside ``vmap``.

API:

- ``Generator(seed=None)``: an independent stream with ``normal``, ``uniform`` and ``integers``. It draws
  on the backend that owns ``device`` (the default backend when None) with that backend's own generator
  (the class the backend hands over as its ``generator``: NumPy's PCG64 ``Generator``; CuPy's cuRAND
  ``RandomState``; for array_api_strict, NumPy's, converted).
  Each backend gets its own stream, seeded with ``seed``.
- ``seed(s)`` reseeds the default generator; ``default_generator()`` returns it; the module-level
  ``normal``, ``uniform``, ``integers`` draw from it. ``get_state()`` / ``set_state(state)`` snapshot
  and restore a generator (the default one at module level).

Inside ``vmap(func, randomness=...)``:

- ``"error"`` (the default): drawing raises, since it is ambiguous whether the batch should share values;
- ``"different"``: every batch element draws independently (one draw of shape ``(batch, *size)``);
- ``"same"``: one draw, shared by the whole batch.

Nested vmaps combine: each "different" level adds its own batch dimension to the draw, each "same"
level shares; any "error" level raises. With ``chunk_size``, "same" replays the generators' state for
every chunk (as torch.func does), so all chunks see the same values.

Loc/scale and low/high may be arrays (even batched tensors): the draw is standard and then scaled with
polyad ops, so it differentiates with respect to them (reparameterisation).

Example:
    >>> import numpy as np, polyad as pa
    >>> g = pa.random.Generator(0)
    >>> g.normal(size=(2, 3)).shape
    (2, 3)
    >>> x = np.zeros(4)
    >>> noisy = pa.vmap(lambda xi: xi + pa.random.normal(), randomness="different")(x)
    >>> bool(noisy[0] != noisy[1])
    True
    >>> same = pa.vmap(lambda xi: xi + pa.random.normal(), randomness="same")(x)
    >>> bool(same[0] == same[1])
    True
"""

import threading
import warnings
import weakref
from typing import Any

import polyad.backends as backends
import polyad.core as core
import polyad.core.dispatch as dispatch
from polyad.core import Tensor, fresh
from polyad.core.avals import broadcast_shape
from polyad.transforms.batching import BatchedTensor, BatchInterpreter, batch_levels

_GENERATORS = weakref.WeakSet()  # every live Generator: vmap(randomness="same", chunk_size=...) replays them
_GEN_LOCK = threading.Lock()


class Generator:
    """A seedable random stream (one underlying generator per backend, created on first use).

    Args:
        seed: an int (reproducible) or None (fresh entropy).

    Example:
        >>> import polyad as pa
        >>> a = pa.random.Generator(7).uniform(size=3)
        >>> b = pa.random.Generator(7).uniform(size=3)
        >>> bool(pa.xp.all(a == b))
        True
    """

    def __init__(self, seed: int | None = None) -> None:
        _check_seed(seed, "Generator(seed")
        self._seed = seed
        self._impls = {}
        with _GEN_LOCK:
            _GENERATORS.add(self)

    def _impl(self, backend):
        impl = self._impls.get(backend.name)
        if impl is None:
            impl = self._impls[backend.name] = backend.generator(self._seed)
        return impl

    def get_state(self) -> Any:
        """A snapshot of this generator's state on the default backend and every one it has drawn on."""
        self._impl(dispatch.default_backend())
        return {name: impl.get_state() for name, impl in self._impls.items()}

    def set_state(self, state: Any) -> None:
        """Restore a snapshot from ``get_state``."""
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise TypeError(
                f"set_state(state): state must be the dict get_state returned, got {type(state).__name__}"
            )
        for name, s in state.items():
            impl = self._impls.get(name)
            if impl is None:
                if name not in backends.names():
                    raise ValueError(
                        f"set_state(state): state names backend {name!r}, which polyad does not know (the "
                        f"backends are {', '.join(backends.names())}); pass what get_state returned"
                    )
                impl = self._impl(dispatch.load_backend(name))
            impl.set_state(s)

    # -------------------------------------------------------------------------- distributions

    def normal(
        self,
        loc: float = 0.0,
        scale: float = 1.0,
        size: int | tuple[int, ...] | None = None,
        *,
        dtype: Any = None,
        device: Any = None,
    ) -> Any:
        """Normal samples with mean ``loc`` and standard deviation ``scale``.

        ``size`` defaults to the broadcast shape of ``loc`` and ``scale``; ``dtype`` to the backend's
        default real floating dtype.
        """
        shape = _shape(size, "normal", loc=loc, scale=scale)
        device = _device_of_parameters(device, loc, scale)
        z = self._draw("normal", shape, _dtype_of_kind(dtype, device, "normal", "real floating"), device)
        return _affine(z, loc, scale, 0.0, 1.0)

    def uniform(
        self,
        low: float = 0.0,
        high: float = 1.0,
        size: int | tuple[int, ...] | None = None,
        *,
        dtype: Any = None,
        device: Any = None,
    ) -> Any:
        """Uniform samples on ``[low, high)`` (``size`` defaults to the broadcast shape of the bounds)."""
        shape = _shape(size, "uniform", low=low, high=high)
        device = _device_of_parameters(device, low, high)
        u = self._draw("uniform", shape, _dtype_of_kind(dtype, device, "uniform", "real floating"), device)
        return _affine(u, low, high - low, 0.0, 1.0)

    def integers(
        self,
        low: int,
        high: int | None = None,
        size: int | tuple[int, ...] | None = None,
        *,
        dtype: Any = None,
        device: Any = None,
    ) -> Any:
        """Integers uniform on ``[low, high)`` (``[0, low)`` when ``high`` is None); Python int bounds."""
        if high is None:
            low, high = 0, low
        if not (_is_int(low) and _is_int(high)):
            raise TypeError(f"integers(low={low!r}, high={high!r}): the bounds must be Python ints")
        if high <= low:
            raise ValueError(f"integers(low={low}, high={high}): high must be greater than low")
        shape = () if size is None else _as_shape(size, "integers")
        dtype = _dtype_of_kind(dtype, device, "integers", "integral")
        return self._draw("integers", shape, dtype, device, low, high)

    def _draw(self, kind, shape, dtype, device, *bounds):
        stack = core.active_interpreters()
        for interp in stack:
            if getattr(interp, "refuses_random", False):  # pa.jit: a draw would be a constant of the trace
                raise RuntimeError(
                    f"pa.random.{kind} inside {interp.where}: the jitted code would replay the values drawn "
                    "while tracing at every call; draw outside the jitted function and pass the values in"
                )
        if stack and getattr(stack[-1], "abstract_random", False):
            # a loop body traced for its closure: a placeholder of the draw's shape, the state untouched
            stack[-1].drew_random = True
            return fresh(dispatch.backend_of_device(device).xp.zeros(shape, dtype=dtype))
        levels = batch_levels()
        for interp in levels:
            if interp.randomness == "error":
                raise RuntimeError(
                    f"pa.random.{kind} inside vmap with randomness='error' (the default): pass "
                    "randomness='different' (independent values per batch element) or 'same' (one value "
                    "shared by the batch) to vmap"
                )
        # a per-example loop (chunk_size=1) draws anew each call: "different" needs no batch dimension
        different = [i for i in levels if i.randomness == "different" and isinstance(i, BatchInterpreter)]
        full = tuple(i.batch_size for i in different) + shape
        backend = dispatch.backend_of_device(device)
        out = getattr(self._impl(backend), kind)(*bounds, full, dtype, device)
        if not different:
            return fresh(out)
        for interp in different:  # outermost first: each level's tensor wraps the one below it
            out = BatchedTensor(out, interp, 0)
        return out

    def __repr__(self):
        return f"Generator(seed={self._seed!r})"


# ------------------------------------------------------------------------------ helpers


def _is_number(x):
    return isinstance(x, int | float) and not isinstance(x, bool)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _check_seed(seed, where):
    if seed is not None and (not _is_int(seed) or seed < 0):
        raise ValueError(f"{where}={seed!r}): seed must be None or a non-negative int")


def _as_shape(size, kind):
    """``size`` (an int or a sequence of ints, each >= 0) as a shape tuple; errors name ``kind``."""
    dims = (size,) if isinstance(size, int) and not isinstance(size, bool) else size
    if not isinstance(dims, tuple | list) or not all(_is_int(d) for d in dims):
        raise TypeError(f"{kind}(size={size!r}): size must be None, an int or a tuple of ints")
    if any(d < 0 for d in dims):
        raise ValueError(f"{kind}(size={size!r}): sizes must be non-negative")
    return tuple(dims)


def _shape(size, kind, **params):
    """The shape of a draw: ``size``, else the broadcast shape of the array ``params`` (each a real
    number or an array, checked here)."""
    for name, value in params.items():
        if not (
            _is_number(value) or isinstance(value, Tensor) or dispatch.backend_of_array(value) is not None
        ):
            raise TypeError(f"{kind}({name}={value!r}): {name} must be a real number or an array")
    if size is not None:
        return _as_shape(size, kind)
    return broadcast_shape(*[tuple(x.shape) for x in params.values() if hasattr(x, "shape")])


def _device_of_parameters(device, *parameters):
    """``device``, else the device of the first array among a distribution's parameters: a draw shifted
    and scaled by arrays is made where they live (on the default device it could not meet them)."""
    if device is None:
        device = next((p.device for p in parameters if hasattr(p, "shape")), None)
    return device


def _info(device, kind):
    if device is not None and dispatch.owner_of_device(device) is None:
        raise ValueError(f"{kind}(device={device!r}): no polyad backend has this device")
    return dispatch.backend_of_device(device).compat.__array_namespace_info__()


def _dtype_of_kind(dtype, device, kind, dtype_kind):
    """``dtype``, checked to be a ``dtype_kind`` dtype ("real floating", "integral") of the backend of
    ``device``; its default one for None."""
    info = _info(device, kind)
    if dtype is None:
        return info.default_dtypes(device=device)[dtype_kind]
    if not any(_same_dtype(dtype, d) for d in info.dtypes(device=device, kind=dtype_kind).values()):
        raise TypeError(
            f"{kind}(dtype={dtype!r}): dtype must be a dtype of kind {dtype_kind!r} of the backend"
        )
    return dtype


def _same_dtype(a, b):
    with warnings.catch_warnings():  # array_api_strict warns when its dtypes meet NumPy's
        warnings.simplefilter("ignore")
        try:
            return bool(a == b)
        except Exception:  # a dtype of another library may refuse the comparison
            return False


def _affine(z, shift, scale, unit_shift, unit_scale):
    """``shift + scale * z`` with polyad ops, skipping the identity parts (no copy for the defaults)."""
    if not (_is_number(scale) and scale == unit_scale):
        z = z * scale
    if not (_is_number(shift) and shift == unit_shift):
        z = z + shift
    return z


# ------------------------------------------------------------------------------ default generator

_DEFAULT = [Generator()]


def default_generator() -> Generator:
    """The generator the module-level functions draw from."""
    return _DEFAULT[0]


def seed(s: int | None) -> None:
    """Reseed the default generator (a new ``Generator(s)`` replaces it; ``s`` a non-negative int or
    None)."""
    _check_seed(s, "seed(s")
    _DEFAULT[0] = Generator(s)


def get_state() -> Any:
    """Snapshot of the default generator's state."""
    return _DEFAULT[0].get_state()


def set_state(state: Any) -> None:
    """Restore the default generator's state from ``get_state``."""
    _DEFAULT[0].set_state(state)


def normal(
    loc: float = 0.0,
    scale: float = 1.0,
    size: int | tuple[int, ...] | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    """Normal samples from the default generator (see ``Generator.normal``)."""
    return _DEFAULT[0].normal(loc, scale, size, dtype=dtype, device=device)


def uniform(
    low: float = 0.0,
    high: float = 1.0,
    size: int | tuple[int, ...] | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    """Uniform samples from the default generator (see ``Generator.uniform``)."""
    return _DEFAULT[0].uniform(low, high, size, dtype=dtype, device=device)


def integers(
    low: int,
    high: int | None = None,
    size: int | tuple[int, ...] | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
) -> Any:
    """Random integers from the default generator (see ``Generator.integers``)."""
    return _DEFAULT[0].integers(low, high, size, dtype=dtype, device=device)


def snapshot_states():
    """The state of every live generator (vmap's chunks with randomness="same" replay it)."""
    with _GEN_LOCK:
        gens = list(_GENERATORS)
    return [(g, g.get_state()) for g in gens]


def restore_states(snapshot):
    for g, state in snapshot:
        g.set_state(state)


__all__ = [
    "Generator",
    "default_generator",
    "get_state",
    "integers",
    "normal",
    "seed",
    "set_state",
    "uniform",
]

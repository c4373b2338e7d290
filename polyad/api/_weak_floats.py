"""Python floats as traced, weakly typed arguments of ``pa.jit`` (as JAX treats them).

A float argument is not part of the cache key: it is traced as a 0-d value of the backend's default
floating dtype (``polyad.graph.tracing.WeakTracedTensor``), so a function called with 50 different step
sizes traces once. "Weak": where it meets a floating array, the array's dtype wins (``x32 * dt`` is float32,
as eagerly, where NumPy and the standard treat the Python number so), which the tracer records as a cast.
Python arithmetic on it (``dt * dt / 2``) stays weak, as it stays a Python float eagerly; an ``xp``
function of it (``xp.exp(-dt)``, ``xp.asarray(dt)``) is a 0-d array of the default float dtype, as eagerly.
Like an array argument, it has no value while the function traces: a Python branch on it, or
``math.sqrt(dt)``, raises ``ConcretizationError`` naming it; mark it static (``static_argnums``) to have
its value (each new value then traces anew). Integers, complex numbers, booleans and strings stay part of
the cache key (an ``int`` is usually a count or a shape).
"""

from polyad.core import Tensor
from polyad.core.avals import ShapeDtype
from polyad.core.dispatch import BY_TYPE, backend_of_array
from polyad.core.tensor import reconnect

WEAK_FLOAT = ("weak float",)  # a float argument's entry in the signature: its value is not in the key
_DEFAULT_FLOAT = {}  # backend -> its default real floating dtype


def is_traced_leaf(x):
    """Whether ``pa.jit`` traces the argument leaf ``x``: an array, a tensor, or a Python float."""
    return (
        isinstance(x, Tensor | float) or BY_TYPE.get(type(x)) is not None or backend_of_array(x) is not None
    )


def default_float(backend):
    """``backend``'s default real floating dtype (what a Python float becomes)."""
    dtype = _DEFAULT_FLOAT.get(backend)
    if dtype is None:
        dtype = backend.compat.__array_namespace_info__().default_dtypes()["real floating"]
        _DEFAULT_FLOAT[backend] = dtype
    return dtype


def weak_aval(x, backend):
    """The abstract value a float argument ``x`` is traced as: 0-d of the default float dtype, or the
    dtype of the tensor ``x`` was handed out for (``float(t)`` inside a transform)."""
    t = reconnect(x)
    if isinstance(t, Tensor):
        return ShapeDtype((), t.dtype, None)
    return ShapeDtype((), default_float(backend), None)


def weak_value(x, backend):
    """What the compiled code receives for the float ``x``: a 0-d array of the default float dtype."""
    return backend.xp.asarray(x, dtype=default_float(backend))


__all__ = ["WEAK_FLOAT", "default_float", "is_traced_leaf", "weak_aval", "weak_value"]

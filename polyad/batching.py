"""vmap: the batching level's tracer (``BatchedTensor``), its interpreter, and the loop fallback.

A ``BatchedTensor`` holds a value with one extra dimension, the batch dimension ``_aux``; unbatched
values are never wrapped (their batch dimension is "None"). Each op's ``batch`` rule receives the
values and their batch dimensions and returns the output and its batch dimension. Ops without a rule
use, in order, a registered decomposition into ops that have rules, then a per-example loop that
stacks the results and warns once per op.
"""

import threading
import warnings

from polyad.core import ConcretizationError, Interpreter, Tensor, bind


class BatchedTensor(Tensor):
    """A value at a vmap level: ``_value`` has the batch dimension ``_aux``; the logical shape lacks it."""

    __slots__ = ()

    @property
    def shape(self):
        s = tuple(self._value.shape)
        return s[: self._aux] + s[self._aux + 1 :]

    def _scalar(self, what):
        raise ConcretizationError(
            f"{what}() of a batched tensor inside vmap: the value differs per batch element, so Python "
            "control flow cannot branch on it; use pa.xp.where, or vmap with chunk_size=1 to loop"
        )

    def concrete(self):
        self._scalar("a concrete value")


class BatchInterpreter(Interpreter):
    def __init__(self, level, axis_size, randomness="error"):
        super().__init__(level)
        self.axis_size = axis_size
        self.randomness = randomness

    def process(self, op, args, params):
        values = []
        dims = []
        for a in args:
            if isinstance(a, Tensor) and a._interp is self:
                values.append(a._value)
                dims.append(a._aux)
            else:
                values.append(a)
                dims.append(None)
        rule = op.batch or decomposition(op)
        if rule is None:
            out, out_dim = loop_fallback(op, dims, values, params)
        else:
            out, out_dim = rule(tuple(dims), *values, **params)
        if op.multiple_results:
            return type(out)(o if d is None else BatchedTensor(o, self, d) for o, d in zip(out, out_dim))
        return out if out_dim is None else BatchedTensor(out, self, out_dim)


# ------------------------------------------------------------------------------ decompositions

# op name -> function(*args, **params) written in ops that have batching rules. Filled lazily:
# ``polyad.ops.decompositions`` registers them on first use, under a lock, so import stays cheap.
_DECOMPOSITIONS = {}
_DECOMPOSITIONS_LOADED = False
_LOCK = threading.Lock()


def register_decomposition(name):
    def deco(fn):
        _DECOMPOSITIONS[name] = fn
        return fn

    return deco


def decomposition(op):
    """A batching rule that runs ``op``'s registered decomposition (None if it has none)."""
    global _DECOMPOSITIONS_LOADED
    if not _DECOMPOSITIONS_LOADED:
        with _LOCK:
            if not _DECOMPOSITIONS_LOADED:
                import polyad.ops.decompositions  # noqa: F401  (registers its functions)

                _DECOMPOSITIONS_LOADED = True
    fn = _DECOMPOSITIONS.get(op.name)
    if fn is None:
        return None
    return _DecompositionRule(fn)


class _DecompositionRule:
    """Runs a decomposition on the batched tensors themselves, so each of its ops is batched by rule."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, dims, *values, **params):
        interp = _current_batch_interpreter(values, dims)
        args = [v if d is None else BatchedTensor(v, interp, d) for v, d in zip(values, dims)]
        out = self.fn(*args, **params)
        return _unwrap(out, interp)


def _current_batch_interpreter(values, dims):
    from polyad.core import _tls

    for interp in reversed(_tls.stack[1:]):
        if isinstance(interp, BatchInterpreter):
            return interp
    raise AssertionError("no batching level is active")  # pragma: no cover


def _unwrap(out, interp):
    if isinstance(out, tuple):
        pairs = [_unwrap(o, interp) for o in out]
        return type(out)(p[0] for p in pairs), tuple(p[1] for p in pairs)
    if isinstance(out, BatchedTensor) and out._interp is interp:
        return out._value, out._aux
    return out, None


# ------------------------------------------------------------------------------ loop fallback

_WARNED = set()


def loop_fallback(op, dims, values, params):
    """Batch ``op`` by running it per batch element and stacking: correct for anything, but slow."""
    from polyad.ops.manipulation import stack, take_index

    if op.name not in _WARNED:
        _WARNED.add(op.name)
        warnings.warn(
            f"vmap: op {op.name!r} has no batching rule; running it in a per-example loop (slow)",
            stacklevel=4,
        )
    size = next(v.shape[d] for v, d in zip(values, dims) if d is not None)
    results = []
    for i in range(size):
        args = [v if d is None else take_index(v, i, axis=d) for v, d in zip(values, dims)]
        results.append(bind(op, *args, **params))
    if op.multiple_results:
        return tuple(stack([r[k] for r in results]) for k in range(len(results[0]))), (0,) * len(results[0])
    return stack(results), 0

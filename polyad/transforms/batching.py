"""vmap: the batching level's tracer (``BatchedTensor``), its interpreter, its rule kind, and the loop
fallback.

A ``BatchedTensor`` holds a value with one extra dimension, the batch dimension ``_aux``; unbatched
values are never wrapped (their batch dimension is "None"), but an op applied to this level's tensors
always returns tensors of this level: an unbatched result is broadcast along the batch (a view). Each op's
``batch`` rule receives the vmap level (``info``: ``batch_size``, ``randomness``), the values and their
batch dimensions, and returns the output and its batch dimension. An op without a rule is computed by its
``decomposition`` (other ops, each batched by its rule) where it has one, else by a per-example loop that
stacks the results and warns once per op; a rule that returns ``NotImplemented`` for the case at hand (a
data-dependent shape) gets the loop too. A rule that raises is answered with the error the op raises on
one example (``raise_as_eager``), so errors inside vmap have eager's type and speak in per-example shapes.

In-place updates: arrays made by creation functions inside vmap (``xp.zeros(3)``, ``xp.asarray([...])``)
come back as ``core.FreshTensor``s, plain level-0 tensors, so that ``x[0] = batched_value`` reaches
polyad's functionalised ``__setitem__`` (a raw NumPy array would refuse the batched value) and ``x``
becomes batched.
"""

import threading
import warnings

from polyad.core import (
    ConcretizationError,
    Interpreter,
    Tensor,
    active_interpreters,
    bind,
    rule_kind,
    rule_of,
    split_args,
)
from polyad.core.avals import shape_of
from polyad.ops.base import broadcast_to, expand_dims, stack, take_index
from polyad.ops.elementwise import equal, isnan, logical_and, logical_or
from polyad.ops.reductions import all as all_of

BATCH = rule_kind(
    "batch",
    "batch(info, dims, *values, **params) -> (out, out_dim): info is the vmap level (batch_size, "
    "randomness); dims[i] is the batch dimension of values[i] (None: unbatched); NotImplemented: loop",
)


class BatchedTensor(Tensor):
    """A value at a vmap level: ``_value`` has the batch dimension ``_aux``; the logical shape lacks it."""

    __slots__ = ()

    @property
    def shape(self):
        s = tuple(self._value.shape)
        return s[: self._aux] + s[self._aux + 1 :]

    def _scalar(self, what):
        """The value common to every example, for ``what()`` (bool, int, float, index, item...): when all
        examples agree, Python takes the same branch for each, so the result is exact (NaN agrees with
        NaN). Otherwise a ConcretizationError naming ``what``."""
        v, d = self._value, self._aux
        n = v.shape[d]
        if n == 0:
            raise ConcretizationError(f"{what}() of a batched tensor inside vmap over an empty batch")
        first = take_index(v, 0, axis=d)
        if n > 1:
            ref = expand_dims(first, axis=d)
            same = equal(v, ref)
            if self.__array_namespace__().isdtype(self.dtype, ("real floating", "complex floating")):
                same = logical_or(same, logical_and(isnan(v), isnan(ref)))
            try:
                agree = bool(all_of(same))  # an outer vmap's examples must all agree too
            except ConcretizationError:
                agree = False
            if not agree:
                raise ConcretizationError(
                    f"{what}() of a batched tensor inside vmap: its value differs between the batch's "
                    "examples, so Python cannot take one branch for all of them; use pa.xp.where to compute "
                    "both sides, or vmap(..., chunk_size=1) to call the function once per example"
                )
        return first._scalar(what) if isinstance(first, Tensor) else first


class _BatchState(threading.local):
    def __init__(self):
        self.levels = []  # the active vmap levels of this thread, outermost first


_state = _BatchState()


def batch_levels():
    """The active vmap levels (``BatchInterpreter`` and ``LoopLevel``) of this thread, outermost first."""
    return list(_state.levels)


class _VmapLevel(Interpreter):
    """What every vmap level has: ``batch_size``, ``randomness``, and a place among ``batch_levels()``."""

    def __init__(self, level, batch_size, randomness="error"):
        super().__init__(level)
        self.batch_size = batch_size
        self.randomness = randomness
        _state.levels.append(self)

    def close(self):
        if _state.levels and _state.levels[-1] is self:
            _state.levels.pop()
        elif self in _state.levels:
            _state.levels.remove(self)


class LoopLevel(_VmapLevel):
    """Marks ``vmap(..., chunk_size=1)``, which calls the function per example: no tensor belongs to it;
    it only carries ``randomness`` for ``pa.random``."""

    def process(self, op, args, params):  # pragma: no cover  (no tensor has this level)
        raise AssertionError("no tensor belongs to a LoopLevel")


class BatchInterpreter(_VmapLevel):
    """A vmap level: ``info`` of every batch rule it runs."""

    rule_kind = BATCH
    transform = "vmap"
    carries = "batch (one value per example)"
    exit_hint = "; to call func with plain per-example values, use vmap(..., chunk_size=1)"

    def process(self, op, args, params):
        values, dims, _ = split_args(self, args)
        rule = rule_of(op, BATCH)
        if rule is not None:
            try:
                result = rule(self, tuple(dims), *values, **params)
            except Exception:
                raise_as_eager(op, dims, values, params)
                raise
            if result is NotImplemented:  # a case the rule cannot batch (data-dependent shapes)
                result = loop_fallback(op, dims, values, params)
        elif op.decomposition is not None:
            return op.decomposition(*args, **params)  # runs on our tensors: each op batched by its rule
        else:
            result = loop_fallback(op, dims, values, params)
        out, out_dim = result
        if op.multiple_results:
            return type(out)(self.batched(o, d) for o, d in zip(out, out_dim))
        return BatchedTensor(out, self, out_dim) if out_dim is not None else self.batched(out, None)

    def batched(self, value, dim):
        """``value`` as a tensor of this level. An unbatched one (``dim`` None: a result that does not
        depend on the batch, such as ``broadcast_arrays``' unbatched members) is broadcast along a new
        batch dimension 0 (a view), so that every op on this level's tensors returns one of them."""
        if dim is None:
            value = broadcast_to(expand_dims(value, axis=0), (self.batch_size, *shape_of(value)))
            dim = 0
        return BatchedTensor(value, self, dim)


def raise_as_eager(op, dims, values, params):
    """A batch rule failed: raise the error the op gives on one example, in per-example shapes (a
    rule sees the batched rank, so its own message, and often its type, differ from eager's: NumPy's
    AxisError against a rule's ValueError). Returns if the example succeeds (the rule's error stands)."""
    size = next((v.shape[d] for v, d in zip(values, dims) if d is not None), 0)
    if not size:
        return
    example = [v if d is None else take_index(v, 0, axis=d) for v, d in zip(values, dims)]
    try:
        bind(op, *example, **params)
    except Exception as eager:
        raise eager from None


# ------------------------------------------------------------------------------ loop fallback

_WARNED = set()
_WARN_LOCK = threading.Lock()


class LoopFallbackWarning(UserWarning):
    """vmap ran an op without a batching rule or decomposition as a per-example loop."""


def loop_fallback(op, dims, values, params):
    """Batch ``op`` by running it per batch element and stacking: correct for anything, but slow.

    Warns once per op (per process), naming it.
    """
    if op.name not in _WARNED:
        with _WARN_LOCK:
            first = op.name not in _WARNED
            _WARNED.add(op.name)
        if first:
            warnings.warn(
                f"vmap: op {op.name!r} has no batching rule; running it in a per-example loop (slow)",
                LoopFallbackWarning,
                stacklevel=5,
            )
    size = next(v.shape[d] for v, d in zip(values, dims) if d is not None)
    results = []
    for i in range(size):
        args = [v if d is None else take_index(v, i, axis=d) for v, d in zip(values, dims)]
        results.append(bind(op, *args, **params))
    if op.multiple_results:
        n = len(results[0])
        return tuple(stack([r[k] for r in results]) for k in range(n)), (0,) * n
    return stack(results), 0


def only_vmap_active():
    """Whether every active level is a vmap (``BatchInterpreter``): a loop of unknown length may then run
    eagerly, one Python loop over the batched values, with nothing else recording it.

    Returns:
        bool (True outside every transform too).

    Example:
        >>> import polyad as pa
        >>> seen = []
        >>> _ = pa.vmap(lambda x: (seen.append(only_vmap_active()), x)[1])(pa.xp.ones(2))
        >>> _ = pa.grad(lambda x: (seen.append(only_vmap_active()), pa.xp.sum(x))[1])(pa.xp.ones(2))
        >>> seen
        [True, False]
    """
    return all(type(interp) is BatchInterpreter for interp in active_interpreters())

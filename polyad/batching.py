"""vmap: the batching level's tracer (``BatchedTensor``), its interpreter, and the loop fallback.

A ``BatchedTensor`` holds a value with one extra dimension, the batch dimension ``_aux``; unbatched
values are never wrapped (their batch dimension is "None"). Each op's ``batch`` rule receives the
values and their batch dimensions and returns the output and its batch dimension. Ops without a rule
use, in order, a registered decomposition into ops that have rules (``polyad.ops.decompositions``,
loaded on first need), then a per-example loop that stacks the results and warns once per op.

In-place updates: arrays made by creation functions inside vmap (``xp.zeros(3)``, ``xp.asarray([...])``)
come back as ``FreshTensor``s, plain level-0 tensors, so that ``x[0] = batched_value`` reaches polyad's
functionalised ``__setitem__`` (a raw NumPy array would refuse the batched value) and ``x`` becomes
batched. Ops on a fresh tensor return raw arrays again, so nothing else changes.
"""

import threading
import warnings

from polyad.core import ConcretizationError, Interpreter, Tensor, _tls, bind, split_args


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


class FreshTensor(Tensor):
    """A plain level-0 tensor for an array created inside a transform, so ``x[key] = traced`` can rebind
    ``x`` (to a batched or differentiated tensor).

    Unlike a plain ``Tensor`` it does not spread: ops on it return raw backend arrays (``_sticky``).
    """

    __slots__ = ()
    _sticky = False

    def _become(self, other):
        return Tensor._become(self, other if isinstance(other, Tensor) else FreshTensor(other))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy ufunc on an array made inside a transform (a constant): NumPy computes it on the array
        inputs = tuple(i._value if type(i) is FreshTensor else i for i in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)


def in_vmap():
    """True while a vmap level is active in this thread."""
    stack = _tls.stack
    if len(stack) > 1:
        for interp in stack[1:]:
            if isinstance(interp, BatchInterpreter):
                return True
    return False


def fresh(array):
    """``array`` as a ``FreshTensor`` while any transform is active (creation functions call this), so that
    ``x[key] = traced`` can rebind ``x``; unchanged outside transforms."""
    return FreshTensor(array) if len(_tls.stack) > 1 else array


def batch_levels():
    """The active vmap levels (``BatchInterpreter`` and ``LoopLevel``), outermost first."""
    return [i for i in _tls.stack[1:] if isinstance(i, BatchInterpreter | LoopLevel)]


class LoopLevel(Interpreter):
    """Marks ``vmap(..., chunk_size=1)``, which calls the function per example: no tensor belongs to it;
    it only carries ``randomness`` for ``pa.random``."""

    def __init__(self, level, randomness):
        super().__init__(level)
        self.randomness = randomness

    def process(self, op, args, params):  # pragma: no cover  (no tensor has this level)
        raise AssertionError("no tensor belongs to a LoopLevel")


class BatchInterpreter(Interpreter):
    kind = "batch"

    def __init__(self, level, axis_size, randomness="error"):
        super().__init__(level)
        self.axis_size = axis_size
        self.randomness = randomness

    def process(self, op, args, params):
        values, dims, _ = split_args(self, args)
        rule = op.batch
        if rule is not None:
            out, out_dim = rule(tuple(dims), *values, **params)
        else:
            fn = decomposition(op)
            if fn is not None:
                return fn(*args, **params)  # runs on our tensors: each of its ops is batched by rule
            out, out_dim = loop_fallback(op, dims, values, params)
        if op.multiple_results:
            return type(out)(o if d is None else BatchedTensor(o, self, d) for o, d in zip(out, out_dim))
        return out if out_dim is None else BatchedTensor(out, self, out_dim)


# ------------------------------------------------------------------------------ decompositions

# op name -> function(*args, **params) written in ops that have batching rules. Filled lazily:
# ``polyad.ops.decompositions`` registers its functions on first use, under a lock, so import stays cheap.
_DECOMPOSITIONS = {}
_DECOMPOSITIONS_LOADED = False
_LOCK = threading.Lock()


def register_decomposition(name):
    """Decorator: batch op ``name`` (when it has no batching rule) by running ``fn(*args, **params)``."""

    def deco(fn):
        _DECOMPOSITIONS[name] = fn
        return fn

    return deco


def decomposition(op):
    """The registered decomposition of ``op`` (None if it has none); loads the table on first call."""
    global _DECOMPOSITIONS_LOADED
    if not _DECOMPOSITIONS_LOADED:
        with _LOCK:
            if not _DECOMPOSITIONS_LOADED:
                import polyad.ops.decompositions  # noqa: F401  (registers its functions)

                _DECOMPOSITIONS_LOADED = True
    return _DECOMPOSITIONS.get(op.name)


# ------------------------------------------------------------------------------ loop fallback

_WARNED = set()
_WARN_LOCK = threading.Lock()


class LoopFallbackWarning(UserWarning):
    """vmap ran an op without a batching rule or decomposition as a per-example loop."""


def loop_fallback(op, dims, values, params):
    """Batch ``op`` by running it per batch element and stacking: correct for anything, but slow.

    Warns once per op (per process), naming it.
    """
    from polyad.ops.manipulation import stack, take_index

    if op.name not in _WARNED:
        with _WARN_LOCK:
            first = op.name not in _WARNED
            _WARNED.add(op.name)
        if first:
            warnings.warn(
                f"vmap: op {op.name!r} has no batching rule; running it in a per-example loop (slow)",
                LoopFallbackWarning,
                stacklevel=4,
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

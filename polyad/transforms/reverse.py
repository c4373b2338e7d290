"""Reverse mode: the grad level's tracer, its tape, and the backward pass.

A ``ReverseTensor`` holds its primal (``_value``) and the id of the tape entry that made it (``_aux``;
leaves have ids with no entry). A result that carries no derivative (a comparison, an integer result, an
op on constants only, anything under ``no_grad``) is a ``ReverseTensor`` with ``_aux`` None and no entry:
the namespace stays closed under the transform. The interpreter appends one entry per op it records, in
execution order, so the backward pass walks the tape in reverse with no topological sort. Each op's
``vjp`` rule runs through polyad ops on the primals, which may be tensors of lower levels: an enclosing
level records the backward pass itself, and that is how higher derivatives work. The tape lives as long as
the interpreter: ``grad`` drops it on return, ``vjp`` keeps it for its ``vjp_fn``.

Deferred values (``defer``, eager ``grad`` only): a ``deferrable`` op (sums, products) on large arrays
records its entry with a ``PendingTensor`` as output, computed when something reads it (a rule of the
backward pass, a later op, the caller); the loss's last products and its sum, which ``grad`` does not
return and no rule reads, are never computed.
"""

import math
import threading
import weakref

import optree

import polyad.core.dispatch as dispatch
from polyad.backends.host import np
from polyad.core import (
    Interpreter,
    RuleContext,
    Tensor,
    active_interpreters,
    all_none,
    bind,
    capture_below,
    eval_raw,
    no_grad_level,
    rule_kind,
    rule_of,
    split_args,
    transform_active,
)
from polyad.core.avals import ShapeDtype
from polyad.ops.base import add
from polyad.ops.creation import asarray
from polyad.ops.fills import zeros_like
from polyad.ops.known_ones import Borrowed, KnownOnes
from polyad.transforms.abstract import ABSTRACT_EVAL
from polyad.transforms.forward import jvp_rule

VJP = rule_kind(
    "vjp",
    "vjp(cotangent, out, *primals, **params) -> tuple: one cotangent per positional argument (None, a "
    "value, or a zero-argument function evaluated only if that input needs a gradient); a rule with a "
    "forward(*primals, **params) -> (out, residuals) attribute gets residuals=... among its params; a "
    "rule with takes_context = True gets context=RuleContext(captured, last_use, transformed), and so "
    "does its forward",
)


class ReverseTensor(Tensor):
    """A value at a grad level: ``_value`` is the primal, ``_aux`` the id of its tape entry."""

    __slots__ = ()


_VALUE = Tensor.__dict__["_value"]  # the slot underneath PendingTensor's ``_value``
DEFER_MIN = 2**16  # elements of the largest argument from which a deferrable op is deferred


class PendingTensor(Tensor):
    """An eager ``grad``'s primal not computed yet: ``op`` applied to raw arrays and other PendingTensors,
    computed the first time anything reads ``_value`` (then kept), never if nothing does. Shape, dtype and
    device come from the op's abstract evaluation. Seen from outside it is a plain tensor, so any code that
    takes it as one computes it (``eval_op`` reads ``_value``)."""

    __slots__ = ()
    _sticky = False  # results of ops on it are raw arrays (FreshTensors inside a transform), not plain

    def __init__(self, aval, op, args, params, errors, backend):
        _VALUE.__set__(self, None)
        self._interp = None
        self._aux = (aval, op, args, params, backend, errors)
        self._alias = None

    @property
    def _value(self):
        value = _VALUE.__get__(self)
        return _compute(self) if value is None else value

    @_value.setter
    def _value(self, value):
        _VALUE.__set__(self, value)
        self._aux = None

    def _aval(self):  # the ShapeDtype while pending, then the array
        aux = self._aux
        return aux[0] if aux is not None else _VALUE.__get__(self)

    @property
    def shape(self):
        return tuple(self._aval().shape)

    @property
    def dtype(self):
        return self._aval().dtype

    @property
    def device(self):
        return self._aval().device

    @property
    def ndim(self):
        return len(self._aval().shape)


def _compute(t):
    """Compute PendingTensor ``t`` and the pending values it needs, deepest first (no recursion: a
    long chain of deferred ops would pass Python's limit), each under the floating-point error settings
    of the moment it was deferred."""
    stack = [t]
    while stack:
        n = stack[-1]
        aux = n._aux
        if aux is None:
            stack.pop()
            continue
        todo = [a for a in aux[2] if type(a) is PendingTensor and a._aux is not None]
        if todo:
            stack.extend(todo)
            continue
        _, op, args, params, _, errors = aux
        with np.errstate(**errors):
            n._value = eval_raw(op, _computed_args(args), params)
        stack.pop()
    return _VALUE.__get__(t)


def _computed(x):
    return x._value if type(x) is PendingTensor else x


def computed(tree):
    """``tree`` with every PendingTensor among its leaves computed (what a grad hands its caller)."""
    return optree.tree_map(_computed, tree, none_is_leaf=True)


def _computed_args(primals):
    return [_computed(p) for p in primals]


def _aval_of(x):
    """What the abstract rule reads for a primal: a pending value's ShapeDtype, an array's, a number."""
    if type(x) is PendingTensor and x._aux is not None:
        return x._aux[0]
    return ShapeDtype.of(_computed(x)) if hasattr(x, "shape") else x


def worth_deferring(values):
    """Whether an eager grad of these inputs defers values: one of them is large (``DEFER_MIN``). Asked
    once per call, so that a grad of small arrays pays nothing per op."""
    return any((getattr(v, "size", 0) or 0) >= DEFER_MIN for v in values if not isinstance(v, Tensor))


def _deferred(op, primals, params):
    """A PendingTensor for ``op`` on ``primals``, or None where the op runs now: no large argument,
    floating-point errors set to raise, or no abstract rule."""
    size, large = 0, None
    for p in primals:
        shape = getattr(p, "shape", None)
        if shape is not None:
            n = math.prod(shape)
            if n > size:
                size, large = n, p
    if size < DEFER_MIN or op.multiple_results:
        return None
    errors = np.geterr()
    rule = rule_of(op, ABSTRACT_EVAL)
    if rule is None or {"raise", "call"} & set(errors.values()):
        return None
    if type(large) is PendingTensor and large._aux is not None:
        backend = large._aux[4]
    else:
        backend = dispatch.backend_of_array(_computed(large))
    if backend is None:
        return None
    aval = rule(backend.xp, *[_aval_of(p) for p in primals], **params)
    return PendingTensor(aval, op, tuple(primals), params, errors, backend)


class ReverseInterpreter(Interpreter):
    """A grad level: records every op applied to its tensors on ``tape``.

    ``respect_no_grad``: whether ``pa.no_grad`` stops recording (False for ``linearize``, which is forward
    mode in torch.func's semantics, where ``no_grad`` does not apply). ``defer``: deferrable ops on large
    arrays leave their outputs pending (``PendingTensor``; eager ``grad``, whose caller does not get the
    function's value, and only at the outermost level, where every primal is a raw array).
    """

    rule_kind = VJP
    transform = "grad (reverse mode: grad, vjp, jacrev, linearize)"
    carries = "derivative"
    differentiates = True

    def __init__(self, level, respect_no_grad=True, defer=False):
        super().__init__(level)
        self.defer = defer and level == 1  # defer: worth_deferring(the inputs)
        self.tape = []  # (op, params, parent ids, primals, out, out ids)
        self.next_id = 0
        self.respect_no_grad = respect_no_grad
        self._dead_cache = None  # forward_sweep's last-use table
        # raw arrays from outside the transform that the tape reads, made read-only while it holds them
        self.held = {}  # id -> array
        weakref.finalize(self, release, self.held)
        # under a capture (pa.jit's trace, make_graph) the tape runs its backward pass during the trace,
        # and a compiled graph may keep it alive (a loop body's closure refers to its tensors): holding
        # the caller's arrays then would leave them read-only for as long as the compiled function lives
        self.holds = all(i.transforms_bodies for i in active_interpreters())

    def new_leaf(self, value):
        """Wrap ``value`` as an input to differentiate; returns the tracer."""
        t = ReverseTensor(value, self, self.next_id)
        self.next_id += 1
        return t

    def constant(self, value):
        """``value`` as a tensor of this level with no tape entry: it carries no derivative."""
        return ReverseTensor(value, self, None)

    def process(self, op, args, params):
        primals, parents, lower = split_args(self, args)
        pending = False  # pending primals (this level's deferred values), computed unless the op defers
        if (
            lower
            and self.defer
            and all(type(p) is PendingTensor or not isinstance(p, Tensor) for p in primals)
        ):
            pending, lower = True, False
        if (
            op.nondiff
            or (parents[0] is None and all_none(parents))  # constants only: nothing to differentiate
            or (self.level <= no_grad_level() and self.respect_no_grad)
        ):
            if pending:
                primals = _computed_args(primals)
            out = bind(op, *primals, **params) if lower else eval_raw(op, primals, params)
            # still a tensor of this level (a comparison, an argmax, a *_like...): the namespace stays
            # closed under the transform, so library code sees one namespace and may write into it
            if op.multiple_results:
                return type(out)(ReverseTensor(o, self, None) for o in out)
            return ReverseTensor(out, self, None)
        rule = None if op.higher_order is None else rule_of(op, VJP)
        forward = getattr(rule, "forward", None)
        # a pending output is recorded with its primals as they are (pending ones included)
        out = _deferred(op, primals, params) if self.defer and op.deferrable and not lower else None
        if out is None:
            if pending:
                primals = _computed_args(primals)
            if forward is None:
                out = bind(op, *primals, **params) if lower else eval_raw(op, primals, params)
            else:  # a rule that keeps its own residuals (a loop's checkpoints): handed to it as a parameter
                out, residuals = forward(*primals, **params, **self._context(rule, last_use=False))
                params = dict(params, residuals=residuals)
        if self.holds:
            hold(self.held, args)
        if op.multiple_results:
            ids = tuple(range(self.next_id, self.next_id + len(out)))
            self.next_id += len(out)
            self.tape.append((op, params, parents, primals, out, ids))
            return type(out)(ReverseTensor(o, self, i) for o, i in zip(out, ids))
        i = self.next_id
        self.next_id += 1
        self.tape.append((op, params, parents, primals, out, i))
        return ReverseTensor(out, self, i)

    def _context(self, rule, last_use):
        """``{"context": RuleContext(...)}`` for a rule that asks for it (``takes_context``), else ``{}``."""
        if not getattr(rule, "takes_context", False):
            return {}
        return {"context": RuleContext(capture_below(self.level), last_use, transform_active())}

    def backward(self, seeds, consume=False, ones=False):
        """Cotangents of the tape's ids given ``seeds`` ({id: cotangent}; the dict is used up, so that each
        cotangent is freed as soon as its rule has run: jacrev's basis need not outlive its first step).

        With ``consume`` the tape is emptied as it is walked, so each entry's saved values are freed as
        soon as its rule has run (``grad``); without, it stays for another call (``vjp_fn``).

        With ``ones`` every seed is all ones (``grad``'s of a scalar loss): while a cotangent is known to
        be all ones, its op's ``vjp.ones`` rule runs instead of the VJP and skips the products by it (see
        ``polyad.ops.base``). A cotangent such a rule borrowed (a primal itself) that reaches the end is
        copied, so the caller never gets a primal as a gradient.
        """
        ct = seeds
        known = dict(seeds) if ones else None  # id -> the all-ones array that is its cotangent
        borrowed = {}  # id -> the primal a ones rule handed over as its cotangent
        if consume:
            tape, self.tape = self.tape, []
            entries = _drain(tape)
        else:
            entries = reversed(self.tape)
        for op, params, parents, primals, out, ids in entries:
            if op.multiple_results:
                gs = [ct.pop(i, None) for i in ids]
                if all(g is None for g in gs):
                    continue
                g = tuple(zeros_like(o) if gi is None else gi for gi, o in zip(gs, out))
            else:
                g = ct.pop(ids, None)
                if g is None:
                    continue
            rule = rule_of(op, VJP)
            if rule is None:  # an op without a rule is fine until a gradient must flow through it
                raise NotImplementedError(
                    f"reverse mode (grad/vjp) is not implemented for op {op.name!r}: it has no VJP rule "
                    "(for a custom op, register one with op.register_autograd)"
                )
            if known and known.pop(ids, None) is g and hasattr(rule, "ones"):
                _ones_step(rule.ones(g, out, *primals, **params), parents, ct, known, borrowed)
                g = None
                continue
            # with ``consume``, the entry's last use: a rule keeping its own residuals may free them as it
            # goes (a loop's checkpoints, each dropped when its schedule is done with it)
            grads = rule(g, out, *primals, **params, **self._context(rule, last_use=consume))
            for pid, gi in zip(parents, grads):
                if pid is None or gi is None:
                    continue
                if callable(gi):  # a lazily given cotangent: computed only for inputs that need it
                    gi = gi()
                    if gi is None:
                        continue
                _accumulate(ct, pid, gi)
            g = grads = gi = None  # hold no cotangent past its entry (peak memory of jacrev)
        for pid, v in borrowed.items():
            if ct.get(pid) is v:
                ct[pid] = asarray(v, copy=True)
        if consume:
            release(self.held)
        return ct

    def forward_sweep(self, seeds, keep=None):
        """Tangents of the tape's ids given input tangents ``seeds`` ({id: tangent}): the JVP replayed on
        the recorded primals (``linearize``), without running any primal op again.

        With ``keep`` (a set of ids), a tangent is dropped after its last use unless its id is in ``keep``,
        so the sweep holds only live tangents (less memory, and the allocator reuses their buffers).
        """
        tan = dict(seeds)
        dead = None if keep is None else self._dead_after(keep)
        for k, (op, params, parents, primals, out, ids) in enumerate(self.tape):
            ts = tuple(None if p is None else tan.get(p) for p in parents)
            if dead is not None and k in dead:
                for p in dead[k]:
                    tan.pop(p, None)
            if all(t is None for t in ts):
                continue
            rule = jvp_rule(op)
            if getattr(rule, "computes_primal", False):  # a loop's rule runs the loop for its tangents
                _, t = rule(ts, None, *primals, **params)
            else:
                t = rule(ts, out, *primals, **params)
            if op.multiple_results:
                for i, ti in zip(ids, t):
                    if ti is not None:
                        tan[i] = ti
            elif t is not None:
                tan[ids] = t
        return tan

    def _dead_after(self, keep):
        """{entry index: ids whose last use is that entry}, ids in ``keep`` left out (cached per tape)."""
        key = (len(self.tape), frozenset(keep))
        cached = self._dead_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        last = {}
        for k, entry in enumerate(self.tape):
            for p in entry[2]:
                if p is not None:
                    last[p] = k
        dead = {}
        for p, k in last.items():
            if p not in keep:
                dead.setdefault(k, []).append(p)
        self._dead_cache = (key, dead)
        return dead


def _ones_step(grads, parents, ct, known, borrowed):
    """Accumulate what a ``vjp.ones`` rule handed back, noting cotangents that are all ones or borrowed."""
    for pid, gi in zip(parents, grads):
        if pid is None or gi is None:
            continue
        if callable(gi):
            gi = gi()
            if gi is None:
                continue
        mark = type(gi)
        if mark is KnownOnes or mark is Borrowed:
            gi = gi.value
        if _accumulate(ct, pid, gi):  # a sum of two cotangents is neither all ones nor borrowed
            if mark is KnownOnes:
                known[pid] = gi
            elif mark is Borrowed:
                borrowed[pid] = gi


def _accumulate(ct, pid, gi):
    """Add cotangent ``gi`` into ``ct[pid]``; True when it is the first one there (it is then ``gi``)."""
    prev = ct.get(pid)
    if prev is None:
        ct[pid] = gi
        return True
    if type(prev) is type(gi) and not isinstance(prev, Tensor):
        # two backend arrays: the array's own ``+`` on the popped cotangent, whose only reference is then
        # the expression's, so NumPy's temporary elision may add into its buffer (it checks the reference
        # count: a cotangent shared with another id, a primal or a view's base is never written to); one
        # allocation fewer per accumulation on large arrays
        prev = None
        ct[pid] = ct.pop(pid) + gi
    else:
        ct[pid] = add(prev, gi)
    return False


# A raw array the tape reads (a closed-over NumPy array, not a tensor) that the user's code then writes in
# place would change the derivative silently (the backward pass reads the new values): while a tape holds
# it, it is read-only, so the write raises. Counted per array: several tapes may hold one.
_HELD = {}  # id(array) -> [array, how many tapes hold it]
_HELD_LOCK = threading.Lock()
# Views given back while their base was still held: NumPy refuses to make a view writeable over a read-only
# base, so each waits until no tape holds its base (retried at every release)
_WAITING = []


def hold(held, args):
    """Make the writeable raw arrays among ``args`` read-only, noting them in ``held`` (one tape's
    ``{id: array}``: an array this tape holds already costs one lookup)."""
    for a in args:
        if isinstance(a, Tensor) or id(a) in held:
            continue
        flags = getattr(a, "flags", None)
        if flags is None or not getattr(a, "ndim", 0):
            continue  # a Python or NumPy scalar, or an array without flags (immutable here)
        with _HELD_LOCK:
            entry = _HELD.get(id(a))
            if entry is not None and entry[0] is a:
                entry[1] += 1
            elif getattr(flags, "writeable", False):
                try:
                    flags.writeable = False
                except (ValueError, AttributeError, TypeError):
                    continue
                _HELD[id(a)] = [a, 1]
            else:
                continue
        held[id(a)] = a


def release(held):
    """Give back the arrays a tape held (writeable again once no tape holds them)."""
    with _HELD_LOCK:
        while held:
            _, a = held.popitem()
            entry = _HELD.get(id(a))
            if entry is None or entry[0] is not a:
                continue
            entry[1] -= 1
            if entry[1] == 0:
                del _HELD[id(a)]
                _WAITING.append(a)
        waiting, progress = _WAITING, True
        while progress and waiting:  # a view after its base, whatever order they were given back in
            progress, still = False, []
            for a in waiting:
                try:
                    a.flags.writeable = True
                    progress = True
                except ValueError:  # its base is still read-only
                    still.append(a)
            waiting = still
        # a view whose base no tape holds stays read-only (its base was made so by someone else)
        _WAITING[:] = [a for a in waiting if _held_base(a)]


def _held_base(a):
    """Whether a tape holds ``a``'s base (or its base's base)."""
    base = getattr(a, "base", None)
    while base is not None:
        entry = _HELD.get(id(base))
        if entry is not None and entry[0] is base:
            return True
        base = getattr(base, "base", None)
    return False


def _drain(tape):
    """The entries of ``tape`` last first, each removed as it is handed out."""
    pop = tape.pop
    while tape:
        yield pop()

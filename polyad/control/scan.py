"""The scan op: a loop of known length over a closure-converted body, and its rule for each transform.

``bind(SCAN, *carry, *xs, *closure, body=..., length=..., ...)`` returns the final carry, the stacked
per-step outputs ``ys`` and, when ``save`` names steps, the carry before each of them (its leaves, step
after step: what a reverse rule keeps as checkpoints; each the very array the loop computed, no copy).
Step ``i`` reads ``xs[i]`` (``xs[length - 1 - i]`` when ``reverse``). The body is called with the carry,
the step's slices of ``xs`` and the closure's values, and returns the new carry then the step's ``ys``.

- Level 0 (the kernel) and transforms without a rule of their own run the loop on their values
  (``run_loop``), calling the body once per step.
- vmap: one scan of the vmapped body (``BatchedBody``), every carry batched.
- jvp: one scan of the body under jvp (``DualBody``), carrying primal and tangent together; no storage.
- grad/vjp: the primal pass stores the checkpoints ``checkpoints=`` asks for (``schedules.plan``) as one
  scan with ``save`` over all steps but the last, which it runs recorded (the reverse sweep's first turn:
  the body runs ``length + p(length, s)`` times, Revolve's count, and once more for the abstract trace);
  the backward pass replays the schedule's reverse actions: advances as scans, turns as one recorded
  step each, pulled back at once. Under a capture (``pa.jit``) the primal pass keeps the last step's
  carry instead, and the backward pass is one op (``SCAN_REVERSE``), whose own rules (vmap, jvp) bind it
  again with the body transformed, so a jitted Hessian
  or per-example gradient holds one sweep, whatever the number of steps.

Rules bind scans again on the values underneath, so the levels below see one op each time.
"""

import math

import polyad.control.schedules as schedules
import polyad.core.dispatch as dispatch
from polyad.control.bodies import BatchedBody, DualBody, recorded, step_pullback, with_batch_at
from polyad.control.graph_steps import run_captured
from polyad.control.schedules import Free, Restore, Store, Turn
from polyad.core import Op, bind
from polyad.core.avals import ShapeDtype, dtype_kind, is_floating, itemsize, nbytes, shape_of
from polyad.graph.compiler.codegen import consuming
from polyad.ops.base import add, broadcast_to, expand_dims, move_to_front, moveaxis, stack, take_index
from polyad.ops.fills import zeros, zeros_like
from polyad.ops.indexing import getitem
from polyad.ops.manipulation import concat


def _split(args, n_carry, n_xs):
    return list(args[:n_carry]), list(args[n_carry : n_carry + n_xs]), list(args[n_carry + n_xs :])


def _index(i, length, reverse):
    """The position in ``xs`` of execution step ``i``."""
    return length - 1 - i if reverse else i


def _stack_steps(per_step, avals, length, like):
    """The per-step outputs (a list, in execution order) stacked into one array per output."""
    if not per_step:
        return [zeros((0, *a.shape), dtype=a.dtype, device=getattr(like, "device", None)) for a in avals]
    return [stack([step[k] for step in per_step]) for k in range(len(per_step[0]))]


def run_loop(args, *, body, length, reverse, n_carry, n_xs, save=(), keep_ys=True, **params):
    """The loop itself, on whatever the arguments are (backend arrays at level 0, a transform's tensors
    when it runs the op's body): ``[*carry, *ys, *saved]``, ``saved`` the carry's leaves before each step
    of ``save``."""
    carry, xs, consts = _split(args, n_carry, n_xs)
    save = frozenset(save)
    saved, ys = [], []
    for i in range(length):
        if i in save:
            saved.append(carry)
        t = _index(i, length, reverse)
        out = body(*carry, *[take_index(x, t) for x in xs], *consts)
        carry = out[:n_carry]
        if keep_ys:
            ys.append(out[n_carry:])
    if reverse:
        ys.reverse()
    like = carry[0] if carry else (xs[0] if xs else None)
    y_avals = body.out_avals[n_carry:] if keep_ys else []
    stacked = _stack_steps(ys, y_avals, length, like) if keep_ys else []
    return (*carry, *stacked, *[leaf for state in saved for leaf in state])


def _kernel(xp, *args, **params):
    out = run_captured(args, **params)  # None unless the steps replay from device graphs
    return run_loop(args, **params) if out is None else out


def _abstract(xp, *avals, body, length, n_carry, save=(), keep_ys=True, **params):
    carry = [ShapeDtype(a.shape, a.dtype, a.device) for a in avals[:n_carry]]
    device = carry[0].device if carry else None
    ys = (
        [ShapeDtype((length, *a.shape), a.dtype, device) for a in body.out_avals[n_carry:]] if keep_ys else []
    )
    return (*carry, *ys, *(carry * len(save)))


# ------------------------------------------------------------------------------ vmap


def _batch(info, dims, *values, body, n_carry, n_xs, **params):
    size = info.batch_size
    carry, xs, consts = _split(values, n_carry, n_xs)
    carry_dims, x_dims, const_dims = _split(dims, n_carry, n_xs)
    # every carry batched (a carry that starts unbatched may become batched after one step)
    carry = [
        move_to_front(c, d) if d is not None else broadcast_to(expand_dims(c, axis=0), (size, *shape_of(c)))
        for c, d in zip(carry, carry_dims)
    ]
    # the batch of xs goes to axis 1, so that each step's slice has it at 0
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, x_dims)]
    step_dims = [0] * n_carry + [None if d is None else 0 for d in x_dims] + list(const_dims)
    inner = BatchedBody(body, step_dims, size, info.randomness)
    outs = bind(SCAN, *carry, *xs, *consts, body=inner, n_carry=n_carry, n_xs=n_xs, **params)
    n_ys = len(outs) - n_carry * (1 + len(params.get("save", ())))
    return outs, (0,) * n_carry + (1,) * n_ys + (0,) * (len(outs) - n_carry - n_ys)


# ------------------------------------------------------------------------------ jvp


def _jvp(tangents, out, *primals, body, n_carry, n_xs, save=(), keep_ys=True, residuals=None, **params):
    carry, xs, consts = _split(primals, n_carry, n_xs)
    t_carry, t_xs, t_consts = _split(tangents, n_carry, n_xs)
    # every floating carry carries a tangent (zeros where none is given: it may turn non-zero after a
    # step); xs and the closure pass theirs only where they have one
    float_carry = [k for k, c in enumerate(carry) if is_floating(c)]
    carry_t = [zeros_like(carry[k]) if t_carry[k] is None else t_carry[k] for k in float_carry]
    x_t = [k for k, t in enumerate(t_xs) if t is not None]
    c_t = [k for k, t in enumerate(t_consts) if t is not None]
    n_y = len(body.out_avals) - n_carry
    float_y = [n_carry + k for k in range(n_y) if _floating_aval(body.out_avals[n_carry + k])]
    # the body under jvp takes its inputs (carry, x, closure) then the tangents given, in that order
    tangent_of = float_carry + [n_carry + k for k in x_t] + [n_carry + n_xs + k for k in c_t]
    inner = DualBody(body, n_carry + n_xs + len(consts), tangent_of, float_carry + float_y)
    step = _JvpStep(inner, (n_carry, len(float_carry), n_xs, len(x_t), len(consts), len(c_t)), n_y)
    args = [*carry, *carry_t, *xs, *[t_xs[k] for k in x_t], *consts, *[t_consts[k] for k in c_t]]
    n_ct = len(float_carry)
    outs = bind(
        SCAN,
        *args,
        body=step,
        n_carry=n_carry + n_ct,
        n_xs=n_xs + len(x_t),
        save=save,
        keep_ys=keep_ys,
        **params,
    )
    new_carry, new_carry_t, rest = outs[:n_carry], outs[n_carry : n_carry + n_ct], outs[n_carry + n_ct :]
    n_ys = n_y + len(float_y) if keep_ys else 0
    ys, ys_t, saved_all = rest[:n_y] if keep_ys else (), rest[n_y:n_ys], rest[n_ys:]
    saved, t_saved = [], []
    for j in range(len(save)):  # each saved state: the carry's leaves, then their tangents
        state = saved_all[j * (n_carry + n_ct) : (j + 1) * (n_carry + n_ct)]
        saved += state[:n_carry]
        tangents = [None] * n_carry
        for k, t in zip(float_carry, state[n_carry:]):
            tangents[k] = t
        t_saved += tangents
    t_out = [None] * (n_carry + len(ys))
    for k, t in zip(float_carry, new_carry_t):
        t_out[k] = t
    for j, t in zip(float_y, ys_t):
        t_out[j] = t  # ys follow the carry in the outputs, as in the body's
    return (*new_carry, *ys, *saved), (*t_out, *t_saved)


def _floating_aval(a):
    dtype = getattr(a, "dtype", None)
    return dtype is not None and dtype_kind(dtype) in "fc"


_jvp.computes_primal = True


class _JvpStep:
    """The step of a jvp'd scan: the scan's flat order (carry and its tangents, xs and theirs, the closure
    and its) around a ``DualBody`` (inputs, then tangents), whose outputs (carry, ys, then their tangents)
    come back as carry, carry tangents, ys, ys tangents."""

    closures = ()
    graph = None

    def __init__(self, inner, sizes, n_y):
        self.inner, self.sizes, self.n_y = inner, sizes, n_y
        self.out_avals = self._order(inner.out_avals)
        self.where = inner.where
        self.draws_random = getattr(inner, "draws_random", False)

    def _order(self, out):
        n_carry, n_ct = self.sizes[0], self.sizes[1]
        n_out = n_carry + self.n_y
        return [*out[:n_carry], *out[n_out : n_out + n_ct], *out[n_carry:n_out], *out[n_out + n_ct :]]

    def __call__(self, *args):
        pieces, k = [], 0
        for n in self.sizes:
            pieces.append(list(args[k : k + n]))
            k += n
        carry, carry_t, xs, xs_t, closure, closure_t = pieces
        return self._order(self.inner(*carry, *xs, *closure, *carry_t, *xs_t, *closure_t))


# ------------------------------------------------------------------------------ grad: checkpoints


def _value_bytes(body, carry):
    """The bytes of every value the body computes, one entry per value, from its traced graph (empty
    where it has none: a transformed body)."""
    graph = getattr(body, "graph", None)
    if graph is None or not carry:
        return []
    xp_ = dispatch.namespace_of(carry[0])
    return [math.prod(o.shape) * itemsize(o.dtype, xp_) for n in graph.nodes for o in n.outputs]


def step_bytes(body, carry):
    """The bytes one step's recording holds (every value the body computes: an upper bound), from its
    traced graph."""
    return sum(_value_bytes(body, carry))


# polyad's own memory in a loop's backward pass besides the arrays (see auto_slots)
BOOKKEEPING = 2**18


def auto_slots(body, carry, max_memory, length=None, carries_per_slot=1, where="pa.scan"):
    """``checkpoints="auto"``'s slots: the most that ``max_memory`` holds beside what the backward pass
    needs, counted as (peaks checked with tracemalloc on NumPy: tests/test_loop_budgets.py)
    - one step's recording: every value the body computes (``step_bytes``, an upper bound);
    - the backward pass's temporaries: the cotangents live at once and a rule's own, 3 x the largest value
      the body computes;
    - 2 carries: the carry's cotangent before and after a turn;
    - ``BOOKKEEPING`` bytes: the tape, the schedule's tables, Python's objects (measured: 0.1 to 0.4 MB
      on loops of 300 to 2,000 steps);
    - the working state (a carry), and ``carries_per_slot`` carries per slot (a while loop's stored
      carries sit in one array beside the sweep's own stores: 2).
    Fewer slots only cost time; a budget that does not hold 2 slots and the working state is refused,
    naming what was counted (with 1 slot every step would be recomputed from the start: a time quadratic
    in the length)."""
    size = nbytes(carry, dispatch.namespace_of(carry[0])) if carry else 0
    values = _value_bytes(body, carry)
    recording, temporaries = sum(values), 3 * max(values, default=size)
    reserved = recording + temporaries + 2 * size + BOOKKEEPING
    slot = max(1, carries_per_slot * size)
    counted = (
        f"{where}: checkpoints='auto' counted a carry of {size} bytes, {carries_per_slot} carry(ies) a slot; "
        f"{recording} bytes for one step's recording (every value the body computes), {temporaries} for "
        f"the backward pass's temporaries (3 x its largest value), {2 * size} for 2 carries of cotangents "
        f"and {BOOKKEEPING} for polyad's bookkeeping"
    )
    budget = schedules.parse_memory(max_memory)
    slots = (budget - reserved) // slot - 1  # the working state is a slot's worth too
    if slots < 2:
        raise ValueError(
            f"{counted}: max_memory={max_memory!r} ({budget} bytes) holds {max(slots, 0)} slot(s) of {slot} "
            f"bytes beside those {reserved} bytes and the working state; at least 2 are needed (with 1, "
            f"every step is recomputed from the start), so max_memory must be at least {reserved + 3 * slot} "
            "bytes; or pass an int checkpoints"
        )
    return slots if length is None else min(slots, max(length, 1))


def _segment(xs, start, stop, length, reverse):
    """``xs`` for execution steps ``start..stop-1``."""
    if reverse:
        return [getitem(x, (slice(length - stop, length - start), ...)) for x in xs]
    return [getitem(x, (slice(start, stop), ...)) for x in xs]


def _step_args(carry, xs, consts, i, length, reverse):
    t = _index(i, length, reverse)
    return [*carry, *[take_index(x, t) for x in xs], *consts]


def refuse_random_recomputation(body, what, checkpoints):
    """A body that draws random numbers cannot be run again with the same draws (polyad's generators keep
    a state; a checkpoint stores the carry, not the generators): refuse rather than differentiate other
    numbers than the primal pass drew."""
    if getattr(body, "draws_random", False):
        raise NotImplementedError(
            f"{body.where}: the body draws random numbers (pa.random) and reverse mode with checkpoints="
            f"{checkpoints!r} would run it again, drawing other numbers; draw them before the loop and pass "
            f"them in xs, or use checkpoints=None (every step's recording kept: {what} runs each step once)"
        )


def _vjp_forward(*primals, body, length, reverse, n_carry, n_xs, context, checkpoints=None, max_memory=None,
                 save=(), keep_ys=True, **params):  # fmt: skip
    """The primal pass under reverse mode: ``(outputs, residuals)``. ``checkpoints=None`` keeps every
    step's recording (under a capture: every state); otherwise one scan saves the plan's checkpoints, and
    the last step runs recorded, its recording kept for the reverse sweep's first turn (Revolve's count:
    the body runs ``length + p(length, s)`` times). Under a capture, which cannot hold that recording, the
    scan runs all ``length`` steps and saves the carry before the last one, the first turn's working
    state: one body run more. ``context.captured``: a capture records below this level (its graph must
    hold the backward sweep as one op, so ``checkpoints=None`` keeps every state rather than every step's
    recording, a Python closure the graph cannot hold)."""
    carry, xs, consts = _split(primals, n_carry, n_xs)
    loop = dict(body=body, reverse=reverse, checkpoints=checkpoints, max_memory=max_memory, **params)
    n_y = len(body.out_avals) - n_carry if keep_ys else 0
    capture = context.captured
    if length == 0 or (checkpoints is None and not capture):
        return _record_every_step(carry, xs, consts, body, length, reverse, n_carry, keep_ys, save)
    if checkpoints is not None:
        refuse_random_recomputation(body, "pa.scan", checkpoints)
    if checkpoints == "auto":
        slots = auto_slots(body, carry, max_memory, length, where=body.where)
        plan = schedules.plan(length, slots)
    else:
        plan = schedules.plan(length, length if checkpoints is None else checkpoints)
    stores = {a.step for a in plan.primal() if type(a) is schedules.Store}
    # the carry before the last step: the first turn's working state where that step is not recorded here
    kept = tuple(sorted(stores if not capture else stores | {length - 1}))
    head_length = length if capture else length - 1
    saves = tuple(sorted((set(kept) | set(save)) - {head_length}))
    head = bind(
        SCAN,
        *carry,
        *(xs if capture else _segment(xs, 0, head_length, length, reverse)),
        *consts,
        length=head_length,
        n_carry=n_carry,
        n_xs=n_xs,
        save=saves,
        keep_ys=keep_ys,
        **loop,
    )
    flat = head[n_carry + n_y :]
    states = {s: list(flat[j * n_carry : (j + 1) * n_carry]) for j, s in enumerate(saves)}
    carry, stacked = list(head[:n_carry]), list(head[n_carry : n_carry + n_y])
    first = None
    if not capture:  # the last step, recorded: the reverse sweep's first turn pulls back through it
        states[length - 1] = carry
        args = _step_args(carry, xs, consts, length - 1, length, reverse)
        out, pullback = recorded(body, args, keep=True)
        first = [pullback]
        carry = out[:n_carry]
        last = [expand_dims(y, axis=0) for y in out[n_carry : n_carry + n_y]]
        stacked = [concat([y, s] if reverse else [s, y]) for s, y in zip(stacked, last)]
    checkpoints_flat = [leaf for s in kept for leaf in states[s]]
    saved = [leaf for s in save for leaf in states[s]]
    residuals = ("plan", plan, kept, checkpoints_flat, first)
    return (*carry, *(stacked if keep_ys else ()), *saved), residuals


def _record_every_step(carry, xs, consts, body, length, reverse, n_carry, keep_ys, save):
    """``checkpoints=None``: every step run at a new reverse level, its recording kept for the backward
    pass (nothing run again)."""
    states, ys, pullbacks = {}, [], []
    for i in range(length):
        states[i] = carry
        out, pullback = recorded(body, _step_args(carry, xs, consts, i, length, reverse), keep=True)
        carry, y = out[:n_carry], out[n_carry:]
        ys.append(y)
        pullbacks.append(pullback)
    if reverse:
        ys.reverse()
    stacked = (
        _stack_steps(ys, body.out_avals[n_carry:], length, carry[0] if carry else None) if keep_ys else []
    )
    saved = [leaf for s in save for leaf in states[s]]
    return (*carry, *stacked, *saved), ("steps", pullbacks)


def _vjp(g, out, *primals, body, length, reverse, n_carry, n_xs, residuals, context, save=(), keep_ys=True,
         checkpoints=None, max_memory=None, **params):  # fmt: skip
    n_y = len(body.out_avals) - n_carry if keep_ys else 0
    sweep = dict(body=body, length=length, reverse=reverse, n_carry=n_carry, n_xs=n_xs, n_y=n_y, save=save)
    if residuals[0] == "steps":
        cts = reverse_sweep((*g, *primals), pullbacks=residuals[1], **sweep)
    else:
        _, plan, kept, stacks, first = residuals
        loop = dict(checkpoints=checkpoints, max_memory=max_memory, **params)
        direct = context.last_use and not context.transformed
        if first is not None or direct:
            # the sweep on the stored states themselves: grad's backward pass with no transform around it
            # takes the only references, so each is freed at its schedule's Free (held as op arguments,
            # the primal pass's s states would stay alive beside the sweep's own: up to twice the budget);
            # a first turn recorded in the primal pass is a Python closure, which no op can hold
            stored = {s: stacks[j * n_carry : (j + 1) * n_carry] for j, s in enumerate(kept)}
            if direct:  # the recording of the first turn too: freed once pulled back
                stacks.clear()
            first = first if direct or first is None else [(first[0], False)]
            sweep.update(plan=plan, kept=kept, loop=loop, stored=stored, first=first)
            cts = reverse_sweep((*g, *primals), **sweep)
        else:
            cts = bind(SCAN_REVERSE, *g, *primals, *stacks, plan=plan, kept=kept, loop=loop, **sweep)
    return tuple(c if is_floating(p) else None for c, p in zip(cts, primals))


def reverse_sweep(args, *, body, length, reverse, n_carry, n_xs, n_y, save, pullbacks=None, plan=None,
                  kept=(), loop=None, stored=None, first=None):  # fmt: skip
    """A scan's backward pass on whatever its arguments are: the output cotangents (carry, ys, the
    checkpoints an enclosing rule asked for), the primals (carry, xs, closure) and, with a ``plan``, the
    stored states (the carry's leaves at each of the steps ``kept``, the last step's among them), or
    ``stored``, those states as ``{step: leaves}``, which the sweep empties as it frees them.
    ``pullbacks``: every step's recording (``checkpoints=None``); ``first``: a list holding the last
    step's pullback, recorded in the primal pass (the first turn's, then not run again), which the sweep
    takes out, or ``(pullback, False)``: one to keep for a later call. Returns the cotangents of the
    primals."""
    n_g = n_carry + n_y + n_carry * len(save)
    g, primals = args[:n_g], args[n_g:]
    in_args = plan is not None and stored is None
    n_in = len(primals) - (n_carry * len(kept) if in_args else 0)  # then the stored states' leaves
    carry, xs, consts = _split(primals[:n_in], n_carry, n_xs)
    stacks = primals[n_in:]
    ct_carry = list(g[:n_carry])
    ct_ys = list(g[n_carry : n_carry + n_y])
    g_saved = g[n_carry + n_y :]
    ct_saved = {s: list(g_saved[j * n_carry : (j + 1) * n_carry]) for j, s in enumerate(save)}
    ct_consts = [None] * len(consts)
    ct_x_steps = [None] * length

    def turn(i, pullback):
        nonlocal ct_carry
        t = _index(i, length, reverse)
        cts = pullback([*ct_carry, *[take_index(gy, t) for gy in ct_ys]])
        ct_carry = [_or_zero(c, v) for c, v in zip(cts[:n_carry], carry)]
        ct_x_steps[t] = cts[n_carry : n_carry + n_xs]
        for k, c in enumerate(cts[n_carry + n_xs :]):
            if c is not None:
                ct_consts[k] = c if ct_consts[k] is None else add(ct_consts[k], c)
        if i in ct_saved:  # the carry before step i is also an output (an enclosing rule's checkpoint)
            ct_carry = [b if a is None else add(a, b) for a, b in zip(ct_carry, ct_saved[i])]

    if pullbacks is not None:
        for i in range(length - 1, -1, -1):
            turn(i, pullbacks[i])
    else:
        slots = (
            stored
            if stored is not None
            else {s: list(stacks[j * n_carry : (j + 1) * n_carry]) for j, s in enumerate(kept)}
        )
        stored = None
        working = slots.get(length - 1)  # the primal pass's working state: the first turn's
        for action in plan.reverse():
            kind = type(action)
            if kind is Turn:
                if first and action.step == length - 1:
                    pullback = first.pop()
                    if type(pullback) is tuple:  # kept for another call of the vjp function
                        turn(action.step, pullback[0])
                    else:  # the last use: its recording is freed as it is pulled back
                        turn(action.step, lambda cts, pullback=pullback: pullback(cts, last=True))
                    working = pullback = None
                    continue
                args = _step_args(working, xs, consts, action.step, length, reverse)
                turn(action.step, step_pullback(body, args)[1])
                working = None
            elif kind is Restore:
                working = slots[action.step]
            elif kind is Store:
                slots[action.step] = working
            elif kind is Free:
                slots.pop(action.step, None)
            else:  # Advance
                a, b = action
                segment = _segment(xs, a, b, length, reverse)
                advanced = bind(SCAN, *working, *segment, *consts, body=body, length=b - a, reverse=reverse,
                                n_carry=n_carry, n_xs=n_xs, keep_ys=False, **loop)  # fmt: skip
                working = list(advanced[:n_carry])
    ct_xs = []
    for k, x in enumerate(xs):
        if not is_floating(x) or length == 0:
            ct_xs.append(zeros_like(x))
            continue
        steps = [zeros_like(take_index(x, 0)) if s is None or s[k] is None else s[k] for s in ct_x_steps]
        ct_xs.append(stack(steps))
    # an op's outputs are arrays: zeros where an input has no cotangent (the rule gives None there)
    return tuple(zeros_like(v) if c is None else c for c, v in zip((*ct_carry, *ct_xs, *ct_consts), primals))


def _reverse_abstract(xp_, *avals, n_carry, n_xs, n_y, save, plan, kept, **params):
    n_g = n_carry + n_y + n_carry * len(save)
    primals = avals[n_g : len(avals) - n_carry * len(kept)]
    return tuple(ShapeDtype(a.shape, a.dtype, getattr(a, "device", None)) for a in primals)


def _or_zero(c, like):
    return c if c is not None or not is_floating(like) else zeros_like(like)


def _reverse_layout(n_args, n_carry, n_xs, n_y, save, kept):
    """The sizes of a ``SCAN_REVERSE``'s argument groups: cotangents of the carry, of the ys and of the
    saved states; the carry, xs, closure; the stored states' leaves."""
    n_consts = n_args - (2 + len(save) + len(kept)) * n_carry - n_y - n_xs
    return [n_carry, n_y, n_carry * len(save), n_carry, n_xs, n_consts, n_carry * len(kept)]


def _groups(values, sizes):
    out, k = [], 0
    for n in sizes:
        out.append(list(values[k : k + n]))
        k += n
    return out


def _reverse_batch(info, dims, *values, body, n_carry, n_xs, n_y, save, kept, **params):
    """vmap of a scan's backward pass (vmap of grad): the same sweep over the vmapped body, every input
    batched (an unbatched closure too: its cotangent is per example); per-step values (the ys'
    cotangents, xs) with the batch at axis 1."""
    size = info.batch_size
    sizes = _reverse_layout(len(values), n_carry, n_xs, n_y, save, kept)
    axes = [0, 1, 0, 0, 1, 0, 0]
    batched = []
    for group, group_dims, axis in zip(_groups(values, sizes), _groups(dims, sizes), axes):
        batched += [with_batch_at(v, d, size, axis) for v, d in zip(group, group_dims)]
    step = BatchedBody(body, [0] * (n_carry + n_xs + sizes[5]), size, info.randomness)
    outs = bind(SCAN_REVERSE, *batched, body=step, n_carry=n_carry, n_xs=n_xs, n_y=n_y, save=save, kept=kept,
                **params)  # fmt: skip
    return outs, (0,) * n_carry + (1,) * n_xs + (0,) * sizes[5]


def _reverse_jvp(tangents, out, *primals, body, n_carry, n_xs, n_y, save, kept, **params):
    """jvp of a scan's backward pass (forward over reverse: hessian, jacfwd of grad): the backward pass
    of the scan of the jvp'd step, seeded with the cotangents' tangents on the primal outputs and the
    cotangents on their tangents (a cotangent ``(a, b)`` of ``(f(x), f'(x) t)`` pulls back to
    ``f'(x)ᵀ a + (f''(x) t)ᵀ b`` on ``x``, the tangent of this op's output, and to ``f'(x)ᵀ b`` on
    ``t``, the output itself). Every floating carry, x and closure value gets a tangent (zeros where it
    has none), so that the dual sweep's cotangents on them are this op's outputs."""
    sizes = _reverse_layout(len(primals), n_carry, n_xs, n_y, save, kept)
    g_carry, g_ys, g_saved, carry, xs, consts, stacks = _groups(primals, sizes)
    t_g_carry, t_g_ys, t_g_saved, t_carry, t_xs, t_consts, t_stacks = _groups(tangents, sizes)
    n_body_y = len(body.out_avals) - n_carry
    fc = [k for k, c in enumerate(carry) if is_floating(c)]
    fx = [k for k, x in enumerate(xs) if is_floating(x)]
    fk = [k for k, c in enumerate(consts) if is_floating(c)]
    fy = [j for j in range(n_body_y) if _floating_aval(body.out_avals[n_carry + j])]
    fy_g = fy if n_y else []  # the ys' cotangents are passed only where the scan keeps its ys

    def tangent(t, like):
        return zeros_like(like) if t is None else t

    def dual_cotangents(g, t_g, floats):  # on (values, their tangents): (tangents of g, g)
        on_values = [tangent(t_g[k], g[k]) if k in floats else g[k] for k in range(len(g))]
        return on_values + [g[k] for k in floats]

    def dual_values(v, t_v, floats):
        return list(v) + [tangent(t_v[k], v[k]) for k in floats]

    dual_saved = []
    for j in range(len(save)):
        part = slice(j * n_carry, (j + 1) * n_carry)
        dual_saved += dual_cotangents(g_saved[part], t_g_saved[part], fc)
    dual_stacks = []
    for j in range(len(kept)):
        part = slice(j * n_carry, (j + 1) * n_carry)
        dual_stacks += dual_values(stacks[part], t_stacks[part], fc)
    tangent_of = fc + [n_carry + k for k in fx] + [n_carry + n_xs + k for k in fk]
    inner = DualBody(body, n_carry + n_xs + len(consts), tangent_of, fc + [n_carry + j for j in fy])
    step = _JvpStep(inner, (n_carry, len(fc), n_xs, len(fx), len(consts), len(fk)), n_body_y)
    outs = bind(
        SCAN_REVERSE,
        *dual_cotangents(g_carry, t_g_carry, fc),
        *dual_cotangents(g_ys, t_g_ys, fy_g),
        *dual_saved,
        *dual_values(carry, t_carry, fc),
        *dual_values(xs, t_xs, fx),
        *dual_values(consts, t_consts, fk),
        *dual_stacks,
        body=step,
        n_carry=n_carry + len(fc),
        n_xs=n_xs + len(fx),
        n_y=n_y + len(fy_g),
        save=save,
        kept=kept,
        **params,
    )
    primal, tangent_out = [], []
    k = 0
    for n, floats in ((n_carry, fc), (n_xs, fx), (len(consts), fk)):
        on_values, on_tangents = outs[k : k + n], outs[k + n : k + n + len(floats)]
        k += n + len(floats)
        p, t = list(on_values), [None] * n
        for i, c in zip(floats, on_tangents):
            p[i], t[i] = c, on_values[i]
        primal += p
        tangent_out += t
    return tuple(primal), tuple(tangent_out)


_reverse_jvp.computes_primal = True


_vjp.forward = _vjp_forward
# reverse.py hands both a RuleContext: whether a capture records (forward), whether the tape is consumed
# with no transform around (the sweep frees the checkpoints)
_vjp.takes_context = True

# the backward pass of a scan with checkpoints as one op: its kernel replays the schedule on concrete
# values; transforms of it replay the same sweep on their own tensors; a capture holds it as one node
SCAN_REVERSE = Op(
    "scan_reverse",
    lambda xp_, *args, **params: reverse_sweep(args, **params),
    multiple_results=True,
    higher_order=lambda *args, **params: reverse_sweep(args, **params),
    abstract_eval=_reverse_abstract,
    batch=_reverse_batch,
    jvp=_reverse_jvp,
)


def _reverse_freeing(args, *, n_carry, kept, **params):
    """``SCAN_REVERSE`` in compiled code (``codegen.consuming``): ``args`` a list that holds the only
    references to the stored states where the graph reads them for the last time; they are taken out of
    it, so that the sweep frees each at its schedule's ``Free``, as eager ``grad`` does (held as
    arguments, the primal pass's states would stay alive beside the sweep's own stores: up to twice the
    ``max_memory`` that counted them)."""
    start = len(args) - n_carry * len(kept)
    stored = {s: args[start + j * n_carry : start + (j + 1) * n_carry] for j, s in enumerate(kept)}
    del args[start:]
    return reverse_sweep(args, n_carry=n_carry, kept=kept, stored=stored, **params)


consuming(SCAN_REVERSE, _reverse_freeing)

SCAN = Op(
    "scan",
    _kernel,
    multiple_results=True,
    higher_order=lambda *args, **params: run_loop(args, **params),
    abstract_eval=_abstract,
    batch=_batch,
    jvp=_jvp,
    vjp=_vjp,
)

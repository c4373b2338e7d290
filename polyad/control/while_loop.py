"""``while_loop`` as an op: a loop whose length its data decide, with a rule for each transform.

``bind(WHILE, *carry, *cond_closure, *body_closure, cond=..., body=..., ...)`` returns the final carry.

- Level 0 and transforms without a rule of their own run the loop on their values.
- vmap alone (every active level a vmap): the loop runs in Python at the vmap's level, nothing traced
  (``_vmapped_loop``: the body runs exactly as often as the longest example needs).
- vmap: every example runs until every example has stopped; a finished example's carry is frozen (each
  step keeps it where its predicate is false), so the body runs as often as the longest example needs.
  The predicate of each example rides in the carry: the condition runs once per step.
- jvp: one while loop over the body under jvp; the condition reads the primal carry.
- grad/vjp: the length is known only at the end, so the primal pass keeps its checkpoints by an online
  schedule (``schedules.OnlineSchedule``: at most ``checkpoints`` carries stored; ``OnlineSqrtSchedule``
  for "sqrt") and reports the length and the stored steps; the backward pass (``WHILE_REVERSE``) replays
  the schedule's reverse sweep (advances as ``scan``s of the body, turns as one recorded step each).
- grad of grad: ``WHILE_REVERSE`` has a VJP of its own (``_reverse_vjp``: a jvp'd forward loop and the
  sweep of the jvp'd step, by the symmetry of second derivatives), and the enclosing level's primal pass
  stores the checkpoints the inner one asked for, which serve both sweeps.
"""

import optree

import polyad.config as config
import polyad.control.schedules as schedules
import polyad.core.dispatch as dispatch
import polyad.xp as xp
from polyad.control.bodies import BatchedBody, DualBody, function_op, step_pullback, with_batch_at
from polyad.control.closure import (
    LOOP_ADVICE,
    abstract_of,
    owned,
    owned_next,
    refuse_pre_dispatch_capture,
    replayed,
    trace,
)
from polyad.control.compiled_loops import count_steps, run_whole_sweep, run_whole_while
from polyad.control.graph_steps import run_while_captured
from polyad.control.loops import as_arrays, carry_names, check_carry, check_checkpoints, func_name
from polyad.control.scan import SCAN, auto_slots, refuse_random_recomputation
from polyad.control.while_steps import (
    AsScanBody,
    BatchedCond,
    BatchedStep,
    CountCond,
    CountedStep,
    JvpWhileStep,
    MaskedStep,
    PrimalCond,
)
from polyad.core import Op, Tensor, bind, plain, transform_active
from polyad.core.avals import ShapeDtype, dtype_name, is_floating, shape_of
from polyad.ops.base import (
    add,
    broadcast_to,
    expand_dims,
    move_to_front,
    moveaxis,
    stack,
    take_index,
)
from polyad.ops.base import where as where_
from polyad.ops.creation import full
from polyad.ops.fills import zeros, zeros_like
from polyad.ops.manipulation import concat
from polyad.ops.reductions import any as any_of
from polyad.transforms.batching import BatchedTensor, only_vmap_active


def _split(args, n_carry, n_cond):
    return list(args[:n_carry]), list(args[n_carry : n_carry + n_cond]), list(args[n_carry + n_cond :])


def _pred(cond, carry, closure):
    return cond(*carry, *closure)[0]


def run_while(args, *, cond, body, n_carry, n_cond, save_slots=None, **params):
    """The loop itself on whatever the arguments are: the final carry; with ``save_slots`` (an int: the
    online schedule's slots), also the number of steps run, the stored steps (-1 where a slot is unused)
    and the stored carries, one stack per carry leaf."""
    whole = run_whole_while(args, cond, body, n_carry, n_cond, save_slots)
    if whole is not None:  # the loop as one compiled call (a small state's, on a backend that has it)
        return whole
    carry, c_closure, b_closure = _split(args, n_carry, n_cond)
    schedule = None
    if save_slots is not None:
        schedule = _schedule(save_slots)
    stored = {}
    steps = 0
    while bool(_pred(cond, carry, c_closure)):
        if schedule is not None:
            for action in schedule.before_step(steps):
                if type(action) is schedules.Store:
                    stored[action.step] = carry
                else:
                    del stored[action.step]
        carry = dispatch.persisted(body(*carry, *b_closure))  # a lazy carry: computed once a step
        steps += 1
    count_steps(body, steps)
    if schedule is None:
        return tuple(carry)
    return (*carry, *_saved_outputs(carry, stored, steps, save_slots))


def _schedule(save_slots):
    """The online schedule for ``save_slots``: an int ``s`` (``s`` rows of output, unused ones padded),
    ``("bounded", s)`` (at most ``s``, as many rows as stored: "auto"'s budget), "sqrt" (slots growing
    with the steps run, as many rows as stored), "all" (every state)."""
    if save_slots == "sqrt":
        return schedules.OnlineSqrtSchedule()
    return schedules.OnlineSchedule(_schedule_slots(save_slots, None))


def _schedule_slots(save_slots, length):
    """The slots of ``save_slots``' schedule once the loop has run ``length`` steps (None: every state)."""
    if save_slots == "all":
        return None
    if save_slots == "sqrt":
        return schedules.sqrt_slots(length)
    return save_slots[1] if isinstance(save_slots, tuple) else save_slots


def _saved_outputs(carry, stored, steps, slots):
    """The number of steps, the stored steps and the stored carries: ``slots`` rows (unused ones -1 and
    zeros) for an int ``slots``, as many as were stored otherwise (a length only the run decides)."""
    order = sorted(stored)
    slots = slots if isinstance(slots, int) else len(order)
    like = carry[0] if carry else None
    device = getattr(like, "device", None)
    count = xp.asarray(steps, device=device)
    unused = slots - len(order)
    index = xp.asarray(order, dtype=xp.int64, device=device)
    if unused:  # the unused rows as one block each (a jitted loop's slots are mostly unused rows)
        index = concat([index, full((unused,), -1, dtype=xp.int64, device=device)])
    stacks = []
    for k, c in enumerate(carry):
        rows = [stored[s][k] for s in order]
        pad = [zeros((unused, *shape_of(c)), dtype=c.dtype, device=device)] if unused else []
        stacks.append(concat([stack(rows), *pad]) if rows and pad else stack(rows) if rows else pad[0] if pad
                      else zeros((0, *shape_of(c)), dtype=c.dtype, device=device))  # fmt: skip
    return [count, index, *stacks]


def _kernel(xp_, *args, **params):
    out = run_while_captured(args, **params)  # None unless the steps replay from device graphs
    out = run_while(args, **params) if out is None else out
    return tuple(plain(o) for o in out)  # raw arrays out (the count is made here)


def _abstract(xp_, *avals, n_carry, save_slots=None, **params):
    carry = [ShapeDtype(a.shape, a.dtype, a.device) for a in avals[:n_carry]]
    if save_slots is None:
        return tuple(carry)
    device = carry[0].device if carry else None
    ints = xp_.int64
    n = save_slots if isinstance(save_slots, int) else None  # else: as many as the loop stores
    saved = [ShapeDtype((n, *c.shape), c.dtype, c.device) for c in carry]
    return (*carry, ShapeDtype((), ints, device), ShapeDtype((n,), ints, device), *saved)


# ------------------------------------------------------------------------------ vmap


def _batch(info, dims, *values, cond, body, n_carry, n_cond, save_slots=None, **params):
    size = info.batch_size
    carry, c_closure, b_closure = _split(values, n_carry, n_cond)
    carry_dims, c_dims, b_dims = _split(dims, n_carry, n_cond)
    carry = [
        move_to_front(c, d) if d is not None else broadcast_to(expand_dims(c, axis=0), (size, *shape_of(c)))
        for c, d in zip(carry, carry_dims)
    ]
    active = BatchedBody(cond, [0] * n_carry + list(c_dims), size, info.randomness)(*carry, *c_closure)[0]
    step = BatchedStep(cond, body, n_carry + 1, c_dims, b_dims, size, info.randomness)
    step.out_avals = [abstract_of(c) for c in carry] + [abstract_of(active)]
    outs = bind(
        WHILE,
        *carry,
        active,
        *c_closure,
        *b_closure,
        cond=BatchedCond(n_carry + 1, active),
        body=step,
        n_carry=n_carry + 1,
        n_cond=0,
        save_slots=save_slots,
        **params,
    )
    final = list(outs[:n_carry])
    if save_slots is None:
        return tuple(final), (0,) * n_carry
    count, index, *stacks = outs[n_carry + 1 :]
    return (*final, count, index, *stacks[:n_carry]), (0,) * n_carry + (None, None) + (1,) * n_carry


# ------------------------------------------------------------------------------ jvp


def _jvp(tangents, out, *primals, cond, body, n_carry, n_cond, save_slots=None, **params):
    carry, c_closure, b_closure = _split(primals, n_carry, n_cond)
    t_carry, _, t_body = _split(tangents, n_carry, n_cond)
    float_carry = [k for k, c in enumerate(carry) if is_floating(c)]
    carry_t = [zeros_like(carry[k]) if t_carry[k] is None else t_carry[k] for k in float_carry]
    b_t = [k for k, t in enumerate(t_body) if t is not None]
    tangent_of = float_carry + [n_carry + k for k in b_t]
    inner = DualBody(body, n_carry + len(b_closure), tangent_of, float_carry)
    n_ct = len(float_carry)
    step = JvpWhileStep(inner, n_carry, n_ct, len(b_closure), len(b_t))
    outs = bind(
        WHILE,
        *carry,
        *carry_t,
        *c_closure,
        *b_closure,
        *[t_body[k] for k in b_t],
        cond=PrimalCond(cond, n_carry, n_ct),
        body=step,
        n_carry=n_carry + n_ct,
        n_cond=n_cond,
        save_slots=save_slots,
        **params,
    )
    t_out = [None] * n_carry
    for k, t in zip(float_carry, outs[n_carry : n_carry + n_ct]):
        t_out[k] = t
    rest = outs[n_carry + n_ct :]
    if save_slots is None:
        return tuple(outs[:n_carry]), tuple(t_out)
    count, index, *stacks = rest
    saved, saved_t = stacks[:n_carry], stacks[n_carry:]
    st = [None] * n_carry
    for k, t in zip(float_carry, saved_t):
        st[k] = t
    return (*outs[:n_carry], count, index, *saved), (*t_out, None, None, *st)


_jvp.computes_primal = True


# ------------------------------------------------------------------------------ grad: online checkpoints


# the default slots of a while loop's reverse mode under pa.jit: with 32 stored carries the online
# schedule recomputes each step at most 3 times up to C(35, 3) = 6545 steps (binomial bound)
JIT_SLOTS = 32


def _slots(checkpoints, max_memory, carry, body):
    """The online schedule's slots: an int; "all" (None: every state); "sqrt": growing with the steps run;
    "auto": the budget's (``scan.auto_slots``, two carries a slot: the primal pass's stack lives through
    the backward pass beside the sweep's own stores), a bound on states stored as the run decides."""
    if checkpoints is None or checkpoints == "sqrt":
        return "all" if checkpoints is None else "sqrt"
    if checkpoints == "auto":
        return ("bounded", _budget_slots(max_memory, carry, body))
    return checkpoints


def _budget_slots(max_memory, carry, body):
    budget = config.max_memory if max_memory is None else max_memory
    return auto_slots(body, carry, budget, carries_per_slot=2, where=body.where)


def _vjp_forward(*primals, cond, body, n_carry, n_cond, context, checkpoints=None, max_memory=None,
                 save_slots=None, **params):  # fmt: skip
    """The primal pass under reverse mode: one while loop at the levels below that stores the online
    schedule's checkpoints and reports its length and the steps stored. Residuals: the slots and those
    outputs.

    Reverse over reverse (``save_slots`` given: an enclosing reverse rule's primal pass): the loop stores
    the checkpoints that rule asked for, and they serve this level's sweep too (one schedule, one pass).
    The stored carries are outputs only ``WHILE_REVERSE`` reads, and its VJP gives them no cotangent (it
    differentiates through the initial carry and closure they were computed from: ``_reverse_vjp``), so
    the cotangents reaching them here are zeros and the sweep seeds only the final carry."""
    if save_slots is not None:
        loop = dict(checkpoints=checkpoints, max_memory=max_memory, save_slots=save_slots, **params)
        outs = bind(WHILE, *primals, cond=cond, body=body, n_carry=n_carry, n_cond=n_cond, **loop)
        return tuple(outs), (save_slots, list(outs[n_carry:]))
    refuse_random_recomputation(body, "pa.while_loop", checkpoints)
    slots = _slots(checkpoints, max_memory, primals[:n_carry], body)
    if not isinstance(slots, int) and context.captured:
        # a compiled graph's shapes are fixed when it is traced, and the number of steps is known only when
        # the loop runs: None, "sqrt" and "auto" get JIT_SLOTS slots, or fewer where "auto"'s budget
        # (max_memory, else pa.config.max_memory) holds fewer. The compiled graph allocates them up
        # front, so the budget's millions of small carries would cost their memory at every call
        slots = min(JIT_SLOTS, _budget_slots(max_memory, primals[:n_carry], body))
    outs = bind(
        WHILE,
        *primals,
        cond=cond,
        body=body,
        n_carry=n_carry,
        n_cond=n_cond,
        checkpoints=checkpoints,
        max_memory=max_memory,
        save_slots=slots,
        **params,
    )
    return tuple(outs[:n_carry]), (slots, list(outs[n_carry:]))


def _vjp(g, out, *primals, cond, body, n_carry, n_cond, residuals, context, checkpoints=None,
         max_memory=None, save_slots=None, **params):  # fmt: skip
    slots, saved = residuals  # the slots the primal pass used (under a capture: an int, whatever was asked)
    cts = bind(
        WHILE_REVERSE,
        *g[:n_carry],
        *primals,
        *saved,
        body=body,
        cond=cond,
        n_carry=n_carry,
        n_cond=n_cond,
        n_closure=len(primals) - n_carry - n_cond,
        slots=slots,
        checkpoints=checkpoints,
        max_memory=max_memory,
    )
    return (*cts[:n_carry], *[None] * n_cond, *cts[n_carry + n_cond :])


def reverse_sweep(args, *, body, cond, n_carry, n_cond, n_closure, slots, checkpoints, max_memory):
    """The backward pass of a while loop, on whatever its arguments are: the cotangent of the final
    carry, the initial carry, the condition's and the body's closures, the number of steps run, the steps
    stored and the stored carries (``run_while``'s outputs with ``save_slots``). Returns the cotangents of
    the initial carry and of the closures (zeros for the condition's, and for none). The length is read
    here, at run time, so that a jitted gradient holds the sweep as one op. Every step counted ran the
    body (``cond`` matters only to the rules below)."""
    whole = run_whole_sweep(args, body, n_carry, n_cond, n_closure, slots)
    if whole is not None:  # the sweep as one compiled call, as the loop itself (``compiled_loops``)
        return whole
    ct_carry = list(args[:n_carry])
    carry = args[n_carry : 2 * n_carry]
    c_closure = list(args[2 * n_carry : 2 * n_carry + n_cond])
    closure = list(args[2 * n_carry + n_cond : 2 * n_carry + n_cond + n_closure])
    count, index, *stacks = args[2 * n_carry + n_cond + n_closure :]
    length = int(count)
    count_steps(body, length)
    # backend arrays (the kernel's): their rows by indexing, without an op's dispatch each (a small
    # state's sweep made 25 of them a step); a transform's tensors by the op, which it differentiates
    row = _row if not any(isinstance(a, Tensor) for a in (index, *stacks)) else take_index
    steps = []
    for j in range(shape_of(index)[0]):  # the stored steps, then -1 in the unused slots
        s = int(row(index, j))
        if s < 0:
            break
        steps.append(s)
    stored = {s: [row(stk, j) for stk in stacks] for j, s in enumerate(steps)}
    schedule = schedules.OnlineSchedule.resumed(
        _schedule_slots(slots, length), stored, length
    )  # the primal pass's
    ct_closure = [None] * n_closure
    working = None
    advance = dict(body=AsScanBody(body), reverse=False, n_carry=n_carry, n_xs=0, keep_ys=False,
                   checkpoints=checkpoints, max_memory=max_memory)  # fmt: skip
    for action in schedule.reverse(length):
        kind = type(action)
        if kind is schedules.Turn:
            _, pullback = step_pullback(body, [*working, *closure])
            cts = pullback(ct_carry)
            ct_carry = [_or_zero(c, v) for c, v in zip(cts[:n_carry], carry)]
            for k, c in enumerate(cts[n_carry:]):
                if c is not None:
                    ct_closure[k] = c if ct_closure[k] is None else add(ct_closure[k], c)
            # lazy cotangents computed once a step: a graph growing with the steps costs each new op
            # a merge of every layer before it (Dask: quadratic in the steps)
            ct_carry, ct_closure = _persisted_lists(ct_carry, ct_closure)
            working = None
        elif kind is schedules.Restore:
            working = stored[action.step]
        elif kind is schedules.Store:
            stored[action.step] = working
        elif kind is schedules.Free:
            del stored[action.step]
        else:
            a, b = action
            working = dispatch.persisted(
                list(bind(SCAN, *working, *closure, length=b - a, **advance)[:n_carry])
            )
    return (
        *ct_carry,
        *[zeros_like(c) for c in c_closure],
        *[_or_zero(c, v) for c, v in zip(ct_closure, closure)],
    )


def _row(x, j):
    return x[j, ...]


def _persisted_lists(a, b):
    """``dispatch.persisted`` of two lists in one call (one graph computed for both); Nones kept."""
    both = dispatch.persisted([*a, *b])
    return list(both[: len(a)]), list(both[len(a) :])


def _or_zero(c, like):
    return c if c is not None else zeros_like(like)


def _reverse_abstract(xp_, *avals, n_carry, n_cond, n_closure, **params):
    ins = avals[n_carry : 2 * n_carry + n_cond + n_closure]
    return tuple(ShapeDtype(a.shape, a.dtype, getattr(a, "device", None)) for a in ins)


def _reverse_batch(info, dims, *values, body, cond, n_carry, n_cond, n_closure, **params):
    """vmap of a while loop's backward pass (vmap of grad): every example's own derivative, its loop
    stopped at its own step. The sweep runs once, over the masked step (``MaskedStep``) of the batch;
    every input is batched (an unbatched closure too: its cotangent is per example)."""
    size = info.batch_size
    n_in = 2 * n_carry + n_cond + n_closure
    # the length and the stored steps are the batched primal loop's, one for every example (the batch
    # rule broadcasts them along the batch, as every output of its level): the first example's
    count, index = [
        v if d is None else take_index(moveaxis(v, d, 0), 0)
        for v, d in zip(values[n_in : n_in + 2], dims[n_in : n_in + 2])
    ]
    ins = [with_batch_at(v, d, size) for v, d in zip(values[:n_in], dims[:n_in])]
    stacks = [with_batch_at(v, d, size, axis=1) for v, d in zip(values[n_in + 2 :], dims[n_in + 2 :])]
    step = MaskedStep(cond, body, n_carry, n_cond, size, info.randomness,
                       [abstract_of(c) for c in ins[n_carry : 2 * n_carry]])  # fmt: skip
    outs = bind(
        WHILE_REVERSE,
        *ins,
        count,
        index,
        *stacks,
        body=step,
        cond=None,
        n_carry=n_carry,
        n_cond=0,
        n_closure=n_cond + n_closure,
        **params,
    )
    return tuple(outs), (0,) * len(outs)


def _reverse_jvp(tangents, out, *primals, body, cond, n_carry, n_cond, n_closure, **params):
    """jvp of a while loop's backward pass (forward over reverse: hessian, jacfwd of grad): the backward
    pass of the loop of the jvp'd step (carry and tangents, closure and tangents), seeded with the
    cotangents' tangents on the carry and the cotangents on its tangent. For a step ``f``, a cotangent
    ``(a, b)`` of ``(f(x), f'(x) t)`` pulls back to ``f'(x)ᵀ a + (f''(x) t)ᵀ b`` on ``x`` and ``f'(x)ᵀ b``
    on ``t``: the tangent of this op's output and the output itself."""
    n = n_carry
    ct, carry = primals[:n], primals[n : 2 * n]
    c_closure = primals[2 * n : 2 * n + n_cond]
    b_closure = primals[2 * n + n_cond : 2 * n + n_cond + n_closure]
    count, index, *stacks = primals[2 * n + n_cond + n_closure :]
    t_ct, t_carry = tangents[:n], tangents[n : 2 * n]
    t_b = tangents[2 * n + n_cond : 2 * n + n_cond + n_closure]
    t_stacks = tangents[2 * n + n_cond + n_closure + 2 :]
    fc = [k for k, c in enumerate(carry) if is_floating(c)]
    fb = [k for k, b in enumerate(b_closure) if is_floating(b)]

    def tangent(t, like):
        return zeros_like(like) if t is None else t

    inner = DualBody(body, n + n_closure, fc + [n + k for k in fb], fc)
    step = JvpWhileStep(inner, n, len(fc), n_closure, len(fb))
    outs = bind(
        WHILE_REVERSE,
        *[tangent(t_ct[k], ct[k]) if k in fc else ct[k] for k in range(n)],
        *[ct[k] for k in fc],
        *carry,
        *[tangent(t_carry[k], carry[k]) for k in fc],
        *c_closure,
        *b_closure,
        *[tangent(t_b[k], b_closure[k]) for k in fb],
        count,
        index,
        *stacks,
        *[tangent(t_stacks[k], stacks[k]) for k in fc],
        body=step,
        cond=None if cond is None else PrimalCond(cond, n, len(fc)),
        n_carry=n + len(fc),
        n_cond=n_cond,
        n_closure=n_closure + len(fb),
        **params,
    )
    on_carry, on_carry_t = outs[:n], outs[n : n + len(fc)]
    on_c = outs[n + len(fc) : n + len(fc) + n_cond]
    on_b = outs[n + len(fc) + n_cond : n + len(fc) + n_cond + n_closure]
    on_b_t = outs[n + len(fc) + n_cond + n_closure :]
    primal_carry, tangent_carry = list(on_carry), [None] * n
    for k, c in zip(fc, on_carry_t):
        primal_carry[k], tangent_carry[k] = c, on_carry[k]
    primal_b, tangent_b = list(on_b), [None] * n_closure
    for k, c in zip(fb, on_b_t):
        primal_b[k], tangent_b[k] = c, on_b[k]
    return (*primal_carry, *on_c, *primal_b), (*tangent_carry, *[None] * n_cond, *tangent_b)


_reverse_jvp.computes_primal = True


def _reverse_vjp(g, out, *primals, body, cond, n_carry, n_cond, n_closure, slots, **params):
    """Reverse mode of a while loop's backward pass (grad of grad, jacrev of jacrev), by the symmetry of
    second derivatives. The op computes ``J(z)ᵀ c`` for the loop's map ``F`` from ``z`` (initial carry
    and closure) to the final carry, ``J = F'(z)``, the cotangent ``c`` given. For a cotangent ``w`` on
    its outputs (one per ``z``), the VJP is
    - on ``c``: ``J w``, the tangent of the final carry along ``w`` (a forward loop of the jvp'd step);
    - on ``z``: the derivative of ``<c, J(z) w>`` in ``z``, a Hessian of ``<c, F>`` times ``w``, which is
      (symmetric Hessian) the derivative of ``J(z)ᵀ c`` along ``w``: ``_reverse_jvp``'s tangent.
    Both are real-linear (complex carries: the conjugate convention is the real adjoint), so this holds
    for every floating dtype. The stored carries, the length and the stored steps get no cotangent:
    their dependence on ``z`` is in the derivative on ``z`` already (they are the loop's states from
    ``z``, run again here with their tangents), so ``_vjp_forward`` ignores what reaches them.

    The forward loop runs ``count`` steps by a counter (not the user's condition: the body's count under
    grad of grad is that of grad, plus ``count`` steps of the jvp'd body and a sweep of it)."""
    n = n_carry
    carry = primals[n : 2 * n]
    b_closure = primals[2 * n + n_cond : 2 * n + n_cond + n_closure]
    count, index, *stacks = primals[2 * n + n_cond + n_closure :]
    w_carry, w_b = g[:n], g[n + n_cond : n + n_cond + n_closure]
    fc = [k for k, c in enumerate(carry) if is_floating(c)]
    fb = [k for k, b in enumerate(b_closure) if is_floating(b)]
    t_carry = [w_carry[k] if w_carry[k] is not None else zeros_like(carry[k]) for k in fc]
    t_b = [w_b[k] if w_b[k] is not None else zeros_like(b_closure[k]) for k in fb]
    # the jvp'd loop from z along w, storing the same steps as the primal pass (the same slots, length)
    inner = DualBody(body, n + n_closure, fc + [n + k for k in fb], fc)
    step = JvpWhileStep(inner, n, len(fc), n_closure, len(fb))
    zero = xp.asarray(0, dtype=count.dtype, device=getattr(count, "device", None))
    dual = bind(
        WHILE,
        *carry,
        *t_carry,
        zero,
        count,
        *b_closure,
        *t_b,
        cond=CountCond(n + len(fc) + 1, zero < count),
        body=CountedStep(step, n + len(fc), zero),
        n_carry=n + len(fc) + 1,
        n_cond=1,
        save_slots=slots,
        **params,
    )
    m = n + len(fc) + 1
    final_t = dual[n : n + len(fc)]
    dual_stacks = dual[m + 2 : m + 2 + n + len(fc)]
    t_stacks = [None] * n
    for j, k in enumerate(fc):
        t_stacks[k] = dual_stacks[n + j]
    tangents = [None] * len(primals)
    for j, k in enumerate(fc):
        tangents[n + k] = t_carry[j]
    for j, k in enumerate(fb):
        tangents[2 * n + n_cond + k] = t_b[j]
    tangents[2 * n + n_cond + n_closure + 2 :] = t_stacks
    _, on_z = _reverse_jvp(tangents, out, *primals, body=body, cond=cond, n_carry=n, n_cond=n_cond,
                           n_closure=n_closure, slots=slots, **params)  # fmt: skip
    on_c = [None] * n
    for j, k in enumerate(fc):
        on_c[k] = final_t[j]
    return (*on_c, *on_z[:n], *[None] * n_cond, *on_z[n + n_cond :], *[None] * (2 + len(stacks)))


# the backward pass of a while loop as one op: its kernel runs the sweep on concrete values (the length
# is known when it runs); transforms of it run the same sweep on their own tensors
WHILE_REVERSE = function_op(
    "while_loop_reverse",
    lambda *args, **params: reverse_sweep(args, **params),
    abstract_eval=_reverse_abstract,
    batch=_reverse_batch,
    jvp=_reverse_jvp,
    vjp=_reverse_vjp,
)


_vjp.forward = _vjp_forward
_vjp.takes_context = True  # reverse.py: the forward pass reads context.captured


WHILE = Op(
    "while_loop",
    _kernel,
    multiple_results=True,
    higher_order=lambda *args, **params: run_while(args, **params),
    abstract_eval=_abstract,
    batch=_batch,
    jvp=_jvp,
    vjp=_vjp,
)


def _predicate(pred, where):
    """``pred`` as a Python bool, or a TypeError: ``cond_fun`` returns a boolean scalar."""
    if isinstance(pred, bool):
        return pred
    if (
        hasattr(pred, "dtype")
        and tuple(getattr(pred, "shape", (None,))) == ()
        and dtype_name(pred.dtype) == "bool"
    ):
        return bool(pred)
    raise TypeError(
        f"{where}: cond_fun must return a boolean scalar (a 0-d bool array or a bool), got {pred!r}"
    )


def _stepped(body_fun, val, tree, init, where):
    """The leaves of ``body_fun(val)``, checked against the initial carry's structure, shapes, dtypes."""
    leaves, out_tree = optree.tree_flatten(body_fun(val), none_is_leaf=False)
    check_carry(leaves, init, where, "body_fun", "init_val", trees=(out_tree, tree))
    return leaves


def _vmapped_loop(cond_fun, body_fun, flat, tree, where):
    """The loop under vmap alone (every active level a vmap, nothing that records or differentiates):
    run in Python at the vmap's level, the body once per step on every example, a finished example's
    carry kept (``where`` on its predicate) until the longest has stopped. Nothing is traced, so the body
    runs exactly as often as the longest example needs (a trace would call it once more)."""
    val = optree.tree_unflatten(tree, owned(flat))
    going = _batched_predicate(cond_fun(val), where)
    while _any_example(going):
        new = _stepped(body_fun, val, tree, flat, where)
        leaves = optree.tree_leaves(val, none_is_leaf=False)
        kept = [where_(going, n if hasattr(n, "dtype") else xp.asarray(n, dtype=c.dtype), c)
                for n, c in zip(new, leaves)]  # fmt: skip
        kept = _persisted_batched(kept)  # a lazy carry: computed once a step
        val = optree.tree_unflatten(tree, kept)
        going = _persisted_batched([going & _batched_predicate(cond_fun(val), where)])[0]
    return val


def _persisted_batched(values):
    """``dispatch.persisted`` of the arrays under vmap's tensors (a lazy backend's carry computed once a
    step, as the eager loop's: else each step's predicate computes every step before it again)."""
    inner = []
    for v in values:
        while isinstance(v, BatchedTensor):
            v = v._value
        inner.append(v)
    done = dispatch.persisted(inner)
    if done is inner:  # nothing lazy
        return values
    return [_rewrapped(v, d) for v, d in zip(values, done)]


def _rewrapped(value, inner):
    if isinstance(value, BatchedTensor):
        return BatchedTensor(_rewrapped(value._value, inner), value._interp, value._aux)
    return inner


def _batched_predicate(pred, where):
    """``cond_fun``'s value under vmap: a boolean scalar per example (a Python bool taken as an array)."""
    if isinstance(pred, bool):
        return xp.asarray(pred)
    if not hasattr(pred, "dtype") or tuple(shape_of(pred)) != () or dtype_name(pred.dtype) != "bool":
        raise TypeError(f"{where}: cond_fun must return a boolean scalar (a 0-d bool array), got {pred!r}")
    return pred


def _any_example(pred):
    """Whether any example of every enclosing vmap has ``pred`` true: the value under all their levels."""
    value = pred
    while isinstance(value, Tensor):
        value = value._value
    return bool(any_of(value))


def while_loop(cond_fun, body_fun, init_val, *, checkpoints=None, max_memory=None, compiled=False):
    """``val = body_fun(val)`` while ``cond_fun(val)``, as ``jax.lax.while_loop`` — and differentiable in
    reverse mode, which JAX's is not.

    Args:
        cond_fun: ``cond_fun(val) -> bool scalar``.
        body_fun: ``body_fun(val) -> val``, keeping its structure, shapes and dtypes.
        init_val: the initial value (a pytree of arrays).
        checkpoints: what reverse mode stores, decided as the loop runs (its length is known only at
            the end): None every carry (the backward pass runs each step once more, recorded); an int
            ``s``: at most ``s`` carries, placed online within a few percent of the optimal binomial
            schedule; "sqrt": at most ``sqrt_slots(steps run)`` (about ``sqrt(2 steps)``), growing as the
            loop runs (about 2.1 body runs a step in all, against 2 for ``pa.scan``'s "sqrt"); "auto": as
            many as ``max_memory`` holds, two carries a slot (``scan.auto_slots`` says what is counted;
            fewer than 2 slots are refused). Under ``pa.jit`` the slots are decided when it traces: an int
            as it is; None, "sqrt" and "auto" take ``JIT_SLOTS`` (32) or, where fewer fit,
            what "auto"'s budget holds (``max_memory``, else ``pa.config.max_memory``).
        max_memory: the budget of "auto" (bytes, or a string such as "400MiB").
        compiled: True: under transforms outside ``pa.jit`` (which compiles the loop its own way), the
            steps run on arrays (grad's forward pass, its advances and turns) replay the body's and
            the condition's traced graphs as straight-line calls of eager's kernels rather than calling
            ``body_fun`` and ``cond_fun`` again: the same values to rounding, without the Python of the
            functions and of each op's dispatch (most of a step's time when the carry is small). Their Python
            side effects then happen once, at the trace. Only for a small carry (every leaf of at most
            ``closure.REPLAY_ELEMENTS``, 4096, elements: a larger one's kernels take the time); steps
            run on a transform's tensors (jvp, vmap, grad of grad) call the functions as without it.

    Returns:
        The final value. Under vmap every example stops at its own step (the loop runs as long as the
        longest example needs, finished examples unchanged).

    Body calls, for a loop of ``n`` steps (the longest example's under vmap): ``n`` eagerly and under
    vmap alone; under any other transform one more, the trace that closure-converts the body, on abstract
    values (no data: jvp, jit, vmap of grad run ``1 + n``); grad and
    hessian add the online schedule's advances and one turn a step (``1 + A + n`` with ``A`` =
    ``schedules.online_steps(n, s)``, ``online_sqrt_steps(n)``, or ``n`` with every carry stored); grad of
    grad ``1 + 2 (A + n)``. Reverse mode nests any number of times (grad of grad, jacrev of jacrev).

    Example:
        >>> import numpy as np, polyad as pa
        >>> def sqrt_newton(a):  # Newton's iteration for sqrt(a), differentiated through the loop
        ...     x = pa.while_loop(lambda x: pa.xp.abs(x * x - a) > 1e-12, lambda x: 0.5 * (x + a / x), a)
        ...     return x
        >>> round(float(sqrt_newton(np.float64(2.0))), 12)
        1.414213562373
        >>> round(float(pa.grad(sqrt_newton)(np.float64(2.0))), 9)  # 1 / (2 sqrt(2))
        0.353553391
    """
    where = f"pa.while_loop({func_name(body_fun)})"
    for name, f in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(f):
            raise TypeError(f"{where}: {name} must be callable, got {type(f).__name__}")
    check_checkpoints(checkpoints, max_memory, where)
    if not isinstance(compiled, bool):
        raise TypeError(f"{where}: compiled must be True or False, got {compiled!r}")
    flat, tree = optree.tree_flatten(init_val, none_is_leaf=False)
    flat = as_arrays(flat, where, "init_val")
    if not transform_active():
        refuse_pre_dispatch_capture(where, "a while loop")
        val = optree.tree_unflatten(tree, owned(flat))  # the body's own carry, as scan's
        while _predicate(cond_fun(val), where):
            leaves = _stepped(body_fun, val, tree, flat, where)
            leaves = owned_next(dispatch.persisted(leaves), flat)
            val = optree.tree_unflatten(tree, leaves)  # a lazy carry: once a step
        return val
    if only_vmap_active():
        refuse_pre_dispatch_capture(where, "a while loop")
        return _vmapped_loop(cond_fun, body_fun, flat, tree, where)
    dtypes = [v.dtype for v in flat]

    def cond_flat(*leaves):
        pred = cond_fun(optree.tree_unflatten(tree, list(leaves)))
        if (
            not hasattr(pred, "dtype")
            or getattr(pred, "shape", None) != ()
            or dtype_name(pred.dtype) != "bool"
        ):
            raise TypeError(
                f"{where}: cond_fun must return a boolean scalar (a 0-d bool array), got {pred!r}"
            )
        return (pred,)

    def body_flat(*leaves):
        out = body_fun(optree.tree_unflatten(tree, list(leaves)))
        o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=False)
        check_carry([], [], where, "body_fun", "init_val", trees=(o_tree, tree))  # shapes: once traced
        return tuple(
            o if isinstance(o, Tensor) or hasattr(o, "dtype") else xp.asarray(o, dtype=d)
            for o, d in zip(o_flat, dtypes)
        )

    names = carry_names(len(flat))
    cond = trace(cond_flat, flat, f"pa.while_loop({func_name(cond_fun)})", names, LOOP_ADVICE)
    body = trace(body_flat, flat, where, names, LOOP_ADVICE)
    check_carry(body.out_avals, flat, where, "body_fun", "init_val")
    if compiled:
        cond, body = replayed(cond, flat), replayed(body, flat)
    outs = bind(
        WHILE,
        *flat,
        *cond.closures,
        *body.closures,
        cond=cond,
        body=body,
        n_carry=len(flat),
        n_cond=len(cond.closures),
        checkpoints=checkpoints,
        max_memory=max_memory,
    )
    return optree.tree_unflatten(tree, list(outs[: len(flat)]))

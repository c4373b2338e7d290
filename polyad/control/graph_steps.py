"""A compiled loop's steps replayed from device graphs (CUDA graphs on CuPy), up to 32 steps per launch.

Under ``pa.jit`` a scan (``fori_loop``, the advances of a checkpointed reverse sweep) runs its compiled
body (a ``CompiledBody``) once per step from Python, and on CuPy each kernel launched that way costs about
13.5 µs against about 0.8 µs per node replayed from a CUDA graph. Where ``$POLYAD_CUDA_GRAPHS`` is "1"
and the arrays' backend can capture (the contract's ``graph_capture``), ``run_captured`` runs the loop
several steps per launch:

- "n applications of the compiled step" is captured once per signature (the shapes and dtypes of the
  carry, of a step's slices of xs and of the closure; the direction; whether ys are kept) and n, into
  buffers allocated before the capture and kept with it on the body (``CompiledBody.captured``): the
  carry in, the carry out (then copied back in, so that launches chain) and the closure, shared by the
  signature's captures, and each capture's n slices of xs and of each y. Each call copies its closure in
  once and each launch its n slices of xs; the carry is copied in before the first launch of a run of
  launches and out after the last.
- A run of m steps is ``rungs(m)``: ``m // k`` launches of k = ``STEPS_PER_LAUNCH`` = 32 steps, then one
  launch for each binary digit of the rest (16, 8, 4, 2, 1 steps): at most ``m // 32 + 5`` launches, and
  at most 6 captures per signature (63 warm-up steps, once). A launch never spans a step before which an
  enclosing rule stores the carry (a checkpoint), so the runs are the stretches between those. Fixed
  sizes rather than one capture per length: the advances of a checkpointed reverse sweep, of many
  lengths, share them. The schedule of the sweep is decided on the host between launches, as before.
- Each launch replaces n launches of each of the step's kernels (about 13.5 µs each on CuPy) by graph
  nodes (about 0.8 µs each) and one launch.
- ``while_loop`` (``run_while_captured``, where no checkpoint is stored: the forward loop, not its
  reverse-mode primal pass): ``WHILE_STEPS_PER_LAUNCH`` (8) masked steps per launch, as the batched while
  loop masks its finished examples: each step checks the condition on the device, steps and keeps the new
  carry only while every check so far held; the host reads that flag once per launch and stops. A loop of
  n steps makes ``n // 8 + 1`` launches and computes up to 7 steps it throws away (8, not 32: a masked
  step of a large state costs its kernels' time).
- Only on backend arrays: on a transform's tensors the loop runs its body as before (no capture).
- A step that cannot be captured (it synchronises with the host, say) warns once (``GraphCaptureWarning``)
  and its loops run as before; the capture was ended by the backend (``graph_capture``'s contract).

Off by default: not verified on a GPU (the control logic is tested on the CPU with a recording fake of
``graph_capture``: tests/test_cuda_graphs.py).
"""

import os
import warnings

import polyad.core.dispatch as dispatch
from polyad.control.closure import CompiledBody
from polyad.core import Tensor
from polyad.ops.base import expand_dims, take_index, where
from polyad.ops.fills import zeros
from polyad.ops.manipulation import concat

ENV = "POLYAD_CUDA_GRAPHS"
SETTINGS = {"": False, "0": False, "1": True}
STEPS_PER_LAUNCH = 32  # k (see the module docstring for the rule)
WHILE_STEPS_PER_LAUNCH = 8  # a while loop's masked steps per launch
MAX_GRAPHS = 8  # captures kept per body (each holds its buffers and its private memory)
FAILED = "failed"  # a signature whose capture failed: its loops run step by step
_STATE = {"capturing": False}  # a loop inside a step being captured runs its steps inside that capture


class GraphCaptureWarning(UserWarning):
    """A loop step could not be captured into a device graph; its loops run step by step."""


def enabled():
    """Whether ``$POLYAD_CUDA_GRAPHS`` asks for device graphs ("1"; unset, "" or "0": no), read at each
    call; ValueError for another value.

    Returns:
        bool.

    Example:
        >>> import os
        >>> from polyad.control import graph_steps
        >>> os.environ.pop("POLYAD_CUDA_GRAPHS", None) and None
        >>> graph_steps.enabled()
        False
    """
    value = os.environ.get(ENV, "").strip()
    if value not in SETTINGS:
        raise ValueError(
            f"${ENV} must be one of {', '.join(repr(v) for v in SETTINGS)} (unset or '0': loop steps "
            f"launched one by one; '1': compiled loop steps replayed from device graphs), got {value!r}"
        )
    return SETTINGS[value]


def capturing():
    """Whether a loop step is being captured now (on this process: captures run one at a time)."""
    return _STATE["capturing"]


def capture_of(body, args):
    """The backend's ``graph_capture`` where ``body``'s loop over ``args`` may replay graphs, else None."""
    if not isinstance(body, CompiledBody) or not enabled() or capturing():
        return None
    if any(isinstance(a, Tensor) or not hasattr(a, "shape") for a in args):
        return None  # a transform's tensors, or a Python number a capture would bake in
    backend = dispatch.backend_of(list(args))
    return getattr(backend, "graph_capture", None)


def run_captured(args, *, body, length, reverse, n_carry, n_xs, save=(), keep_ys=True, **params):
    """A scan's loop (``polyad.control.scan.run_loop``'s arguments and result) with its steps replayed
    from captured graphs (``rungs``), or None where it runs as before (see the module docstring)."""
    capture = capture_of(body, args) if length > 0 else None
    if capture is None:
        return None
    carry, xs = list(args[:n_carry]), list(args[n_carry : n_carry + n_xs])
    run = _Run(body, capture, carry, xs, list(args[n_carry + n_xs :]), length, reverse, keep_ys)
    stops = sorted({s for s in save if 0 <= s < length} | {length})
    saved, i = {}, 0
    for stop in stops:
        if i in save:
            saved[i] = run.carry_now()
        for size in rungs(stop - i):
            if not run.launch(i, size):
                break
            i += size
        while i < stop:
            run.step(i)
            i += 1
    chunks = list(reversed(run.ys)) if reverse else run.ys
    ys = [concat([c[j] for c in chunks]) for j in range(len(body.out_avals) - n_carry)] if keep_ys else []
    return (*run.carry_now(), *ys, *[leaf for s in save for leaf in saved[s]])


def rungs(steps):
    """The launches that run ``steps`` steps: ``steps // k`` graphs of k = ``STEPS_PER_LAUNCH`` steps,
    then one of each power of two in the rest (its binary digits), largest first.

    Args:
        steps: a non-negative int.

    Returns:
        The number of steps of each launch, in order (a list of ints).

    Example:
        >>> from polyad.control.graph_steps import rungs
        >>> rungs(70)  # k = 32
        [32, 32, 4, 2]
    """
    k = STEPS_PER_LAUNCH
    rest = steps % k
    return [k] * (steps // k) + [1 << b for b in range(rest.bit_length() - 1, -1, -1) if rest >> b & 1]


class _Run:
    """One loop's state: its carry (arrays, or the graphs' input buffers after a launch) and its ys,
    chunk by chunk in execution order, each chunk in the order of xs."""

    def __init__(self, body, capture, carry, xs, consts, length, reverse, keep_ys):
        self.body, self.capture = body, capture
        self.carry, self.xs, self.consts = carry, xs, consts
        self.length, self.reverse, self.keep_ys = length, reverse, keep_ys
        self.n_carry = len(carry)
        self.ys = []
        self.buffers = None  # the signature's buffers, once a launch needs them
        self.in_buffers = False  # whether the carry is in ``buffers.carry_in``

    def carry_now(self):
        """The carry as arrays of this loop's own (copies out of the buffers, which later launches reuse)."""
        if self.in_buffers:
            self.carry = [_copy(b) for b in self.buffers.carry_in]
            self.in_buffers = False
        return list(self.carry)

    def step(self, i):
        t = self.length - 1 - i if self.reverse else i
        out = self.body(*self.carry_now(), *[take_index(x, t) for x in self.xs], *self.consts)
        self.carry = list(out[: self.n_carry])
        if self.keep_ys:
            self.ys.append([expand_dims(y, axis=0) for y in out[self.n_carry :]])

    def launch(self, i, size):
        """Steps ``i .. i+size-1`` by one launch; False (nothing run) where they cannot be captured."""
        if self.buffers is None:
            carry = self.carry_now()
            key = (_avals(carry), _avals([x[0] for x in self.xs]), _avals(self.consts), self.reverse,
                   self.keep_ys)  # fmt: skip
            buffers = _cached(self.body, key, lambda: _Buffers(self.body, carry, self.consts, self.keep_ys))
            for b, c in zip(buffers.const_in, self.consts):
                b[...] = c
            self.buffers = buffers
        if size not in self.buffers.rungs:
            self.carry_now()  # a capture may run its steps on the buffers: the carry out of them first
        rung = self.buffers.rung(size, self.body, self.capture, self.xs, self.reverse)
        if rung is None:
            return False
        if not self.in_buffers:
            for b, c in zip(self.buffers.carry_in, self.carry):
                b[...] = c
            self.in_buffers = True
        lo = self.length - i - size if self.reverse else i
        for b, x in zip(rung.xs_in, self.xs):
            b[...] = x[lo : lo + size]
        rung.replay.launch()
        if self.keep_ys:
            self.ys.append([_copy(b) for b in rung.ys_out])
        return True


class _Buffers:
    """What a signature's captures share: the carry in and out, the closure, and a capture per number of
    steps (``rungs``: each with its own slices of xs and of the ys), or ``FAILED``."""

    def __init__(self, body, carry, consts, keep_ys):
        self.carry_in = [_copy(c) for c in carry]
        self.carry_out = [_copy(c) for c in carry]
        self.const_in = [_copy(c) for c in consts]
        self.device = getattr(carry[0], "device", None) if carry else None
        self.y_avals = body.out_avals[len(carry) :] if keep_ys else []
        self.rungs = {}

    def rung(self, size, body, capture, xs, reverse):
        """The capture of ``size`` steps (taken now if it is the first), or None where it failed."""
        if size not in self.rungs:
            rung = _Rung(self, size, body.fn, xs, reverse)
            rung.replay = _take(capture, rung.record, body.where)
            self.rungs[size] = FAILED if rung.replay is None else rung
        rung = self.rungs[size]
        return None if rung is FAILED else rung


class _Rung:
    """``size`` applications of the compiled step, from ``carry_in`` back into ``carry_in``."""

    def __init__(self, buffers, size, fn, xs, reverse):
        self.buffers, self.size, self.fn, self.reverse = buffers, size, fn, reverse
        self.xs_in = [_copy(x[:size]) for x in xs]
        self.ys_out = [zeros((size, *a.shape), dtype=a.dtype, device=buffers.device) for a in buffers.y_avals]
        self.replay = None

    def record(self):
        buffers = self.buffers
        carry, n = list(buffers.carry_in), len(buffers.carry_in)
        for j in range(self.size):
            t = self.size - 1 - j if self.reverse else j
            out = self.fn(*carry, *[take_index(b, t) for b in self.xs_in], *buffers.const_in)
            carry = list(out[:n])
            for b, y in zip(self.ys_out, out[n:]):
                b[t] = y
        for b, c in zip(buffers.carry_out, carry):  # not into carry_in at once: an output may be a view of it
            b[...] = c
        for b, c in zip(buffers.carry_in, buffers.carry_out):
            b[...] = c


def run_while_captured(args, *, cond, body, n_carry, n_cond, save_slots=None, **params):
    """A while loop (``polyad.control.while_loop.run_while``'s arguments and result) run
    ``WHILE_STEPS_PER_LAUNCH`` masked steps per launch, or None where it runs as before (see the module
    docstring)."""
    if save_slots is not None or not isinstance(cond, CompiledBody) or n_carry == 0:
        return None
    capture = capture_of(body, args)
    if capture is None:
        return None
    carry, c_closure, b_closure = (
        list(args[:n_carry]),
        args[n_carry : n_carry + n_cond],
        args[n_carry + n_cond :],
    )
    key = ("while", _avals(carry), _avals(c_closure), _avals(b_closure), WHILE_STEPS_PER_LAUNCH)
    graph = _cached(body, key, lambda: _WhileGraph(cond, body, carry, c_closure, b_closure))
    if graph.replay is None:
        graph.replay = _take(capture, graph.record, body.where) or FAILED
    if graph.replay is FAILED:
        return None
    for buffers, values in (
        (graph.c_closure, c_closure),
        (graph.b_closure, b_closure),
        (graph.carry_in, carry),
    ):
        for b, v in zip(buffers, values):
            b[...] = v
    graph.alive[...] = True
    graph.replay.launch()
    while bool(graph.alive):  # the host reads one flag per launch
        graph.replay.launch()
    return tuple(_copy(b) for b in graph.carry_in)


class _WhileGraph:
    """A capture of a while loop's masked steps with the buffers it reads and writes."""

    def __init__(self, cond, body, carry, c_closure, b_closure):
        self.carry_in = [_copy(c) for c in carry]
        self.carry_out = [_copy(c) for c in carry]
        self.c_closure = [_copy(c) for c in c_closure]
        self.b_closure = [_copy(c) for c in b_closure]
        flag = dispatch.namespace_of(carry[0]).asarray(True, device=getattr(carry[0], "device", None))
        self.alive, self.alive_out = flag, _copy(flag)
        self.cond, self.body = cond.fn, body.fn
        self.replay = None

    def record(self):
        """``WHILE_STEPS_PER_LAUNCH`` steps, each kept only while every check so far held."""
        carry, alive = list(self.carry_in), self.alive
        logical_and = dispatch.namespace_of(alive).logical_and
        for _ in range(WHILE_STEPS_PER_LAUNCH):
            alive = logical_and(alive, self.cond(*carry, *self.c_closure)[0])
            new = self.body(*carry, *self.b_closure)
            carry = [where(alive, n, c) for n, c in zip(new, carry)]
        for b, c in zip(self.carry_out, carry):
            b[...] = c
        self.alive_out[...] = alive
        for b, c in zip(self.carry_in, self.carry_out):
            b[...] = c
        self.alive[...] = self.alive_out


def _avals(arrays):
    return tuple((tuple(a.shape), str(a.dtype)) for a in arrays)


def _cached(body, key, make):
    """The buffers (and captures) of signature ``key`` on ``body``: ``make()``'s, the first time."""
    graphs = body.captured
    if key not in graphs:
        graphs[key] = make()
        while len(graphs) > MAX_GRAPHS:
            del graphs[next(iter(graphs))]
    return graphs[key]


def _take(capture, record, where):
    """``capture.capture(record)``, or None (with a ``GraphCaptureWarning``) where it failed."""
    _STATE["capturing"] = True
    try:
        return capture.capture(record)
    except Exception as exc:
        warnings.warn(
            f"{where}: the compiled step could not be captured into a device graph "
            f"({type(exc).__name__}: {exc}); its loops of this signature run step by step",
            GraphCaptureWarning,
            stacklevel=3,
        )
        return None
    finally:
        _STATE["capturing"] = False


def _copy(a):
    return dispatch.namespace_of(a).asarray(a, copy=True)

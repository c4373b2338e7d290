"""A compiled loop's steps replayed from device graphs (CUDA graphs on CuPy), k steps per launch.

Under ``pa.jit`` a scan (``fori_loop``, the advances of a checkpointed reverse sweep) runs its compiled
body (a ``CompiledBody``) once per step from Python, and on CuPy each kernel launched that way costs about
13.5 µs against about 0.8 µs per node replayed from a CUDA graph. Where ``$POLYAD_CUDA_GRAPHS`` is "1"
and the arrays' backend can capture (the contract's ``graph_capture``), ``run_captured`` runs the loop
``STEPS_PER_LAUNCH`` (k) steps per launch:

- "k applications of the compiled step" is captured once per signature (the shapes and dtypes of the
  carry, of a step's slices of xs and of the closure; k; the direction; whether ys are kept), into
  buffers allocated before the capture and kept with it on the body (``CompiledBody.captured``): the
  carry in, the carry out (then copied back in, so that launches chain), k slices of xs, the closure, k
  slices of each y. Each call copies its closure in once and each launch its k slices of xs; the carry is
  copied in before the first launch of a run of launches and out after the last.
- ``length // k`` launches (fewer where an enclosing rule stores the carry before a step: a launch never
  spans such a step), the rest of the steps as before, one by one. The schedule of a checkpointed reverse
  sweep is decided on the host between launches, as before.
- k = 32 for every loop, so that the advances of a reverse sweep, of many lengths, share one capture: a
  launch replaces 32 launches of each of the step's kernels (13.5 µs each) by graph nodes (0.8 µs each),
  and a capture costs one warm-up of k steps, once per signature. Loops shorter than k run as before.
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
    """A scan's loop (``polyad.control.scan.run_loop``'s arguments and result) with its steps replayed k
    at a time from a captured graph, or None where it runs as before (see the module docstring)."""
    k = STEPS_PER_LAUNCH
    capture = capture_of(body, args) if length >= k else None
    if capture is None:
        return None
    carry, xs, consts = (
        list(args[:n_carry]),
        list(args[n_carry : n_carry + n_xs]),
        list(args[n_carry + n_xs :]),
    )
    run = _Run(body, capture, carry, xs, consts, length, reverse, keep_ys, k)
    stops = sorted({s for s in save if 0 <= s < length} | {length})
    saved, i = {}, 0
    for stop in stops:
        if i in save:
            saved[i] = run.carry_now()
        while stop - i >= k and run.launch(i):
            i += k
        while i < stop:
            run.step(i)
            i += 1
    chunks = list(reversed(run.ys)) if reverse else run.ys
    ys = [concat([c[j] for c in chunks]) for j in range(len(body.out_avals) - n_carry)] if keep_ys else []
    return (*run.carry_now(), *ys, *[leaf for s in save for leaf in saved[s]])


class _Run:
    """One loop's state: its carry (arrays, or in the graph's input buffers after a launch) and its ys,
    chunk by chunk in execution order, each chunk in the order of xs."""

    def __init__(self, body, capture, carry, xs, consts, length, reverse, keep_ys, k):
        self.body, self.capture, self.k = body, capture, k
        self.carry, self.xs, self.consts = carry, xs, consts
        self.length, self.reverse, self.keep_ys = length, reverse, keep_ys
        self.n_carry = len(carry)
        self.ys = []
        self.graph = None  # the capture this loop launches, once taken
        self.in_buffers = False  # whether the carry is the graph's input buffers

    def carry_now(self):
        """The carry as arrays of this loop's own (copies out of the buffers, which later launches reuse)."""
        if self.in_buffers:
            self.carry = [_copy(b) for b in self.graph.carry_in]
            self.in_buffers = False
        return list(self.carry)

    def step(self, i):
        t = self.length - 1 - i if self.reverse else i
        out = self.body(*self.carry_now(), *[take_index(x, t) for x in self.xs], *self.consts)
        self.carry = list(out[: self.n_carry])
        if self.keep_ys:
            self.ys.append([expand_dims(y, axis=0) for y in out[self.n_carry :]])

    def launch(self, i):
        """Steps ``i .. i+k-1`` by one launch; False (nothing run) where the step cannot be captured."""
        if self.graph is None:
            carry, xs, consts = self.carry_now(), self.xs, self.consts
            key = (_avals(carry), tuple(_avals([x[0] for x in xs])), _avals(consts), self.k, self.reverse,
                   self.keep_ys)  # fmt: skip
            graph = _captured(self.body, self.capture, key, lambda: _Graph(self.body, carry, xs, consts,
                              self.k, self.reverse, self.keep_ys))  # fmt: skip
            if graph is None:
                return False
            self.graph = graph
            for b, c in zip(graph.const_in, self.consts):
                b[...] = c
        graph = self.graph
        if not self.in_buffers:
            for b, c in zip(graph.carry_in, self.carry):
                b[...] = c
            self.in_buffers = True
        lo = self.length - i - self.k if self.reverse else i
        for b, x in zip(graph.xs_in, self.xs):
            b[...] = x[lo : lo + self.k]
        graph.replay.launch()
        if self.keep_ys:
            self.ys.append([_copy(b) for b in graph.ys_out])
        return True


class _Graph:
    """A capture of k steps with the buffers it reads and writes (kept alive with it)."""

    def __init__(self, body, carry, xs, consts, k, reverse, keep_ys):
        device = getattr(carry[0], "device", None) if carry else None
        self.carry_in = [_copy(c) for c in carry]
        self.carry_out = [_copy(c) for c in carry]
        self.xs_in = [_copy(x[:k]) for x in xs]
        self.const_in = [_copy(c) for c in consts]
        y_avals = body.out_avals[len(carry) :] if keep_ys else []
        self.ys_out = [zeros((k, *a.shape), dtype=a.dtype, device=device) for a in y_avals]
        self.fn, self.k, self.reverse = body.fn, k, reverse
        self.replay = None

    def record(self):
        """k applications of the compiled step, from ``carry_in`` back into ``carry_in``."""
        carry, n = list(self.carry_in), len(self.carry_in)
        for j in range(self.k):
            t = self.k - 1 - j if self.reverse else j
            out = self.fn(*carry, *[take_index(b, t) for b in self.xs_in], *self.const_in)
            carry = list(out[:n])
            for b, y in zip(self.ys_out, out[n:]):
                b[t] = y
        for b, c in zip(self.carry_out, carry):  # not into carry_in at once: an output may be a view of it
            b[...] = c
        for b, c in zip(self.carry_in, self.carry_out):
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
    graph = _captured(body, capture, key, lambda: _WhileGraph(cond, body, carry, c_closure, b_closure))
    if graph is None:
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


def _captured(body, capture, key, make):
    """The capture for this signature (``make()``'s buffers, captured now if it is the first), or None
    where it failed."""
    graphs = body.captured
    graph = graphs.get(key)
    if graph is None:
        graph = make()
        _STATE["capturing"] = True
        try:
            graph.replay = capture.capture(graph.record)
        except Exception as exc:
            warnings.warn(
                f"{body.where}: the compiled step could not be captured into a device graph "
                f"({type(exc).__name__}: {exc}); its loops of this signature run step by step",
                GraphCaptureWarning,
                stacklevel=2,
            )
            graph = FAILED
        finally:
            _STATE["capturing"] = False
        graphs[key] = graph
        while len(graphs) > MAX_GRAPHS:
            del graphs[next(iter(graphs))]
    return None if graph is FAILED else graph


def _copy(a):
    return dispatch.namespace_of(a).asarray(a, copy=True)

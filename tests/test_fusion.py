"""Fusion (polyad.graph.compiler.fusion): which nodes end up in which group, values equal to the unfused graph
and to eager code (replayed, compiled, transformed), the CPU kernel's fallbacks, and the CUDA source text
(checked for structure here; run on a GPU by the cuda-marked test)."""

import re
import sys
from collections import Counter

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.backends.cupy import fusion as cuda_fusion
from polyad.backends.numpy.compiler import fusion as cpu_fusion
from polyad.core import dispatch
from polyad.graph import Const, Graph
from polyad.graph.compiler import fuse
from polyad.graph.compiler.fusion import FUSABLE, FusedOp

BACKEND = dispatch.default_backend()
xb = BACKEND.xp


@pytest.fixture(autouse=True)
def _loops_compile_at_the_first_call(monkeypatch):
    """These tests check what the fused loop computes: its first call waits for Numba rather than running
    the group's ops while the loop compiles in the background (tests/test_first_call.py checks that)."""
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")


def arr(values, dtype="float64"):
    return xb.asarray(np.asarray(values, dtype=dtype))


def names(graph):
    """Each node's op name; a fused node shows its members in order: ``fused[sin,exp]``."""
    return [n.op.name for n in graph.nodes]


def fused_nodes(graph):
    return [n for n in graph.nodes if isinstance(n.op, FusedOp)]


def check_values(f, *args, rtol=1e-13, atol=1e-14):
    """The fused graph of ``f`` replayed, compiled and differentiated equals the unfused graph and eager."""
    graph = pa.make_graph(f, *args)
    fused = fuse(graph, BACKEND.name)
    eager = f(*args)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for got in (fused(*args), fused.compile()(*args), graph.compile()(*args)):
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(eager)
        for g, e in zip(got, eager):
            assert_close(to_numpy(g), to_numpy(e), rtol=rtol, atol=atol)
            assert str(g.dtype) == str(e.dtype)
    return graph, fused


# ------------------------------------------------------------------------------------------ grouping


def test_a_chain_is_one_group():
    graph = pa.make_graph(lambda x: pxp.exp(pxp.sin(x) * 2.0) - x, arr([0.1, 0.2, 0.3]))
    fused = fuse(graph, BACKEND.name)
    assert names(fused) == ["fused[sin,multiply,exp,subtract]"]
    (node,) = fused.nodes
    assert node.inputs == graph.inputs and node.outputs == graph.outputs


def test_a_value_read_outside_the_group_stays_an_output():
    def f(x):
        y = pxp.sin(x)
        return y, pxp.exp(y) * y

    graph = pa.make_graph(f, arr([0.5, 1.0]))
    fused = fuse(graph, BACKEND.name)
    (node,) = fused.nodes
    assert node.op.name == "fused[sin,exp,multiply]"
    assert [o.id for o in node.outputs] == [r.id for r in graph.outputs]  # y is read by the caller
    assert node.op.multiple_results


def test_a_path_through_an_unfusable_op_splits_the_group():
    w = arr(np.eye(2) * 3.0)

    def f(x):
        a = pxp.sin(x)
        b = a @ w  # matmul is not element-wise: exp(a) + b cannot join sin's group (a cycle)
        return pxp.exp(a) + b

    graph = pa.make_graph(f, arr([0.5, 1.0]))
    fused = fuse(graph, BACKEND.name)
    assert names(fused) == ["fused[sin,exp]", "matmul", "add"]
    sin_exp = fused.nodes[0]
    a, e = sin_exp.outputs
    assert fused.nodes[1].inputs[0] is a and fused.nodes[2].inputs[0] is e


def test_independent_branches_merge_where_they_meet():
    graph = pa.make_graph(lambda x: pxp.sin(x) * pxp.cos(x) + pxp.tanh(x), arr([0.5, 1.0]))
    assert names(fuse(graph, BACKEND.name)) == ["fused[sin,cos,multiply,tanh,add]"]


def test_a_group_ends_in_a_sum_and_its_readers_start_another():
    def f(x):
        s = pxp.sum(pxp.sin(x) * x, axis=1)  # (3,)
        return pxp.cos(s) * s

    graph = pa.make_graph(f, arr(np.linspace(0, 1, 6).reshape(3, 2)))
    fused = fuse(graph, BACKEND.name)
    assert names(fused) == ["fused[sin,multiply,sum]", "fused[cos,multiply]"]
    spec = fused.nodes[0].op.fusion
    assert spec.outputs == [(fused.nodes[0].outputs[0].id, "sum", {"axis": 1, "keepdims": False})]
    assert spec.shape == (3, 2) and fused.nodes[1].op.fusion.shape == (3,)


def test_a_sum_never_feeds_its_own_group():
    graph = pa.make_graph(lambda x: pxp.sin(x) * pxp.sum(pxp.sin(x)), arr([0.5, 1.0]))
    fused = fuse(graph, BACKEND.name)
    assert names(fused) == ["fused[sin,sum]", "fused[sin,multiply]"]


def test_other_shapes_and_dtypes_start_groups_of_their_own():
    def f(x, y32, k):
        a = pxp.exp(x)[:, None] * x  # (3,) -> (3, 3): another group shape
        b = pxp.sin(y32) * 2.0  # float32: its own group, its own dtype
        c = k * 3  # integers are never fused
        return a, b, c

    args = (arr([0.1, 0.2, 0.3]), arr([1.0, 2.0], "float32"), xb.asarray(np.arange(2)))
    graph = pa.make_graph(f, *args)
    fused = fuse(graph, BACKEND.name)
    assert [n for n in names(fused) if n.startswith("fused")] == ["fused[sin,multiply]"]
    (node,) = fused_nodes(fused)
    assert node.op.fusion.dtype == "float32"
    check_values(f, *args, rtol=1e-6)


def test_the_gradient_of_w2_is_one_kernel():
    """grad(sum(sin(v) exp(-v^2) + tanh(v))): the forward's values the backward reads fuse with it, the
    forward's last steps (only the seed's ones read the loss, and eager reverse mode never multiplies by
    them) are gone: the whole gradient is one kernel."""

    def w2(v):
        return pxp.sum(pxp.sin(v) * pxp.exp(-(v**2)) + pxp.tanh(v))

    x = arr(np.linspace(-3, 3, 7))
    graph, fused = check_values(pa.grad(w2), x)
    (node,) = fused_nodes(fused)
    members = Counter(node.op.name[len("fused[") : -1].split(","))
    element_wise = Counter(n.op.name for n in graph.nodes if n.op.name in FUSABLE)
    # all but the loss's last two steps (sin(v) * exp(-v**2), then + tanh(v)) and the seed's broadcast
    assert element_wise - members == Counter({"multiply": 1, "add": 1, "broadcast_to": 1})
    assert not members - element_wise and sum(members.values()) == 15
    assert names(fused) == [node.op.name]
    v = np.linspace(-3, 3, 7)
    by_hand = (np.cos(v) - 2 * v * np.sin(v)) * np.exp(-(v**2)) + 1 - np.tanh(v) ** 2
    assert_close(to_numpy(fused.compile()(x)), by_hand, rtol=1e-13, atol=1e-15)


def test_nothing_to_fuse_returns_the_graph():
    graph = pa.make_graph(lambda x: pxp.sin(x) @ x, arr([1.0, 2.0]))
    assert fuse(graph, BACKEND.name) is graph


# ------------------------------------------------------------------------------------------ values


@pytest.mark.parametrize(
    "f",
    [
        lambda x: pxp.sqrt(pxp.abs(x)) / (1.0 + x * x) - pxp.log1p(pxp.abs(x)),
        lambda x: pxp.sum(pxp.tanh(x) ** 2 + pxp.sinh(x) * pxp.cosh(x)),
        lambda x: pxp.sum(pxp.expm1(x) * pxp.sign(x), axis=0, keepdims=True),
        lambda x: pxp.atan(x) + pxp.asinh(x) - pxp.sin(pxp.square(x)) * pxp.reciprocal(2.0 + x),
        lambda x: (pxp.exp(-x) ** 1.5, -pxp.cos(x)),
    ],
    ids=["algebra", "sum-of-powers", "axis-sum", "inverse-trig", "two-outputs"],
)
def test_values_equal_eager(f):
    x = arr(np.linspace(-0.9, 0.9, 12).reshape(3, 4))
    graph, fused = check_values(f, x)
    assert len(fused.nodes) < len(graph.nodes)


def test_broadcast_inputs_of_every_kind():
    def f(a, b, c):
        return pxp.sin(a * b) * c + a  # (3, 1) * (1, 4) -> (3, 4); c is one element

    args = (arr(np.linspace(0, 1, 3).reshape(3, 1)), arr(np.linspace(1, 2, 4).reshape(1, 4)), arr([[0.5]]))
    graph, fused = check_values(f, *args)
    assert names(fused) == ["fused[multiply,sin,multiply,add]"]
    assert fused.nodes[0].op.fusion.input_shapes == [(3, 1), (1, 4), (1, 1)]


def test_captured_constants_are_inputs():
    w = arr([1.0, -2.0, 3.0])
    graph, fused = check_values(lambda x: pxp.exp(x * w) + w, arr([0.1, 0.2, 0.3]))
    (node,) = fused.nodes
    assert any(isinstance(r, Const) for r in node.inputs)


def test_float32_keeps_its_dtype():
    x = arr(np.linspace(-2, 2, 9), "float32")
    graph, fused = check_values(lambda v: pxp.exp(-(v**2)) * 3 + pxp.cos(v) / 7, x, rtol=2e-6, atol=1e-7)
    assert fused.nodes[0].op.fusion.dtype == "float32"


def test_transforms_of_a_fused_graph_use_the_members_rules():
    def f(x):
        return pxp.sin(x) * pxp.exp(-x) + x**3

    x = arr([0.3, -0.7, 1.1])
    graph = pa.make_graph(f, x)
    fused = fuse(graph, BACKEND.name)
    (node,) = fused.nodes
    xn = np.array([0.3, -0.7, 1.1])
    analytic = np.cos(xn) * np.exp(-xn) - np.sin(xn) * np.exp(-xn) + 3 * xn**2
    assert_close(to_numpy(pa.grad(lambda v: pxp.sum(fused(v)))(x)), analytic, rtol=1e-13)
    assert_close(to_numpy(pa.jvp(fused, (x,), (xb.ones_like(x),))[1]), analytic, rtol=1e-13)
    batch = arr(np.stack([xn, 2 * xn]))
    assert_close(to_numpy(pa.vmap(fused)(batch)), np.stack([to_numpy(f(x)), to_numpy(f(2 * x))]), rtol=1e-13)
    # a graph of the fused graph keeps the group as one node
    again = pa.make_graph(fused, x)
    assert names(again) == [node.op.name]


def test_the_gradient_graph_of_a_fused_graph_fuses_again():
    graph = pa.make_graph(lambda x: pxp.sum(pxp.tanh(x) * x), arr([0.3, 0.5]))
    fused = fuse(graph, BACKEND.name)
    second = pa.make_graph(pa.grad(fused), arr([0.3, 0.5]))
    refused = fuse(second, BACKEND.name)
    xn = np.array([0.3, 0.5])
    assert_close(to_numpy(refused.compile()(arr(xn))), np.tanh(xn) + xn * (1 - np.tanh(xn) ** 2), rtol=1e-13)


# ------------------------------------------------------------------------------------------ CPU kernel


@pytest.mark.skipif(BACKEND.name != "numpy", reason="the Numba kernel runs on NumPy arrays")
def test_the_cpu_kernel_is_a_numba_loop_when_numba_is_there():
    pytest.importorskip("numba")
    graph = pa.make_graph(lambda x: pxp.sin(x) * pxp.sin(x) + 1, arr([0.1, 0.2]))
    (node,) = fuse(graph, "numpy").nodes
    source = node.op.kernels["cpu"].source
    loop = source.split("for i in range(n):")[1]
    # one statement per member, named by its place in the group (not its graph id: groups of the same
    # structure share their source, and so one compiled loop)
    assert re.findall(r"t(\d+) = ", loop) == [str(k) for k in range(len(graph.nodes))]
    # each member once (sin is bound twice), as the vectorisable function of math="fast" (the default)
    assert "vm.sin(s0)" in loop and loop.count("vm.sin") == 2
    assert f"out0[i] = t{len(graph.nodes) - 1}" in loop
    # the literal is an argument (a one-element array after the inputs), not a constant of the source:
    # groups differing only in their constants share one compiled loop
    assert "c0 = in1[0]" in source and "1.0" not in loop
    compiled = fuse(graph, "numpy").compile()
    assert len(re.findall(r"= k\d+\(", compiled.source)) == 1  # sin runs inside the loop, not as its own op
    assert_close(to_numpy(compiled(arr([0.1, 0.2]))), np.sin([0.1, 0.2]) ** 2 + 1, rtol=1e-15)


def test_a_numpy_scalar_argument_runs_the_loop_not_the_straight_line_kernel():
    # np.float64(0.5) is no ndarray: it used to send the whole group to the straight-line fallback (a
    # scan's compiled step with a scalar parameter ran unfused at every step)
    pytest.importorskip("numba")
    graph = pa.make_graph(lambda x, k: pxp.sin(x) * k + 1, np.array([0.1, 0.2]), np.float64(0.5))
    (node,) = [n for n in fuse(graph, "numpy").nodes if isinstance(n.op, FusedOp)]
    calls = []
    run = cpu_fusion.kernel(node.op.fusion, lambda xp, *a: calls.append(1))
    out = run(np, np.array([0.1, 0.2]), np.float64(0.5))
    assert not calls
    assert_close(out, np.sin([0.1, 0.2]) * 0.5 + 1, rtol=1e-15)
    run(np, np.array([0.1, 0.2], dtype=np.float32), np.float32(0.5))  # another dtype: the fallback
    assert calls == [1]


def test_a_group_of_scalars_runs_the_loop_and_returns_0d_arrays():
    # a small state's step control: groups of 0-d values, given as 0-d arrays and NumPy scalars
    pytest.importorskip("numba")
    graph = pa.make_graph(lambda h, e: pxp.sqrt(h) * e + h, np.asarray(0.25), np.float64(3.0))
    (node,) = [n for n in fuse(graph, "numpy").nodes if isinstance(n.op, FusedOp)]
    calls = []
    run = cpu_fusion.kernel(node.op.fusion, lambda xp, *a: calls.append(1))
    for h, e in ((np.asarray(0.25), np.float64(3.0)), (np.float64(0.25), np.asarray(3.0))):
        out = run(np, h, e)
        assert type(out) is np.ndarray and out.shape == () and float(out) == 0.5 * 3.0 + 0.25
    assert not calls


def test_an_overridden_kernel_is_not_fused():
    """``library.override`` swaps an op's kernel: code generated from the op's stock semantics would ignore
    the swap, so the op stays out of every group while the override is active."""
    graph = pa.make_graph(lambda x: pxp.sin(x) * pxp.sin(x) + 1, arr([0.1, 0.2]))
    calls = []
    with pa.library.override(pxp.sin, "generic", lambda v: calls.append(1) or v):
        with pa.library.override(pxp.sin, "cpu", lambda v: calls.append(1) or v):
            fused = fuse(graph, "numpy")
            assert "sin" in names(fused)
            out = fused.compile()(arr([0.1, 0.2]))
    assert calls and not {"sin"} & {n.op.name for n in fused_nodes(fused)}
    assert_close(to_numpy(out), np.array([0.1, 0.2]) ** 2 + 1, rtol=1e-15)


def test_without_the_cpu_library_numpy_graphs_stay_unfused(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba now raises ImportError
    assert not cpu_fusion.available()
    graph = pa.make_graph(lambda x: pxp.exp(pxp.sin(x)), np.array([0.1, 0.2]))
    assert fuse(graph, "numpy") is graph
    # a graph fused for another backend replays on NumPy through its straight-line kernel
    fused = fuse(graph, "array_api_strict")
    (node,) = fused.nodes
    assert "cpu" not in node.op.kernels
    assert_close(fused.compile("numpy")(np.array([0.1, 0.2])), np.exp(np.sin([0.1, 0.2])), rtol=1e-15)


def test_other_arrays_of_the_cpu_device_type_take_the_straight_line_kernel():
    pytest.importorskip("numba")
    import array_api_strict

    graph = pa.make_graph(lambda x: pxp.exp(pxp.sin(x)), np.array([0.1, 0.2]))
    fused = fuse(graph, "numpy")
    got = fused.compile("array_api_strict")(array_api_strict.asarray([0.1, 0.2]))
    assert type(got) is type(array_api_strict.asarray(1.0))
    assert_close(to_numpy(got), np.exp(np.sin([0.1, 0.2])), rtol=1e-15)


# ------------------------------------------------------------------------------------------ CUDA source

_STATEMENT = re.compile(r"^T t(\d+) = (.*);$")
_ASSIGN = re.compile(r"^out(\d+) = t(\d+);$")


def _parse(operation):
    """``({target: expression}, [(output index, target)])`` of an ElementwiseKernel's operation, checking
    each temporary is defined once, before any use."""
    temps, outs = {}, []
    for line in operation.splitlines():
        m = _STATEMENT.match(line)
        if m:
            used = {int(t) for t in re.findall(r"\bt(\d+)\b", m.group(2))}
            assert used <= set(temps), f"{line}: reads a temporary not yet defined"
            assert int(m.group(1)) not in temps
            temps[int(m.group(1))] = m.group(2)
            continue
        m = _ASSIGN.match(line)
        assert m, f"unexpected line {line!r}"
        assert int(m.group(2)) in temps
        outs.append((int(m.group(1)), int(m.group(2))))
    return temps, outs


def test_cuda_elementwise_source():
    def f(x, y):
        a = pxp.sin(x) * 2
        return a, pxp.exp(-a) + y

    graph = pa.make_graph(f, arr([0.1, 0.2]), arr([1.0, 2.0]))
    (node,) = fuse(graph, BACKEND.name).nodes
    elementwise, reductions = cuda_fusion.sources(node.op.fusion)
    assert reductions == [None, None]
    assert elementwise.in_params == "T in0, T in1" and elementwise.out_params == "T out0, T out1"
    assert re.fullmatch(r"polyad_fused_[0-9a-f]{16}", elementwise.name)
    temps, outs = _parse(elementwise.operation)
    ids = [n.outputs[0].id for n in graph.nodes]  # sin, multiply, negative, exp, add
    assert list(temps) == ids
    assert temps[ids[0]] == "sin(in0)"
    assert temps[ids[1]] == f"(t{ids[0]} * (T)2.0)"  # the int literal, cast to the arrays' type
    assert temps[ids[2]] == f"(-t{ids[1]})"
    assert temps[ids[3]] == f"exp(t{ids[2]})"
    assert temps[ids[4]] == f"(t{ids[3]} + in1)"
    assert outs == [(0, ids[1]), (1, ids[4])]


def test_cuda_reduction_source():
    graph = pa.make_graph(lambda x: pxp.sum(pxp.tanh(x) * x, axis=(0,)), arr(np.ones((2, 3))))
    (node,) = fuse(graph, BACKEND.name).nodes
    elementwise, (reduction,) = cuda_fusion.sources(node.op.fusion)
    assert elementwise is None
    # kernel parameters x<k>, y<k>: named in0/out0, CuPy's CUB path lacks their types (nvrtc_check)
    assert (reduction.in_params, reduction.out_params) == ("T x0", "T y0")
    assert (reduction.reduce_expr, reduction.post_map_expr, reduction.identity) == ("a + b", "y0 = a", "0")
    assert (reduction.axis, reduction.keepdims) == ((0,), False)
    header, *body, ret, close = reduction.preamble.splitlines()
    function = re.fullmatch(r"__device__ T (polyad_summand_[0-9a-f]{16})\(T in0\) \{", body.pop(0)).group(1)
    assert header == "template <typename T>" and close == "}"
    assert reduction.map_expr == f"{function}(x0)" and reduction.name == f"{function}_sum"
    temps, _ = _parse("\n".join(line.strip() for line in body))
    t, m = (n.outputs[0].id for n in graph.nodes[:2])
    assert temps == {t: "tanh(in0)", m: f"(t{t} * in0)"}
    assert ret.strip() == f"return t{m};"


def test_every_fusable_op_has_a_cuda_and_a_cpu_expression():
    # each backend that fuses writes the code of exactly the compiler's fusable ops, using every argument
    from polyad.backends.cupy import fusion as cuda_fusion
    from polyad.backends.numpy import compiler as cpu_compiler

    for codegen in (cpu_compiler, cuda_fusion):
        assert set(codegen.expressions) == set(FUSABLE)
        for name, arity in FUSABLE.items():
            args = [f"a{k}" for k in range(arity)]
            text = codegen.expressions[name].format(*args)
            assert all(a in text for a in args), name
            assert f"{{{arity}}}" not in codegen.expressions[name], name  # no argument beyond the arity


@pytest.mark.cuda
def test_cuda_kernels_run_on_cupy():
    import cupy

    def f(x, y):
        a = pxp.sin(x) * 2
        return a, pxp.exp(-a) + y, pxp.sum(pxp.tanh(a) * y, axis=1)

    args = (cupy.linspace(0, 1, 6).reshape(2, 3), cupy.asarray([[1.0], [2.0]]))
    graph = pa.make_graph(f, *args)
    fused = fuse(graph, "cupy")
    assert [n.op.name for n in fused.nodes] == ["fused[sin,multiply,negative,exp,add,tanh,multiply,sum]"]
    for got, expected in zip(fused.compile("cupy")(*args), f(*args)):
        assert_close(cupy.asnumpy(got), cupy.asnumpy(expected), rtol=1e-13)


# ------------------------------------------------------------------------------------------ bad input


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match=r"fuse\(graph=...\): expected a polyad.graph.Graph, got function"):
        fuse(lambda x: x, "numpy")
    graph = pa.make_graph(lambda x: pxp.sin(pxp.sin(x)), arr([1.0]))
    with pytest.raises(TypeError, match=r"fuse\(backend=3\): backend must be a backend name"):
        fuse(graph, 3)
    assert isinstance(fuse(graph), Graph)


def test_groups_that_would_wait_on_each_other_run_unfused():
    # a group can gain an input that depends on another group after a value of that group was read into
    # it (the grouping's dependency masks are taken when a value is made): two fused nodes then read
    # each other's outputs. Seen in pa.jit(pa.grad) of a two-state ODE solve with t_eval, whose compile
    # looped until MemoryError; now those groups run unfused and the value is eager's
    pytest.importorskip("numba")
    from polyad.graph.compiler.fusion import _topological
    from polyad.graph.ir import Node, Var
    from polyad.integrate import solve_ivp

    a, b, c, d = (Var(i, (2,), np.float64) for i in range(4))
    nodes = [Node(pxp.sin.op, [b], {}, [a]), Node(pxp.cos.op, [a], {}, [b]), Node(pxp.exp.op, [d], {}, [c])]
    order, stuck = _topological(nodes)  # sin and cos read each other's output; exp reads an input
    assert stuck == [0, 1] and [n.op.name for n in order] == ["exp"]

    if pa.get_backend() != "numpy":
        pytest.skip("the compiled loops of pa.jit are NumPy's")

    def loss(k):
        sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 3.0), np.ones(2), t_eval=np.linspace(0.0, 3.0, 2),
                        args=(k,), rtol=1e-6, atol=1e-8)  # fmt: skip
        return pxp.sum(sol.y)

    k = np.float64(0.5)
    assert_close(pa.jit(pa.grad(loss))(k), pa.grad(loss)(k), rtol=1e-12)


def test_only_groups_on_a_cycle_run_unfused():
    # two groups that read each other's outputs (A = {sin, exp}, B = {cos, tanh}: B's cos reads A's sin,
    # A's exp reads B's tanh) cannot both be fused nodes; a third group C = {sin, cos} only reads A's exp:
    # it waits on the cycle but is on none, and stays fused (it ran unfused before, which cost the
    # pullback of a small ODE's step under pa.jit 19 of its 40 groups)
    pytest.importorskip("numba")
    import optree

    from polyad.graph.compiler.fusion import _Group, _on_cycles, _rebuild
    from polyad.graph.ir import Node, Var

    f64 = np.dtype("float64")
    v = [Var(i, (3,), f64) for i in range(7)]
    ops = [pxp.sin, pxp.cos, pxp.tanh, pxp.exp, pxp.sin, pxp.cos]  # a chain: v[i + 1] = op(v[i])
    nodes = [Node(op.op, [v[i]], {}, [v[i + 1]]) for i, op in enumerate(ops)]
    one, two = optree.tree_structure((0,)), optree.tree_structure((0, 0))
    graph = Graph([v[0]], one, nodes, [v[6], v[4]], two, [])

    # _on_cycles: of exp <-> cos (each reads the other's output) and a sin reading exp's, the first two
    w = [Var(10 + i, (3,), f64) for i in range(3)]
    stuck = [Node(pxp.exp.op, [w[1]], {}, [w[0]]), Node(pxp.cos.op, [w[0]], {}, [w[1]]),
             Node(pxp.sin.op, [w[0]], {}, [w[2]])]  # fmt: skip
    assert _on_cycles(stuck) == [0, 1]

    groups = []
    for gid, members in enumerate(([0, 3], [1, 2], [4, 5])):
        g = _Group(gid, (3,), "float64")
        g.members = members
        groups.append(g)
    rebuilt = _rebuild(graph, groups, "fast")
    assert Counter(names(rebuilt)) == Counter(["sin", "cos", "tanh", "exp", "fused[sin,cos]"])
    x = arr([0.1, 0.5, 2.0])
    chain = np.exp(np.tanh(np.cos(np.sin(to_numpy(x)))))
    for out, expected in zip(rebuilt.compile()(x), (np.cos(np.sin(chain)), chain)):
        assert_close(out, expected, rtol=1e-14)

"""Graph capture: make_graph below the transforms (graphs of grad, vmap, jacobians; replay on each
backend; compile), call_delegate, and pre-dispatch capture (transform nodes, free variables, refusals)."""

import warnings

import numpy as np
import pytest
from helpers import assert_close, raises_cleanly

import polyad as pa
from polyad import core, xp
from polyad.core import dispatch
from polyad.graph import predispatch
from polyad.graph.predispatch import TransformNode
from polyad.testing import check_grads, check_vmap


def _xp():
    return dispatch.default_backend().xp


def _arr(values):
    return _xp().asarray(values, dtype=_xp().float64)


# ------------------------------------------------------------------------------ graphs


def test_make_graph_of_grad_holds_the_backward_and_replays():
    f = lambda v: xp.sum(xp.sin(v) * v)  # noqa: E731
    x = _arr([0.1, 0.2, 0.3])
    graph = pa.make_graph(pa.grad(f), x)
    text = str(graph)
    assert "cos" in text and "sin" in text  # the backward pass became plain ops
    assert len(text.splitlines()) == len(graph.nodes) + 2 + len(graph.consts)
    y = _arr([1.0, -2.0, 0.5])
    assert_close(graph(y), pa.grad(f)(y))
    assert all(hasattr(n, "op") and hasattr(n, "inputs") for n in graph.nodes)


def test_graph_replays_on_the_other_backend():
    import array_api_strict

    f = lambda v: xp.sum(xp.exp(v) * 2.0)  # noqa: E731
    graph = pa.make_graph(pa.grad(f), np.array([0.0, 1.0]))
    out = graph(array_api_strict.asarray([0.5, 1.5]))
    assert isinstance(out, array_api_strict._array_object.Array)
    assert_close(out, np.exp([0.5, 1.5]) * 2.0)
    graph2 = pa.make_graph(pa.grad(f), array_api_strict.asarray([0.0, 1.0]))
    assert_close(graph2(np.array([0.5, 1.5])), np.exp([0.5, 1.5]) * 2.0)


def test_graph_of_vmap_and_jacobian():
    x = _arr([0.3, 0.6])
    f = pa.jacrev(lambda v: xp.tanh(v) * v[0])
    graph = pa.make_graph(f, x)
    assert_close(graph(_arr([0.1, -0.4])), f(_arr([0.1, -0.4])))


def test_call_delegate_eager_traced_shapes_and_transforms():
    lowered = pa.make_graph(lambda v: xp.sin(v) * 3.0, _arr([0.0, 0.0])).lower()
    x = _arr([0.2, 0.4])
    assert_close(pa.call_delegate(lowered, x), _xp().sin(x) * 3.0)
    outer = pa.make_graph(lambda v: pa.call_delegate(lowered, v) + 1.0, x)
    assert [n.op.name for n in outer.nodes] == ["call_delegate", "add"]
    assert_close(outer(x), _xp().sin(x) * 3.0 + 1.0)
    shape = pa.eval_shape(lambda v: pa.call_delegate(lowered, v), x)
    assert shape.shape == (2,)
    assert_close(pa.grad(lambda v: xp.sum(pa.call_delegate(lowered, v)))(x), 3.0 * _xp().cos(x))
    tangent = pa.jvp(lambda v: pa.call_delegate(lowered, v), (x,), (_arr([1.0, 1.0]),))[1]
    assert_close(tangent, 3 * _xp().cos(x))
    check_vmap(lambda v: pa.call_delegate(lowered, v), (_xp().stack([x, 2 * x]),), 0)
    check_grads(lambda v: pa.call_delegate(lowered, v), (x,), order=2)


def test_call_delegate_rejects_non_graphs():
    with pytest.raises(TypeError, match="must be a Graph"):
        pa.call_delegate(lambda v: v, _arr([1.0]))


# ------------------------------------------------------------------------------ pre-dispatch graphs


def _pre_dispatch_example(x):
    y = xp.sin(x)
    g = pa.grad(lambda v: xp.sum(v * y * v))(x)  # y is a free variable of the grad body
    per_row = pa.vmap(lambda r: xp.sum(r * x))(xp.stack([x, 2 * x, 3 * x]))
    t = pa.jvp(lambda v: xp.exp(v), (x,), (y,))[1]
    return g + t + per_row[1] * x


def test_pre_dispatch_graph_records_transforms_and_replays():
    x = _arr([0.3, -0.2])
    graph = pa.make_graph(_pre_dispatch_example, x, pre_dispatch=True)
    kinds = [n.kind for n in graph.nodes if isinstance(n, TransformNode)]
    assert kinds == ["grad", "vmap", "jvp"]
    text = str(graph)
    assert "grad(" in text and "vmap(" in text and "free:" in text
    for values in ([0.5, 1.5], [-1.0, 0.25]):
        y = _arr(values)
        assert_close(graph(y), _pre_dispatch_example(y))


def test_pre_dispatch_graph_replays_across_backends_and_nests():
    import array_api_strict

    def f(batch):
        return pa.vmap(pa.grad(lambda r: xp.sum(xp.tanh(r) ** 2)))(batch)

    graph = pa.make_graph(f, np.ones((3, 2)), pre_dispatch=True)
    (node,) = graph.nodes
    assert node.kind == "vmap"
    assert [n.kind for n in node.body.nodes] == ["grad"]
    b = np.linspace(-1, 1, 6).reshape(3, 2)
    out = graph(array_api_strict.asarray(b))
    assert isinstance(out, array_api_strict._array_object.Array)
    assert_close(out, f(b))
    # and the replayed graph is itself transformable
    assert_close(pa.grad(lambda v: xp.sum(graph(v)))(b), pa.grad(lambda v: xp.sum(f(v)))(b))


def test_pre_dispatch_refuses_vjp_and_restores_state():
    def f(x):
        out, fn = pa.vjp(xp.sin, x)
        return fn(out)[0]

    with pytest.raises(NotImplementedError, match="returns a function"):
        pa.make_graph(f, _arr([1.0]), pre_dispatch=True)
    assert core.pre_dispatch_hook() is None and not predispatch._state.frames
    assert core.current_level() == 0
    # a pre_dispatch=False capture of the same function works
    g = pa.make_graph(f, _arr([1.0]))
    assert_close(g(_arr([0.5])), _xp().cos(_arr([0.5])) * _xp().sin(_arr([0.5])))


@pytest.mark.parametrize("construct", ["while_loop", "custom_root", "custom_linear_solve", "solve_ivp"])
def test_pre_dispatch_refuses_value_dependent_steps(construct):
    """A while loop or a solver records its Python steps one by one under a pre-dispatch capture: the
    graph would replay that fixed unrolling (a loop that doubled x = 1 six times doubled x = 50 six times
    too: 3200 where the loop gives 50). It refuses; a pre_dispatch=False capture holds one node, right on
    other inputs."""

    def doubling(x):
        return pa.while_loop(lambda v: xp.sum(v) < 100.0, lambda v: v * 2.0, x)

    def newton(f, x0):
        return pa.while_loop(lambda x: xp.abs(f(x)) > 1e-12, lambda x: x - f(x) / (3 * x**2), x0)

    def cube_root(a):
        return pa.custom_root(lambda x: x**3 - a, a, newton, lambda g, y: y / 3)

    def halve(b):
        return pa.custom_linear_solve(lambda v: 2.0 * v, b, lambda mv, r: r / 2.0)

    def decay(y0):
        return pa.integrate.solve_ivp(lambda t, y: -y, (0.0, 1.0), y0, rtol=1e-10, atol=1e-12).y[:, -1]

    f, x, other, want = {
        "solve_ivp": (decay, _arr([1.0, 2.0]), _arr([3.0, 4.0]), [3.0 * np.exp(-1.0), 4.0 * np.exp(-1.0)]),
        "while_loop": (doubling, _arr([1.0, 1.0]), _arr([50.0, 50.0]), [50.0, 50.0]),
        "custom_root": (cube_root, _arr(8.0), _arr(27.0), 3.0),
        "custom_linear_solve": (halve, _arr([1.0, 3.0]), _arr([4.0, 6.0]), [2.0, 3.0]),
    }[construct]
    with pytest.raises(NotImplementedError, match="cannot hold"):
        pa.make_graph(f, x, pre_dispatch=True)
    assert core.pre_dispatch_hook() is None and not predispatch._state.frames
    assert core.current_level() == 0
    assert_close(pa.make_graph(f, x)(other), np.asarray(want))


def test_a_branch_on_a_captured_value_warns_where_it_is_baked_in():
    """make_graph runs the function once: an ``if`` on a captured value bakes in the branch taken, and the
    graph replays it for other inputs (silently, until this warning); pa.cond keeps both branches."""
    x, other = _arr([1.0, 2.0]), _arr([-1.0, -2.0])

    def branchy(v):
        if xp.sum(v) > 0:  # the line the warning names
            return v * 2.0
        return v - 10.0

    with pytest.warns(pa.SpecializedGraphWarning, match=r"bool\(\) of a captured value") as record:
        graph = pa.make_graph(branchy, x)
    assert record[0].filename == __file__
    assert_close(graph(other), np.array([-2.0, -4.0]))  # the branch of x, not branchy(other)

    def with_cond(v):
        return pa.cond(xp.sum(v) > 0, lambda u: u * 2.0, lambda u: u - 10.0, v)

    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.SpecializedGraphWarning)
        graph = pa.make_graph(with_cond, x)
    assert_close(graph(other), np.array([-11.0, -12.0]))


def test_compiled_graph_matches_eager_on_each_backend():
    f = lambda v: xp.sum(xp.tanh(v) * xp.exp(-v * v))  # noqa: E731
    x = _arr([0.1, -0.4, 0.9])
    graph = pa.make_graph(pa.grad(f), x)
    compiled = graph.compile(pa.get_backend())
    assert "def replay(" in compiled.source and str(compiled) == compiled.source
    for values in ([0.3, 0.2, -1.0], [2.0, -2.0, 0.0]):
        y = _arr(values)
        out = compiled(y)
        assert dispatch.backend_of_array(out) is dispatch.default_backend()
        assert_close(out, pa.grad(f)(y))
    with pytest.raises(TypeError, match="takes 1"):
        compiled(x, x)


def test_compiled_graph_with_constants_and_multiple_outputs():
    W = _xp().reshape(_xp().arange(6, dtype=_xp().float64), (2, 3))

    def f(v):
        q, r = xp.linalg.qr(W.mT @ W + xp.eye(3) + v[:, None] * v[None, :])
        return xp.sum(r), q

    x = _arr([0.5, 0.1, -0.3])
    graph = pa.make_graph(f, x)
    compiled = graph.compile()
    got, want = compiled(x), f(x)
    assert_close(got[0], want[0])
    assert_close(got[1], want[1])


def test_compiled_grad_graph_skips_what_only_the_value_needed():
    f = lambda v: xp.sum(xp.sin(v) * xp.exp(-v * v) + xp.tanh(v))  # noqa: E731
    x = _arr([0.3, -1.2, 2.0])
    graph = pa.make_graph(pa.grad(f), x)
    compiled = graph.compile()
    calls = [line for line in compiled.source.splitlines() if " = k" in line]
    dead = {"sum", "add"} & {n.op.name for n in graph.nodes}
    assert dead and len(calls) < len(graph.nodes)  # the final add and sum of f are gone
    assert_close(compiled(x), pa.grad(f)(x))


# ------------------------------------------------------------------------------ input signatures


def _other_backend_array(values):
    if pa.get_backend() == "numpy":
        import array_api_strict

        return array_api_strict.asarray(values, dtype=array_api_strict.float64)
    return np.asarray(values, dtype=np.float64)


def test_compiled_graph_checks_its_input_signature():
    f = lambda v: xp.sum(xp.sin(v) * v)  # noqa: E731
    x = _arr([0.1, 0.2, 0.3])
    compiled = pa.make_graph(pa.grad(f), x).compile()
    with raises_cleanly(ValueError, "input 0", "shape (1,)", "expected shape (3,) and dtype float64"):
        compiled(_arr([1.0]))
    with raises_cleanly(TypeError, "input 0", "dtype int64", "float64"):
        compiled(_xp().asarray([1, 2, 3], dtype=_xp().int64))
    with raises_cleanly(TypeError, "input 0", "dtype float32"):
        compiled(_xp().asarray([1, 2, 3], dtype=_xp().float32))
    with raises_cleanly(TypeError, "input 0", "got a float"):
        compiled(1.0)
    with raises_cleanly(TypeError, "structure"):
        compiled({"x": x})
    with raises_cleanly(TypeError, "input 0", "compiled for", ".compile("):
        compiled(_other_backend_array([0.1, 0.2, 0.3]))
    assert_close(compiled(_arr([0.5, 1.0, 1.5])), pa.grad(f)(_arr([0.5, 1.0, 1.5])))  # still usable


def test_grad_of_a_compiled_graph_says_what_to_do():
    f = lambda v: xp.sum(xp.sin(v))  # noqa: E731
    x = _arr([0.1, 0.2])
    graph = pa.make_graph(f, x)
    compiled = graph.compile()
    with raises_cleanly(TypeError, "ReverseTensor", "pa.grad(graph)", "compile()"):
        pa.grad(compiled)(x)
    with raises_cleanly(TypeError, "BatchedTensor"):
        pa.vmap(compiled)(_xp().stack([x, x]))
    # what the message suggests works: the graph itself, or the compiled graph of grad
    assert_close(pa.grad(graph)(x), _xp().cos(x))
    assert_close(pa.make_graph(pa.grad(f), x).compile()(x), _xp().cos(x))


@pytest.mark.parametrize("pre_dispatch", [False, True])
def test_graph_replay_checks_its_input_signature(pre_dispatch):
    f = pa.grad(lambda v: xp.sum(v * v))
    x = _arr([1.0, 2.0, 3.0])
    graph = pa.make_graph(f, x, pre_dispatch=pre_dispatch)
    with raises_cleanly(TypeError, "input 0", "dtype int64"):
        graph(_xp().asarray([1, 2, 3], dtype=_xp().int64))  # not an int gradient
    with raises_cleanly(ValueError, "input 0", "shape (2,)"):
        graph(_arr([1.0, 2.0]))
    with raises_cleanly(TypeError, "takes 1 array"):
        graph(x, x)
    with raises_cleanly(TypeError, "structure"):
        graph([1.0, 2.0, 3.0])  # a list is a pytree of three leaves
    with raises_cleanly(TypeError, "input 0", "got a float"):
        graph(1.0)
    assert_close(graph(_arr([0.5, 1.0, 1.5])), np.asarray([1.0, 2.0, 3.0]))
    other = graph(_other_backend_array([0.5, 1.0, 1.5]))  # a graph still replays on any backend
    assert dispatch.backend_of_array(other).name != pa.get_backend()
    assert_close(other, np.asarray([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("pre_dispatch", [False, True])
def test_make_graph_refuses_non_array_inputs_naming_them(pre_dispatch):
    with raises_cleanly(TypeError, "make_graph", "argument 0 is a float", "pa.xp.asarray"):
        pa.make_graph(lambda v: v * 2, 1.0, pre_dispatch=pre_dispatch)
    with raises_cleanly(TypeError, "argument 1['scale'] is a str"):
        pa.make_graph(lambda v, d: v, _arr([1.0]), {"scale": "big"}, pre_dispatch=pre_dispatch)
    with raises_cleanly(TypeError, "func must be callable"):
        pa.make_graph("f", _arr([1.0]), pre_dispatch=pre_dispatch)


def test_eval_shape_of_python_numbers():
    """A Python number among the outputs is a shape like any output: a weakly typed 0-d ShapeDtype of the
    default dtype of its kind, as JAX's eval_shape gives (not its value)."""
    info = dispatch.default_backend().xp.__array_namespace_info__().default_dtypes()
    out = pa.eval_shape(lambda v: v * 2, 1.5)
    assert out == pa.ShapeDtype((), info["real floating"], weak_type=True) and out.weak_type
    out = pa.eval_shape(lambda v, s: (v * s, s + 1, 1j * s, s > 2), _arr([1.0, 2.0]), 3)
    assert out[0].shape == (2,) and not out[0].weak_type
    assert out[1] == pa.ShapeDtype((), info["integral"], weak_type=True)
    assert out[2] == pa.ShapeDtype((), info["complex floating"], weak_type=True)
    assert out[3].shape == () and not out[3].weak_type and "bool" in str(out[3].dtype)
    assert "weak_type=True" in repr(out[1])
    with raises_cleanly(TypeError, "eval_shape", "got a str"):
        pa.eval_shape(lambda v: "text", _arr([1.0]))
    with raises_cleanly(TypeError, "eval_shape(func", "callable"):
        pa.eval_shape(3, _arr([1.0]))

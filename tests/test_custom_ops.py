"""Custom ops: registration paths, the dispatcher's per-device choice, every transform and their nestings
through a custom op, missing-rule errors, overrides, graph capture and call_delegate."""

import itertools
import warnings

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import dispatch, xp
from polyad.testing import check_grads, check_vmap

_names = (f"test::op{i}" for i in itertools.count())


def _xp():
    return dispatch.default_backend().xp


def _arr(values):
    return _xp().asarray(values, dtype=_xp().float64)


def make_cube(with_rules=True):
    """x**3 * scale as a custom op with every rule registered (or none)."""

    @pa.custom_op(next(_names), mutates_args=())
    def cube(x, *, scale=1.0):
        return x * x * x * scale

    if with_rules:

        def setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.scale = inputs[1] if len(inputs) > 1 and inputs[1] is not None else 1.0

        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x * ctx.scale

        cube.register_autograd(backward, setup_context=setup)
        cube.register_jvp(lambda p, t, scale=1.0: (cube(p[0], scale=scale), 3 * p[0] * p[0] * t[0] * scale))
        cube.register_vmap(lambda info, dims, x, scale=1.0: (cube(x, scale=scale), dims[0]))
        cube.register_fake(lambda x, scale=1.0: x.__array_namespace__().empty_like(x))
    return cube


def test_default_kernel_runs_eagerly_on_raw_arrays():
    cube = make_cube()
    x = _arr([1.0, 2.0])
    out = cube(x, scale=2.0)
    assert dispatch.backend_of_array(out) is dispatch.default_backend()
    assert_close(out, _arr([2.0, 16.0]))


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap", "jacrev", "jacfwd", "hessian"])
def test_every_transform_through_a_custom_op(transform):
    cube = make_cube()
    x = _arr([0.5, -1.0, 2.0])
    f = lambda v: xp.sum(cube(v, scale=2.0))  # noqa: E731
    if transform == "grad":
        assert_close(pa.grad(f)(x), 6 * x * x)
    elif transform == "jvp":
        t = _arr([1.0, 2.0, 3.0])
        assert_close(pa.jvp(lambda v: cube(v, scale=2.0), (x,), (t,))[1], 6 * x * x * t)
    elif transform == "vmap":
        check_vmap(lambda v: cube(v, scale=2.0), (_xp().stack([x, 2 * x]),), 0)
    elif transform == "jacrev":
        assert_close(pa.jacrev(lambda v: cube(v))(x), to_numpy(np.diag(3 * to_numpy(x) ** 2)))
    elif transform == "jacfwd":
        assert_close(pa.jacfwd(lambda v: cube(v))(x), to_numpy(np.diag(3 * to_numpy(x) ** 2)))
    else:
        assert_close(pa.hessian(f)(x), np.diag(12 * to_numpy(x)))


def test_nestings_and_finite_differences():
    cube = make_cube()
    x = _arr([0.3, -0.7])
    check_grads(lambda v: cube(v, scale=1.5), (x,), order=2)
    # vmap of grad, grad of vmap, jvp of grad
    batch = _xp().stack([x, 2 * x])
    per_example = pa.vmap(pa.grad(lambda v: xp.sum(cube(v))))(batch)
    assert_close(per_example, 3 * batch * batch)
    assert_close(pa.grad(lambda b: xp.sum(pa.vmap(cube)(b)))(batch), 3 * batch * batch)
    t = _arr([1.0, 1.0])
    assert_close(pa.jvp(pa.grad(lambda v: xp.sum(cube(v))), (x,), (t,))[1], 6 * x)


def test_custom_vjp_and_jvp_together():
    """Unlike JAX's custom_vjp, a registered VJP does not block forward mode when a JVP is registered."""
    cube = make_cube()
    x = _arr([1.0, 2.0])
    assert_close(pa.jacfwd(pa.jacrev(lambda v: xp.sum(cube(v))))(x), np.diag(6 * to_numpy(x)))


def test_missing_rules_name_the_op_and_the_rule():
    cube = make_cube(with_rules=False)
    x = _arr([1.0, 2.0])
    with pytest.raises(NotImplementedError, match=rf"{cube.name}.*register_autograd"):
        pa.grad(lambda v: xp.sum(cube(v)))(x)
    with pytest.raises(NotImplementedError, match=rf"{cube.name}.*register_jvp"):
        pa.jvp(cube, (x,), (x,))
    with pytest.raises(NotImplementedError, match=rf"{cube.name}.*register_fake"):
        pa.eval_shape(cube, x)
    assert pa.core.current_level() == 0 if hasattr(pa, "core") else True
    from polyad.core import current_level

    assert current_level() == 0
    # vmap falls back to a loop, with one warning naming the op
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = pa.vmap(cube)(_xp().stack([x, x]))
        pa.vmap(cube)(_xp().stack([x, x]))
    assert_close(out, _xp().stack([x * x * x, x * x * x]))
    messages = [str(w.message) for w in caught if cube.name in str(w.message)]
    assert len(messages) == 1 and "loop" in messages[0]


def test_vmap_rule_receives_info():
    seen = []

    @pa.custom_op(next(_names))
    def double(x):
        return x * 2

    def rule(info, in_dims, x):
        seen.append((info.batch_size, info.randomness, in_dims))
        return double(x), in_dims[0]

    double.register_vmap(rule)
    pa.vmap(double, randomness="same")(_xp().ones((4, 2)))
    assert seen == [(4, "same", (0,))]


def test_eval_shape_uses_fake():
    cube = make_cube()
    out = pa.eval_shape(cube, _xp().ones((3, 2)))
    assert out.shape == (3, 2) and out.dtype == _xp().float64


def test_bad_names_and_duplicates():
    for bad in ("noseparator", "a::", "::b", "a::b c", 3):
        with pytest.raises(ValueError, match="namespace::op"):
            pa.custom_op(bad)(lambda x: x)
    name = next(_names)
    pa.custom_op(name)(lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        pa.custom_op(name)(lambda x: x)


def test_backward_with_wrong_output_count_is_an_error():
    @pa.custom_op(next(_names))
    def mul(x, y):
        return x * y

    mul.register_autograd(lambda ctx, g: g)  # one gradient for two inputs
    x = _arr([1.0])
    with pytest.raises(ValueError, match="backward returned 1 gradient"):
        pa.grad(lambda a: xp.sum(mul(a, x)))(x)


def test_jvp_rule_must_return_a_pair():
    @pa.custom_op(next(_names))
    def ident(x):
        return x

    ident.register_jvp(lambda p, t: t[0])
    x = _arr([1.0])
    with pytest.raises(TypeError, match=r"must return \(output, tangent\)"):
        pa.jvp(ident, (x,), (x,))


class _FakeCuda:
    """float32 arrays stand in for CUDA arrays."""

    def __enter__(self):
        self.undo = dispatch.register_device_type("cuda", lambda a: "float32" in str(a.dtype))

    def __exit__(self, *exc):
        self.undo()


def test_register_kernel_and_library_impl_choose_by_device():
    calls = []

    @pa.custom_op(next(_names))
    def twice(x):
        calls.append("default")
        return x * 2

    twice.register_kernel("cpu")(lambda x: calls.append("cpu") or x * 2)
    pa.library.impl(twice.name, "cuda", lambda x: calls.append("cuda") or x * 2)
    with _FakeCuda():
        f64 = _xp().ones(2, dtype=_xp().float64)
        f32 = _xp().ones(2, dtype=_xp().float32)
        twice(f64)
        twice(f32)
        twice.register_autograd(lambda ctx, g: 2 * g)
        pa.grad(lambda v: xp.sum(twice(v)))(f32)
    assert calls == ["cpu", "cuda", "cuda"]


def test_library_impl_as_decorator_and_unknown_name():
    @pa.custom_op(next(_names))
    def f(x):
        return x

    @pa.library.impl(f.name, device_types=("cpu",))
    def cpu_kernel(x):
        return x + 1

    assert_close(f(_arr([1.0])), _arr([2.0]))
    with pytest.raises(ValueError, match="no custom op named"):
        pa.library.impl("nope::nothing", "cpu", lambda x: x)


def test_override_kernel_and_rule_restored_on_exit():
    x = _arr([0.0, 1.0])
    seen = []

    def counting_sin(v):
        seen.append(1)
        return _xp().sin(v)

    with pa.library.override(pa.xp.sin, "cpu", counting_sin):
        pa.grad(lambda v: xp.sum(xp.sin(v)))(x)
    assert seen == [1]
    xp.sin(x)
    assert seen == [1]  # restored
    with pytest.raises(RuntimeError):
        with pa.library.override("sin", "vjp", lambda g, y, v: (g * 0,)):
            assert_close(pa.grad(lambda v: xp.sum(xp.sin(v)))(x), _arr([0.0, 0.0]))
            raise RuntimeError("inside")
    assert_close(pa.grad(lambda v: xp.sum(xp.sin(v)))(x), _xp().cos(x))


def test_fused_softplus_generic_kernel_and_rules():
    x = _arr([-30.0, -1.0, 0.0, 2.0, 40.0])
    ref = to_numpy(np.logaddexp(0.0, to_numpy(x)))
    assert_close(pa.fused.softplus(x), ref)
    check_grads(pa.fused.softplus, (x,), order=2)
    check_vmap(pa.fused.softplus, (_xp().stack([x, -x]),), 0)


@pytest.mark.cuda
def test_fused_softplus_cuda_kernel():
    import cupy

    calls = []
    op = pa.fused.softplus.op
    cuda_kernel = op.kernels["cuda"]
    op.kernels["cuda"] = lambda xp_, *a, **k: calls.append(1) or cuda_kernel(xp_, *a, **k)
    try:
        x = cupy.linspace(-5, 5, 11)
        out = pa.fused.softplus(x)
        assert calls == [1]
        np.testing.assert_allclose(cupy.asnumpy(out), np.logaddexp(0, np.linspace(-5, 5, 11)))
        g = pa.grad(lambda v: xp.sum(pa.fused.softplus(v)))(x)
        np.testing.assert_allclose(cupy.asnumpy(g), 1 / (1 + np.exp(-np.linspace(-5, 5, 11))))
    finally:
        op.kernels["cuda"] = cuda_kernel


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
    from polyad.predispatch import TransformNode

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
    from polyad import core, predispatch

    def f(x):
        out, fn = pa.vjp(xp.sin, x)
        return fn(out)[0]

    with pytest.raises(NotImplementedError, match="returns a function"):
        pa.make_graph(f, _arr([1.0]), pre_dispatch=True)
    assert core._pre_dispatch is None and not predispatch._state.frames
    assert core.current_level() == 0
    # a pre_dispatch=False capture of the same function works
    g = pa.make_graph(f, _arr([1.0]))
    assert_close(g(_arr([0.5])), _xp().cos(_arr([0.5])) * _xp().sin(_arr([0.5])))


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

"""Custom ops: registration paths, the dispatcher's per-device choice, every transform and their nestings
through a custom op, missing-rule errors, overrides. Graph capture and call_delegate: test_graph.py."""

import itertools
import warnings

import numpy as np
import pytest
from helpers import assert_close, native_device_type, to_numpy

import polyad as pa
from polyad import xp
from polyad.core import dispatch
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


def _device_types():
    """``(native, accelerator)``: the backend's own device type and the stand-in one ``_FakeCuda`` ranks
    above it ("cpu" and "cuda" on NumPy; on CuPy, whose arrays are "cuda" already, "cuda" and "accel")."""
    native = native_device_type()
    return native, "cuda" if native != "cuda" else "accel"


class _FakeCuda:
    """float32 arrays stand in for an accelerator's arrays (see ``_device_types``)."""

    def __enter__(self):
        native, accelerator = _device_types()
        self.undo = dispatch.register_device_type(
            accelerator, lambda a: "float32" in str(a.dtype), above=native
        )

    def __exit__(self, *exc):
        self.undo()


def test_register_kernel_and_library_impl_choose_by_device():
    calls = []

    @pa.custom_op(next(_names))
    def twice(x):
        calls.append("default")
        return x * 2

    native, accelerator = _device_types()
    twice.register_kernel(native)(lambda x: calls.append("cpu") or x * 2)
    pa.library.impl(twice.name, accelerator, lambda x: calls.append("cuda") or x * 2)
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

    @pa.library.impl(f.name, device_types=(native_device_type(),))
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

    with pa.library.override(pa.xp.sin, native_device_type(), counting_sin):
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
    assert_close(pa.custom_ops.softplus(x), ref)
    check_grads(pa.custom_ops.softplus, (x,), order=2)
    check_vmap(pa.custom_ops.softplus, (_xp().stack([x, -x]),), 0)


@pytest.mark.cuda
def test_fused_softplus_cuda_kernel():
    import cupy

    calls = []
    op = pa.custom_ops.softplus.op
    cuda_kernel = op.kernels["cuda"]
    op.kernels["cuda"] = lambda xp_, *a, **k: calls.append(1) or cuda_kernel(xp_, *a, **k)
    try:
        x = cupy.linspace(-5, 5, 11)
        out = pa.custom_ops.softplus(x)
        assert calls == [1]
        np.testing.assert_allclose(cupy.asnumpy(out), np.logaddexp(0, np.linspace(-5, 5, 11)))
        g = pa.grad(lambda v: xp.sum(pa.custom_ops.softplus(v)))(x)
        np.testing.assert_allclose(cupy.asnumpy(g), 1 / (1 + np.exp(-np.linspace(-5, 5, 11))))
    finally:
        op.kernels["cuda"] = cuda_kernel

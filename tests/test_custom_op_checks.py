"""What a custom op's user code hands polyad is checked where it arrives: gradients of register_autograd,
tangents of register_jvp, (output, out_dim) of register_vmap, kernel outputs, keyword metadata,
mutates_args, and (under ``polyad.config.check_custom_ops``) fake functions against kernels. A bad value
is an error naming the op, the rule and the input, never the answer of a transform; a value that is only
off by a broadcast or a dtype of the same kind is conformed, and the derivative is right."""

import itertools

import numpy as np
import pytest
from helpers import assert_close, native_device_type, raises_cleanly, to_numpy

import polyad as pa
from polyad import xp
from polyad.core import dispatch

_names = (f"checks::op{i}" for i in itertools.count())


def _bx():
    return dispatch.default_backend().xp


def _arr(values, dtype="float64"):
    return _bx().asarray(values, dtype=getattr(_bx(), dtype))


def _other_backend_array(values):
    """An array of a library other than the backend under test."""
    if pa.get_backend() == "numpy":
        import array_api_strict

        return array_api_strict.asarray(values)
    return np.asarray(values)


def _doubler(backward=None, jvp=None, vmap=None):
    """``2 * x`` as a custom op with the given rules."""

    @pa.custom_op(next(_names), mutates_args=())
    def double(x):
        return x * 2

    if backward is not None:
        double.register_autograd(backward)
    if jvp is not None:
        double.register_jvp(jvp)
    if vmap is not None:
        double.register_vmap(vmap)
    return double


def _grad_sum(op, x):
    return pa.grad(lambda v: xp.sum(op(v)))(x)


# ------------------------------------------------------------------------------ register_autograd


@pytest.mark.parametrize(
    "backward, exc, fragments",
    [
        (lambda ctx, g: g[:2], ValueError, ["shape (2,)", "input's shape (3,)"]),
        (lambda ctx, g: xp.sum(g), ValueError, ["shape ()", "input's shape (3,)"]),
        (lambda ctx, g: xp.astype(g, _bx().int64), TypeError, ["dtype int64", "float64"]),
        (lambda ctx, g: xp.astype(g, _bx().complex128), TypeError, ["complex128", "kind"]),
        (lambda ctx, g: "nope", TypeError, ["a str", "None or an array"]),
        (lambda ctx, g: [1.0, 2.0, 3.0], TypeError, ["a list"]),
        (lambda ctx, g: 2.0, TypeError, ["a float"]),
        (lambda ctx, g: (g, g), ValueError, ["returned 2 gradient(s) for 1 positional input(s)"]),
        (
            lambda ctx, g: _other_backend_array([1.0, 1.0, 1.0]),
            TypeError,
            ["array as the gradient", "compute it"],
        ),
    ],
    ids=["shape", "0-d", "int64", "complex", "str", "list", "float", "too-many", "other-library"],
)
def test_bad_gradients_are_errors_naming_op_rule_and_input(backward, exc, fragments):
    op = _doubler(backward=backward)
    with raises_cleanly(exc, op.name, "register_autograd's backward", "(x)", *fragments):
        _grad_sum(op, _arr([1.0, 2.0, 3.0]))


def test_gradient_of_another_float_dtype_is_cast_to_the_input_dtype():
    op = _doubler(backward=lambda ctx, g: xp.astype(g * 2, _bx().float32))
    g = _grad_sum(op, _arr([1.0, 2.0, 3.0]))
    assert g.dtype == _bx().float64
    assert_close(g, np.full(3, 2.0))
    # and the other way: a float64 gradient for a float32 input
    op32 = _doubler(backward=lambda ctx, g: xp.astype(g, _bx().float64) * 2)
    g32 = _grad_sum(op32, _arr([1.0, 2.0], "float32"))
    assert g32.dtype == _bx().float32
    assert_close(g32, np.full(2, 2.0, dtype=np.float32))


def test_gradient_of_the_broadcast_shape_is_summed_back_to_the_input():
    """mul(x, s) with s of shape (1,) and x of shape (2, 3): a backward that returns the output-shaped
    ``g * x`` for s is summed, as torch does; the result matches the analytic gradient sum(x)."""

    @pa.custom_op(next(_names))
    def mul(x, s):
        return x * s

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1])

    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * s, g * x  # the second has x's shape (2, 3), s has shape (1,)

    mul.register_autograd(backward, setup_context=setup)
    x = _arr([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    s = _arr([0.5])
    gx, gs = pa.grad(lambda a, b: xp.sum(mul(a, b) ** 2), argnums=(0, 1))(x, s)
    xn = to_numpy(x)
    assert_close(gx, 2 * xn * 0.5 * 0.5)
    assert_close(gs, np.asarray([np.sum(2 * xn * xn * 0.5)]))
    assert tuple(gs.shape) == (1,)
    # the sum is itself differentiable: d2/ds2 sum((x s)^2) = 2 sum(x^2)
    hess = pa.jacrev(pa.grad(lambda b: xp.sum(mul(x, b) ** 2)))(s)
    assert_close(hess, np.asarray([[2 * np.sum(xn * xn)]]))


def test_trailing_none_gradients_for_keyword_inputs_are_accepted():
    """torch's layout: one gradient per input, keyword-only ones included (None)."""

    @pa.custom_op(next(_names))
    def scaled(x, *, scale=1.0):
        return x * scale

    def setup(ctx, inputs, output):
        ctx.scale = inputs[1]

    scaled.register_autograd(lambda ctx, g: (g * ctx.scale, None), setup_context=setup)
    assert_close(pa.grad(lambda v: xp.sum(scaled(v, scale=3.0)))(_arr([1.0, 2.0])), np.full(2, 3.0))
    scaled.register_autograd(lambda ctx, g: (g, g), setup_context=setup)
    with raises_cleanly(ValueError, "returned 2 gradient(s) for 1 positional input(s) (x)"):
        pa.grad(lambda v: xp.sum(scaled(v, scale=3.0)))(_arr([1.0, 2.0]))


@pytest.mark.filterwarnings("ignore::polyad.transforms.batching.LoopFallbackWarning")
def test_checked_gradients_under_vmap_and_second_order():
    """The checks see logical shapes under vmap and run on tensors of outer levels (higher order)."""
    op = _doubler(backward=lambda ctx, g: xp.astype(g * 2, _bx().float32))
    batch = _arr([[1.0, 2.0], [3.0, 4.0]])
    per_example = pa.vmap(lambda v: _grad_sum(op, v))(batch)
    assert_close(per_example, np.full((2, 2), 2.0))

    @pa.custom_op(next(_names))
    def cube(x):
        return x * x * x

    cube.register_autograd(
        lambda ctx, g: xp.astype(3 * g * ctx.saved_tensors[0] ** 2, _bx().float32),
        setup_context=lambda ctx, inputs, out: ctx.save_for_backward(inputs[0]),
    )
    x = _arr([0.5, -1.0])
    # the float32 gradient is cast back to float64, a differentiable op: the Hessian is 6x (to float32
    # precision, where the gradient was rounded)
    assert_close(pa.jacrev(pa.grad(lambda v: xp.sum(cube(v))))(x), np.diag(6 * to_numpy(x)), rtol=1e-6)


# ------------------------------------------------------------------------------ register_jvp


@pytest.mark.parametrize(
    "tangent, exc, fragments",
    [
        (lambda p, t: t[0][:1], ValueError, ["shape (1,)", "output's shape (2,)"]),
        (lambda p, t: xp.astype(t[0], _bx().int64), TypeError, ["int64"]),
        (lambda p, t: "nope", TypeError, ["a str"]),
        (lambda p, t: _other_backend_array([1.0, 1.0]), TypeError, ["array as the tangent"]),
    ],
    ids=["shape", "int64", "str", "other-library"],
)
def test_bad_tangents_are_errors(tangent, exc, fragments):
    op = _doubler(jvp=lambda p, t: (p[0] * 2, tangent(p, t)))
    x = _arr([1.0, 2.0])
    with raises_cleanly(exc, op.name, "register_jvp's rule", "the tangent", *fragments):
        pa.jvp(op, (x,), (x,))


def test_tangent_of_another_float_dtype_is_cast_to_the_output_dtype():
    op = _doubler(jvp=lambda p, t: (p[0] * 2, xp.astype(t[0] * 2, _bx().float32)))
    x = _arr([1.0, 2.0])
    out, tan = pa.jvp(op, (x,), (_arr([1.0, -1.0]),))
    assert tan.dtype == _bx().float64
    assert_close(tan, np.asarray([2.0, -2.0]))
    assert_close(pa.jacfwd(op)(x), 2 * np.eye(2))


# ------------------------------------------------------------------------------ register_vmap


@pytest.mark.parametrize(
    "rule, exc, fragments",
    [
        (lambda info, dims, x: x * 2, TypeError, ["must return (output, out_dim)"]),
        (lambda info, dims, x: (x * 2, 5), ValueError, ["out_dim=5", "out of range"]),
        (lambda info, dims, x: (x * 2, True), TypeError, ["out_dim=True"]),
        (lambda info, dims, x: (x * 2, "0"), TypeError, ["out_dim='0'"]),
        (lambda info, dims, x: (x[:1, ...] * 2, 0), ValueError, ["entries there; the batch has 3"]),
        (lambda info, dims, x: ("nope", 0), TypeError, ["a str as the output"]),
    ],
    ids=["not-a-pair", "out-of-range", "bool", "str", "wrong-size", "not-an-array"],
)
def test_bad_batching_results_are_errors(rule, exc, fragments):
    op = _doubler(vmap=rule)
    with raises_cleanly(exc, op.name, "register_vmap's rule", *fragments):
        pa.vmap(op)(_arr([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))


def test_negative_out_dim_counts_from_the_end():
    op = _doubler(vmap=lambda info, dims, x: (xp.moveaxis(x, dims[0], -1) * 2, -1))
    batch = _arr([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert_close(pa.vmap(op)(batch), 2 * to_numpy(batch))  # the loop's answer: 2x per example


# ------------------------------------------------------------------------------ kernels, registration


def test_kernel_output_must_be_one_array_of_the_inputs_library():
    native = native_device_type()  # "cpu" on NumPy, "cuda" on CuPy
    op = _doubler()
    op.register_kernel(native, lambda x: [1.0, 2.0])
    with raises_cleanly(TypeError, op.name, f"kernel for '{native}'", "returned a list"):
        xp.sum(op(_arr([1.0, 2.0])))
    op2 = _doubler()
    op2.register_kernel(native, lambda x: _other_backend_array([1.0, 2.0]))
    with raises_cleanly(TypeError, op2.name, "array", pa.get_backend()):
        op2(_arr([1.0, 2.0]))

    @pa.custom_op(next(_names))
    def pair(x):
        return (x, x)

    with raises_cleanly(TypeError, pair.name, "default kernel", "a tuple"):
        pair(_arr([1.0]))


def test_register_kernel_and_rules_refuse_bad_arguments():
    op = _doubler()
    with raises_cleanly(TypeError, "device_types=3", "device type"):
        op.register_kernel(3, lambda x: x)
    with raises_cleanly(TypeError, "device_types=()"):
        op.register_kernel((), lambda x: x)
    with raises_cleanly(ValueError, "unknown device type 'tpu'"):
        op.register_kernel("tpu", lambda x: x)
    with raises_cleanly(TypeError, "kernel must be callable"):
        op.register_kernel("cpu", "not a function")
    for method in ("register_jvp", "register_vmap", "register_fake", "register_autograd"):
        with raises_cleanly(TypeError, f"{op.name}.{method}"):
            getattr(op, method)(42)
    with raises_cleanly(TypeError, "impl must be callable"):
        with pa.library.override(op, "vjp", 42):
            pass
    assert_close(op(_arr([1.0])), np.asarray([2.0]))  # nothing was registered by the failed calls


def test_a_transform_tensor_as_keyword_metadata_is_an_error_naming_it():
    @pa.custom_op(next(_names))
    def scale_by(x, *, w=None):
        return x * (1.0 if w is None else w)

    scale_by.register_autograd(lambda ctx, g: g)
    scale_by.register_vmap(lambda info, dims, x, w=None: (scale_by(x, w=w), dims[0]))
    x = _arr([1.0, 2.0])
    with raises_cleanly(TypeError, scale_by.name, "keyword argument w", "ReverseTensor", "positional"):
        pa.grad(lambda v: xp.sum(scale_by(v, w=v)))(x)
    with raises_cleanly(TypeError, "keyword argument w", "BatchedTensor"):
        pa.vmap(lambda v: scale_by(v, w=v))(_bx().stack([x, x]))
    with raises_cleanly(TypeError, "keyword argument w", "DualTensor"):
        pa.jvp(lambda v: scale_by(v, w=v), (x,), (x,))
    # a raw array as metadata is a constant, as before
    assert_close(pa.grad(lambda v: xp.sum(scale_by(v, w=_arr([3.0, 3.0]))))(x), np.ones(2))
    assert_close(scale_by(x, w=_arr([3.0, 3.0])), np.asarray([3.0, 6.0]))


# ------------------------------------------------------------------------------ mutates_args


def test_mutates_args_names_are_checked_against_the_signature():
    with raises_cleanly(ValueError, "'nope' is not a positional parameter"):
        pa.custom_op(next(_names), mutates_args=("nope",))(lambda x: x)
    with raises_cleanly(ValueError, "'scale' is not a positional parameter"):
        pa.custom_op(next(_names), mutates_args=("scale",))(lambda x, *, scale=1.0: x)
    with raises_cleanly(TypeError, "mutates_args must be a tuple of argument names"):
        pa.custom_op(next(_names), mutates_args="out")(lambda out: out)
    with raises_cleanly(TypeError, "mutates_args"):
        pa.custom_op(next(_names), mutates_args=(3,))(lambda out: out)


def test_a_mutating_op_runs_eagerly_and_refuses_transforms():
    @pa.custom_op(next(_names), mutates_args=("out",))
    def fill_sin(x, out):
        out[...] = _bx().sin(x)
        return out

    x, out = _arr([0.0, 1.0]), _arr([0.0, 0.0])
    fill_sin(x, out)
    assert_close(out, np.sin([0.0, 1.0]))
    for transform in (
        lambda: pa.grad(lambda v: xp.sum(fill_sin(v, out)))(x),
        lambda: pa.jvp(lambda v: fill_sin(v, out), (x,), (x,)),
        lambda: pa.vmap(lambda v: fill_sin(v, out))(_bx().stack([x, x])),
        lambda: pa.make_graph(lambda v: fill_sin(v, out), x),
    ):
        with raises_cleanly(
            NotImplementedError, fill_sin.name, "mutates_args=('out',)", "outside transforms"
        ):
            transform()


# ------------------------------------------------------------------------------ debug: fake vs kernel


@pytest.fixture
def checking(monkeypatch):
    monkeypatch.setattr(pa.config, "check_custom_ops", True)


@pytest.mark.filterwarnings("ignore::polyad.transforms.batching.LoopFallbackWarning")
def test_fake_is_compared_with_the_kernel_under_the_debug_switch(checking):
    op = _doubler()
    op.register_fake(lambda x: x.__array_namespace__().empty((1,), dtype=x.dtype))
    with raises_cleanly(
        ValueError, op.name, "fake function gives shape (1,)", "default kernel returned shape (2,)"
    ):
        op(_arr([1.0, 2.0]))
    op.register_fake(lambda x: x.__array_namespace__().empty(x.shape, dtype=x.__array_namespace__().float32))
    with raises_cleanly(TypeError, "fake function gives dtype float32", "returned dtype float64"):
        op(_arr([1.0, 2.0]))
    op.register_fake(lambda x: x.__array_namespace__().empty_like(x))
    assert_close(op(_arr([1.0, 2.0])), np.asarray([2.0, 4.0]))
    # kernels chosen per device are checked too, also inside a transform
    native = native_device_type()
    op.register_kernel(native, lambda x: x[:1] * 2)
    with raises_cleanly(ValueError, f"kernel for '{native}' returned shape (1,)"):
        pa.vmap(op)(_arr([[1.0, 2.0], [3.0, 4.0]]))


def test_fake_mismatch_passes_unseen_without_the_switch():
    op = _doubler()
    op.register_fake(lambda x: x.__array_namespace__().empty((1,), dtype=x.dtype))
    assert not pa.config.check_custom_ops
    assert_close(op(_arr([1.0, 2.0])), np.asarray([2.0, 4.0]))
    assert pa.eval_shape(op, _arr([1.0, 2.0])).shape == (1,)  # what the fake says, checked only on demand


def test_undeclared_writes_are_caught_under_the_debug_switch(checking):
    @pa.custom_op(next(_names))
    def sneaky(x, buf):
        buf[...] = 0.0
        return x * 2

    x, buf = _arr([1.0, float("nan")]), _arr([1.0, 2.0])
    with raises_cleanly(ValueError, sneaky.name, "wrote to input 1 (buf)", "mutates_args=('buf',)"):
        sneaky(x, buf)

    @pa.custom_op(next(_names), mutates_args=("buf",))
    def declared(x, buf):
        buf[...] = 0.0
        return x * 2

    out = declared(x, _arr([1.0, 2.0]))  # declared: fine; NaN inputs compare equal to themselves
    assert to_numpy(out)[0] == 2.0

"""Every way a value leaves a transform (polyad/core/tensor.py): arrays, DLPack, the buffer protocol, pickle
refuse a transform's tensor and let plain ones through; copies keep the derivative; Python numbers keep
it where they come back to polyad, and a lost one warns; vmap's conversions return the common value of
agreeing examples; a tracer used from another thread is refused.

References: analytic derivatives, central finite differences and per-example loops on plain arrays."""

import copy
import math
import operator
import pickle
import threading
import warnings

import numpy as np
import pytest
from helpers import assert_close, to_numpy
from helpers import raises_cleanly as _raises

import polyad as pa
from polyad import core
from polyad.core import dispatch

xp = pa.xp
BX = dispatch.default_backend().xp


def arr(values, dtype=None):
    return BX.asarray(values, dtype=BX.float64 if dtype is None else dtype)


def fd_grad(f, x, eps=1e-6):
    """Central differences of the real scalar ``f`` (which may return a Python float) at ``x``."""
    xn = to_numpy(x)
    out = np.zeros_like(xn)
    for idx in np.ndindex(xn.shape):
        e = np.zeros_like(xn)
        e[idx] = eps
        hi, lo = pa.Tensor(BX.asarray(xn + e)), pa.Tensor(BX.asarray(xn - e))  # plain tensors have item()
        out[idx] = (float(f(hi)) - float(f(lo))) / (2 * eps)
    return out


X = [0.3, -1.2, 2.0]


def _inside(transform, body):
    """Run ``body(tracer)`` inside ``transform`` ("grad", "jvp", "vmap") on a tracer of X."""
    x = arr(X)

    def f(v):
        body(v)
        return xp.sum(v * v)

    if transform == "grad":
        return pa.grad(f)(x)
    if transform == "jvp":
        return pa.jvp(f, (x,), (arr([1.0, 1.0, 1.0]),))
    return pa.vmap(lambda v: body(v) or v * 2.0)(BX.stack([x, x]))


TRANSFORM_NAMES = {"grad": "grad", "jvp": "jvp", "vmap": "vmap"}

# ------------------------------------------------------------------------------ arrays: refused inside

ARRAY_EXITS = {
    "np.asarray": (lambda t: np.asarray(t), "np.asarray()"),
    "np.array": (lambda t: np.array(t), "np.asarray()"),
    "np.from_dlpack": (lambda t: np.from_dlpack(t), "from_dlpack"),
    "__dlpack__": (lambda t: t.__dlpack__(), "__dlpack__"),
    "buffer": (lambda t: t.__buffer__(0), "buffer protocol"),
    "pickle": (lambda t: pickle.dumps(t), "pickle"),
    "pickle dict": (lambda t: pickle.dumps({"w": [t]}), "pickle"),
    "concrete": (lambda t: t.concrete(), "concrete()"),
}


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
@pytest.mark.parametrize("exit_name", sorted(ARRAY_EXITS))
def test_array_exits_refuse_a_transforms_tensor(transform, exit_name):
    leave, what = ARRAY_EXITS[exit_name]
    with _raises(TypeError, what, TRANSFORM_NAMES[transform], "refused", "polyad.xp"):
        _inside(transform, leave)


def test_from_dlpack_of_a_tracer_no_longer_gives_a_constant():
    # the reported bug: grad(sum(from_dlpack(a) * a)) was a, not 2a; NumPy's import is refused, polyad's keeps
    a = arr(X)
    with _raises(TypeError, "from_dlpack", "grad"):
        pa.grad(lambda v: xp.sum(np.from_dlpack(v) * v))(a)
    assert_close(pa.grad(lambda v: xp.sum(xp.from_dlpack(v) * v))(a), 2 * to_numpy(a))


def test_plain_and_fresh_tensors_leave_freely():
    raw = arr(X)
    t = pa.Tensor(raw)
    assert_close(np.asarray(to_numpy(t)), np.array(X))
    assert_close(pickle.loads(pickle.dumps(t)), raw)
    assert type(pickle.loads(pickle.dumps(t))) is pa.Tensor
    seen = {}

    def f(v):
        made = xp.full(3, 1.5, dtype=v.dtype)  # made inside: a constant, no tensor of the transform
        assert type(made) is core.FreshTensor
        seen["pickled"] = pickle.loads(pickle.dumps(made))
        seen["copy"] = copy.deepcopy(made)
        seen["float"], seen["list"] = float(made[0]), made.tolist()
        return xp.sum(v * made)

    assert_close(pa.grad(f)(raw), np.full(3, 1.5))
    assert_close(seen["pickled"], np.full(3, 1.5))
    assert type(seen["copy"]) is core.FreshTensor
    assert type(seen["float"]) is float and seen["float"] == 1.5 and seen["list"] == [1.5] * 3


def test_numpy_accepts_plain_tensors_of_numpy():
    if dispatch.default_backend().name != "numpy":
        pytest.skip("NumPy imports only its own arrays through __array__/DLPack here")
    t = pa.Tensor(np.array(X))
    np.testing.assert_array_equal(np.asarray(t), X)
    np.testing.assert_array_equal(np.from_dlpack(t), X)
    np.testing.assert_array_equal(np.frombuffer(t.__buffer__(0), dtype=np.float64), X)


def test_escaped_tracer_refuses_every_exit():
    leaked = []
    pa.grad(lambda v: (leaked.append(v), xp.sum(v))[1])(arr(X))
    for leave in (float, bool, operator.methodcaller("item"), np.asarray, pickle.dumps, copy.deepcopy):
        with _raises(RuntimeError, "escaped", "ReverseInterpreter"):
            leave(leaked[0])


# ------------------------------------------------------------------------------ copies keep the derivative


def test_deepcopy_inside_grad_differentiates():
    x = arr(X)
    xn = to_numpy(x)

    def f(v):
        c = copy.deepcopy(v)
        assert c is not v and isinstance(c, pa.Tensor)
        return xp.sum(c * v)

    assert_close(pa.grad(f)(x), 2 * xn)

    def g(v):  # a dict of tracers: each copy keeps its own derivative
        d = copy.deepcopy({"a": v, "b": [v * 2.0, 3.0], "same": v})
        assert d["a"] is d["same"]  # deepcopy's memo: one copy of one object
        return xp.sum(d["a"] * d["b"][0]) * d["b"][1]

    assert_close(pa.grad(g)(x), 12 * xn)
    assert_close(pa.grad(lambda v: xp.sum(copy.copy(v) * v))(x), 2 * xn)
    assert_close(pa.grad(pa.grad(lambda v: copy.deepcopy(v) ** 3))(arr(2.0)), np.asarray(12.0))


def test_deepcopy_inside_jvp_and_vmap_stays_inside():
    x, t = arr(X), arr([1.0, -1.0, 0.5])
    out, tan = pa.jvp(lambda v: copy.deepcopy({"k": v**2})["k"], (x,), (t,))
    assert_close(tan, 2 * to_numpy(x) * to_numpy(t))
    assert type(tan) is type(x)  # a backend array comes back, not a DualTensor
    batch = BX.stack([x, 2 * x])
    got = pa.vmap(lambda v: copy.deepcopy({"k": [v * 3.0]}))(batch)
    assert type(got["k"][0]) is type(x)
    assert_close(got["k"][0], 3 * to_numpy(batch))
    assert_close(pa.vmap(copy.deepcopy)(batch), to_numpy(batch))


def test_deepcopy_and_copy_of_plain_tensors():
    t = pa.Tensor(arr(X))
    d = copy.deepcopy(t)
    assert type(d) is pa.Tensor and d is not t
    assert_close(d, to_numpy(t))
    assert type(copy.copy(t)) is pa.Tensor


# ------------------------------------------------------------------------------ Python numbers


def test_float_returned_or_passed_back_keeps_the_derivative():
    x = arr(X)
    xn = to_numpy(x)
    # returned: the number is its tensor again at the output
    assert_close(pa.grad(lambda v: float(xp.sum(v**3)))(x), 3 * xn**2)
    # met by an op (reflected operator, xp function, asarray, full)
    assert_close(pa.grad(lambda v: xp.sum(float(xp.sum(v)) * v))(x), np.full(3, 2 * xn.sum()))
    f = lambda v: xp.sin(xp.asarray(float(v[0] * v[1])))  # noqa: E731
    assert_close(pa.grad(f)(x), fd_grad(f, x), rtol=1e-6)
    g = lambda v: xp.sum(xp.full((2,), float(v[2])) * v[:2])  # noqa: E731
    assert_close(pa.grad(g)(x), fd_grad(g, x), rtol=1e-6)
    # forward mode and nested levels
    _, tan = pa.jvp(lambda v: float(xp.sum(xp.exp(v))), (x,), (arr([1.0, 0.0, 2.0]),))
    assert_close(tan, np.asarray(np.exp(xn[0]) + 2 * np.exp(xn[2])))
    assert_close(pa.grad(pa.grad(lambda s: float(s**4)))(arr(1.5)), np.asarray(12 * 1.5**2))


def test_branching_on_numbers_is_exact_and_quiet():
    def f(v):
        assert f"{v[0]:.1f}|{v[0].item():.1f}" == f"{v[0].item():.1f}|{float(v[0]):.1f}"  # formatting is fine
        if float(v[0]) > 0 and int(v[1] * 0.0 + 2.0) == 2 and bool(v[2] > 1.0):
            return xp.sum(v**2)
        return xp.sum(-v)

    x = arr(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.DerivativeLostWarning)
        assert_close(pa.grad(f)(x), 2 * to_numpy(x))
        assert_close(pa.grad(f)(-x), -np.ones(3))
        # a branch to an output that does not depend on the inputs: the number only compared, nothing lost
        assert_close(pa.grad(lambda v: xp.asarray(1.0) if float(v[0]) > 0 else v[0])(x), np.zeros(3))


def _log_var_term(v):
    # scipy.stats.boxcox_llf's pattern: a math function of a traced value, in arithmetic
    return xp.sum(v**2) - 2 * math.log(abs(v[0]))


def _stored_then_compared(v):
    tol = float(v[1]) * 1e-3  # a number kept in a variable, only compared later
    if float(v[0]) > tol:
        return xp.sum(v**2)
    return xp.sum(v)


def _stored_then_computed(v):
    scale = float(v[1])
    return xp.sum(v) * (scale * 2.0)  # arithmetic on the plain number: its derivative is lost


def test_a_lost_derivative_is_reported_with_its_line_even_when_the_output_depends_on_the_inputs():
    x = arr(X)
    line = _log_var_term.__code__.co_firstlineno + 2
    with pytest.warns(pa.DerivativeLostWarning, match=rf"math\.log\(\) at .*test_exits\.py:{line}"):
        g = pa.grad(_log_var_term)(x)
    assert_close(g, 2 * to_numpy(x))  # the math.log term is missing: what the warning says
    line = _stored_then_computed.__code__.co_firstlineno + 1
    with pytest.warns(pa.DerivativeLostWarning, match=rf"float\(\) at .*test_exits\.py:{line}"):
        pa.grad(_stored_then_computed)(x)
    with pytest.warns(pa.DerivativeLostWarning, match="derivative was lost"):
        pa.jvp(_log_var_term, (x,), (arr([1.0, 0.0, 0.0]),))
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.DerivativeLostWarning)
        assert_close(pa.grad(_stored_then_compared)(x), 2 * to_numpy(x))
        # a value that carries no derivative loses nothing: math on it is quiet
        assert_close(pa.grad(lambda v: xp.sum(v) * math.log(abs(pa.stop_gradient(v[0]))))(x),
                     np.full(3, math.log(abs(X[0]))))  # fmt: skip


def test_int_and_round_have_zero_derivative():
    # int() of a float value is piecewise constant: the exact derivative is zero (away from integers)
    def f(v):
        n = int(v[0] * 7.0)
        assert type(n) is int
        return xp.sum(v * n) + round(float(v[1]))

    x = arr(X)
    assert_close(pa.grad(f)(x), fd_grad(f, x), atol=1e-6)
    assert_close(pa.grad(f)(x), np.full(3, 2.0))


def test_complex_numbers_keep_the_derivative():
    z = BX.asarray([1.0 + 2.0j, -0.5 + 0.25j])
    t = BX.asarray([0.5 - 1.0j, 1.0 + 0.0j])
    zn, tn = to_numpy(z), to_numpy(t)
    _, tan = pa.jvp(lambda v: v * v[1].item(), (z,), (t,))
    assert_close(tan, tn * zn[1] + zn * tn[1])
    _, tan = pa.jvp(lambda v: v[0].item() ** 2, (z,), (t,))
    assert_close(tan, np.asarray(2 * zn[0] * tn[0]))
    # complex() cannot be followed (CPython rebuilds the number): it says so
    with pytest.warns(pa.DerivativeLostWarning, match=r"complex\(\) of a value inside jvp.*item"):
        assert pa.jvp(lambda v: (complex(v[0]), v)[1], (z,), (t,))[0] is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.DerivativeLostWarning)
        assert pa.vmap(lambda v: v * complex(v[0] * 0.0 + 1.0))(BX.stack([z, z])) is not None


def test_item_and_tolist_give_traced_numbers():
    x = arr(X)
    xn = to_numpy(x)
    seen = {}

    def f(v):
        a = v[0].item()
        seen["type"], seen["value"] = type(a), a
        b = (a**2 + 1.0) / 2.0 - 3.0 * a  # Python arithmetic on it stays traced
        return xp.sum(v * b) + sum(v.tolist())  # so does the builtin sum of tolist()

    g = pa.grad(f)(x)
    assert seen["type"] is pa.TracedFloat and seen["value"] == xn[0]
    assert isinstance(seen["value"], float)  # still a float to Python
    assert_close(g, fd_grad(f, x), rtol=1e-6)
    # after the transform a traced number is a plain float again
    late = seen["value"] * 2.0
    assert type(late) is float and late == 2 * xn[0]
    assert math.isclose(np.exp(seen["value"]), math.exp(xn[0]))
    assert pickle.loads(pickle.dumps(seen["value"])) == xn[0]

    h = lambda v: xp.sum(xp.asarray(v.tolist()) ** 3)  # noqa: E731
    assert_close(pa.grad(h)(x), 3 * xn**2)
    _, tan = pa.jvp(lambda v: v[1].item() * v, (x,), (arr([1.0, 1.0, 1.0]),))
    assert_close(tan, xn[1] + xn)
    assert pa.Tensor(arr(X)).tolist() == X and pa.Tensor(arr([2.5])).item() == 2.5


def test_traced_numbers_meet_numpy():
    x = arr(X)

    def f(v):
        w = np.array([1.0, 2.0, 3.0])
        return xp.sum(w * v[0].item() + v)  # NumPy arithmetic with a traced number: a polyad tensor

    if dispatch.default_backend().name == "numpy":
        assert_close(pa.grad(f)(x), np.array([7.0, 1.0, 1.0]))
    with _raises(TypeError, "NumPy's exp", "polyad.xp.exp"):
        pa.grad(lambda v: xp.sum(v) * np.exp(v[0].item()))(x)


def test_lost_derivative_warns_naming_the_conversion():
    x = arr(X)

    def f(v):
        s = float(xp.sum(v**2))
        return xp.asarray(math.exp(s) * 0.0 + s * 2.0)  # Python arithmetic: polyad never sees it again

    with pytest.warns(pa.DerivativeLostWarning, match=r"float\(\) at .*test_exits.py"):
        g = pa.grad(f)(x)
    assert_close(g, np.zeros(3))  # the warning is the point: this zero is not the derivative
    with pytest.warns(pa.DerivativeLostWarning, match="item"):
        pa.jvp(lambda v: xp.asarray(math.sin(v[0].item())), (x,), (x,))


def test_a_number_as_an_op_parameter_is_refused():
    x = arr(X)
    with _raises(TypeError, "parameter ord", "vector_norm", "grad"):
        pa.grad(lambda v: xp.linalg.vector_norm(v, ord=float(v[0] * 0.0 + 3.0)))(x)


def test_numbers_take_the_dtype_of_the_array_they_meet():
    x32 = arr(X, BX.float32)
    out = pa.jvp(lambda v: v * float(xp.astype(v[0], BX.float64)), (x32,), (x32,))
    assert out[0].dtype == BX.float32 and out[1].dtype == BX.float32
    assert_close(out[1], 2 * to_numpy(x32) * np.float32(X[0]), rtol=1e-6)


# ------------------------------------------------------------------------------ vmap: agreeing examples


def _validated_sqrt(v):
    if xp.any(v < 0):  # input validation: the same answer for every example
        raise ValueError("negative input")
    n = int(xp.sum(v * 0.0 + 1.0))  # a size: the same for every example
    return xp.sqrt(v) * float(n)


def _loop(f, batch):
    return np.stack([to_numpy(f(batch[i, ...])) for i in range(batch.shape[0])])


def test_vmap_conversions_of_agreeing_examples_return_the_common_value():
    batch = arr([[1.0, 4.0, 9.0], [0.25, 2.0, 16.0]])
    assert_close(pa.vmap(_validated_sqrt)(batch), _loop(_validated_sqrt, batch))
    # nested vmap, vmap of grad, and grad of vmap
    deep = BX.stack([batch, batch * 4.0])
    looped = np.stack([_loop(_validated_sqrt, deep[i, ...]) for i in range(2)])
    assert_close(pa.vmap(pa.vmap(_validated_sqrt))(deep), looped)
    g = pa.vmap(pa.grad(lambda v: xp.sum(_validated_sqrt(v))))(batch)
    assert_close(g, 3 * 0.5 / np.sqrt(to_numpy(batch)))
    h = pa.grad(lambda v: xp.sum(pa.vmap(_validated_sqrt)(v)))(batch)
    assert_close(h, g)

    def scalars(v):
        common = v[0] * 0.0 + 2.5  # the same in every example
        assert float(common) == 2.5 and common.item() == 2.5 and [1, 2, 3][int(common) - 1] == 2
        assert operator.index(xp.astype(common, BX.int64)) == 2
        assert common.tolist() == 2.5 and bool(xp.isnan(v[0] * xp.nan))
        assert math.isnan(float(v[0] * xp.nan))  # NaN agrees with NaN
        assert f"{common:.2f}" == "2.50"
        return v * float(common)

    assert_close(pa.vmap(scalars)(batch), 2.5 * to_numpy(batch))


def test_vmap_conversions_of_differing_examples_name_the_operation():
    batch = arr([[1.0, 4.0, 9.0], [1.0, -2.0, 16.0]])
    with _raises(pa.ConcretizationError, "bool()", "differs", "xp.where", "chunk_size=1"):
        pa.vmap(_validated_sqrt)(batch)
    with pytest.raises(ValueError, match="negative input"):  # the per-example loop raises the user's error
        pa.vmap(_validated_sqrt, chunk_size=1)(batch)
    for convert, name in ((float, "float()"), (operator.methodcaller("item"), "item()"), (int, "int()")):
        with _raises(pa.ConcretizationError, name, "chunk_size=1"):
            pa.vmap(lambda v, c=convert: v * c(v[1]))(batch)


# ------------------------------------------------------------------------------ threads


def test_a_tracer_used_from_another_thread_is_refused():
    x = arr(X)
    errors, tape_sizes = [], []

    def other_thread(v):
        for use in (xp.sin, float, np.asarray, lambda t: t + 1.0):
            try:
                use(v)
            except RuntimeError as exc:
                errors.append(str(exc))

    def f(v):
        y = v * 2.0
        interp = core.active_interpreters()[-1]
        before = len(interp.tape)
        worker = threading.Thread(target=other_thread, args=(y,), name="worker-7")
        worker.start()
        worker.join()
        tape_sizes.append((before, len(interp.tape)))
        return xp.sum(y * y)

    assert_close(pa.grad(f)(x), 8 * to_numpy(x))  # the owner's transform is intact
    assert tape_sizes == [(1, 1)]  # nothing was recorded from the worker
    assert len(errors) == 4
    for msg in errors:
        assert "'worker-7'" in msg and "'MainThread'" in msg and "grad" in msg and "thread" in msg

"""Forward mode's public behaviour: jvp and linearize; pytrees, has_aux, strict, concrete tracers,
complex tangents, gradient modes, linearize's replay without primal recomputation, and errors.

References are analytic derivatives and central finite differences computed on plain arrays."""

import collections

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


def fd_jvp(f, x, t, eps=1e-6):
    """Central finite difference of ``f`` (one array in, one array out) at ``x`` along ``t`` (numpy)."""
    xn, tn = to_numpy(x), to_numpy(t)
    plus = to_numpy(f(BX.asarray(xn + eps * tn)))
    minus = to_numpy(f(BX.asarray(xn - eps * tn)))
    return (plus - minus) / (2 * eps)


@pytest.fixture(autouse=True)
def _levels_intact():
    yield
    assert core.current_level() == 0
    assert core.no_grad_level() == 0


def _is_plain(x):
    return not isinstance(x, pa.Tensor) and dispatch.backend_of_array(x) is not None


def _f(x):
    return xp.sin(x) * x * x + xp.exp(-x)


# ------------------------------------------------------------------------------ jvp values


def test_jvp_matches_analytic_and_fd():
    x, t = arr([0.3, -1.0, 2.5]), arr([1.0, -2.0, 0.5])
    out, tan = pa.jvp(_f, (x,), (t,))
    xn, tn = to_numpy(x), to_numpy(t)
    assert_close(out, np.sin(xn) * xn * xn + np.exp(-xn))
    assert_close(tan, (np.cos(xn) * xn * xn + 2 * xn * np.sin(xn) - np.exp(-xn)) * tn, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(tan), fd_jvp(_f, x, t), rtol=1e-6)
    assert _is_plain(out) and _is_plain(tan)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_jvp_keeps_shape_and_dtype(dtype):
    dt = getattr(BX, dtype)
    x = BX.reshape(BX.arange(6, dtype=dt), (3, 2)) / 5
    out, tan = pa.jvp(lambda x: x * x, (x,), (BX.ones((3, 2), dtype=dt),))
    assert tan.dtype == dt and tuple(tan.shape) == (3, 2)
    assert_close(tan, 2 * to_numpy(x), rtol=1e-6)


def test_jvp_0d_and_empty():
    out, tan = pa.jvp(lambda x: x * x * x, (arr(2.0),), (arr(1.0),))
    assert float(tan) == 12.0
    e = BX.zeros((0, 3), dtype=BX.float64)
    out, tan = pa.jvp(xp.sin, (e,), (e,))
    assert tuple(tan.shape) == (0, 3)


def test_jvp_several_primals_and_pytrees():
    Point = collections.namedtuple("Point", ["a", "b"])
    x, y = arr([1.0, 2.0]), arr([3.0, -1.0])
    tx, ty = arr([0.5, 1.0]), arr([2.0, 0.0])

    def f(p, scale):
        return {"prod": p.a * p.b * scale["s"], "sum": (xp.sum(p.a),)}

    s, ts = arr(2.0), arr(-1.0)
    out, tan = pa.jvp(f, (Point(x, y), {"s": s}), (Point(tx, ty), {"s": ts}))
    xn, yn, txn, tyn = map(to_numpy, (x, y, tx, ty))
    assert set(tan) == {"prod", "sum"} and isinstance(tan["sum"], tuple)
    assert_close(tan["prod"], (txn * yn + xn * tyn) * 2.0 + xn * yn * -1.0)
    assert_close(tan["sum"][0], np.asarray(txn.sum()))
    assert_close(out["prod"], xn * yn * 2.0)


def test_jvp_has_aux_and_strict():
    x, t = arr([1.0, 2.0]), arr([1.0, 1.0])
    out, tan, aux = pa.jvp(lambda x: (x * x, {"half": x / 2.0}), (x,), (t,), has_aux=True)
    assert_close(tan, 2 * to_numpy(x))
    assert _is_plain(aux["half"])
    assert_close(aux["half"], to_numpy(x) / 2)
    # an output that does not depend on the inputs: zeros of its shape and dtype, an error with strict
    c = arr([[5.0, 6.0]])
    out, tan = pa.jvp(lambda x: (x, c), (x,), (t,))
    assert_close(tan[1], np.zeros((1, 2)))
    out, tan = pa.jvp(lambda x: (x, c), (x,), (t,), strict=False)
    assert_close(out[1], to_numpy(c))
    out, tan = pa.jvp(lambda x: x * 2.0, (x,), (t,), strict=True)
    assert_close(tan, np.array([2.0, 2.0]))


def test_jvp_concrete_tracers_and_control_flow():
    def f(x):
        if float(xp.sum(x)) > 0 and bool(x[0, ...] < 5.0):
            y = x * x
        else:
            y = -x
        for _ in range(int(xp.sum(x * 0.0 + 1.0))):  # int(tracer): 2 iterations
            y = xp.sin(y)
        return y

    x, t = arr([0.2, 0.4]), arr([1.0, -1.0])
    _, tan = pa.jvp(f, (x,), (t,))
    np.testing.assert_allclose(to_numpy(tan), fd_jvp(f, x, t), rtol=1e-6)
    _, tan_neg = pa.jvp(f, (-x,), (t,))
    np.testing.assert_allclose(to_numpy(tan_neg), fd_jvp(f, -x, t), rtol=1e-6)


def test_jvp_complex_holomorphic_and_not():
    z = BX.asarray([0.5 + 1.0j, -1.0 + 0.2j], dtype=BX.complex128)
    t = BX.asarray([1.0 - 0.5j, 0.3 + 2.0j], dtype=BX.complex128)
    _, tan = pa.jvp(lambda z: z * z * z, (z,), (t,))
    assert_close(tan, 3 * to_numpy(z) ** 2 * to_numpy(t), rtol=1e-12)  # f'(z) t

    def g(z):  # not holomorphic: real output
        return xp.real(z * xp.conj(z)) + xp.imag(xp.sin(z))

    _, tan = pa.jvp(g, (z,), (t,))
    np.testing.assert_allclose(to_numpy(tan), fd_jvp(g, z, t), rtol=1e-6)


def test_no_grad_does_not_affect_forward_mode():
    x, t = arr([1.0, 2.0]), arr([1.0, 1.0])

    def f(x):
        with pa.no_grad():
            return x * x

    assert_close(pa.jvp(f, (x,), (t,))[1], 2 * to_numpy(x))
    with pa.no_grad():
        assert_close(pa.jvp(lambda x: x * x, (x,), (t,))[1], 2 * to_numpy(x))


def test_stop_gradient_blocks_jvp():
    x, t = arr([1.0, 2.0]), arr([1.0, 1.0])
    _, tan = pa.jvp(lambda x: x * pa.stop_gradient(x), (x,), (t,))
    assert_close(tan, to_numpy(x))
    with _raises(RuntimeError, "strict=True", "does not depend"):
        pa.jvp(pa.stop_gradient, (x,), (t,), strict=True)


# ------------------------------------------------------------------------------ linearize


class _Counter:
    """Counts kernel calls of the named ops (wrapping each op's kernels)."""

    def __init__(self, monkeypatch, names):
        self.calls = dict.fromkeys(names, 0)
        for name in names:
            op = core.OPS[name]
            monkeypatch.setattr(op, "generic", self._wrap(name, op.generic))
            monkeypatch.setattr(op, "kernels", {k: self._wrap(name, v) for k, v in op.kernels.items()})

    def _wrap(self, name, kernel):
        def counted(*args, **params):
            self.calls[name] += 1
            return kernel(*args, **params)

        return counted


def _g(x):
    return xp.exp(xp.sin(x)) * xp.tanh(x)


def test_linearize_matches_jvp():
    x = arr([0.1, -0.7, 1.3])
    out, jvp_fn = pa.linearize(_g, x)
    assert_close(out, to_numpy(_g(x)))
    for t in (arr([1.0, 0.0, 0.0]), arr([0.3, -2.0, 1.0])):
        expected = pa.jvp(_g, (x,), (t,))[1]
        assert_close(jvp_fn(t), to_numpy(expected), rtol=1e-12)
        np.testing.assert_allclose(to_numpy(jvp_fn(t)), fd_jvp(_g, x, t), rtol=1e-6)
    # linear in the tangent
    t1, t2 = arr([1.0, 2.0, 3.0]), arr([-1.0, 0.5, 0.25])
    assert_close(jvp_fn(t1 + 3.0 * t2), to_numpy(jvp_fn(t1)) + 3 * to_numpy(jvp_fn(t2)), rtol=1e-12)
    assert _is_plain(jvp_fn(t1))


def test_linearize_does_not_rerun_the_primal(monkeypatch):
    counter = _Counter(monkeypatch, ["sin", "exp", "tanh"])
    x = arr([0.1, -0.7, 1.3])
    _, jvp_fn = pa.linearize(_g, x)
    assert counter.calls == {"sin": 1, "exp": 1, "tanh": 1}
    for t in (arr([1.0, 0.0, 0.0]), arr([0.0, 1.0, 0.0]), arr([0.3, -2.0, 1.0])):
        jvp_fn(t)
    assert counter.calls == {"sin": 1, "exp": 1, "tanh": 1}  # only tangent rules ran
    pa.jvp(_g, (x,), (arr([1.0, 0.0, 0.0]),))  # the counter sees jvp's primal evaluation
    assert counter.calls == {"sin": 2, "exp": 2, "tanh": 2}


def test_linearize_pytrees_and_independent_outputs():
    a, b = arr([1.0, 2.0]), arr([0.5])
    c = arr([9.0])

    def f(p):
        return {"y": p["a"] * p["b"], "const": c, "same": p["a"]}

    out, jvp_fn = pa.linearize(f, {"a": a, "b": b})
    tan = jvp_fn({"a": arr([1.0, -1.0]), "b": arr([2.0])})
    assert_close(tan["y"], np.array([1.0 * 0.5 + 1.0 * 2.0, -1.0 * 0.5 + 2.0 * 2.0]))
    assert_close(tan["const"], np.zeros(1))
    assert_close(tan["same"], np.array([1.0, -1.0]))
    assert_close(out["const"], to_numpy(c))


def test_linearize_ignores_no_grad():
    def f(x):
        with pa.no_grad():
            return x * x

    _, jvp_fn = pa.linearize(f, arr([3.0]))
    assert_close(jvp_fn(arr([1.0])), np.array([6.0]))


# ------------------------------------------------------------------------------ errors


def test_error_primals_and_tangents_not_tuples():
    x = arr([1.0])
    with _raises(TypeError, "primals must be a tuple", "list", "(x,)"):
        pa.jvp(xp.sin, [x], [x])
    with _raises(
        TypeError, "primals must be a tuple", "Array" if "strict" in pa.get_backend() else "ndarray"
    ):
        pa.jvp(xp.sin, x, x)
    with _raises(TypeError, "tangents must be a tuple", "list"):
        pa.jvp(xp.sin, (x,), [x])


def test_error_tangent_structure_shape_dtype():
    x = arr([1.0, 2.0])
    with _raises(ValueError, "structure of the primals", "PyTreeSpec"):
        pa.jvp(lambda a, b: a, (x, x), (x,))
    with _raises(ValueError, "structure of the primals"):
        pa.jvp(lambda p: p["a"], ({"a": x},), ({"b": x},))
    with _raises(ValueError, "primals[1]['w']", "shape (3,)", "(2,)"):
        pa.jvp(lambda a, p: a, (x, {"w": x}), (x, {"w": arr([1.0, 2.0, 3.0])}))
    with _raises(TypeError, "primals[0]", "float32", "float64"):
        pa.jvp(xp.sin, (x,), (BX.asarray([1.0, 2.0], dtype=BX.float32),))
    with _raises(TypeError, "primals[0]", "must be an array", "int"):
        pa.jvp(xp.sin, (arr(1.0),), (1,))


def test_error_bad_primals():
    with _raises(TypeError, "primals[0]", "must be an array", "str"):
        pa.jvp(xp.sin, ("x",), (arr(1.0),))
    with _raises(TypeError, "primals[0]", "floating dtype", "int"):
        pa.jvp(lambda x: x, (BX.asarray([1, 2]),), (BX.asarray([1, 2]),))


def test_error_strict_independent_output_names_it():
    x = arr([1.0])
    with _raises(RuntimeError, "strict=True", "output[1]", "does not depend"):
        pa.jvp(lambda x: (x * 2.0, arr([3.0])), (x,), (x,), strict=True)


def test_error_outputs_and_has_aux():
    x = arr([1.0])
    with _raises(TypeError, "must return arrays", "str", "output"):
        pa.jvp(lambda x: "nope", (x,), (x,))
    with _raises(TypeError, "has_aux=True", "pair"):
        pa.jvp(lambda x: x, (x,), (x,), has_aux=True)
    with _raises(TypeError, "has_aux=1", "True or False"):
        pa.jvp(lambda x: x, (x,), (x,), has_aux=1)
    with _raises(TypeError, "func must be callable"):
        pa.jvp(None, (x,), (x,))


def test_error_linearize():
    x = arr([1.0, 2.0])
    with _raises(TypeError, "primals[0][0]", "must be an array", "int"):
        pa.linearize(xp.sin, [1, 2])
    with _raises(TypeError, "must return arrays", "output[1]", "str"):
        pa.linearize(lambda x: (x, "nope"), x)
    _, jvp_fn = pa.linearize(lambda a, b: a * b, x, x)
    with _raises(ValueError, "jvp_fn", "structure"):
        jvp_fn(x)
    with _raises(ValueError, "jvp_fn", "primals[1]", "shape (1,)"):
        jvp_fn(x, arr([1.0]))
    with _raises(TypeError, "jvp_fn", "float32"):
        jvp_fn(x, BX.asarray([1.0, 1.0], dtype=BX.float32))
    assert_close(jvp_fn(x, x), 2 * to_numpy(x) ** 2)  # still usable


def test_linearize_output_that_is_also_an_intermediate():
    # y's tangent is used by a later op and is an output: the sweep must keep it
    def f(x):
        y = xp.sin(x)
        z = xp.exp(y) * y
        return y, z, x

    x, t = arr([0.3, -0.8]), arr([1.0, 2.0])
    _, jvp_fn = pa.linearize(f, x)
    ty, tz, tx = jvp_fn(t)
    _, (ey, ez, ex) = pa.jvp(f, (x,), (t,))
    assert_close(ty, to_numpy(ey), rtol=1e-12)
    assert_close(tz, to_numpy(ez), rtol=1e-12)
    assert_close(tx, to_numpy(t))
    xn, tn = to_numpy(x), to_numpy(t)
    assert_close(ty, np.cos(xn) * tn, rtol=1e-12)

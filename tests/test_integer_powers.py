"""Small literal powers without libm's pow (issue 34, item 2): ``x ** 2``, ``x ** 3``, ``x ** -1`` and
``x ** 0.5`` as products, a reciprocal and a square root, eagerly and in compiled graphs, against NumPy's
own ``np.power`` (within 1 ulp for the cube, whose two products round twice; bit for bit otherwise), with
derivatives unchanged."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp
from polyad.core import dispatch
from polyad.graph.compiler import optimize

EXPONENTS = [2, 3, -1, 0.5, 2.0, 3.0, -1.0]


def _arr(values):
    bxp = dispatch.default_backend().xp
    return bxp.asarray(np.asarray(values).tolist(), dtype=bxp.float64)


def _sample(b, n=2001):
    x = np.random.default_rng(7).uniform(-4.0, 4.0, n)
    x[:4] = [1e-120, -1e100, 3.0, -0.0 if b != -1 else -2.5]
    return np.abs(x) if b == 0.5 else x


def _ulps(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    return np.max(np.abs(got - expected) / np.spacing(np.maximum(np.abs(expected), 1e-300)))


@pytest.mark.parametrize("b", EXPONENTS)
def test_eager_powers_agree_with_numpy(b):
    x = _sample(b)
    got = to_numpy(xp.pow(_arr(x), b))
    expected = np.power(x, b)
    assert _ulps(got, expected) <= (1.0 if b == 3 else 0.0)
    assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("b", [2, 3, -1])
def test_complex_powers_agree_with_numpy(b):
    rng = np.random.default_rng(3)
    z = rng.standard_normal(200) + 1j * rng.standard_normal(200)
    bxp = dispatch.default_backend().xp
    got = to_numpy(xp.pow(bxp.asarray(z.tolist(), dtype=bxp.complex128), b))
    np.testing.assert_allclose(got, np.power(z, b), rtol=4e-16, atol=0)


@pytest.mark.parametrize("b", EXPONENTS)
def test_derivatives_of_the_powers(b):
    x = _sample(b, 50)[4:] + (0.5 if b == 0.5 else 0.0)
    expected = b * np.power(x, b - 1)
    assert_close(pa.grad(lambda v: xp.sum(v**b))(_arr(x)), expected, rtol=1e-14)
    (_, tangent) = pa.jvp(lambda v: v**b, (_arr(x),), (_arr(np.ones_like(x)),))
    assert_close(tangent, expected, rtol=1e-14)


@pytest.mark.parametrize("b", [2, 3, -1, 0.5])
def test_compiled_powers_have_no_pow_and_equal_eager(b):
    x = _sample(b, 64) + (0.5 if b == 0.5 else 0.0)  # sqrt's derivative is infinite at 0
    f = lambda v: xp.sin(xp.pow(v, b)) * 2.0  # noqa: E731  (xp.pow: a NumPy array's ** is NumPy's own)
    graph = pa.make_graph(f, _arr(x))
    assert "pow" in [n.op.name for n in graph.nodes]
    optimised = optimize(graph)
    assert "pow" not in [n.op.name for n in optimised.nodes]
    assert_close(optimised(_arr(x)), f(_arr(x)), rtol=0, atol=0)
    jitted = pa.jit(pa.grad(lambda v: xp.sum(f(v))))
    for _ in range(2):
        assert_close(jitted(_arr(x)), pa.grad(lambda v: xp.sum(f(v)))(_arr(x)), rtol=1e-15)


def test_other_exponents_keep_pow():
    x = _sample(1.5, 64)
    x = np.abs(x)
    assert_close(xp.pow(_arr(x), 1.5), np.power(x, 1.5), rtol=0, atol=0)
    graph = pa.make_graph(lambda v: v**1.5, _arr(x))
    assert "pow" in [n.op.name for n in optimize(graph).nodes]

"""Eager grad's deferred values (``polyad.transforms.reverse.PendingTensor``): a sum or product on large
arrays is computed only when something reads it, so the loss's last products and its sum, which grad does
not return and no rule reads, are never computed. References: the hand-written gradient, the value
computed by the backend library, and the same transforms with deferral off."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad.core import dispatch
from polyad.transforms import reverse

xp = pa.xp
BX = dispatch.default_backend().xp


@pytest.fixture
def computed_ops(monkeypatch):
    """The names of the deferred ops computed during the test (deferral from 4 elements on)."""
    monkeypatch.setattr(reverse, "DEFER_MIN", 4)
    names = []
    compute = reverse._compute

    def spy(t):
        stack = [t]
        while stack:  # every pending value this computation will fill in
            n = stack.pop()
            if type(n) is reverse.PendingTensor and n._aux is not None:
                names.append(n._aux[1].name)
                stack.extend(n._aux[2])
        return compute(t)

    monkeypatch.setattr(reverse, "_compute", spy)
    return names


def loss(v):
    return xp.sum(xp.sin(v) * xp.exp(-(v**2)) + xp.tanh(v))


def by_hand(x):
    s, e, t = np.sin(x), np.exp(-(x**2)), np.tanh(x)
    return np.cos(x) * e - 2 * x * s * e + (1 - t * t)


def test_grad_skips_the_values_no_rule_reads(computed_ops):
    x = np.linspace(-3.0, 3.0, 64)
    g = pa.grad(loss)(BX.asarray(x))
    assert_close(g, by_hand(x), rtol=1e-13, atol=1e-15)
    # exp reads -(v**2): the negation is computed; the product, the sum of terms and the loss never are
    assert sorted(computed_ops) == ["negative"], computed_ops


def test_value_and_grad_computes_the_value(computed_ops):
    x = np.linspace(-3.0, 3.0, 64)
    value, g = pa.value_and_grad(loss)(BX.asarray(x))
    assert_close(value, np.sum(np.sin(x) * np.exp(-(x**2)) + np.tanh(x)), rtol=1e-13)
    assert_close(g, by_hand(x), rtol=1e-13, atol=1e-15)
    assert type(value) is not reverse.PendingTensor
    assert {"multiply", "add", "sum"} <= set(computed_ops)


def test_aux_and_python_reads_compute_the_values(computed_ops):
    x = BX.asarray(np.linspace(0.5, 2.0, 32))

    def f(v):
        y = v * v
        scale = 2.0 if float(xp.sum(y)) > 10 else 3.0  # a Python branch reads the pending sum
        return xp.sum(y * scale), {"y": y, "total": xp.sum(y)}

    g, aux = pa.grad(f, has_aux=True)(x)
    xn = to_numpy(x)
    scale = 2.0 if np.sum(xn * xn) > 10 else 3.0
    assert_close(g, 2 * scale * xn, rtol=1e-13)
    assert_close(aux["y"], xn * xn, rtol=0)
    assert_close(aux["total"], np.sum(xn * xn), rtol=1e-13)
    assert all(type(a) is not reverse.PendingTensor for a in (aux["y"], aux["total"]))


def test_deferred_values_under_nested_transforms(computed_ops):
    x = np.linspace(-1.0, 1.0, 16)
    # grad of grad: the outer level defers, the inner one's rules read what they need
    h = pa.grad(lambda v: xp.sum(pa.grad(lambda u: xp.sum(xp.sin(u) * u))(v) * v))(BX.asarray(x))
    # d/dv sum((cos v * v + sin v) * v) = (2 cos v - v sin v) v + cos v v + sin v
    ref = (2 * np.cos(x) - x * np.sin(x)) * x + np.cos(x) * x + np.sin(x)
    assert_close(h, ref, rtol=1e-12, atol=1e-14)
    J = pa.vmap(pa.grad(loss))(BX.asarray(np.stack([x, 2 * x])))
    assert_close(J, np.stack([by_hand(x), by_hand(2 * x)]), rtol=1e-13, atol=1e-15)


def test_a_long_chain_of_deferred_ops(computed_ops):
    x = BX.asarray(np.linspace(0.0, 0.1, 8))

    def f(v):
        y = v
        for _ in range(3000):  # 3000 pending additions, computed without recursion
            y = y + v
        return xp.sum(xp.exp(y))

    value, g = pa.value_and_grad(f)(x)
    xn = to_numpy(x)
    yn = xn
    for _ in range(3000):  # the same additions, the same rounding
        yn = yn + xn
    assert_close(value, np.sum(np.exp(yn)), rtol=1e-13)
    assert_close(g, 3001 * np.exp(yn), rtol=1e-12)


@pytest.mark.skipif(dispatch.default_backend().name != "numpy", reason="NumPy's errstate and writeable flag")
def test_deferral_keeps_errstate_and_read_only_inputs(computed_ops):
    x = np.full(8, 1e200)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        pa.grad(lambda v: xp.sum(v * v))(x)  # raised at the product, as eagerly: not deferred
    buf = np.ones(8)

    def writes(v):
        y = v * buf  # deferred: reads buf later
        buf[0] = 2.0  # the tape holds buf read-only, as for any op
        return xp.sum(y)

    with pytest.raises(ValueError, match="read-only"):
        pa.grad(writes)(np.ones(8))
    assert buf.flags.writeable and buf[0] == 1.0

"""Property-based tests: random programs built from namespace functions, checked against finite
differences (grad, jvp, their consistency, second order) and a loop (vmap), on the backend under test."""

import random

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

import polyad as pa
from polyad import xp
from polyad.core import dispatch
from polyad.testing import check_grads, check_vmap

# smooth steps on any real input (domains kept away from singularities)
STEPS = {
    "sin": lambda v: xp.sin(v),
    "tanh": lambda v: xp.tanh(v),
    "exp_neg_sq": lambda v: xp.exp(-v * v),
    "log1p_sq": lambda v: xp.log1p(v * v),
    "softplus": lambda v: xp.logaddexp(v, 0.0),
    "scale_shift": lambda v: 1.3 * v - 0.2,
    "cube": lambda v: v**3 / 3.0,
    "cumsum": lambda v: xp.cumulative_sum(v, axis=-1) / v.shape[-1],
    "flip_mul": lambda v: v * xp.flip(v, axis=-1),
    "matmul_sym": lambda v: xp.tanh(v @ xp.matrix_transpose(v)) @ v if v.ndim >= 2 else v * xp.sum(v),
    "normalise": lambda v: v / xp.sqrt(1.0 + xp.sum(v * v, axis=-1, keepdims=True)),
    "sort": lambda v: xp.sort(v, axis=-1),
}

programs = st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=5)
shapes = st.sampled_from([(3,), (2, 3), (3, 3), (1, 4)])


def _program(names):
    def f(v):
        for name in names:
            v = STEPS[name](v)
        return xp.sum(v * v) + xp.sum(v)

    return f


def _array(shape, seed):
    bx = dispatch.default_backend().xp
    rng = random.Random(seed)
    n = 1
    for s in shape:
        n *= s
    # distinct values, so sort's permutation is locally constant
    vals = [rng.uniform(-1, 1) + 0.01 * i for i in range(n)]
    rng.shuffle(vals)
    return bx.reshape(bx.asarray(vals, dtype=bx.float64), shape)


SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(names=programs, shape=shapes, seed=st.integers(0, 10_000))
def test_random_programs_differentiate_correctly(names, shape, seed):
    f = _program(names)
    x = _array(shape, seed)
    check_grads(f, (x,), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-4)


@SETTINGS
@given(names=programs, shape=shapes, seed=st.integers(0, 10_000))
def test_random_programs_vmap_like_a_loop(names, shape, seed):
    f = _program(names)
    bx = dispatch.default_backend().xp
    batch = bx.stack([_array(shape, seed + k) for k in range(3)])
    check_vmap(f, (batch,), 0)
    check_vmap(pa.grad(f), (batch,), 0, atol=1e-10, rtol=1e-8)

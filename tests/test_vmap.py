"""vmap: in_dims/out_dims, errors, chunking, nesting, composition with grad/jvp, randomness (pa.random),
functionalised in-place updates, the loop fallback and the lazy decomposition table. Every batched result
is compared with a Python loop of the unbatched function (or an analytic value)."""

import warnings

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import core
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.transforms import batching


@pytest.fixture
def A():
    """Backend array from a NumPy array (float64 unless the array says otherwise)."""
    xp = dispatch.default_backend().xp

    def make(x, dtype=None):
        x = np.asarray(x)
        if dtype is None:
            dtype = xp.float64 if x.dtype.kind == "f" else xp.int64 if x.dtype.kind == "i" else None
        return xp.asarray(x, dtype=dtype)

    return make


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).uniform(-1, 1, shape)


def loop(f, args, in_dims, out_dim=0):
    """Reference: the unbatched ``f`` per example, stacked (NumPy) at ``out_dim``."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    size = next(to_numpy(a).shape[d] for a, d in zip(args, dims) if d is not None)
    per = []
    for i in range(size):
        ex = [
            a if d is None else a[(slice(None),) * (d % len(a.shape)) + (i, ...)] for a, d in zip(args, dims)
        ]
        per.append(f(*ex))
    if isinstance(per[0], tuple):
        return tuple(np.stack([to_numpy(p[k]) for p in per], axis=out_dim) for k in range(len(per[0])))
    return np.stack([to_numpy(p) for p in per], axis=out_dim)


# ------------------------------------------------------------------------------ in_dims / out_dims


@pytest.mark.parametrize(
    "in_dims,shapes",
    [
        (0, [(4, 3), (4, 3)]),
        (1, [(3, 4), (2, 4)]),
        (-1, [(3, 4), (4,)]),
        ((0, None), [(4, 3), (3,)]),
        ((None, 1), [(3,), (3, 4)]),
        ((2, 0), [(3, 2, 4), (4, 2)]),
    ],
)
def test_in_dims_vs_loop(A, in_dims, shapes):
    args = [A(rand(*s, seed=i)) for i, s in enumerate(shapes)]

    def f(x, y):
        return pxp.sin(x) * pxp.sum(y) + pxp.sum(x * x)

    got = pa.vmap(f, in_dims=in_dims)(*args)
    assert_close(got, loop(f, args, in_dims))


@pytest.mark.parametrize("out_dims", [0, 1, -1, 2])
def test_out_dims_vs_loop(A, out_dims):
    x = A(rand(5, 2, 3))
    f = lambda x: pxp.matmul(pxp.permute_dims(x, (1, 0)), x)  # noqa: E731  (3, 3)
    assert_close(pa.vmap(f, out_dims=out_dims)(x), loop(f, [x], 0, out_dim=out_dims))


def test_pytree_in_dims_and_out_dims(A):
    params = {"w": A(rand(3, 4)), "b": A(rand(3))}
    xs = A(rand(5, 4))

    def f(p, x):
        y = pxp.matmul(p["w"], x) + p["b"]
        return {"y": y, "norm": pxp.sum(y * y)}

    got = pa.vmap(f, in_dims=({"w": None, "b": None}, 0), out_dims={"y": 1, "norm": 0})(params, xs)
    ys = np.stack([to_numpy(f(params, xs[i, ...])["y"]) for i in range(5)], axis=1)
    assert_close(got["y"], ys)
    assert_close(got["norm"], np.sum(ys * ys, axis=0))
    # a prefix: None for the whole dict
    got2 = pa.vmap(f, in_dims=(None, 0))(params, xs)
    assert_close(got2["y"], ys.T)


def test_unbatched_output_is_broadcast_and_out_dim_none(A):
    x = A(rand(4, 2))
    c = A(rand(3))
    y, k = pa.vmap(lambda x: (x * 2.0, c), out_dims=(0, None))(x)
    assert_close(y, to_numpy(x) * 2)
    assert_close(k, c)
    y, k = pa.vmap(lambda x: (x * 2.0, c))(x)
    assert_close(k, np.broadcast_to(to_numpy(c), (4, 3)))


def test_nested_vmaps_different_in_dims(A):
    x, y = A(rand(4, 3)), A(rand(3, 5))

    def f(a, b):
        return pxp.sum(a * b)

    # outer maps rows of x, inner maps columns of y: a matrix product
    got = pa.vmap(pa.vmap(f, in_dims=(None, 1)), in_dims=(0, None))(x, y)
    assert_close(got, to_numpy(x) @ to_numpy(y))
    got = pa.vmap(pa.vmap(f, in_dims=(None, 1), out_dims=0), in_dims=(0, None), out_dims=1)(x, y)
    assert_close(got, (to_numpy(x) @ to_numpy(y)).T)


# ------------------------------------------------------------------------------ errors


def _check_error(exc_type, match, fn, *args):
    with pytest.raises(exc_type, match=match):
        fn(*args)
    assert core.current_level() == 0


def test_errors_echo_the_call(A):
    def f(x, y):
        return x + y

    x, y = A(rand(3, 2)), A(rand(4, 2))
    _check_error(
        ValueError, r"vmap\(f, in_dims=\(0, 0\).*different sizes.*3.*4", pa.vmap(f, in_dims=(0, 0)), x, y
    )
    _check_error(ValueError, r"vmap\(f, in_dims=\(0, 2\).*out of range", pa.vmap(f, in_dims=(0, 2)), x, x)
    _check_error(ValueError, r"vmap\(f, in_dims=None.*no input is mapped", pa.vmap(f, in_dims=None), x, x)
    _check_error(
        ValueError, r"in_dims=\(0, 0\).*float.*only arrays can be mapped", pa.vmap(f, in_dims=(0, 0)), x, 1.0
    )
    _check_error(ValueError, r"in_dims has 3 entries.*2 positional", pa.vmap(f, in_dims=(0, 0, 0)), x, x)
    _check_error(ValueError, r"0-d", pa.vmap(f), A(1.0), A(2.0))
    _check_error(ValueError, r"output leaf 0 is batched.*out_dim is None", pa.vmap(f, out_dims=None), x, x)
    _check_error(ValueError, r"out_dim 3 is out of range", pa.vmap(f, out_dims=3), x, x)
    _check_error(TypeError, r"must return arrays", pa.vmap(lambda x: "s"), x)
    with pytest.raises(ValueError, match="randomness"):
        pa.vmap(f, randomness="sometimes")
    for bad in (0, -1):
        with pytest.raises(ValueError, match="chunk_size"):
            pa.vmap(f, chunk_size=bad)
    with pytest.raises(TypeError, match="in_dims"):
        pa.vmap(f, in_dims="0")


def test_state_intact_after_error_inside_func(A):
    def f(x):
        pxp.sin(x)
        raise KeyError("inside")

    with pytest.raises(KeyError):
        pa.vmap(pa.grad(lambda x: pxp.sum(f(x))))(A(rand(3, 2)))
    assert core.current_level() == 0
    assert_close(pa.vmap(pxp.sin)(A(rand(3))), np.sin(rand(3)))


def test_control_flow_on_batched_value_errors(A):
    with pytest.raises(pa.ConcretizationError, match="chunk_size=1"):
        pa.vmap(lambda x: x if float(pxp.sum(x)) > 0 else -x)(A(rand(3, 2)))
    assert core.current_level() == 0


# ------------------------------------------------------------------------------ chunking


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 100])
def test_chunk_size_matches_unchunked(A, chunk_size):
    x, y = A(rand(7, 3)), A(rand(3, 7))

    def f(a, b):
        return pxp.exp(a) * b, pxp.sum(a)

    got = pa.vmap(f, in_dims=(0, 1), out_dims=(1, 0), chunk_size=chunk_size)(x, y)
    ref = pa.vmap(f, in_dims=(0, 1), out_dims=(1, 0))(x, y)
    assert_close(got, ref)
    assert_close(got[0], loop(lambda a, b: f(a, b)[0], [x, y], (0, 1), out_dim=1))


def test_chunk_size_one_is_a_plain_loop(A):
    # Python control flow on values works only per example
    x = A(rand(5, 2))

    def f(v):
        return v * 2.0 if float(pxp.sum(v)) > 0 else -v

    assert_close(pa.vmap(f, chunk_size=1)(x), loop(f, [x], 0))


# ------------------------------------------------------------------------------ composition with grad, jvp


def test_per_example_gradients_vs_loop(A):
    w = A(rand(3))
    xs, ys = A(rand(6, 3)), A(rand(6))

    def loss(w, x, y):
        return (pxp.tanh(pxp.sum(w * x)) - y) ** 2

    got = pa.vmap(pa.grad(loss), in_dims=(None, 0, 0))(w, xs, ys)
    assert_close(got, loop(pa.grad(loss), [w, xs, ys], (None, 0, 0)))


def test_grad_of_vmap(A):
    x = A(rand(4, 3))
    g = pa.grad(lambda x: pxp.sum(pa.vmap(lambda r: pxp.sum(pxp.sin(r)) ** 2)(x)))(x)
    xn = to_numpy(x)
    assert_close(g, 2 * np.sum(np.sin(xn), axis=1, keepdims=True) * np.cos(xn))


def test_vmap_of_jvp_vs_loop(A):
    x, t = A(rand(5, 3)), A(rand(5, 3, seed=1))

    def f(x, t):
        return pa.jvp(lambda v: pxp.exp(v) * pxp.sum(v), (x,), (t,))

    got = pa.vmap(f)(x, t)
    assert_close(got, loop(f, [x, t], 0))


def test_nested_vmap_of_grad(A):
    x = A(rand(2, 3, 4))
    got = pa.vmap(pa.vmap(pa.grad(lambda v: pxp.sum(v**3))))(x)
    assert_close(got, 3 * to_numpy(x) ** 2)


# ------------------------------------------------------------------------------ in-place updates


def test_setitem_batched_into_created_array(A):
    x = A(rand(4, 2))

    def f(v):
        out = pxp.zeros(3, dtype=v.dtype)
        out[0] = pxp.sum(v)
        out[2] = 5.0
        out[1:] = out[1:] + v[0]
        return out

    assert_close(pa.vmap(f)(x), loop(f, [x], 0))
    assert_close(pa.vmap(f, chunk_size=3)(x), loop(f, [x], 0))


def test_setitem_from_asarray_and_grad_through_it(A):
    x = A(rand(5, 3))

    def f(v):
        buf = pxp.asarray([0.0, 0.0], dtype=v.dtype)
        buf[1] = pxp.sum(v * v)
        return pxp.sum(buf * 3.0)

    assert_close(pa.vmap(f)(x), loop(f, [x], 0))
    assert_close(pa.vmap(pa.grad(f))(x), 6 * to_numpy(x))


def test_created_arrays_leave_vmap_as_backend_arrays(A):
    x = A(rand(3, 2))
    y, z = pa.vmap(lambda v: (v + pxp.ones(2), pxp.zeros(2)), out_dims=(0, None))(x)
    assert not isinstance(y, pa.Tensor) and not isinstance(z, pa.Tensor)
    assert_close(z, np.zeros(2))


# ------------------------------------------------------------------------------ loop fallback, decompositions


def _no_rule_op(name):
    op = core.Op(name, lambda xp, x, *, k: x * k + 1.0, abstract_eval=None, register=False)
    return op


def test_loop_fallback_warns_once_per_op(A):
    op = _no_rule_op("h8_no_rule")
    batching._WARNED.discard(op.name)
    x = A(rand(4, 3))
    with pytest.warns(batching.LoopFallbackWarning, match="'h8_no_rule'"):
        got = pa.vmap(lambda v: core.bind(op, v, k=2.0))(x)
    assert_close(got, 2 * to_numpy(x) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pa.vmap(lambda v: core.bind(op, v, k=3.0), in_dims=1)(x)
    assert_close(got, (3 * to_numpy(x) + 1).T)


def test_rule_returning_notimplemented_loops(A):
    # a batched boolean mask selects a different number of elements per example: getitem's rule declines
    op = core.OPS["getitem"]
    batching._WARNED.discard(op.name)
    x = A(rand(3, 4))
    masks = A(np.array([[True, False, True, True], [False, True, True, True], [True, True, True, False]]))
    with pytest.warns(batching.LoopFallbackWarning, match="'getitem'"):
        got = pa.vmap(lambda v, m: pxp.sum(v[m]))(x, masks)
    ref = [to_numpy(x)[b][to_numpy(masks)[b]].sum() for b in range(3)]
    assert_close(got, np.array(ref))


def test_batch_rule_wins_over_decomposition(A):
    op = core.Op("h8_rule_and_decomposition", lambda xp, x: x * 2.0, register=False)
    calls = []
    op.rules["batch"] = lambda info, dims, x: (calls.append(info.batch_size) or core.bind(op, x), dims[0])
    op.decomposition = lambda x: pytest.fail("the decomposition must not run when a rule exists")
    got = pa.vmap(lambda v: core.bind(op, v))(A(rand(5, 2)))
    assert calls == [5] and tuple(got.shape) == (5, 2)


def test_index_add_decomposition_per_example_embedding_grads(A):
    table = A(rand(5))
    idx = A(np.array([0, 2, 2, 4]))
    ws = A(rand(6, 4))

    def loss(t, w):
        return pxp.sum(pxp.sin(t[idx]) * w)

    with warnings.catch_warnings():
        warnings.simplefilter("error", batching.LoopFallbackWarning)
        got = pa.vmap(pa.grad(loss), in_dims=(None, 0))(table, ws)
    assert_close(got, loop(pa.grad(loss), [table, ws], (None, 0)))
    # analytic: rows accumulate for repeated indices
    w0 = to_numpy(ws)[0]
    ref = np.zeros(5)
    np.add.at(ref, np.array([0, 2, 2, 4]), np.cos(to_numpy(table)[[0, 2, 2, 4]]) * w0)
    assert_close(got[0, ...], ref)
    assert np.count_nonzero(to_numpy(got)[0]) == 3


# ------------------------------------------------------------------------------ randomness


def test_random_error_by_default(A):
    x = A(rand(3))
    _check_error(RuntimeError, "randomness='error'", pa.vmap(lambda v: v + pa.random.normal()), x)
    _check_error(
        RuntimeError, "randomness='error'", pa.vmap(lambda v: v + pa.random.normal(), chunk_size=1), x
    )
    # nested: any level with "error" refuses
    inner = pa.vmap(lambda v: v + pa.random.uniform(), randomness="different")
    _check_error(RuntimeError, "randomness", pa.vmap(inner), A(rand(2, 3)))


@pytest.mark.parametrize("chunk_size", [None, 1, 2])
def test_random_different_and_same(A, chunk_size):
    x = A(np.zeros((5, 4)))
    d = to_numpy(
        pa.vmap(lambda v: v + pa.random.normal(size=4), randomness="different", chunk_size=chunk_size)(x)
    )
    assert d.shape == (5, 4)
    assert len({tuple(r) for r in d}) == 5  # every example drew its own values
    s = to_numpy(pa.vmap(lambda v: v + pa.random.normal(size=4), randomness="same", chunk_size=chunk_size)(x))
    assert s.shape == (5, 4)
    assert np.all(s == s[0]) and len(set(s[0])) == 4  # one draw shared by the batch


def test_random_nested_levels(A):
    x = A(np.zeros((2, 3)))
    inner = pa.vmap(lambda v: v + pa.random.uniform(), randomness="same")
    got = to_numpy(pa.vmap(inner, randomness="different")(x))
    assert np.all(got == got[:, :1]) and got[0, 0] != got[1, 0]  # same along inner, different along outer
    inner = pa.vmap(lambda v: v + pa.random.uniform(), randomness="different")
    got = to_numpy(pa.vmap(inner, randomness="same")(x))
    assert np.all(got == got[:1, :]) and len(set(got[0])) == 3


def test_generator_seeding_and_state():
    a = to_numpy(pa.random.Generator(3).normal(size=(2, 3)))
    b = to_numpy(pa.random.Generator(3).normal(size=(2, 3)))
    assert a.shape == (2, 3) and np.array_equal(a, b)
    assert not np.array_equal(a, to_numpy(pa.random.Generator(4).normal(size=(2, 3))))
    pa.random.seed(11)
    first = to_numpy(pa.random.uniform(size=5))
    pa.random.seed(11)
    state = pa.random.get_state()
    assert np.array_equal(first, to_numpy(pa.random.uniform(size=5)))
    pa.random.set_state(state)
    assert np.array_equal(first, to_numpy(pa.random.uniform(size=5)))
    with pytest.raises(ValueError, match="seed"):
        pa.random.Generator(-1)


def test_distributions(A):
    g = pa.random.Generator(0)
    z = to_numpy(g.normal(size=20000))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    u = to_numpy(g.uniform(-2.0, 3.0, size=20000))
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    k = g.integers(2, 7, size=(1000,))
    assert "int" in str(k.dtype)
    kn = to_numpy(k)
    assert kn.min() == 2 and kn.max() == 6
    assert to_numpy(g.integers(3, size=50)).max() <= 2
    f32 = g.normal(size=3, dtype=dispatch.default_backend().xp.float32)
    assert "float32" in str(f32.dtype)
    loc = A(np.array([0.0, 100.0]))
    assert to_numpy(g.normal(loc, 0.01)).round().tolist() == [0.0, 100.0]
    with pytest.raises(TypeError, match="floating"):
        g.normal(size=2, dtype=dispatch.default_backend().xp.int64)
    with pytest.raises(ValueError, match="greater"):
        g.integers(3, 3)


def test_reparameterised_gradient(A):
    mu, sigma = A(rand(4)), A(np.full(4, 0.5))
    z = to_numpy(pa.random.Generator(5).normal(size=4))

    def sample_sum(mu, sigma):
        return pxp.sum(pa.random.Generator(5).normal(mu, sigma) ** 2)

    g_mu, g_sigma = pa.grad(sample_sum, argnums=(0, 1))(mu, sigma)
    s = to_numpy(mu) + to_numpy(sigma) * z
    assert_close(g_mu, 2 * s)
    assert_close(g_sigma, 2 * s * z)


def test_random_with_batched_loc(A):
    locs = A(np.array([0.0, 10.0, 20.0]))
    got = to_numpy(pa.vmap(lambda m: pa.random.normal(m, 0.001, size=2), randomness="same")(locs))
    assert got.shape == (3, 2)
    assert_close(got - got[0], np.array([[0.0, 0.0], [10.0, 10.0], [20.0, 20.0]]), atol=1e-9)


def test_registered_decomposition_replaces_the_loop(A):
    op = _no_rule_op("h8_decomposed")
    op.decomposition = lambda x, *, k: x * k + 1.0
    x = A(rand(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", batching.LoopFallbackWarning)
        got = pa.vmap(lambda v: core.bind(op, v, k=2.0), in_dims=1)(x)
    assert_close(got, (2 * to_numpy(x) + 1).T)


def test_index_add_batch_rule_vs_loop(A):
    from polyad.ops.indexing import index_add, split_key

    xs = A(rand(3, 5))
    vs = A(rand(3, 4))
    idx = A(np.array([1, 3, 3, 0]))
    structure, arrays = split_key(idx)
    got = pa.vmap(lambda x, v: index_add(x, v, *arrays, key=structure))(xs, vs)
    ref = loop(lambda x, v: index_add(x, v, *arrays, key=structure), [xs, vs], 0)
    assert_close(got, ref)
    expected = to_numpy(xs).copy()
    for b in range(3):
        np.add.at(expected[b], [1, 3, 3, 0], to_numpy(vs)[b])
    assert_close(got, expected)

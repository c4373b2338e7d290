"""Reverse mode's symbolic ones: a cotangent known to be all ones (the seed of a scalar loss, ``sum``'s
broadcast of it, ``add`` passing it on) lets an op's ``vjp.ones`` rule skip the products by it. Every
gradient here is checked against an analytic formula or central differences, on the paths those rules take
(borrowed primals, broadcasting, mixed dtypes, complex), and the savings are asserted on captured graphs."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad import xp
from polyad.core import dispatch

BX = dispatch.default_backend().xp

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _backend_array(a, dtype=None):
    """A NumPy array as an array of the backend under test."""
    a = np.asarray(a)
    return BX.asarray(a, dtype=BX.float32 if a.dtype == np.float32 else BX.float64)


def _close(got, want, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(to_numpy(got), want, rtol=rtol, atol=atol)


def _fd(f, x, eps=1e-6):
    """Central differences of a scalar function of a NumPy array."""
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(to_numpy(f(_backend_array(x + e)))) - float(to_numpy(f(_backend_array(x - e))))) / (
            2 * eps
        )
    return g


RNG = np.random.default_rng(0)
X = RNG.uniform(0.5, 1.5, (3, 4))
C = RNG.uniform(-1.0, 1.0, (3, 4))
ROW = RNG.uniform(-1.0, 1.0, (4,))

CASES = {
    "sum(x * c)": lambda x: xp.sum(x * _backend_array(C)),
    "sum(c * x)": lambda x: xp.sum(_backend_array(C) * x),
    "sum(x * row)": lambda x: xp.sum(x * _backend_array(ROW)),
    "sum(row * x[0])": lambda x: xp.sum(_backend_array(ROW) * x[0, ...]),
    "sum(x * x)": lambda x: xp.sum(x * x),
    "sum(exp(x))": lambda x: xp.sum(xp.exp(x)),
    "sum(sin(x) * exp(-x**2) + tanh(x))": lambda x: xp.sum(xp.sin(x) * xp.exp(-(x**2)) + xp.tanh(x)),
    "sum(x - c)": lambda x: xp.sum(x - _backend_array(C)),
    "sum(c - x)": lambda x: xp.sum(_backend_array(C) - x),
    "sum(c / x)": lambda x: xp.sum(_backend_array(C) / x),
    "sum(x / c)": lambda x: xp.sum(x / _backend_array(C)),
    "sum(x / 3)": lambda x: xp.sum(x / 3.0),
    "sum(+x * 2)": lambda x: xp.sum(+x * 2.0),
    "sum(log(1 + x))": lambda x: xp.sum(xp.log(1.0 + x)),
    "sum(x, axis=0) summed": lambda x: xp.sum(xp.sum(x, axis=0) * _backend_array(ROW)),
    "sum(x + row) (broadcast)": lambda x: xp.sum(x + _backend_array(ROW)),
    "sum(x[0, ...] + x)": lambda x: xp.sum(x[0, ...] + x),
    "sum(x ** 1)": lambda x: xp.sum(x**1),
    "sum(sqrt(x)) + sum(x)": lambda x: xp.sum(xp.sqrt(x)) + xp.sum(x),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_matches_finite_differences(name):
    f = CASES[name]
    got = pa.grad(f)(_backend_array(X))
    _close(got, _fd(f, X), rtol=1e-5, atol=1e-6)


def test_a_borrowed_primal_is_never_the_gradient():
    # the ones rule of multiply hands c over as x's cotangent; the caller must get a copy of it
    c = _backend_array(C)
    g = pa.grad(lambda x: xp.sum(x * c))(_backend_array(X))
    _close(g, C)
    assert g is not c
    g = to_numpy(g)
    if isinstance(g, np.ndarray) and np.shares_memory(g, to_numpy(c)):
        raise AssertionError("the gradient shares memory with the constant c")
    e = pa.grad(lambda x: xp.sum(xp.exp(x)))(_backend_array(X))  # exp's rule borrows its output
    _close(e, np.exp(X))
    v, g = pa.value_and_grad(lambda x: xp.sum(x * x[0, ...]))(_backend_array(X[:1]))  # borrowed and summed
    _close(g, 2 * X[:1])


def test_float32_input_gets_float32_gradient():
    x = _backend_array(X.astype(np.float32))
    g = pa.grad(lambda v: xp.sum(v * _backend_array(C)))(x)  # promoted to float64 inside
    assert g.dtype == BX.float32
    _close(g, C.astype(np.float32), rtol=1e-6)
    g = pa.grad(lambda v: xp.sum(xp.exp(v)))(x)
    assert g.dtype == BX.float32
    _close(g, np.exp(X.astype(np.float32)), rtol=1e-6)


def test_complex_input_takes_the_general_rule():
    z = BX.asarray(np.array([1.0 + 2.0j, -0.5 + 0.25j]))
    g = pa.grad(lambda v: xp.sum(xp.real(v * v)))(z)
    _close(g, np.conj(2 * np.array([1.0 + 2.0j, -0.5 + 0.25j])))


def test_override_of_the_vjp_is_respected():
    # an overridden VJP has no ones rule: the override runs for an all-ones cotangent too
    def doubled(g, y, a, b):
        return (lambda: 2.0 * g * b, lambda: 2.0 * g * a)

    with pa.library.override(xp.multiply, "vjp", doubled):
        g = pa.grad(lambda x: xp.sum(x * _backend_array(C)))(_backend_array(X))
    _close(g, 2.0 * C)
    _close(pa.grad(lambda x: xp.sum(x * _backend_array(C)))(_backend_array(X)), C)


def test_higher_order_through_the_ones_rules():
    f = CASES["sum(sin(x) * exp(-x**2) + tanh(x))"]
    x = _backend_array(np.linspace(-1.0, 1.0, 5))
    h = pa.hessian(f)(x)
    fd = np.stack([_fd(lambda v, i=i: pa.grad(f)(v)[i], np.linspace(-1.0, 1.0, 5)) for i in range(5)])
    _close(h, fd, rtol=1e-5, atol=1e-6)
    gg = pa.grad(lambda v: xp.sum(pa.grad(f)(v) * v))(x)  # reverse over reverse
    _close(gg, _fd(lambda v: xp.sum(pa.grad(f)(v) * v), np.linspace(-1.0, 1.0, 5)), rtol=1e-5, atol=1e-6)


def test_hessian_of_w5_is_the_analytic_one():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((16, 16)) / 4.0
    x = rng.standard_normal(16)
    s = 1 / (1 + np.exp(-(A @ x)))
    expected = A.T @ ((s * (1 - s))[:, None] * A)
    Ab = _backend_array(A)
    h = pa.hessian(lambda v: xp.sum(xp.log(1 + xp.exp(Ab @ v))))(_backend_array(x))
    _close(h, expected, rtol=1e-10, atol=1e-12)
    j = pa.jacrev(lambda v: xp.sum(xp.log(1 + xp.exp(Ab @ v))))(_backend_array(x))  # a scalar's basis
    _close(j, A.T @ s, rtol=1e-10, atol=1e-12)


def test_vjp_with_a_user_cotangent_multiplies():
    # the caller's cotangent is not known to be ones: vjp_fn must scale by it
    out, f_vjp = pa.vjp(lambda x: xp.sum(x * _backend_array(C)), _backend_array(X))
    _close(f_vjp(BX.asarray(2.0, dtype=BX.float64))[0], 2.0 * C)


def _op_names(f, x):
    return [n.op.name for n in pa.make_graph(pa.grad(f), x).nodes]


def test_products_by_ones_are_skipped():
    xn = np.linspace(-1.0, 1.0, 7)
    x = _backend_array(xn)
    # W2's loss: the backward pass multiplies only where it must (exp's g * y, tanh's y * y, pow's 2 x
    # and g * 2 x, sin's g * cos x: 5, the two whose factor can be infinite zero-safe), never by the seed
    # or by sum's broadcast of it (that made 8)
    names = _op_names(CASES["sum(sin(x) * exp(-x**2) + tanh(x))"], x)
    backward = names[names.index("ones_like") :]
    assert backward.count("multiply") + backward.count("zero_safe_multiply") == 5, backward
    names = _op_names(lambda v: xp.sum(xp.sin(v)), x)
    assert "multiply" not in names, names  # the gradient is cos(x)
    names = _op_names(lambda v: xp.sum(v * _backend_array(np.cos(xn))), x)  # NumPy's cos of NumPy values
    assert names.count("multiply") == 1, names  # the forward one: the gradient is cos(x) itself


def test_accumulation_in_place_never_writes_a_shared_array():
    # arrays above NumPy's elision threshold (256 KiB): accumulating cotangents may reuse a buffer only
    # when nothing else refers to it; shared cotangents (add passes one to both inputs), borrowed primals
    # and the caller's arrays must come out unchanged, and every gradient exact
    n = 50_000
    xn = np.linspace(-2.0, 2.0, n)
    cn, dn = np.cos(3 * xn), np.sin(5 * xn)
    x, c, d = _backend_array(xn), _backend_array(cn), _backend_array(dn)
    g = pa.grad(lambda v: xp.sum(c * (xp.exp(v) + xp.sin(v)) + xp.exp(v) * d))(x)
    _close(g, cn * np.exp(xn) + cn * np.cos(xn) + dn * np.exp(xn), rtol=1e-12)
    g = pa.grad(lambda v: xp.sum(xp.sin(v) * (xp.sin(v) + xp.cos(v))))(x)
    _close(g, np.cos(xn) * (2 * np.sin(xn) + np.cos(xn)) - np.sin(xn) ** 2, rtol=1e-10, atol=1e-12)
    g = pa.grad(lambda v: xp.sum(v * v * v))(x)
    _close(g, 3 * xn**2, rtol=1e-12)
    g = pa.grad(lambda v: xp.sum(v * c) + xp.sum(v * d) + xp.sum((v + v) * c))(x)
    _close(g, 3 * cn + dn, rtol=1e-12)
    u = xp.exp(x)
    g = pa.grad(lambda v: xp.sum((v * u + v * u) * u + v * u))(x)
    _close(g, 2 * np.exp(2 * xn) + np.exp(xn), rtol=1e-12)
    _close(c, cn, rtol=0)
    _close(d, dn, rtol=0)
    _close(x, xn, rtol=0)
    _close(u, np.exp(xn), rtol=0)
    out, f_vjp = pa.vjp(lambda v: (v * c, v * c * 2.0), x)  # two outputs, one cotangent array twice
    seed = _backend_array(np.ones(n))
    (g,) = f_vjp((seed, seed))
    _close(g, 3 * cn, rtol=1e-12)
    _close(seed, np.ones(n), rtol=0)


@pytest.mark.parametrize("chunk_size", [None, 3, 1])
def test_jacfwd_identity_basis_skips_the_product(chunk_size):
    # jacfwd's basis is rows of the identity: matmul's batching rule slices the matrix instead of
    # multiplying by them; the Jacobian is exact and never shares the caller's matrix
    rng = np.random.default_rng(3)
    An, Bn, xn = rng.standard_normal((5, 7)), rng.standard_normal((7, 4)), rng.standard_normal(7)
    A, B, x = _backend_array(An), _backend_array(Bn), _backend_array(xn)
    J = pa.jacfwd(lambda v: A @ v, chunk_size=chunk_size)(x)
    _close(J, An, rtol=0, atol=0)
    J = pa.jacfwd(lambda v: xp.tanh(v @ B), chunk_size=chunk_size)(x)
    _close(J, (1 - np.tanh(xn @ Bn) ** 2)[:, None] * Bn.T, rtol=1e-12, atol=1e-15)
    J = pa.jacfwd(lambda v: (A * 2.0) @ xp.sin(v), chunk_size=chunk_size)(x)  # not the basis: a product
    _close(J, 2.0 * An * np.cos(xn), rtol=1e-12, atol=1e-15)
    if isinstance(J, np.ndarray):
        J = pa.jacfwd(lambda v: A @ v, chunk_size=chunk_size)(x)
        assert not np.shares_memory(J, A) and J.flags.writeable
        Js = pa.vmap(pa.jacfwd(lambda v: A @ v, chunk_size=chunk_size))(np.stack([x, x]))
        assert not np.shares_memory(Js, A)
        # the identity basis is kept between calls (read-only): the caller gets a copy of their own
        I1 = pa.jacfwd(lambda v: v, chunk_size=chunk_size)(x)
        I1[0, 0] = 5.0
        I2 = pa.jacfwd(lambda v: v, chunk_size=chunk_size)(x)
        _close(I2, np.eye(7), rtol=0, atol=0)
        # jacfwd of jacfwd: the inner one meets the outer one's basis; both products by it are skipped
        H = pa.jacfwd(pa.jacfwd(lambda v: xp.sin(A @ v), chunk_size=chunk_size), chunk_size=chunk_size)(x)
        s = -np.sin(An @ xn)
        _close(H, s[:, None, None] * An[:, :, None] * An[:, None, :], rtol=1e-12, atol=1e-15)
    _close(A, An, rtol=0, atol=0)


def test_hessian_has_one_matrix_product():
    rng = np.random.default_rng(4)
    A = _backend_array(rng.standard_normal((6, 6)))
    graph = pa.make_graph(pa.hessian(lambda v: xp.sum(xp.log(1 + xp.exp(A @ v)))), _backend_array(np.ones(6)))
    # matrix-matrix products (the batched tangents): only the VJP's; the tangent of A @ v is A itself
    products = [n for n in graph.nodes if n.op.name == "matmul" and tuple(n.outputs[0].shape) == (6, 6)]
    assert len(products) == 1, [n.op.name for n in graph.nodes]

"""polyad.linalg's structured solves (SciPy's solve_triangular, cho_factor/cho_solve, lu_factor/lu_solve)
beyond what the op table checks: every trans, what unit_diagonal and the triangles leave unread, the
(c, lower) and (lu, piv) pairs under grad, jvp, vmap, hessian and jit, bad input, the generic kernels
against SciPy (as without SciPy), and a Gaussian process and a Kalman filter differentiated through
them, against finite differences and the same models written with xp.linalg.solve."""

import math

import numpy as np
import pytest
import scipy.linalg as sl
from helpers import to_numpy

import polyad as pa
from polyad import linalg, xp
from polyad.core import dispatch
from polyad.ops.linalg import EXTENSIONS, structured
from polyad.ops.linalg.lu import pivots_to_permutation

RNG = np.random.default_rng(20240607)


def A(x, dtype=None):
    """A NumPy value as an array of the backend under test."""
    return dispatch.default_backend().xp.asarray(np.asarray(x, dtype=dtype))


def close(got, expected, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(to_numpy(got), np.asarray(expected), rtol=rtol, atol=atol)


def dominant(n, batch=(), complex=False):
    """Both triangles well conditioned (diagonal about 3); the unread one random."""
    m = RNG.uniform(-1, 1, (*batch, n, n))
    if complex:
        m = m + 1j * RNG.uniform(-1, 1, (*batch, n, n))
    return m + 3 * np.eye(n)


def spd(n, batch=()):
    m = RNG.uniform(-1, 1, (*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def op_np(m, trans):
    return m if trans in (0, "N") else m.T if trans in (1, "T") else m.conj().T


# ------------------------------------------------------------------------------ namespace


def test_the_functions_are_in_both_namespaces():
    for name in EXTENSIONS:
        assert getattr(xp.linalg, name) is getattr(pa.linalg, name) is getattr(linalg, name)
    seen = []

    def f(a):  # SciPy-style code reaching the functions through the namespace of its argument
        ns = pa.array_namespace(a)
        seen.append(ns is xp)
        c, lower = ns.linalg.cho_factor(a)
        return ns.sum(ns.linalg.cho_solve((c, lower), ns.ones(3)))

    pa.grad(f)(A(spd(3)))
    assert seen == [True]


# ------------------------------------------------------------------------------ values


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_solve_triangular_against_scipy(trans, lower, complex_):
    a = dominant(4, complex=complex_)
    for b in (RNG.standard_normal(4), RNG.standard_normal((4, 2))):
        for unit in (False, True):
            got = linalg.solve_triangular(A(a), A(b), trans=trans, lower=lower, unit_diagonal=unit)
            close(got, sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit))


def test_unread_entries_are_not_read():
    """unit_diagonal leaves the diagonal unread and the other triangle is never read: nan there changes
    nothing, and their cotangent is zero (a strictly triangular gradient with unit_diagonal)."""
    a = dominant(4)
    poisoned = np.triu(np.full((4, 4), np.nan), 0) + np.tril(a, -1)  # nan on and above the diagonal
    b = RNG.standard_normal((4, 2))
    for trans in (0, 1):
        got = linalg.solve_triangular(
            A(poisoned), A(b), trans=trans, lower=True, unit_diagonal=True, check_finite=False
        )
        close(got, sl.solve_triangular(a, b, trans=trans, lower=True, unit_diagonal=True))
        g = pa.grad(
            lambda m, t=trans: xp.sum(
                xp.sin(linalg.solve_triangular(m, A(b), trans=t, lower=True, unit_diagonal=True))
            )
        )(A(a))
        g = to_numpy(g)
        assert np.all(np.triu(g) == 0) and np.all(g[np.tril_indices(4, -1)] != 0)
    g = to_numpy(pa.grad(lambda m: xp.sum(linalg.solve_triangular(m, A(b))))(A(a)))  # upper, diagonal read
    assert np.all(np.tril(g, -1) == 0) and np.all(np.diag(g) != 0)


@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_reads_one_triangle_and_zeros_the_other(lower):
    s = spd(4)
    c, flag = linalg.cho_factor(A(s), lower=lower)
    assert flag is lower
    tri = np.tril if lower else np.triu
    c = to_numpy(c)
    np.testing.assert_array_equal(c, tri(c))  # zeros, not SciPy's arbitrary values
    close(c, tri(sl.cho_factor(s, lower=lower)[0]))
    # a non-symmetric matrix: the Hermitian matrix its read triangle defines is factored
    skew = (
        s
        + np.triu(RNG.standard_normal((4, 4)), 1) * (0 if lower else 1)
        + np.tril(RNG.standard_normal((4, 4)), -1) * (1 if lower else 0)
    )
    herm = tri(skew, -1 if lower else 1)
    herm = herm + herm.T + np.diag(np.diag(skew))
    close(linalg.cho_factor(A(skew), lower=lower)[0], sl.cholesky(herm, lower=lower))
    # its cotangent lies in the triangle read
    w = A(RNG.standard_normal((4, 4)))
    g = to_numpy(pa.grad(lambda m: xp.sum(w * linalg.cho_factor(m, lower=lower)[0]))(A(s)))
    other = np.triu(g, 1) if lower else np.tril(g, -1)
    assert np.all(other == 0) and np.any(g != 0)


def test_cho_solve_takes_scipy_cho_factor_output():
    """SciPy's cho_factor leaves arbitrary values in the other triangle: cho_solve does not read them."""
    s, b = spd(4), RNG.standard_normal((4, 3))
    for lower in (False, True):
        c, _ = sl.cho_factor(s, lower=lower)
        c = c + (np.triu(np.ones((4, 4)), 1) if lower else np.tril(np.ones((4, 4)), -1)) * 7.0
        close(linalg.cho_solve((A(c), lower), A(b)), sl.cho_solve((c, lower), b))
        g = to_numpy(pa.grad(lambda m, lo=lower: xp.sum(linalg.cho_solve((m, lo), A(b))))(A(c)))
        assert np.all((np.triu(g, 1) if lower else np.tril(g, -1)) == 0)


@pytest.mark.parametrize("trans", [0, 1, 2, "T", "C"])
def test_lu_solve_against_scipy_and_solve(trans):
    a, b = dominant(4, complex=True), RNG.standard_normal((4, 2)) + 1j * RNG.standard_normal((4, 2))
    lu, piv = sl.lu_factor(a)
    t = {"T": 1, "C": 2}.get(trans, trans)  # SciPy's lu_solve takes integers only; polyad both
    close(linalg.lu_solve((A(lu), A(piv)), A(b), trans=trans), sl.lu_solve((lu, piv), b, trans=t))
    close(linalg.lu_solve(linalg.lu_factor(A(a)), A(b), trans=trans), np.linalg.solve(op_np(a, trans), b))


def test_lu_factor_pivots_and_permutation():
    a = RNG.standard_normal((3, 5, 5))
    lu, piv = linalg.lu_factor(A(a))
    lu, piv = to_numpy(lu), to_numpy(piv)
    assert piv.dtype == np.int32
    perm = to_numpy(pivots_to_permutation(A(piv, np.int32)))
    for k in range(3):
        lu_k, piv_k = sl.lu_factor(a[k])
        close(lu[k], lu_k)
        np.testing.assert_array_equal(piv[k], piv_k)
        expected = list(range(5))  # LAPACK's interchanges, applied in order
        for i, p in enumerate(piv_k):
            expected[i], expected[p] = expected[p], expected[i]
        np.testing.assert_array_equal(perm[k], expected)
        low, up = np.tril(lu_k, -1) + np.eye(5), np.triu(lu_k)
        close(a[k][perm[k]], low @ up)  # P^T a = L U


def test_dtypes_follow_scipy():
    a32, b64 = dominant(3).astype(np.float32), RNG.standard_normal(3)
    assert to_numpy(linalg.solve_triangular(A(a32), A(b64.astype(np.float32)))).dtype == np.float32
    assert to_numpy(linalg.solve_triangular(A(a32), A(b64))).dtype == np.float64  # promoted, as SciPy
    assert to_numpy(linalg.cho_factor(A(spd(3).astype(np.float32)))[0]).dtype == np.float32
    ints = np.array([[2, 0], [1, 4]])
    x = linalg.solve_triangular(A(ints), A(np.array([2, 9])), lower=True)  # integers compute as floats
    close(x, [1.0, 2.0])
    assert to_numpy(x).dtype == np.float64
    assert to_numpy(linalg.lu_solve(linalg.lu_factor(A(a32)), A(b64 + 0j))).dtype == np.complex128


def test_overwrite_is_accepted_and_nothing_is_written():
    a, s, b = dominant(3), spd(3), RNG.standard_normal((3, 2))
    a_, s_, b_ = A(a), A(s), A(b)
    linalg.solve_triangular(a_, b_, overwrite_b=True)
    c = linalg.cho_factor(s_, overwrite_a=True)
    linalg.cho_solve(c, b_, overwrite_b=True)
    lu = linalg.lu_factor(a_, overwrite_a=True)
    linalg.lu_solve(lu, b_, overwrite_b=True)
    for before, arr in ((a, a_), (s, s_), (b, b_)):
        np.testing.assert_array_equal(to_numpy(arr), before)


def test_empty_systems():
    assert to_numpy(linalg.solve_triangular(A(np.zeros((0, 0))), A(np.zeros((0, 2))))).shape == (0, 2)
    assert to_numpy(linalg.cho_solve((A(np.zeros((2, 3, 3))), True), A(np.zeros((3, 0))))).shape == (2, 3, 0)
    lu, piv = linalg.lu_factor(A(np.zeros((2, 0, 0))))
    assert to_numpy(lu).shape == (2, 0, 0) and to_numpy(piv).shape == (2, 0)


# ------------------------------------------------------------------------------ the pairs under transforms


def _sym_matrix(v, base):
    """A symmetric positive definite matrix moving with the vector ``v``: ``base + v v^T``."""
    return base + xp.reshape(v, (-1, 1)) * xp.reshape(v, (1, -1))


@pytest.mark.parametrize("lower", [False, True])
def test_cho_pair_matches_solve_under_every_transform(lower):
    base, b0 = A(spd(4)), A(RNG.standard_normal((4, 2)))

    def by_cho(v, b):
        return linalg.cho_solve(linalg.cho_factor(_sym_matrix(v, base), lower=lower), b)

    def by_solve(v, b):
        return xp.linalg.solve(_sym_matrix(v, base), b)

    def scalar(f):
        return lambda v, b: xp.sum(xp.sin(f(v, b)))

    v = A(RNG.standard_normal(4) * 0.5)
    close(by_cho(v, b0), to_numpy(by_solve(v, b0)))
    for transform in (
        lambda f: pa.grad(scalar(f), argnums=(0, 1)),
        lambda f: pa.jacfwd(f, argnums=(0, 1)),
        lambda f: pa.jacrev(f, argnums=(0, 1)),
        lambda f: pa.hessian(scalar(f)),
        lambda f: lambda v, b: pa.jvp(f, (v, b), (xp.ones_like(v), b))[1],
    ):
        for got, expected in zip(_leaves(transform(by_cho)(v, b0)), _leaves(transform(by_solve)(v, b0))):
            close(got, to_numpy(expected), rtol=1e-8, atol=1e-10)
    vs = A(RNG.standard_normal((3, 4)) * 0.5)
    close(pa.vmap(by_cho, in_dims=(0, None))(vs, b0), to_numpy(pa.vmap(by_solve, in_dims=(0, None))(vs, b0)))
    got = pa.vmap(pa.grad(scalar(by_cho)), in_dims=(0, None))(vs, b0)
    close(got, to_numpy(pa.vmap(pa.grad(scalar(by_solve)), in_dims=(0, None))(vs, b0)), rtol=1e-8)
    close(pa.jit(pa.grad(scalar(by_cho)))(v, b0), to_numpy(pa.grad(scalar(by_solve))(v, b0)), rtol=1e-8)


def _leaves(x):
    return list(x) if isinstance(x, tuple) else [x]


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
def test_lu_pair_matches_solve_under_every_transform(trans, complex_):
    a0 = A(dominant(3, complex=complex_))
    b0 = A(RNG.standard_normal(3) + (1j * RNG.standard_normal(3) if complex_ else 0))

    def by_lu(a, b):
        return linalg.lu_solve(linalg.lu_factor(a), b, trans=trans)

    def by_solve(a, b):
        m = a if trans == 0 else xp.linalg.matrix_transpose(a)
        return xp.linalg.solve(xp.conj(m) if trans == 2 else m, b)

    def scalar(f):
        return lambda a, b: xp.sum(xp.real(xp.sin(f(a, b))))

    close(by_lu(a0, b0), to_numpy(by_solve(a0, b0)))
    transforms = [
        lambda f: pa.grad(scalar(f), argnums=(0, 1)),
        lambda f: lambda a, b: pa.jvp(f, (a, b), (xp.ones_like(a), b))[1],
    ]
    if not complex_:  # Jacobians and Hessians need real values
        transforms += [lambda f: pa.jacrev(f, argnums=(0, 1)), lambda f: pa.hessian(scalar(f))]
    for transform in transforms:
        for got, expected in zip(_leaves(transform(by_lu)(a0, b0)), _leaves(transform(by_solve)(a0, b0))):
            close(got, to_numpy(expected), rtol=1e-8, atol=1e-10)
    stack = A(dominant(3, batch=(4,), complex=complex_))
    close(
        pa.vmap(by_lu, in_dims=(0, None))(stack, b0),
        to_numpy(pa.vmap(by_solve, in_dims=(0, None))(stack, b0)),
    )
    lu, piv = pa.vmap(linalg.lu_factor)(stack)  # the pair itself, batched
    for k in range(4):
        lu_k, piv_k = sl.lu_factor(to_numpy(stack)[k])
        close(to_numpy(lu)[k], lu_k)
        np.testing.assert_array_equal(to_numpy(piv)[k], piv_k)
    got = pa.vmap(pa.grad(scalar(by_lu)), in_dims=(0, None))(stack, b0)
    close(got, to_numpy(pa.vmap(pa.grad(scalar(by_solve)), in_dims=(0, None))(stack, b0)), rtol=1e-8)


def test_vmap_of_cho_factor_itself_names_the_flag():
    """The flag is a Python bool, not an array: vmap a function returning ``c`` (or using the pair)."""
    stack = A(spd(3, batch=(2,)))
    with pytest.raises(TypeError, match="bool at output leaf 1"):
        pa.vmap(linalg.cho_factor)(stack)
    c = pa.vmap(lambda m: linalg.cho_factor(m, lower=True)[0])(stack)
    for k in range(2):
        close(to_numpy(c)[k], sl.cholesky(to_numpy(stack)[k], lower=True))


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: linalg.solve_triangular(A(np.ones((3, 2))), A(np.ones(3))), ValueError,
         r"a must be a square"),
        (lambda: linalg.solve_triangular(A(np.ones(3)), A(np.ones(3))), ValueError, r"got shape \(3,\)"),
        (lambda: linalg.solve_triangular(A(np.eye(3)), A(np.ones(2))), ValueError, r"b needs 3 rows"),
        (lambda: linalg.solve_triangular(A(np.eye(3)), A(np.ones((2, 3)))), ValueError, r"incompatible"),
        (lambda: linalg.solve_triangular(A(np.ones((2, 3, 3))), A(np.ones((4, 3, 1)))), ValueError,
         r"stack dimensions"),
        (lambda: linalg.solve_triangular(A(np.eye(3)), A(np.float64(1.0))), ValueError, r"0-d"),
        (lambda: linalg.solve_triangular(A(np.eye(3)), A(np.ones(3)), trans=3), ValueError,
         r"trans must be 0, 1, 2, 'N', 'T' or 'C', got 3"),
        (lambda: linalg.solve_triangular(A(np.eye(3)), A(np.ones(3)), trans="X"), ValueError, r"got 'X'"),
        (lambda: linalg.cho_factor(A(np.ones((2, 3)))), ValueError, r"cho_factor: a must be a square"),
        (lambda: linalg.cho_solve(A(np.eye(3)), A(np.ones(3))), TypeError, r"the pair \(c, lower\)"),
        (lambda: linalg.cho_solve((A(np.eye(3)), True), A(np.ones(4))), ValueError, r"shapes of c"),
        (lambda: linalg.lu_factor(A(np.ones((2, 3)))), ValueError, r"lu_factor: a must be a square"),
        (lambda: linalg.lu_solve(A(np.eye(3)), A(np.ones(3))), TypeError, r"the pair \(lu, piv\)"),
        (lambda: linalg.lu_solve((A(np.eye(3)), A(np.zeros(3))), A(np.ones(3))), TypeError,
         r"piv must be an integer array"),
        (lambda: linalg.lu_solve((A(np.eye(3)), A(np.zeros(2, np.int32))), A(np.ones(3))), ValueError,
         r"piv must have shape \(\.\.\., 3\)"),
        (lambda: linalg.lu_solve(linalg.lu_factor(A(np.eye(3))), A(np.ones(3)), trans=-1), ValueError,
         r"lu_solve: trans must be"),
    ],
)  # fmt: skip
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_check_finite(bad):
    a, s, b = dominant(3), spd(3), RNG.standard_normal(3)
    a_bad, b_bad = a.copy(), b.copy()
    a_bad[0, 2], b_bad[1] = bad, bad
    cases = [
        lambda m, v: linalg.solve_triangular(m, v),
        lambda m, v: linalg.cho_solve((m, False), v),
        lambda m, v: linalg.lu_solve((m, A(np.zeros(3, np.int32) + np.arange(3, dtype=np.int32))), v),
    ]
    for f in cases:
        for m, v, name in ((A(a_bad), A(b), "a|c|lu"), (A(a), A(b_bad), "b")):
            with pytest.raises(ValueError, match=rf"must not contain infs or NaNs \(({name});"):
                f(m, v)
    for factor in (linalg.cho_factor, linalg.lu_factor):
        s_bad = s.copy()
        s_bad[0, 0] = bad
        with pytest.raises(ValueError, match="must not contain infs or NaNs"):
            factor(A(s_bad))
    # check_finite=False computes (nan comes out); inside grad the values are at hand: checked
    x = linalg.solve_triangular(A(a), A(b_bad), check_finite=False)
    assert not np.isfinite(to_numpy(x)).all()
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):
        pa.grad(lambda m: xp.sum(linalg.solve_triangular(m, A(b_bad))))(A(a))
    # while pa.jit traces there are no values: nothing to check, the nan flows through
    jitted = pa.jit(lambda m, v: linalg.solve_triangular(m, v))
    assert not np.isfinite(to_numpy(jitted(A(a), A(b_bad)))).all()


# ------------------------------------------------------------------------------ kernels


@pytest.fixture
def without_scipy(monkeypatch):
    """The structured solves as without SciPy: the generic Array API kernels run on NumPy too."""
    monkeypatch.setattr(structured, "_SCIPY", [None])


def test_generic_kernels_agree_with_scipy(without_scipy):
    for complex_ in (False, True):
        a, b = dominant(4, batch=(2,), complex=complex_), RNG.standard_normal((2, 4, 3))
        for lower in (False, True):
            for trans in (0, 1, 2):
                for unit in (False, True):
                    got = linalg.solve_triangular(A(a), A(b), trans=trans, lower=lower, unit_diagonal=unit)
                    for k in range(2):
                        close(
                            to_numpy(got)[k],
                            sl.solve_triangular(a[k], b[k], trans=trans, lower=lower, unit_diagonal=unit),
                        )
            s = spd(4, batch=(2,))
            c, _ = linalg.cho_factor(A(s), lower=lower)
            x = linalg.cho_solve((c, lower), A(b[0, :, 0]))
            for k in range(2):
                close(to_numpy(c)[k], sl.cholesky(s[k], lower=lower))
                close(to_numpy(x)[k], sl.cho_solve((sl.cholesky(s[k], lower=lower), lower), b[0, :, 0]))
        lu, piv = linalg.lu_factor(A(a))
        for k in range(2):
            lu_k, piv_k = sl.lu_factor(a[k])
            close(to_numpy(lu)[k], lu_k)
            np.testing.assert_array_equal(to_numpy(piv)[k], piv_k)  # the same pivots (|Re|+|Im| if complex)
            for trans in (0, 1, 2):
                close(
                    to_numpy(linalg.lu_solve((lu, piv), A(b), trans=trans))[k],
                    sl.lu_solve((lu_k, piv_k), b[k], trans=trans),
                )


def test_generic_lu_of_a_singular_matrix_is_lapacks(without_scipy):
    a = np.array([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0], [0.0, 0.0, 1.0]])  # a zero column: a zero pivot
    lu, piv = linalg.lu_factor(A(a))
    with pytest.warns(sl.LinAlgWarning):
        lu_ref, piv_ref = sl.lu_factor(a)
    close(lu, lu_ref)
    np.testing.assert_array_equal(to_numpy(piv), piv_ref)


def test_scipy_kernels_on_numpy_generic_elsewhere(monkeypatch):
    on_numpy = dispatch.get_backend() == "numpy"
    assert structured.scipy_linalg_for((A(np.ones(2)),)) is (sl if on_numpy else None)
    calls = []
    for name in ("solve_triangular", "cholesky", "cho_solve", "lu_factor", "lu_solve"):
        real = getattr(sl, name)
        monkeypatch.setattr(sl, name, lambda *a, _f=real, _n=name, **k: calls.append(_n) or _f(*a, **k))
    a, b = A(dominant(3)), A(np.ones(3))
    linalg.solve_triangular(a, b)
    linalg.cho_solve(linalg.cho_factor(A(spd(3))), b)
    linalg.lu_solve(linalg.lu_factor(a), b)
    expected = ["solve_triangular", "cholesky", "cho_solve", "lu_factor", "lu_solve"] if on_numpy else []
    assert calls == expected


@pytest.mark.parametrize("small", [0, structured.SMALL], ids=["scipy per matrix", "batched generic"])
def test_both_cpu_kernels_on_stacks(monkeypatch, small):
    """Stacks run SciPy once per matrix, or (small matrices) NumPy's batched kernels: both as SciPy."""
    monkeypatch.setattr(structured, "SMALL", small)
    a, s = dominant(3, batch=(2, 1)), spd(3, batch=(3,))  # stacks (2, 1) and (3,) broadcast to (2, 3)
    lu_, piv = sl.lu_factor(a[0, 0])
    c = np.linalg.cholesky(s)
    for b in (RNG.standard_normal(3), RNG.standard_normal((3, 3, 2))):
        got = to_numpy(linalg.solve_triangular(A(a), A(b), trans=1, lower=True))
        chol = to_numpy(linalg.cho_solve((A(c), True), A(b)))
        lus = to_numpy(linalg.lu_solve((A(lu_), A(piv)), A(b), trans=2))
        for i in range(2):
            for j in range(3):
                bj = b if b.ndim == 1 else b[j]
                at = got[i, j] if b.ndim > 1 else got[i, 0]  # a 1-D b: the stack is a's, (2, 1)
                close(at, sl.solve_triangular(a[i, 0], bj, trans=1, lower=True))
        for j in range(3):
            bj = b if b.ndim == 1 else b[j]
            close(chol[j], sl.cho_solve((c[j], True), bj))
            close(lus if b.ndim == 1 else lus[j], sl.lu_solve((lu_, piv), bj, trans=2))


@pytest.mark.cuda
def test_cupy_kernels_against_scipy():
    import cupy

    a, s, b = dominant(4, batch=(2,)), spd(4, batch=(2,)), RNG.standard_normal((2, 4, 3))
    x = linalg.solve_triangular(cupy.asarray(a), cupy.asarray(b), trans=1, lower=True)
    c, _ = linalg.cho_factor(cupy.asarray(s), lower=True)
    y = linalg.cho_solve((c, True), cupy.asarray(b))
    lu, piv = linalg.lu_factor(cupy.asarray(a))
    z = linalg.lu_solve((lu, piv), cupy.asarray(b), trans=2)
    for k in range(2):
        close(cupy.asnumpy(x[k]), sl.solve_triangular(a[k], b[k], trans=1, lower=True))
        close(cupy.asnumpy(y[k]), sl.cho_solve((sl.cholesky(s[k], lower=True), True), b[k]))
        close(cupy.asnumpy(z[k]), sl.lu_solve(sl.lu_factor(a[k]), b[k], trans=2))

    def loss(m, v):
        return xp.sum(linalg.cho_solve(linalg.cho_factor(m), v))

    g = pa.grad(loss)(cupy.asarray(s[0]), cupy.asarray(b[0]))
    close(cupy.asnumpy(g), pa.grad(loss)(s[0], b[0]))  # the same rules on NumPy (SciPy's kernels)


# ------------------------------------------------------------------------------ a Gaussian process


def _gp_data(n=12):
    x = np.sort(RNG.uniform(0, 5, n))
    y = np.sin(x) + 0.1 * RNG.standard_normal(n)
    return A(x), A(y)


def _gp_kernel(theta, x):
    """RBF kernel plus noise: theta = (log length scale, log signal variance, log noise variance)."""
    d2 = (xp.reshape(x, (-1, 1)) - xp.reshape(x, (1, -1))) ** 2
    k = xp.exp(theta[1]) * xp.exp(-0.5 * d2 / xp.exp(2 * theta[0]))
    return k + xp.exp(theta[2]) * xp.eye(x.shape[0], dtype=x.dtype)


def gp_nll_cho(theta, x, y):
    """The negative log marginal likelihood, by a Cholesky factorisation."""
    c, lower = linalg.cho_factor(_gp_kernel(theta, x), lower=True)
    alpha = linalg.cho_solve((c, lower), y)
    n = x.shape[0]
    return 0.5 * xp.sum(y * alpha) + xp.sum(xp.log(xp.linalg.diagonal(c))) + 0.5 * n * math.log(2 * math.pi)


def gp_nll_solve(theta, x, y):
    """The same model by a general solve and slogdet."""
    k = _gp_kernel(theta, x)
    n = x.shape[0]
    return (
        0.5 * xp.sum(y * xp.linalg.solve(k, y))
        + 0.5 * xp.linalg.slogdet(k)[1]
        + 0.5 * n * math.log(2 * math.pi)
    )


def _central(f, theta, h=1e-5):
    g = np.zeros(theta.shape)
    for i in range(theta.size):
        e = np.zeros(theta.shape)
        e[i] = h
        g[i] = (float(f(A(theta + e))) - float(f(A(theta - e)))) / (2 * h)
    return g


def test_gaussian_process_likelihood_gradient():
    x, y = _gp_data()
    theta = np.array([0.1, 0.3, -2.0])
    xn, yn = to_numpy(x), to_numpy(y)
    k = to_numpy(_gp_kernel(A(theta), x))
    c = sl.cho_factor(k, lower=True)
    reference = (
        0.5 * yn @ sl.cho_solve(c, yn) + np.log(np.diag(c[0])).sum() + 0.5 * len(xn) * np.log(2 * np.pi)
    )
    close(gp_nll_cho(A(theta), x, y), reference)
    g = pa.grad(gp_nll_cho)(A(theta), x, y)
    close(g, _central(lambda t: gp_nll_cho(t, x, y), theta), rtol=1e-6, atol=1e-7)
    close(g, to_numpy(pa.grad(gp_nll_solve)(A(theta), x, y)), rtol=1e-9)
    h = pa.hessian(gp_nll_cho)(A(theta), x, y)
    close(h, to_numpy(pa.hessian(gp_nll_solve)(A(theta), x, y)), rtol=1e-8, atol=1e-10)
    rows = [_central(lambda t, i=i: pa.grad(gp_nll_cho)(t, x, y)[i], theta) for i in range(3)]
    close(h, np.array(rows), rtol=1e-5, atol=1e-6)
    close(pa.jit(pa.grad(gp_nll_cho))(A(theta), x, y), to_numpy(g), rtol=1e-12)
    thetas = A(np.array([theta, theta + 0.1, theta - 0.2]))
    per = pa.vmap(pa.grad(gp_nll_cho), in_dims=(0, None, None))(thetas, x, y)
    for k_, t in enumerate(to_numpy(thetas)):
        close(to_numpy(per)[k_], to_numpy(pa.grad(gp_nll_solve)(A(t), x, y)), rtol=1e-9)


# ------------------------------------------------------------------------------ a Kalman filter


def kalman_nll(log_q, log_r, ys, factor):
    """Negative log-likelihood of a 2-state constant-velocity model with position observations,
    by a Kalman filter whose innovation solves go through ``factor`` ("cho" or "solve")."""
    f = A(np.array([[1.0, 0.1], [0.0, 1.0]]))
    h = A(np.array([[1.0, 0.0]]))
    q = xp.exp(log_q) * A(np.array([[0.1**3 / 3, 0.1**2 / 2], [0.1**2 / 2, 0.1]]))
    r = xp.exp(log_r) * xp.eye(1, dtype=q.dtype)
    m, p = A(np.zeros((2, 1))), xp.eye(2, dtype=q.dtype)
    total = 0.0
    for t in range(ys.shape[0]):
        m, p = f @ m, f @ p @ xp.linalg.matrix_transpose(f) + q
        s = h @ p @ xp.linalg.matrix_transpose(h) + r
        v = ys[t : t + 1, :] - h @ m
        ph = p @ xp.linalg.matrix_transpose(h)
        if factor == "cho":
            c = linalg.cho_factor(s, lower=True)
            sv, sk = linalg.cho_solve(c, v), linalg.cho_solve(c, xp.linalg.matrix_transpose(ph))
            logdet = 2 * xp.sum(xp.log(xp.linalg.diagonal(c[0])))
        else:
            sv, sk = xp.linalg.solve(s, v), xp.linalg.solve(s, xp.linalg.matrix_transpose(ph))
            logdet = xp.linalg.slogdet(s)[1]
        total = total + 0.5 * (xp.sum(v * sv) + logdet + math.log(2 * math.pi))
        m = m + ph @ sv
        p = p - ph @ sk
    return total


def test_kalman_filter_likelihood_gradient():
    ys = A(np.cumsum(0.1 * RNG.standard_normal(15))[:, None] + 0.05 * RNG.standard_normal((15, 1)))
    params = np.array([-1.0, -3.0])

    def nll(pq, factor="cho"):
        return kalman_nll(pq[0], pq[1], ys, factor)

    g = pa.grad(nll)(A(params))
    close(g, _central(nll, params), rtol=1e-6, atol=1e-7)
    close(g, to_numpy(pa.grad(lambda pq: nll(pq, "solve"))(A(params))), rtol=1e-9)

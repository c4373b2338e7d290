"""Sparse Jacobians and Hessians (``pa.sparse_jacfwd``, ``pa.sparse_jacrev``, ``pa.sparse_hessian``)
against the dense ones; colourings checked by an independent loop; patterns reused; bad input refused."""

import numpy as np
import pytest
from helpers import to_numpy
from test_sparsity import HESSIANS, STRUCTURED, A, laplacian_2d

import polyad as pa
from polyad.api import coloring, sparse

scipy_sparse = pytest.importorskip("scipy.sparse")
xp = pa.xp


def _point(n, seed=0):
    return A(np.random.default_rng(seed).uniform(0.5, 1.5, n))


def _dense_jacobian(f, x, shape):
    return to_numpy(pa.jacfwd(f)(x)).reshape(shape)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", list(STRUCTURED))
def test_sparse_jacobian_equals_the_dense_one(name, mode):
    f, n = STRUCTURED[name]
    x = _point(n)
    make = pa.sparse_jacfwd if mode == "forward" else pa.sparse_jacrev
    J = make(f)(x)
    assert isinstance(J, scipy_sparse.csr_array) and J.dtype == np.float64
    np.testing.assert_allclose(J.toarray(), _dense_jacobian(f, x, J.shape), rtol=1e-13, atol=1e-14)


def test_a_five_point_stencil_takes_five_colours():
    for n in (8, 16, 40):
        f = lambda u, n=n: laplacian_2d(u, n)  # noqa: E731
        jac = pa.sparse_jacfwd(f, sparsity=pa.jacobian_sparsity(f)(_point(n * n)))
        assert jac.n_colors == 5
        x = _point(n * n, seed=3)
        np.testing.assert_allclose(jac(x).toarray(), _dense_jacobian(f, x, (n * n, n * n)), atol=1e-14)


def _valid_by_loop(pattern, colors):
    """No row holds two columns of one colour (checked row by row, independently of coloring.py)."""
    dense = pattern.toarray()
    for row in dense:
        cols = np.nonzero(row)[0]
        if len(set(colors[cols].tolist())) != len(cols):
            return False
    return True


@pytest.mark.parametrize("order", coloring.ORDERS)
def test_colourings_are_valid(order):
    rng = np.random.default_rng(0)
    patterns = [
        scipy_sparse.random_array((40, 30), density=d, rng=rng).astype(bool) for d in (0.02, 0.1, 0.4)
    ]
    patterns += [pa.jacobian_sparsity(f)(_point(n)) for f, n in STRUCTURED.values()]
    patterns += [
        scipy_sparse.csr_array(np.ones((3, 4), dtype=bool)),
        scipy_sparse.csr_array((5, 0), dtype=bool),
    ]
    for p in patterns:
        colors = coloring.color_columns(p, order)
        assert len(colors) == p.shape[1]
        assert _valid_by_loop(p, colors)
        assert coloring.is_valid(p, colors)
    dense_rows = scipy_sparse.csr_array(np.ones((3, 4), dtype=bool))
    assert coloring.color_columns(dense_rows, order).tolist() in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 2, 3])
    assert not coloring.is_valid(dense_rows, np.zeros(4, dtype=np.int64))


def test_a_given_pattern_is_reused_without_detection(monkeypatch):
    f = lambda u: laplacian_2d(u, 6)  # noqa: E731
    pattern = pa.jacobian_sparsity(f)(_point(36))
    jac = pa.sparse_jacfwd(f, sparsity=pattern)
    assert jac.n_colors == 5 and coloring.is_valid(pattern, jac.colors)

    def no_detection(*args, **kwargs):
        raise AssertionError("the pattern was detected again")

    monkeypatch.setattr(sparse, "_patterns", no_detection)
    monkeypatch.setattr(sparse, "color_columns", no_detection)
    for seed in (1, 2):  # Newton iterations: new points, the same pattern and colouring
        x = _point(36, seed)
        np.testing.assert_allclose(jac(x).toarray(), _dense_jacobian(f, x, (36, 36)), atol=1e-14)


def test_detection_at_each_call_keeps_the_colouring_of_an_unchanged_pattern(monkeypatch):
    f, n = STRUCTURED["2-d five-point stencil"]
    jac = pa.sparse_jacfwd(f)
    assert jac.sparsity is None and jac.colors is None
    calls = []
    original = sparse.color_columns
    monkeypatch.setattr(sparse, "color_columns", lambda *a: calls.append(1) or original(*a))
    for seed in (1, 2, 3):
        x = _point(n, seed)
        np.testing.assert_allclose(jac(x).toarray(), _dense_jacobian(f, x, (n, n)), atol=1e-14)
    assert len(calls) == 1 and jac.n_colors == 5


def test_a_pattern_missing_a_non_zero_is_an_error():
    f = lambda x: x[1:] * x[:-1]  # noqa: E731
    x = _point(6)
    diagonal_only = scipy_sparse.csr_array(np.eye(5, 6, dtype=bool))
    with pytest.raises(ValueError, match="misses a non-zero"):
        pa.sparse_jacfwd(f, sparsity=diagonal_only)(x)
    with pytest.raises(ValueError, match="misses a non-zero"):
        pa.sparse_jacrev(f, sparsity=scipy_sparse.csr_array(np.eye(5, 6, 1, dtype=bool)))(x)


def test_a_denser_pattern_gives_explicit_zeros():
    f = lambda x: x * 2.0  # noqa: E731
    J = pa.sparse_jacfwd(f, sparsity=np.eye(4, dtype=bool) | np.eye(4, k=1, dtype=bool))(_point(4))
    assert J.nnz == 7 and J.toarray().tolist() == (2.0 * np.eye(4)).tolist()


def test_pytrees_and_several_arguments():
    def f(p, s):
        return {"a": p["u"][1:] * p["v"], "b": xp.sum(p["u"]) * s}

    p, s = {"u": _point(3), "v": _point(2, 1)}, A(2.0)
    J = pa.sparse_jacfwd(f, argnums=(0, 1))(p, s)
    Jr = pa.sparse_jacrev(f, argnums=(0, 1))(p, s)
    u, v, sv = (to_numpy(p["u"]), to_numpy(p["v"]), 2.0)
    expected = np.array(
        [
            [0, v[0], 0, u[1], 0, 0],
            [0, 0, v[1], 0, u[2], 0],
            [sv, sv, sv, 0, 0, u.sum()],
        ]
    )
    np.testing.assert_allclose(J.toarray(), expected, rtol=1e-14)
    np.testing.assert_allclose(Jr.toarray(), expected, rtol=1e-14)


@pytest.mark.parametrize("name", list(HESSIANS))
def test_sparse_hessian_equals_the_dense_one(name):
    f, n = HESSIANS[name]
    x = _point(n, 4)
    H = pa.sparse_hessian(f)(x)
    np.testing.assert_allclose(H.toarray(), to_numpy(pa.hessian(f)(x)), rtol=1e-12, atol=1e-13)
    reused = pa.sparse_hessian(f, sparsity=pa.hessian_sparsity(f)(x))
    np.testing.assert_allclose(reused(x).toarray(), H.toarray(), rtol=1e-12, atol=1e-13)


def test_hessian_with_a_one_sided_pattern_is_made_symmetric():
    f = lambda x: xp.sum(x[1:] * x[:-1])  # noqa: E731
    upper = np.eye(4, k=1, dtype=bool)
    H = pa.sparse_hessian(f, sparsity=upper)(_point(4))
    np.testing.assert_allclose(H.toarray(), np.eye(4, k=1) + np.eye(4, k=-1))


def test_newton_with_a_reused_pattern():
    spsolve = pytest.importorskip("scipy.sparse.linalg").spsolve
    n = 12

    def residual(u):  # the stencil, -0.01 exp(u) (laplacian_2d has -0.1 exp(u)) and a source
        return laplacian_2d(u, n) + 0.09 * xp.exp(u) - 0.05

    jac = pa.sparse_jacfwd(residual, sparsity=pa.jacobian_sparsity(residual)(A(np.zeros(n * n))))
    u = np.zeros(n * n)
    for _ in range(20):
        r = to_numpy(residual(A(u)))
        if np.max(np.abs(r)) < 1e-12:
            break
        u = u - spsolve(jac(A(u)).tocsc(), r)
    assert np.max(np.abs(to_numpy(residual(A(u))))) < 1e-12


def test_float32_values():
    x = A(np.linspace(1.0, 2.0, 5))
    x32 = xp.astype(x, xp.float32)
    J = pa.sparse_jacfwd(lambda v: v[1:] * v[:-1])(x32)
    assert J.dtype == np.float32


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "make", [pa.jacobian_sparsity, pa.hessian_sparsity, pa.sparse_jacfwd, pa.sparse_jacrev, pa.sparse_hessian]
)
def test_bad_functions_and_argnums(make):
    with pytest.raises(TypeError, match="func must be callable"):
        make(3)
    with pytest.raises(TypeError, match="argnums"):
        make(xp.sin, argnums="0")


@pytest.mark.parametrize("make", [pa.sparse_jacfwd, pa.sparse_jacrev, pa.sparse_hessian])
def test_bad_sparsity(make):
    with pytest.raises(TypeError, match="sparsity must be a 2-D scipy.sparse"):
        make(xp.sin, sparsity=[[True]])
    with pytest.raises(ValueError, match="sparsity must be 2-D"):
        make(xp.sin, sparsity=np.ones((2, 2, 2), dtype=bool))
    with pytest.raises(ValueError, match="coloring must be one of"):
        make(xp.sin, coloring="random")


def test_hessian_sparsity_must_be_square():
    with pytest.raises(ValueError, match=r"sparse_hessian\(sparsity=...\): a Hessian's pattern is square"):
        pa.sparse_hessian(lambda v: xp.sum(v), sparsity=np.ones((2, 3), dtype=bool))


def test_sparsity_of_the_wrong_shape():
    f = lambda x: x[1:] - x[:-1]  # noqa: E731
    with pytest.raises(ValueError, match=r"sparsity has shape \(3, 3\).*4 elements"):
        pa.sparse_jacfwd(f, sparsity=np.ones((3, 3), dtype=bool))(_point(4))
    with pytest.raises(ValueError, match=r"sparsity has shape \(4, 4\).*\(3, 4\)"):
        pa.sparse_jacfwd(f, sparsity=np.ones((4, 4), dtype=bool))(_point(4))
    with pytest.raises(ValueError, match=r"sparsity has shape \(4, 4\).*\(3, 4\)"):
        pa.sparse_jacrev(f, sparsity=np.ones((4, 4), dtype=bool))(_point(4))


@pytest.mark.parametrize("make", [pa.jacobian_sparsity, pa.sparse_jacfwd, pa.sparse_jacrev])
def test_bad_arguments(make):
    with pytest.raises(TypeError, match="must be an array"):
        make(xp.sin)([1, 2])
    with pytest.raises(TypeError, match="floating dtype"):
        make(xp.sin)(A(np.ones(2)) > 0)
    with pytest.raises(TypeError, match="complex"):
        make(xp.sin)(xp.astype(A(np.ones(2)), xp.complex128))
    with pytest.raises(TypeError, match="plain arrays"):
        pa.vmap(lambda v: make(xp.sin)(v))(A(np.ones((2, 2))))
    with pytest.raises(TypeError, match="integer|floating"):
        make(lambda v: xp.argmax(v))(A(np.ones(2)))


def test_without_scipy_the_error_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError("No module named 'scipy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    with pytest.raises(ImportError, match=r"polyad\[scipy\]"):
        pa.jacobian_sparsity(xp.sin)(A(np.ones(2)))

"""Sparse Jacobians and Hessians (``pa.sparse_jacfwd``, ``pa.sparse_jacrev``, ``pa.sparse_hessian``)
against the dense ones; colourings checked by an independent loop; patterns reused; bad input refused."""

import numpy as np
import pytest
from helpers import to_numpy
from test_sparsity import HESSIANS, STRUCTURED, A, laplacian_2d

import polyad as pa
import polyad.core.dispatch as dispatch
from polyad import backends
from polyad.api import _coloring as coloring
from polyad.api import sparse

scipy_sparse = pytest.importorskip("scipy.sparse")
xp = pa.xp


def _point(n, seed=0):
    return A(np.random.default_rng(seed).uniform(0.5, 1.5, n))


def _dense(J, like):
    """A sparse result as a NumPy array, through the sparse container ``like``'s backend declares."""
    return to_numpy(dispatch.backend_of_array(like).sparse.to_dense(J))


def _in_container(J, like):
    """Whether ``J`` is held as ``like``'s backend declares: its library's CSR matrix (SciPy's, or an
    ArrayCSR of array_api_strict's arrays on ``like``'s device), or its dense array on that device."""
    support = dispatch.backend_of_array(like).sparse
    if support.container == "csr":
        return support.is_sparse(J) and J.format == "csr" and getattr(J, "device", like.device) == like.device
    return dispatch.backend_of_array(J) is dispatch.backend_of_array(like) and J.device == like.device


def _dense_jacobian(f, x, shape):
    return to_numpy(pa.jacfwd(f)(x)).reshape(shape)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("name", list(STRUCTURED))
def test_sparse_jacobian_equals_the_dense_one(name, mode):
    f, n = STRUCTURED[name]
    x = _point(n)
    make = pa.sparse_jacfwd if mode == "forward" else pa.sparse_jacrev
    J = make(f)(x)
    assert _in_container(J, x) and J.dtype == xp.float64
    np.testing.assert_allclose(_dense(J, x), _dense_jacobian(f, x, J.shape), rtol=1e-13, atol=1e-14)


def test_a_five_point_stencil_takes_five_colours():
    for n in (8, 16, 40):
        f = lambda u, n=n: laplacian_2d(u, n)  # noqa: E731
        jac = pa.sparse_jacfwd(f, sparsity=pa.jacobian_sparsity(f)(_point(n * n)))
        assert jac.n_colors == 5
        x = _point(n * n, seed=3)
        np.testing.assert_allclose(_dense(jac(x), x), _dense_jacobian(f, x, (n * n, n * n)), atol=1e-14)


def _valid_by_loop(pattern, colors):
    """No row holds two columns of one colour (checked row by row, independently of api/_coloring.py)."""
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

    monkeypatch.setattr(sparse, "detect_pattern", no_detection)
    monkeypatch.setattr(sparse, "color_columns", no_detection)
    for seed in (1, 2):  # Newton iterations: new points, the same pattern and colouring
        x = _point(36, seed)
        np.testing.assert_allclose(_dense(jac(x), x), _dense_jacobian(f, x, (36, 36)), atol=1e-14)


def test_detection_at_each_call_keeps_the_colouring_of_an_unchanged_pattern(monkeypatch):
    f, n = STRUCTURED["2-d five-point stencil"]
    jac = pa.sparse_jacfwd(f)
    assert jac.sparsity is None and jac.colors is None
    calls = []
    original = sparse.color_columns
    monkeypatch.setattr(sparse, "color_columns", lambda *a: calls.append(1) or original(*a))
    for seed in (1, 2, 3):
        x = _point(n, seed)
        np.testing.assert_allclose(_dense(jac(x), x), _dense_jacobian(f, x, (n, n)), atol=1e-14)
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
    x = _point(4)
    J = pa.sparse_jacfwd(f, sparsity=np.eye(4, dtype=bool) | np.eye(4, k=1, dtype=bool))(x)
    assert (J.nnz == 7 if hasattr(J, "nnz") else True) and _dense(J, x).tolist() == (2.0 * np.eye(4)).tolist()


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
    np.testing.assert_allclose(_dense(J, s), expected, rtol=1e-14)
    np.testing.assert_allclose(_dense(Jr, s), expected, rtol=1e-14)


@pytest.mark.parametrize("name", list(HESSIANS))
def test_sparse_hessian_equals_the_dense_one(name):
    f, n = HESSIANS[name]
    x = _point(n, 4)
    H = pa.sparse_hessian(f)(x)
    np.testing.assert_allclose(_dense(H, x), to_numpy(pa.hessian(f)(x)), rtol=1e-12, atol=1e-13)
    reused = pa.sparse_hessian(f, sparsity=pa.hessian_sparsity(f)(x))
    np.testing.assert_allclose(_dense(reused(x), x), _dense(H, x), rtol=1e-12, atol=1e-13)


def test_hessian_with_a_one_sided_pattern_is_made_symmetric():
    f = lambda x: xp.sum(x[1:] * x[:-1])  # noqa: E731
    upper = np.eye(4, k=1, dtype=bool)
    x = _point(4)
    H = pa.sparse_hessian(f, sparsity=upper)(x)
    np.testing.assert_allclose(_dense(H, x), np.eye(4, k=1) + np.eye(4, k=-1))


def test_newton_with_a_reused_pattern():
    n = 12

    def residual(u):  # the stencil, -0.01 exp(u) (laplacian_2d has -0.1 exp(u)) and a source
        return laplacian_2d(u, n) + 0.09 * xp.exp(u) - 0.05

    jac = pa.sparse_jacfwd(residual, sparsity=pa.jacobian_sparsity(residual)(A(np.zeros(n * n))))
    u = A(np.zeros(n * n))
    support = dispatch.backend_of_array(u).sparse  # the backend's own direct solve: SciPy, cupyx, ...
    for _ in range(20):
        r = residual(u)
        if np.max(np.abs(to_numpy(r))) < 1e-12:
            break
        u = u - support.spsolve(jac(u), r)
    assert np.max(np.abs(to_numpy(residual(u)))) < 1e-12


def test_float32_values():
    x = A(np.linspace(1.0, 2.0, 5))
    x32 = xp.astype(x, xp.float32)
    J = pa.sparse_jacfwd(lambda v: v[1:] * v[:-1])(x32)
    assert J.dtype == xp.float32


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


# ------------------------------------------------------------------------------ on the device


def _stencil(u):
    """The five-point stencil of ``laplacian_2d`` on a 6 x 6 grid, its padding made on ``u``'s device."""
    n = 6
    grid = xp.reshape(u, (n, n))
    zrow = xp.zeros((1, n), dtype=u.dtype, device=u.device)
    zcol = xp.zeros((n + 2, 1), dtype=u.dtype, device=u.device)
    padded = xp.concat([zcol, xp.concat([zrow, grid, zrow], axis=0), zcol], axis=1)
    neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    return xp.reshape(4.0 * padded[1:-1, 1:-1] - neighbours, (n * n,)) - 0.1 * xp.exp(u)


def _stencil_jacobians():
    f = _stencil
    pattern = pa.jacobian_sparsity(f)(_point(36))

    def energy(u):
        return xp.sum((u[:-1] ** 2 + u[-1] ** 2) ** 2) + xp.sum(u[1:] * u[:-1])

    h_pattern = pa.hessian_sparsity(energy)(_point(36))
    jacs = [pa.sparse_jacfwd(f, sparsity=pattern), pa.sparse_jacrev(f, sparsity=pattern)]
    return jacs + [pa.sparse_hessian(energy, sparsity=h_pattern)], (f, f, energy)


def test_a_reused_pattern_makes_no_host_copy():
    x = _point(36, 5)
    jacs, funcs = _stencil_jacobians()
    for jac in jacs:
        jac(x)  # the first call at this device moves the seeds and index arrays there
    before = backends.host_copies()
    results = [jac(x) for jac in jacs]
    assert backends.host_copies() == before
    dense = [_dense_jacobian(funcs[0], x, (36, 36))] * 2 + [to_numpy(pa.hessian(funcs[2])(x))]
    for J, expected in zip(results, dense, strict=True):
        assert _in_container(J, x)
        np.testing.assert_allclose(_dense(J, x), expected, rtol=1e-13, atol=1e-13)


def test_on_a_device_that_refuses_numpy():
    """array_api_strict's "device1" refuses np.asarray as CUDA arrays do: the whole call stays there."""
    strict = pytest.importorskip("array_api_strict")
    device = strict.Device("device1")
    host_x = to_numpy(_point(36, 6))
    x = strict.asarray(host_x, device=device)
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        np.asarray(x)  # the premise: a host conversion would fail here
    jacs, funcs = _stencil_jacobians()
    for jac, f, hessian in zip(jacs, funcs, (False, False, True), strict=True):
        before = backends.host_copies()
        J = jac(x)
        assert backends.host_copies() == before
        assert _in_container(J, x) and J.device == device and J.shape == (36, 36)
        dense = dispatch.backend_of_array(x).sparse.to_dense(J)  # densified on the device too
        assert isinstance(dense, type(x)) and dense.device == device
        expected = pa.hessian(f)(host_x) if hessian else pa.jacfwd(f)(host_x)
        back = np.asarray(dense.to_device(strict.__array_namespace_info__().default_device()))
        np.testing.assert_allclose(back, expected, rtol=1e-13, atol=1e-13)


def test_a_missing_non_zero_is_found_on_the_device():
    strict = pytest.importorskip("array_api_strict")
    x = strict.asarray(np.linspace(1.0, 2.0, 5), device=strict.Device("device1"))
    f = lambda v: v * xp.sum(v)  # noqa: E731  (dense Jacobian)
    with pytest.raises(ValueError, match="misses a non-zero"):
        pa.sparse_jacfwd(f, sparsity=np.eye(5, dtype=bool))(x)


# ------------------------------------------------------------------------------ star colouring


def _recoverable_by_loop(pattern, colors):
    """Each non-zero (i, j) is alone among its colour in row i, or (i, j)'s mirror in row j; and
    neighbours differ in colour (a plain loop over the dense pattern, independent of api/_coloring.py)."""
    dense = pattern.toarray()
    n = dense.shape[0]
    for i in range(n):
        for j in range(n):
            if not dense[i, j]:
                continue
            if i != j and colors[i] == colors[j]:
                return False
            alone_in_i = sum(1 for k in range(n) if dense[i, k] and colors[k] == colors[j]) == 1
            alone_in_j = sum(1 for k in range(n) if dense[j, k] and colors[k] == colors[i]) == 1
            if not (alone_in_i or alone_in_j):
                return False
    return True


def arwhead(x):
    """CUTEst's ARWHEAD: sum of (x_i^2 + x_n^2)^2 - 4 x_i + 3: an arrowhead Hessian."""
    return xp.sum((x[:-1] ** 2 + x[-1] ** 2) ** 2 - 4.0 * x[:-1] + 3.0)


def test_an_arrowhead_hessian_takes_two_star_colours():
    n = 40
    x = _point(n, 7)
    pattern = pa.hessian_sparsity(arwhead)(x)
    star = pa.sparse_hessian(arwhead, sparsity=pattern, coloring="star")
    distance1 = pa.sparse_hessian(arwhead, sparsity=pattern, coloring="dsatur")
    auto = pa.sparse_hessian(arwhead, sparsity=pattern)
    assert star.n_colors <= 3 and distance1.n_colors == n and auto.n_colors == star.n_colors
    assert _recoverable_by_loop(pattern, star.colors)
    expected = to_numpy(pa.hessian(arwhead)(x))
    for H in (star, distance1, pa.sparse_hessian(arwhead, coloring="star")):
        np.testing.assert_allclose(_dense(H(x), x), expected, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_star_colouring_on_random_symmetric_patterns(seed):
    rng = np.random.default_rng(seed)
    n = 30
    mask = scipy_sparse.random_array((n, n), density=0.08, rng=rng).toarray() != 0
    mask = mask | mask.T
    weights = np.triu(rng.uniform(0.5, 1.5, (n, n)) * mask)
    S = A(weights + weights.T)

    def f(v):  # Hessian: the weights' pattern (twice S) and the diagonal of exp
        return xp.sum(v * (S @ v)) + xp.sum(xp.exp(v))

    x = _point(n, seed)
    pattern = pa.hessian_sparsity(f)(x)
    star = pa.sparse_hessian(f, sparsity=pattern, coloring="star")
    assert coloring.is_star_coloring(pattern, star.colors) and _recoverable_by_loop(pattern, star.colors)
    np.testing.assert_allclose(_dense(star(x), x), to_numpy(pa.hessian(f)(x)), rtol=1e-13, atol=1e-12)
    distance1 = pa.sparse_hessian(f, sparsity=pattern, coloring="dsatur")
    auto = pa.sparse_hessian(f, sparsity=pattern)
    assert auto.n_colors == (star.n_colors if star.n_colors < distance1.n_colors else distance1.n_colors)


def _star_by_paths(pattern, colors):
    """The star property checked path by path: neighbours differ, no path on 4 vertices has 2 colours."""
    dense = pattern.toarray().astype(bool)
    np.fill_diagonal(dense, False)
    nb = [np.flatnonzero(row).tolist() for row in dense]
    for v in range(len(nb)):
        for w in nb[v]:
            if colors[v] == colors[w]:
                return False
            for x in nb[w]:
                if x != v and colors[x] == colors[v]:
                    if any(y not in (v, w) and colors[y] == colors[w] for y in nb[x]):
                        return False
    return True


@pytest.mark.parametrize("seed", range(3))
def test_the_star_check_agrees_with_a_path_by_path_loop(seed):
    rng = np.random.default_rng(10 + seed)
    n = 25
    mask = rng.uniform(size=(n, n)) < 0.12
    pattern = scipy_sparse.csr_array(mask | mask.T | np.eye(n, dtype=bool))
    star = coloring.star_coloring(pattern)
    assert _star_by_paths(pattern, star) and coloring.is_star_coloring(pattern, star)
    verdicts = []
    for trial in range(40):  # random colourings, most of them not star colourings
        colors = rng.integers(0, 3 + trial // 4, n)
        verdicts.append(_star_by_paths(pattern, colors))
        assert coloring.is_star_coloring(pattern, colors) == verdicts[-1]
    assert not all(verdicts)


def _arwhead_hessian(x):
    """ARWHEAD's Hessian in closed form, as (diagonal, last row): H_ii = 12 x_i^2 + 4 x_n^2,
    H_in = 8 x_i x_n, H_nn = sum_i (4 x_i^2 + 12 x_n^2) (i < n)."""
    head, last = x[:-1], x[-1]
    return np.append(12 * head**2 + 4 * last**2, np.sum(4 * head**2 + 12 * last**2)), 8 * head * last


def test_an_arrowhead_hessian_of_a_hundred_thousand_unknowns_in_two_products():
    import tracemalloc  # noqa: PLC0415

    n = 100_000
    host = np.random.default_rng(5).uniform(0.5, 1.5, n)
    x = A(host)
    tracemalloc.start()
    try:
        pattern = pa.hessian_sparsity(arwhead)(x)
        H = pa.sparse_hessian(arwhead, sparsity=pattern)
        M = H(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 2 colours: 2 Hessian-vector products, and the probe's (the check that the pattern holds)
    assert H.n_colors == 2 and coloring.is_star_coloring(pattern, H.colors)
    assert peak < 300 * 2**20  # the dense Hessian: 8e10 bytes
    data, indices, indptr = (to_numpy(a) for a in (M.data, M.indices, M.indptr))
    rows = np.repeat(np.arange(n), np.diff(indptr))
    diagonal, last_row = _arwhead_hessian(host)
    expected = np.where(rows == indices, diagonal[rows], 0.0)
    expected = np.where((rows == n - 1) & (indices < n - 1), last_row[np.minimum(indices, n - 2)], expected)
    expected = np.where((indices == n - 1) & (rows < n - 1), last_row[np.minimum(rows, n - 2)], expected)
    assert len(data) == 3 * n - 2
    np.testing.assert_allclose(data, expected, rtol=1e-13)


def test_an_array_csr_matrix_vector_product_stays_sparse():
    import array_api_strict as strict  # noqa: PLC0415

    from polyad.backends.array_csr import ArrayCSR  # noqa: PLC0415

    rng = np.random.default_rng(3)
    for m, n, density in [(7, 5, 0.3), (60, 90, 0.04), (3, 4, 0.0), (150, 150, 0.5)]:  # empty rows too
        S = scipy_sparse.random_array((m, n), density=density, rng=rng, format="csr")
        S.sort_indices()
        parts = (S.data, S.indices.astype(np.int64), S.indptr.astype(np.int64))
        M = ArrayCSR(strict, *map(strict.asarray, parts), S.shape)
        v = rng.normal(size=n)
        np.testing.assert_allclose(np.asarray(M @ strict.asarray(v)), S @ v, rtol=1e-13, atol=1e-13)
    n = 10**6  # dense: 8 TB
    rows = np.arange(n, dtype=np.int64)
    M = ArrayCSR(
        strict, strict.asarray(rows + 1.0), strict.asarray(rows), strict.asarray(np.arange(n + 1)), (n, n)
    )
    np.testing.assert_array_equal(np.asarray(M @ strict.ones(n, dtype=strict.float64)), rows + 1.0)


def test_an_array_csr_matrix_times_a_matrix_stays_sparse():
    # on main, ArrayCSR @ matrix went through the dense array (and an int64 index per dense entry)
    import tracemalloc  # noqa: PLC0415

    import array_api_strict as strict  # noqa: PLC0415

    from polyad.backends.array_csr import ArrayCSR  # noqa: PLC0415

    def as_array_csr(S):
        S.sort_indices()
        parts = (S.data, S.indices.astype(np.int64), S.indptr.astype(np.int64))
        return ArrayCSR(strict, *map(strict.asarray, parts), S.shape)

    rng = np.random.default_rng(4)
    for m, n, k, density in [(7, 5, 3, 0.3), (60, 90, 4, 0.04), (3, 4, 2, 0.0), (150, 150, 1, 0.5)]:
        S = scipy_sparse.random_array((m, n), density=density, rng=rng, format="csr")
        B = rng.normal(size=(n, k))
        product = as_array_csr(S) @ strict.asarray(B)
        assert product.shape == (m, k)
        np.testing.assert_allclose(np.asarray(product), S @ B, rtol=1e-13, atol=1e-13)
    n, k = 5_000, 3  # a tridiagonal matrix times 3 columns: its dense array alone is 200 MB
    S = scipy_sparse.diags_array([np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], offsets=[-1, 0, 1])
    M, B = as_array_csr(S.tocsr()), rng.normal(size=(n, k))
    tracemalloc.start()
    try:
        product = np.asarray(M @ strict.asarray(B))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # O(nnz k): 1.5e4 x 3 x 8 bytes per array in the scan
    np.testing.assert_allclose(product, S @ B, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="other must have 5 rows"):
        as_array_csr(scipy_sparse.random_array((4, 5), density=0.5, rng=rng, format="csr")) @ strict.ones(
            (4, 2)
        )
    with pytest.raises(TypeError, match="1-D or 2-D array"):
        as_array_csr(scipy_sparse.eye_array(3, format="csr")) @ strict.ones((2, 3, 3))


def test_a_star_colouring_is_for_hessians_only():
    with pytest.raises(ValueError, match="star colouring needs a symmetric matrix"):
        pa.sparse_jacfwd(xp.sin, coloring="star")


# ------------------------------------------------------------------------------ bidirectional colouring


def _arrow(x):
    """A dense column (the scale x[0]) and a dense row (the total): each direction alone needs n."""
    return xp.concat([x[0] * x[1:] ** 2 + xp.sin(x[:-1]), xp.sum(x * x, keepdims=True)])


def test_a_dense_row_and_column_take_a_few_bidirectional_colours():
    n = 40
    x = _point(n, 8)
    pattern = pa.jacobian_sparsity(_arrow)(x)
    both = pa.sparse_jacobian(_arrow, sparsity=pattern, mode="bidirectional")
    auto = pa.sparse_jacobian(_arrow, sparsity=pattern)
    forward, reverse = pa.sparse_jacfwd(_arrow, sparsity=pattern), pa.sparse_jacrev(_arrow, sparsity=pattern)
    assert both.n_colors <= 4 and forward.n_colors >= n - 1 and reverse.n_colors >= n - 1
    assert auto.chosen_mode == "bidirectional" and auto.n_colors == both.n_colors
    expected = _dense_jacobian(_arrow, x, (n, n))
    for jac in (both, auto, pa.sparse_jacobian(_arrow, mode="bidirectional")):
        J = jac(x)
        assert _in_container(J, x)
        np.testing.assert_allclose(_dense(J, x), expected, rtol=1e-13, atol=1e-13)
    before = backends.host_copies()
    both(x)
    assert backends.host_copies() == before


@pytest.mark.parametrize("name", list(STRUCTURED))
def test_bidirectional_jacobians_equal_the_dense_ones(name):
    f, n = STRUCTURED[name]
    x = _point(n)
    J = pa.sparse_jacobian(f, mode="bidirectional")(x)
    np.testing.assert_allclose(_dense(J, x), _dense_jacobian(f, x, J.shape), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_bidirectional_on_random_patterns_with_dense_rows_and_columns(seed):
    rng = np.random.default_rng(seed)
    m, n = 25, 30
    mask = rng.uniform(size=(m, n)) < 0.08
    mask[rng.integers(m), :] = True
    mask[:, rng.integers(n)] = True
    W = A(rng.uniform(0.5, 1.5, (m, n)) * mask)

    def f(v):
        return W @ xp.sin(v) + xp.exp(W @ v) * 0.1

    x = _point(n, seed)
    pattern = pa.jacobian_sparsity(f)(x)
    jac = pa.sparse_jacobian(f, sparsity=pattern, mode="bidirectional")
    by_rows, columns, rows = coloring.bidirectional_colors(pattern)
    kept = pattern.toarray()[~by_rows]
    assert _valid_by_loop(scipy_sparse.csr_array(kept), columns)  # JVP side: columns apart in its rows
    assert _valid_by_loop(scipy_sparse.csr_array(pattern.toarray()[by_rows].T), rows[by_rows])
    np.testing.assert_allclose(_dense(jac(x), x), _dense_jacobian(f, x, (m, n)), rtol=1e-12, atol=1e-13)


def test_a_bidirectional_pattern_missing_a_non_zero_is_an_error():
    x = _point(12)
    pattern = pa.jacobian_sparsity(_arrow)(x).toarray()
    pattern[3, 7] = True  # harmless extra entry
    missing = pattern.copy()
    missing[5, 5] = False  # a diagonal non-zero of the JVP side
    with pytest.raises(ValueError, match="misses a non-zero"):
        pa.sparse_jacobian(_arrow, sparsity=missing, mode="bidirectional")(x)
    missing = pattern.copy()
    missing[-1, 4] = False  # one of the dense row's (the VJP side)
    with pytest.raises(ValueError, match="misses a non-zero"):
        pa.sparse_jacobian(_arrow, sparsity=missing, mode="bidirectional")(x)
    with pytest.raises(ValueError, match="mode must be one of"):
        pa.sparse_jacobian(_arrow, mode="both")


def test_bidirectional_on_a_device_that_refuses_numpy():
    strict = pytest.importorskip("array_api_strict")
    device = strict.Device("device1")
    host_x = to_numpy(_point(20, 9))
    jac = pa.sparse_jacobian(_arrow, sparsity=pa.jacobian_sparsity(_arrow)(host_x), mode="bidirectional")
    x = strict.asarray(host_x, device=device)
    before = backends.host_copies()
    J = jac(x)
    assert backends.host_copies() == before and J.device == device
    dense = dispatch.backend_of_array(x).sparse.to_dense(J)
    back = np.asarray(dense.to_device(strict.__array_namespace_info__().default_device()))
    np.testing.assert_allclose(back, pa.jacfwd(_arrow)(host_x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("mode", ["forward", "reverse", "bidirectional", "star"])
def test_each_mode_with_a_reused_pattern_stays_on_a_device_that_refuses_numpy(mode):
    """Seeds, products, recovery and the result's container all on device1, for each way of compressing:
    JVPs of column colours, VJPs of row colours, both, and a star-coloured Hessian."""
    strict = pytest.importorskip("array_api_strict")
    device = strict.Device("device1")
    n = 30
    host_x = to_numpy(_point(n, 11))
    if mode == "star":
        jac = pa.sparse_hessian(arwhead, sparsity=pa.hessian_sparsity(arwhead)(host_x), coloring="star")
        diagonal, last_row = _arwhead_hessian(host_x)
        expected = np.diag(diagonal)
        expected[-1, :-1] = expected[:-1, -1] = last_row
        assert jac.n_colors == 2 and coloring.is_star_coloring(jac.sparsity, jac.colors)
    else:
        jac = pa.sparse_jacobian(_arrow, sparsity=pa.jacobian_sparsity(_arrow)(host_x), mode=mode)
        expected = to_numpy(pa.jacfwd(_arrow)(host_x))
        assert jac.chosen_mode == mode
    x = strict.asarray(host_x, device=device)
    before = backends.host_copies()
    results = [jac(x), jac(x)]  # the first call at device1 places the seeds there; the second reuses them
    assert backends.host_copies() == before
    default = strict.__array_namespace_info__().default_device()
    for J in results:
        assert _in_container(J, x) and J.device == device and J.shape == (n, n)
        dense = dispatch.backend_of_array(x).sparse.to_dense(J)
        assert dense.device == device
        np.testing.assert_allclose(np.asarray(dense.to_device(default)), expected, rtol=1e-13, atol=1e-12)

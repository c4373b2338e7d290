"""Jacobian and Hessian sparsity patterns (``pa.jacobian_sparsity``, ``pa.hessian_sparsity``) against
dense Jacobians: every op of the op table never misses a non-zero of ``pa.jacfwd``; stencils, banded
operators and the other structured examples are exact."""

import math
import warnings

import numpy as np
import optree
import pytest
from helpers import to_numpy

import polyad as pa
from polyad import core
from polyad.core import dispatch
from polyad.core.avals import is_complex, is_floating
from polyad.testing.op_table import OP_TABLE, Sampler, float_argnums
from polyad.transforms.sparsity import SPARSITY

scipy_sparse = pytest.importorskip("scipy.sparse")

xp = pa.xp


def _dense(x):
    return to_numpy(x)


def _flat_function(fn, args):
    """``fn`` as a function of one float64 vector holding its arguments, returning one real vector: its
    floating outputs flattened (complex ones as real and imaginary parts), integer ones left out."""
    shapes = [tuple(a.shape) for a in args]
    dtypes = [a.dtype for a in args]

    def flat_fn(v):
        parts, start = [], 0
        for s, d in zip(shapes, dtypes):
            n = math.prod(s)
            piece = xp.reshape(v[start : start + n], s)
            parts.append(piece if piece.dtype == d else xp.astype(piece, d))
            start += n
        outs = []
        for o in optree.tree_leaves(fn(*parts)):
            if not is_floating(o):
                continue
            o = xp.reshape(o, (-1,))
            if is_complex(o):
                outs += [xp.real(o), xp.imag(o)]
            else:
                outs.append(o if o.dtype == xp.float64 else xp.astype(o, xp.float64))
        return xp.concat(outs) if outs else xp.zeros((0,), dtype=xp.float64)

    backend = dispatch.default_backend()
    host = [np.asarray(backend.to_numpy(a), dtype=np.float64).ravel() for a in args]
    v0 = backend.xp.asarray(np.concatenate(host) if host else np.zeros(0))
    return flat_fn, v0


def _cases():
    cases, sampler = [], Sampler()
    for row in OP_TABLE:
        if not row.differentiable or row.skip_reason("jvp"):
            continue
        for i, sample in enumerate(row.samples(sampler)):
            args = [sample.args[n] for n in float_argnums(sample)]
            if args and not any(is_complex(a) for a in args):  # real floating arguments to differentiate
                cases.append(pytest.param(row, i, id=f"{row.name}-{sample.name or i}"))
    return cases


def _op_case(row, i):
    """Sample ``i`` of ``row`` as ``_flat_function`` of its real floating arguments."""
    sample = row.samples(Sampler())[i]
    nums = float_argnums(sample)
    args = [sample.args[n] for n in nums]
    f = row.function()

    def fn(*diff):
        full = list(sample.args)
        for n, d in zip(nums, diff):
            full[n] = d
        return f(*full, **sample.kwargs)

    return _flat_function(fn, args)


@pytest.mark.parametrize("row,i", _cases())
def test_op_table_patterns_cover_the_dense_jacobian(row, i):
    flat_fn, v0 = _op_case(row, i)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.SparsityFallbackWarning)  # every built-in op has a rule
        pattern = pa.jacobian_sparsity(flat_fn)(v0)
    if v0.shape[0] == 0:  # no input element: nothing to depend on (jacfwd refuses an empty basis)
        assert pattern.shape[1] == 0 and pattern.nnz == 0
        return
    dense = _dense(pa.jacfwd(flat_fn)(v0))
    assert pattern.shape == dense.shape and pattern.dtype == bool
    missed = (dense != 0) & ~pattern.toarray()
    assert not missed.any(), f"the pattern misses non-zeros at {np.argwhere(missed)[:5].tolist()}"


def _hessian_cases():
    def has_elements(case):
        row, i = case.values
        sample = row.samples(Sampler())[i]
        return any(math.prod(sample.args[n].shape) for n in float_argnums(sample))

    return [c for c in _cases() if not c.values[0].skip_reason("grad2") and has_elements(c)]


@pytest.mark.parametrize("row,i", _hessian_cases())
def test_op_table_hessian_patterns_cover_the_dense_hessian(row, i):
    # through the gradient's backward pass: every VJP rule's ops carry patterns too
    flat_fn, v0 = _op_case(row, i)

    def scalar(v):
        return xp.sum(xp.sin(flat_fn(v)))

    with warnings.catch_warnings():
        warnings.simplefilter("error", pa.SparsityFallbackWarning)
        pattern = pa.hessian_sparsity(scalar)(v0).toarray()
    dense = _dense(pa.hessian(scalar)(v0))
    assert not ((dense != 0) & ~pattern).any()


def test_every_builtin_op_has_a_sparsity_rule():
    missing = [
        name
        for name, op in core.OPS.items()
        if op.higher_order is None and core.rule_of(op, SPARSITY) is None and "::" not in name
    ]
    assert not missing


# ------------------------------------------------------------------------------ structured examples


def A(x):
    """A NumPy array on the backend under test (float64)."""
    b = dispatch.default_backend()
    return b.xp.asarray(np.asarray(x, dtype=np.float64))


def laplacian_2d(u, n):
    """The demo's five-point stencil: reshape, zero padding by concat, shifted slices."""
    grid = xp.reshape(u, (n, n))
    zrow, zcol = xp.zeros((1, n), dtype=u.dtype), xp.zeros((n + 2, 1), dtype=u.dtype)
    padded = xp.concat([zcol, xp.concat([zrow, grid, zrow], axis=0), zcol], axis=1)
    centre = padded[1:-1, 1:-1]
    neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    return xp.reshape(4.0 * centre - neighbours, (n * n,)) - 0.1 * xp.exp(u)


def _tridiagonal(n):
    return A(np.diag(np.full(n, -2.0)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1))


def _in_place(x):
    y = xp.zeros(x.shape, dtype=x.dtype)
    y[1:-1] = x[2:] - 2 * x[1:-1] + x[:-2]
    y[0] = x[0] ** 2
    return y


def _network(x):
    """A reaction network: rates k x_a x_b gathered by index arrays, a constant stoichiometric matrix."""
    n = x.shape[0]
    a, b = xp.asarray(list(range(n - 1))), xp.asarray(list(range(1, n)))
    rates = xp.take(x, a) * xp.take(x, b) * A(np.linspace(1.0, 2.0, n - 1))
    stoich = np.zeros((n, n - 1))
    stoich[np.arange(n - 1), np.arange(n - 1)] = -1.0
    stoich[np.arange(1, n), np.arange(n - 1)] = 1.0
    return A(stoich) @ rates


STRUCTURED = {
    "1-d stencil by slices": (lambda x: x[2:] - 2 * x[1:-1] + x[:-2], 12),
    "2-d five-point stencil": (lambda u: laplacian_2d(u, 6), 36),
    "periodic stencil by roll": (lambda x: 2 * x - xp.roll(x, 1) - xp.roll(x, -1), 10),
    "constant banded matmul": (lambda x: _tridiagonal(9) @ xp.sin(x), 9),
    "banded matmul, vector on the left": (lambda x: xp.cos(x) @ _tridiagonal(9), 9),
    "banded tensordot": (lambda x: xp.tensordot(_tridiagonal(8), x * x, axes=1), 8),
    "in-place updates": (_in_place, 10),
    "where with a constant mask": (
        lambda x: xp.where(A(np.arange(10) % 3 == 0) > 0, x, x[::-1] * x),
        10,
    ),
    "second difference by diff": (lambda x: xp.diff(x**3, n=2), 11),
    "block sums": (lambda x: xp.sum(xp.reshape(x, (4, 5)) ** 2, axis=1), 20),
    "scan": (lambda x: xp.cumulative_sum(x), 7),
    "vmap inside": (lambda x: pa.vmap(lambda r: r[1:] * r[:-1])(xp.reshape(x, (4, 5))), 20),
    "reaction network": (_network, 9),
    "constant factor with zeros": (lambda x: x * A(np.arange(8) % 2), 8),
}


@pytest.mark.parametrize("name", list(STRUCTURED))
def test_structured_patterns_are_exact(name):
    f, n = STRUCTURED[name]
    rng = np.random.default_rng(0)
    x1, x2 = A(rng.uniform(0.5, 1.5, n)), A(rng.uniform(0.5, 1.5, n))
    pattern = pa.jacobian_sparsity(f)(x1)
    dense = _dense(pa.jacfwd(f)(x1)).reshape(pattern.shape)
    assert np.array_equal(pattern.toarray(), dense != 0)
    # the pattern holds elsewhere: it does not depend on the point
    assert np.array_equal(pa.jacobian_sparsity(f)(x2).toarray(), pattern.toarray())


def _energy(u):
    """A discrete Bratu energy: its gradient is the stencil residual, its Hessian the stencil matrix."""
    n = 5
    grid = xp.reshape(u, (n, n))
    return 0.5 * (xp.sum((grid[1:, :] - grid[:-1, :]) ** 2) + xp.sum((grid[:, 1:] - grid[:, :-1]) ** 2)) - (
        xp.sum(xp.exp(u))
    )


HESSIANS = {
    "chain": (lambda x: xp.sum((x[1:] - x[:-1]) ** 2) + xp.sum(xp.exp(x)), 8),
    "2-d energy": (_energy, 25),
    "products of neighbours": (lambda x: xp.sum(x[1:] * x[:-1] ** 2), 6),
    "separable": (lambda x: xp.sum(xp.sin(x)), 5),
    "linear": (lambda x: xp.sum(x * A(np.arange(7.0))), 7),
}


@pytest.mark.parametrize("name", list(HESSIANS))
def test_hessian_patterns_are_exact(name):
    f, n = HESSIANS[name]
    x = A(np.random.default_rng(1).uniform(0.5, 1.5, n))
    pattern = pa.hessian_sparsity(f)(x)
    dense = _dense(pa.hessian(f)(x)) != 0
    assert np.array_equal(pattern.toarray(), dense)
    assert (pattern != pattern.T).nnz == 0


def test_control_flow_takes_the_branch_of_the_point():
    def f(x):
        if float(xp.sum(x)) > 0:
            return x[1:] * x[:-1]
        return x * 2.0

    assert pa.jacobian_sparsity(f)(A(np.ones(4))).shape == (3, 4)
    assert pa.jacobian_sparsity(f)(A(-np.ones(4))).toarray().tolist() == np.eye(4, dtype=bool).tolist()


def test_a_number_handed_out_keeps_its_dependence():
    def f(x):
        s = float(xp.sum(x))  # returns to polyad as the tensor it came from
        return x * s

    assert pa.jacobian_sparsity(f)(A(np.ones(3))).toarray().all()


def test_values_from_comparisons_are_not_constants():
    # relu by a mask computed from x: the mask's zeros depend on the point, so the pattern keeps the
    # diagonal (a mask taken for a constant would drop it where x < 0 now, wrong at other points)
    f = lambda x: x * xp.astype(x > 0, x.dtype)  # noqa: E731
    assert pa.jacobian_sparsity(f)(A([-1.0, 2.0])).toarray().tolist() == [[True, False], [False, True]]
    g = lambda x: xp.where(x > 0, x, x[::-1])  # noqa: E731
    assert pa.jacobian_sparsity(g)(A([-1.0, 2.0])).toarray().all()


def test_outputs_and_arguments_as_pytrees():
    def f(p, scale):
        return {"a": p["u"][1:] * p["v"], "b": xp.sum(p["u"]) * scale}

    p = {"u": A(np.ones(3)), "v": A(np.ones(2))}
    pattern = pa.jacobian_sparsity(f, argnums=(0, 1))(p, A(2.0))
    # columns: u (3), v (2), scale (1); rows: a (2), b (1)
    expected = [[0, 1, 0, 1, 0, 0], [0, 0, 1, 0, 1, 0], [1, 1, 1, 0, 0, 1]]
    assert pattern.toarray().astype(int).tolist() == expected


def test_constant_output_has_an_empty_pattern():
    pattern = pa.jacobian_sparsity(lambda x: xp.ones(3) + xp.astype(xp.argmax(x), xp.float64))(A(np.ones(2)))
    assert pattern.shape == (3, 2) and pattern.nnz == 0


def test_custom_op_without_a_rule_falls_back_conservatively():
    @pa.custom_op("sparsitytest::first_difference", mutates_args=())
    def first_difference(x):
        return x[1:] - x[:-1]

    first_difference.register_fake(lambda x: x[1:])
    with pytest.warns(pa.SparsityFallbackWarning, match="sparsitytest::first_difference"):
        pattern = pa.jacobian_sparsity(first_difference)(A(np.ones(4)))
    assert pattern.toarray().all()  # every element of the output on every input: never a missed one

    def rule(traced, out, x):  # the op's own pattern: output i depends on inputs i and i + 1
        n = x.shape[0]
        return (scipy_sparse.csr_array(np.eye(n - 1, n) + np.eye(n - 1, n, 1)) if traced[0] else None,)

    first_difference.register_rule("sparsity", rule)
    expected = np.eye(3, 4, dtype=bool) | np.eye(3, 4, 1, dtype=bool)
    assert np.array_equal(pa.jacobian_sparsity(first_difference)(A(np.ones(4))).toarray(), expected)

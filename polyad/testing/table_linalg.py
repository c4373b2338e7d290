"""Op table rows: linear algebra (main namespace ``matmul``, ``matrix_transpose``, ``tensordot``, ``vecdot``
and the ``linalg`` extension).

Samples are small and well conditioned: symmetric matrices with distinct eigenvalues, matrices with distinct
nonzero singular values, SPD matrices for ``cholesky``. A sample whose derivative is not defined (the
extra singular vectors of ``full_matrices=True``, complex eigenvectors whose phase is arbitrary) sets
``diff_argnums=()``: its value, shapes and batching are checked, its derivatives are not, and its name
says why.
"""

import numpy as np

from polyad.ops.special.shared import host_call
from polyad.testing.op_table import OpInfo, Sample, on_backend

INF = float("inf")


def _solve_broadcast(xp, a, b):
    """The library's ``solve`` on stacks broadcast by hand, as the standard broadcasts them (CuPy's needs
    equal batch shapes)."""
    vec = b.ndim == 1
    b2 = b[:, None] if vec else b
    batch = np.broadcast_shapes(a.shape[:-2], b2.shape[:-2])
    a2 = xp.broadcast_to(a, (*batch, *a.shape[-2:]))
    x = xp.linalg.solve(a2, xp.broadcast_to(b2, (*batch, *b2.shape[-2:])))
    return x[..., 0] if vec else x


def dask_lacks(what):
    """Every check of the row fails on Dask, whose linalg lacks ``what``."""
    return on_backend("dask", f"Dask's linalg {what}")


def _sym(s, *shape):
    """A real symmetric matrix (distinct eigenvalues with probability one, here well separated)."""
    xp = s.xp
    n = shape[-1]
    a = s.float(*shape)
    spread = xp.asarray([float(i) for i in range(n)], dtype=xp.float64)
    return (a + xp.matrix_transpose(a)) / 2 + xp.eye(n, dtype=xp.float64) * spread


def _herm(s, *shape):
    """A complex Hermitian positive definite matrix."""
    xp = s.xp
    n = shape[-1]
    a = s.complex(*shape)
    return a @ xp.conj(xp.matrix_transpose(a)) + n * xp.eye(n, dtype=xp.complex128)


def _cwell(s, *shape):
    xp = s.xp
    return s.complex(*shape) + 3 * xp.eye(shape[-1], dtype=xp.complex128)


def _no_diff(why):
    return {"diff_argnums": (), "name": f"{why} (values only)"}


def matmul_samples(s):
    return [
        Sample((s.float(2, 3), s.float(3, 4)), name="2-d"),
        Sample((s.float(2, 1, 2, 3), s.float(3, 3, 2)), name="broadcast"),
        Sample((s.float(3), s.float(3, 2)), name="1-d @ 2-d"),
        Sample((s.float(2, 2, 3), s.float(3)), name="3-d @ 1-d"),
        Sample((s.float(3), s.float(3)), name="1-d @ 1-d"),
        Sample((s.float(0, 3), s.float(3, 2)), name="empty"),
        Sample((s.noncontiguous(2, 3), s.float(3, 2)), name="non-contiguous"),
        Sample((s.complex(2, 3), s.complex(3, 2)), name="complex"),
        Sample((s.float(2, 3), s.complex(3)), name="real @ complex"),
    ]


def matrix_transpose_samples(s):
    return [
        Sample((s.float(2, 3),), name="2-d"),
        Sample((s.float(2, 3, 4),), name="batched"),
        Sample((s.noncontiguous(3, 2),), name="non-contiguous"),
        Sample((s.complex(2, 3),), name="complex"),
    ]


def tensordot_samples(s):
    return [
        Sample((s.float(2, 3, 4), s.float(3, 4, 2)), name="axes=2"),
        Sample((s.float(2, 3), s.float(3, 4)), {"axes": 1}, name="axes=1"),
        Sample((s.float(2), s.float(3)), {"axes": 0}, name="axes=0"),
        Sample((s.float(3, 4, 2), s.float(2, 3, 5)), {"axes": ((0, 2), (1, 0))}, name="axis pairs"),
        Sample((s.float(4, 3), s.float(2, 4)), {"axes": ([0], [-1])}, name="one pair"),
        Sample((s.complex(2, 3), s.complex(3, 2)), {"axes": 1}, name="complex"),
        Sample((s.float(2, 3), s.complex(3, 2)), {"axes": 1}, name="real x complex"),
        Sample((s.complex(3), s.float(3, 2)), {"axes": 1}, name="complex x real"),
    ]


def vecdot_samples(s):
    return [
        Sample((s.float(2, 3), s.float(3)), name="broadcast"),
        Sample((s.float(3, 2), s.float(3, 2)), {"axis": -2}, name="axis=-2"),
        Sample((s.float(4), s.float(4)), name="1-d"),
        Sample((s.float(2, 0), s.float(2, 0)), name="empty"),
        Sample((s.complex(2, 3), s.complex(2, 3)), name="complex"),
        Sample((s.complex(2, 3), s.float(3)), name="complex . real"),
    ]


def cross_samples(s):
    return [
        Sample((s.float(3), s.float(3)), name="1-d"),
        Sample((s.float(2, 3), s.float(3)), name="broadcast"),
        Sample((s.float(3, 2), s.float(3, 2)), {"axis": -2}, name="axis=-2"),
        Sample((s.complex(2, 3), s.complex(2, 3)), name="complex"),
    ]


def square_samples(s):
    """Well-conditioned square matrices (inv, det, matrix_power, ...)."""
    return [
        Sample((s.well_conditioned(3),), name="3x3"),
        Sample((s.well_conditioned(2, batch=(2,)),), name="batched"),
        Sample((s.float(1, 1, low=0.5, high=2.0),), name="1x1"),
        Sample((_cwell(s, 2, 2),), name="complex"),
    ]


def det_samples(s):
    return [*square_samples(s), Sample((-s.well_conditioned(3),), name="negative det")]


def diagonal_samples(s):
    return [
        Sample((s.float(3, 4),), name="offset 0"),
        Sample((s.float(3, 4),), {"offset": 1}, name="offset 1"),
        Sample((s.float(4, 3),), {"offset": -2}, name="offset -2"),
        Sample((s.float(2, 3),), {"offset": 5}, name="empty"),
        Sample((s.float(2, 3, 3),), name="batched"),
        Sample((s.complex(2, 2),), name="complex"),
    ]


def trace_samples(s):
    return [
        Sample((s.float(3, 3),), name="3x3"),
        Sample((s.float(3, 4),), {"offset": 1}, name="offset 1"),
        Sample((s.float(2, 4, 3),), {"offset": -1}, name="batched offset -1"),
        Sample((s.float(2, 3),), {"dtype": s.xp.float64}, name="dtype"),
        Sample((s.int(2, 2),), {"dtype": s.xp.int64}, name="int"),
        Sample((s.complex(2, 2),), name="complex"),
    ]


def cholesky_samples(s):
    return [
        Sample((s.spd(3),), name="3x3"),
        Sample((s.spd(2, batch=(2,)),), name="batched"),
        Sample((s.spd(3),), {"upper": True}, name="upper"),
        Sample((_herm(s, 2, 2),), name="complex"),
    ]


def eigh_samples(s):
    return [
        Sample((_sym(s, 3, 3),), name="3x3"),
        Sample((_sym(s, 2, 3, 3),), name="batched"),
        Sample((s.float(1, 1),), name="1x1"),
        Sample((_herm(s, 2, 2),), **_no_diff("complex: the eigenvector phase is arbitrary")),
    ]


def eigvalsh_samples(s):
    return [
        Sample((_sym(s, 3, 3),), name="3x3"),
        Sample((_sym(s, 2, 3, 3),), name="batched"),
        Sample((_herm(s, 3, 3),), name="complex"),
    ]


def _distinct_real(s, *shape):
    """A real matrix with distinct real eigenvalues near 1..n: diag(1..n) plus off-diagonal entries whose
    row sums stay below 0.3, so its Gershgorin discs are disjoint (each holds one real eigenvalue), also
    after vmap's 5% perturbations."""
    xp = s.xp
    n = shape[-1]
    spread = xp.asarray([float(i + 1) for i in range(n)], dtype=xp.float64)
    return s.float(*shape) * (0.3 / n) + xp.eye(n, dtype=xp.float64) * spread


def _complex_pair(s):
    """A real 3x3 matrix with eigenvalues near 1 +- 2i and -1."""
    xp = s.xp
    a = xp.asarray([[1.0, -2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, -1.0]], dtype=xp.float64)
    return a + s.float(3, 3) * 0.1


def _complex_spread(s, n):
    """A complex matrix with distinct eigenvalues near 1, 2i, -1, ... (disjoint Gershgorin discs)."""
    xp = s.xp
    centres = xp.asarray([(1.0, 2j, -1.0, -2j)[i % 4] * (1 + i // 4) for i in range(n)], dtype=xp.complex128)
    return s.complex(n, n) * (0.3 / n) + xp.eye(n, dtype=xp.complex128) * centres


_GAUGE = (
    "complex eigenvectors: their phase is the backend's (LAPACK: largest component real), not polyad's gauge"
)


def eig_samples(s):
    return [
        Sample((_distinct_real(s, 3, 3),), name="3x3 real spectrum"),
        Sample((_distinct_real(s, 2, 4, 4),), name="batched"),
        Sample((s.float(1, 1),), name="1x1"),
        # tests/test_eig.py checks the derivatives of phase-invariant functions of these
        Sample((_complex_pair(s),), **_no_diff(f"complex pair; {_GAUGE}")),
        Sample((_complex_spread(s, 3),), **_no_diff(f"complex input; {_GAUGE}")),
    ]


def eigvals_samples(s):
    return [
        Sample((_distinct_real(s, 3, 3),), name="3x3 real spectrum"),
        Sample((_distinct_real(s, 2, 4, 4),), name="batched"),
        Sample((s.float(1, 1),), name="1x1"),
        Sample((_complex_pair(s),), name="complex pair"),
        Sample((_complex_spread(s, 3),), name="complex input"),
    ]


def matrix_norm_samples(s):
    out = [
        Sample((s.float(3, 4),), name="fro"),
        Sample((s.float(2, 3, 3),), {"keepdims": True}, name="fro keepdims"),
        Sample((s.complex(2, 3),), name="fro complex"),
    ]
    for ord in ("nuc", 1, -1, 2, -2, INF, -INF):
        out.append(Sample((s.float(3, 4),), {"ord": ord}, name=f"ord={ord}"))
    out += [
        Sample((s.float(2, 3, 2),), {"ord": "nuc", "keepdims": True}, name="nuc batched keepdims"),
        Sample((s.float(2, 2, 3),), {"ord": 2}, name="ord=2 batched"),
        Sample((s.float(2, 3, 3),), {"ord": INF, "keepdims": True}, name="ord=inf batched keepdims"),
        Sample((s.complex(3, 2),), {"ord": 2}, name="ord=2 complex"),
        Sample((s.complex(3, 2),), {"ord": 1}, name="ord=1 complex"),
    ]
    return out


def matrix_power_samples(s):
    return [
        Sample((s.well_conditioned(3), 3), name="n=3"),
        Sample((s.well_conditioned(2), 1), name="n=1"),
        Sample((s.well_conditioned(3), 0), name="n=0"),
        Sample((s.well_conditioned(3), -2), name="n=-2"),
        Sample((s.well_conditioned(2, batch=(2,)), 2), name="batched"),
        Sample((_cwell(s, 2, 2), -1), name="complex"),
    ]


def matrix_rank_samples(s):
    xp = s.xp
    u = s.float(3, 1)
    v = s.float(1, 3)
    return [
        Sample((s.well_conditioned(3),), name="full rank"),
        Sample((u @ v,), name="rank 1"),
        Sample((s.float(2, 3, 2),), name="batched"),
        Sample((s.float(3, 3),), {"rtol": 0.5}, name="rtol float"),
        Sample((s.float(2, 3, 3),), {"rtol": xp.asarray([0.1, 0.9], dtype=xp.float64)}, name="rtol array"),
    ]


def pinv_samples(s):
    xp = s.xp
    return [
        Sample((s.float(3, 2),), name="tall"),
        Sample((s.float(2, 3),), name="wide"),
        Sample((s.well_conditioned(3),), name="square"),
        Sample((s.float(2, 3, 2),), name="batched"),
        Sample((s.float(3, 2),), {"rtol": 1e-3}, name="rtol float"),
        Sample((s.float(2, 2, 3),), {"rtol": xp.asarray([1e-3, 1e-2], dtype=xp.float64)}, name="rtol array"),
        Sample((s.complex(3, 2),), name="complex"),
    ]  # fmt: skip


def qr_samples(s):
    return [
        Sample((s.float(4, 3),), name="tall reduced"),
        Sample((s.float(3, 3),), name="square"),
        Sample((s.float(2, 4),), name="wide reduced"),
        Sample((s.float(2, 4),), {"mode": "complete"}, name="wide complete"),
        Sample((s.float(2, 3, 2),), name="batched"),
        Sample((s.complex(3, 2),), name="complex"),
        Sample((s.float(3, 2),), {"mode": "complete"},
               **_no_diff("complete, m > n: the extra columns of Q are not determined")),
    ]  # fmt: skip


def slogdet_samples(s):
    return [*square_samples(s), Sample((-s.well_conditioned(3),), name="negative det")]


def solve_samples(s):
    return [
        Sample((s.well_conditioned(3), s.float(3, 2)), name="matrix"),
        Sample((s.well_conditioned(3), s.float(3)), name="1-d x2"),
        Sample((s.well_conditioned(3, batch=(2,)), s.float(3)), name="batched x1, 1-d x2"),
        Sample((s.well_conditioned(2, batch=(2,)), s.float(2, 3)), name="broadcast x2"),
        Sample((s.well_conditioned(2), s.float(2, 2, 1)), name="broadcast x1"),
        Sample((_cwell(s, 2, 2), s.complex(2, 2)), name="complex"),
    ]


def svd_samples(s):
    return [
        Sample((s.float(3, 2),), {"full_matrices": False}, name="tall reduced"),
        Sample((s.float(2, 3),), {"full_matrices": False}, name="wide reduced"),
        Sample((s.float(3, 3),), name="square full"),
        Sample((s.float(2, 3, 2),), {"full_matrices": False}, name="batched reduced"),
        Sample((s.float(3, 2),), **_no_diff("full_matrices, m != n: the extra vectors are not determined")),
        Sample((s.complex(3, 2),), {"full_matrices": False},
               **_no_diff("complex: the singular vector phase is arbitrary")),
    ]  # fmt: skip


def svdvals_samples(s):
    return [
        Sample((s.float(3, 2),), name="tall"),
        Sample((s.float(2, 4),), name="wide"),
        Sample((s.float(2, 3, 3),), name="batched"),
        Sample((s.complex(3, 2),), name="complex"),
    ]


def outer_samples(s):
    return [
        Sample((s.float(3), s.float(2)), name="1-d"),
        Sample((s.float(0), s.float(2)), name="empty"),
        Sample((s.complex(2), s.complex(3)), name="complex"),
        Sample((s.float(2), s.complex(3)), name="real x complex"),
        Sample((s.complex(2), s.float(3)), name="complex x real"),
    ]


def vector_norm_samples(s):
    return [
        Sample((s.float(2, 3),), name="all axes"),
        Sample((s.float(2, 3),), {"axis": 1, "keepdims": True}, name="axis keepdims"),
        Sample((s.float(2, 3, 2),), {"axis": (0, 2)}, name="axis tuple"),
        Sample((s.float(0),), name="empty"),
        Sample((s.float(),), name="0-d"),
        Sample((s.float(2, 3),), {"ord": 1, "axis": 0}, name="ord=1"),
        Sample((s.float(2, 3),), {"ord": INF, "axis": -1}, name="ord=inf"),
        Sample((s.float(2, 3),), {"ord": -INF}, name="ord=-inf"),
        Sample((s.float(2, 3),), {"ord": 0}, name="ord=0"),
        Sample((s.float(2, 3),), {"ord": 3}, name="ord=3"),
        Sample((s.float(4, low=0.5, high=1.5),), {"ord": 0.5}, name="ord=0.5"),
        Sample((s.float(2, 3),), {"ord": -2, "axis": 1}, name="ord=-2"),
        Sample((s.complex(2, 3),), {"axis": 1}, name="complex"),
        Sample((s.complex(3),), {"ord": INF}, name="complex ord=inf"),
        Sample((s.noncontiguous(2, 3),), {"ord": 1}, name="non-contiguous"),
    ]


def _first(gen, n=1):
    return lambda s: gen(s)[:n]


ROWS = [
    # main namespace
    OpInfo("matmul", matmul_samples),
    OpInfo("matrix_transpose", matrix_transpose_samples),
    OpInfo("tensordot", tensordot_samples),
    OpInfo("vecdot", vecdot_samples),
    # the linalg extension (matmul, matrix_transpose, tensordot, vecdot: the same functions)
    OpInfo("linalg.matmul", _first(matmul_samples, 2)),
    OpInfo("linalg.matrix_transpose", _first(matrix_transpose_samples)),
    OpInfo("linalg.tensordot", _first(tensordot_samples)),
    OpInfo("linalg.vecdot", _first(vecdot_samples)),
    OpInfo(
        "linalg.cholesky", cholesky_samples, backend_failures=dask_lacks("factors one 2-D matrix, not stacks")
    ),
    OpInfo("linalg.cross", cross_samples, backend_failures=dask_lacks("has no cross")),
    OpInfo("linalg.det", det_samples, backend_failures=dask_lacks("has no det")),
    OpInfo("linalg.diagonal", diagonal_samples),
    OpInfo("linalg.eig", eig_samples, backend_failures=dask_lacks("has no eig")),
    OpInfo(
        "linalg.eigh",
        eigh_samples,
        backend_failures=dask_lacks("has no eigh"),
    ),
    OpInfo("linalg.eigvals", eigvals_samples, backend_failures=dask_lacks("has no eigvals")),
    OpInfo("linalg.eigvalsh", eigvalsh_samples, backend_failures=dask_lacks("has no eigvalsh")),
    OpInfo("linalg.inv", square_samples, backend_failures=dask_lacks("inverts one 2-D matrix, not stacks")),
    OpInfo(
        "linalg.matrix_norm",
        matrix_norm_samples,
        backend_failures=dask_lacks("has no SVD-based norms (2, -2, nuc) of stacks"),
    ),
    OpInfo("linalg.matrix_power", matrix_power_samples, backend_failures=dask_lacks("has no matrix_power")),
    OpInfo(
        "linalg.matrix_rank",
        matrix_rank_samples,
        differentiable=False,
        backend_failures=dask_lacks("svd has no compute_uv, which matrix_rank passes"),
    ),
    OpInfo("linalg.outer", outer_samples),
    OpInfo("linalg.pinv", pinv_samples, backend_failures=dask_lacks("has no pinv")),
    OpInfo(
        "linalg.qr",
        qr_samples,
        backend_failures=dask_lacks(
            "qr has mode='reduced' only, of one 2-D matrix in tall-and-skinny chunks"
        ),
    ),
    OpInfo("linalg.slogdet", slogdet_samples, backend_failures=dask_lacks("has no slogdet")),
    OpInfo(
        "linalg.solve",
        solve_samples,
        ref=_solve_broadcast,
        backend_failures=dask_lacks("solves with one 2-D matrix and a 1-D or 2-D b, not stacks"),
    ),
    OpInfo(
        "linalg.svd",
        svd_samples,
        backend_failures=dask_lacks("svd has full_matrices=False only, of one 2-D matrix"),
    ),
    OpInfo(
        "linalg.svdvals",
        svdvals_samples,
        backend_failures=dask_lacks("svd has full_matrices=False only (svdvals asks for True)"),
    ),
    OpInfo("linalg.trace", trace_samples),
    OpInfo("linalg.vector_norm", vector_norm_samples),
]


# ------------------------------------------------------------------------------ structured solves
# SciPy's solve_triangular, cho_factor/cho_solve, lu_factor/lu_solve (polyad.xp.linalg's extension),
# checked against scipy.linalg on host copies (SciPy >= 1.15 batches stacks itself: an independent
# reference for polyad's own loop and rules). Triangular matrices have a dominant diagonal and a random
# other triangle, which the functions must not read (its cotangent is zero).


def _scipy_linalg(call):
    """The reference: ``call(scipy.linalg, *arrays, **kwargs)`` on NumPy copies, back in the library."""

    def ref(xp, *args, **kwargs):
        import scipy.linalg

        return host_call(lambda *a: call(scipy.linalg, *a, **kwargs), args)

    return ref


def _dominant(s, n, batch=(), complex=False):
    """A matrix whose triangles are both well-conditioned triangular matrices (diagonal about 3)."""
    xp = s.xp
    if complex:
        return s.complex(*batch, n, n) + 3 * xp.eye(n, dtype=xp.complex128)
    return s.float(*batch, n, n) + 3 * xp.eye(n, dtype=xp.float64)


def _pivots(s, n, batch=()):
    """Valid LAPACK pivots (``i <= piv[i] < n``), int32, as lu_factor returns them."""
    count = 1
    for d in batch:
        count *= d
    vals = [s.rng.randrange(i, n) for _ in range(count) for i in range(n)]
    return s.xp.reshape(s.xp.asarray(vals, dtype=s.xp.int32), (*batch, n))


def solve_triangular_samples(s):
    return [
        Sample((_dominant(s, 3), s.float(3, 2)), name="upper"),
        Sample((_dominant(s, 3), s.float(3)), {"lower": True}, name="lower, 1-d b"),
        Sample((_dominant(s, 3), s.float(3, 2)), {"lower": True, "trans": 1}, name="trans=1"),
        Sample((_dominant(s, 3), s.float(3, 2)), {"trans": "T"}, name="trans='T' upper"),
        Sample((_dominant(s, 3), s.float(3)), {"lower": True, "unit_diagonal": True}, name="unit_diagonal"),
        Sample((_dominant(s, 3), s.float(3, 2)), {"trans": 2, "unit_diagonal": True}, name="trans=2 unit"),
        Sample((_dominant(s, 3, batch=(2,)), s.float(3)), {"lower": True}, name="batched a, 1-d b"),
        Sample((_dominant(s, 2, batch=(2,)), s.float(2, 2, 3)), name="broadcast b"),
        Sample((_dominant(s, 2), s.float(2, 2, 1)), {"lower": True}, name="broadcast a"),
        Sample((_dominant(s, 3, complex=True), s.complex(3, 2)), {"lower": True, "trans": "C"},
               name="complex trans='C'"),
        Sample((_dominant(s, 2, complex=True), s.complex(2)), {"trans": 1}, name="complex trans=1"),
        Sample((_dominant(s, 0), s.float(0, 2)), name="empty"),
    ]  # fmt: skip


def cho_factor_samples(s):
    return [
        Sample((s.spd(3),), name="upper"),
        Sample((s.spd(3),), {"lower": True}, name="lower"),
        Sample((s.spd(2, batch=(2,)),), {"lower": True}, name="batched"),
        Sample((_herm(s, 2, 2),), name="complex"),
        Sample((s.spd(3) + s.float(3, 3, low=-0.2, high=0.2),), {"lower": True},
               name="non-symmetric: one triangle read"),
    ]  # fmt: skip


def cho_solve_samples(s):
    return [
        Sample((_dominant(s, 3), s.float(3, 2)), name="upper"),
        Sample((_dominant(s, 3), s.float(3)), {"lower": True}, name="lower, 1-d b"),
        Sample((_dominant(s, 2, batch=(2,)), s.float(2)), {"lower": True}, name="batched c, 1-d b"),
        Sample((_dominant(s, 2, batch=(2,)), s.float(2, 2, 3)), name="broadcast b"),
        Sample((_dominant(s, 2), s.float(2, 2, 1)), {"lower": True}, name="broadcast c"),
        Sample((_dominant(s, 2, complex=True), s.complex(2, 2)), {"lower": True}, name="complex"),
    ]


def lu_factor_samples(s):
    return [
        Sample((s.well_conditioned(3),), name="3x3"),
        Sample((s.well_conditioned(3, batch=(2,)),), name="batched"),
        Sample((s.float(4, 4),), name="pivoting"),
        Sample((_cwell(s, 3, 3),), name="complex"),
        Sample((s.float(1, 1, low=0.5, high=2.0),), name="1x1"),
    ]


def lu_solve_samples(s):
    return [
        Sample((_dominant(s, 3), _pivots(s, 3), s.float(3, 2)), name="trans=0"),
        Sample((_dominant(s, 3), _pivots(s, 3), s.float(3)), {"trans": 1}, name="trans=1, 1-d b"),
        Sample((_dominant(s, 3), _pivots(s, 3), s.float(3, 2)), {"trans": 2}, name="trans=2"),
        Sample((_dominant(s, 2, batch=(2,)), _pivots(s, 2, batch=(2,)), s.float(2)), name="batched, 1-d b"),
        Sample((_dominant(s, 2, batch=(2,)), _pivots(s, 2, batch=(2,)), s.float(2, 2, 3)), {"trans": 1},
               name="broadcast b"),
        Sample((_dominant(s, 2), _pivots(s, 2), s.float(2, 2, 1)), name="broadcast lu"),
        Sample((_dominant(s, 3, complex=True), _pivots(s, 3), s.complex(3, 2)), {"trans": 1},
               name="complex trans=1"),
        Sample((_dominant(s, 2, complex=True), _pivots(s, 2), s.complex(2)), {"trans": 2},
               name="complex trans=2"),
    ]  # fmt: skip


def _solve_with_pair(f):
    """``cho_solve((c, lower), b)`` as a function of the arrays ``c, b`` (``lower`` a keyword)."""
    return lambda c, b, lower=False, **k: f((c, lower), b, **k)


def _lu_solve_with_pair(f):
    return lambda lu, piv, b, **k: f((lu, piv), b, **k)


STRUCTURED_ROWS = [
    OpInfo(
        "linalg.solve_triangular",
        solve_triangular_samples,
        ref=_scipy_linalg(lambda sl, a, b, **k: sl.solve_triangular(a, b, **k)),
    ),
    OpInfo(
        "linalg.cho_factor",
        cho_factor_samples,
        ref=_scipy_linalg(lambda sl, a, lower=False: sl.cholesky(a, lower=lower)),  # zeros, as polyad
        pack=lambda f: lambda a, **k: f(a, **k)[0],
    ),
    OpInfo(
        "linalg.cho_solve",
        cho_solve_samples,
        ref=_scipy_linalg(lambda sl, c, b, lower=False: sl.cho_solve((c, lower), b)),
        pack=_solve_with_pair,
    ),
    OpInfo("linalg.lu_factor", lu_factor_samples, ref=_scipy_linalg(lambda sl, a: tuple(sl.lu_factor(a)))),
    OpInfo(
        "linalg.lu_solve",
        lu_solve_samples,
        ref=_scipy_linalg(lambda sl, lu, piv, b, **k: sl.lu_solve((lu, piv), b, **k)),
        pack=_lu_solve_with_pair,
    ),
]
ROWS += STRUCTURED_ROWS

"""Linear algebra: ``matmul``, ``matrix_transpose``, ``tensordot``, ``vecdot`` and the linalg extension.

One file per sub-family, each importing only the ones before it:

- ``shared``: the family rules ``leading_batch`` and ``leading_batch_multi``, and small helpers;
- ``products``: ``matrix_transpose``, ``matmul``, ``tensordot``, ``vecdot``, ``cross``, ``outer``;
- ``diagonals``: ``diagonal``, ``trace`` (and ``diag_embed``, their transpose);
- ``solves``: ``inv``, ``det``, ``slogdet``, ``solve``, ``matrix_power``, ``matrix_rank``, ``pinv``;
- ``decompositions``: ``cholesky``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``qr``;
- ``eig``: ``eig`` and ``eigvals`` of general square matrices (standard 2025.12);
- ``norms``: ``vector_norm``, ``matrix_norm``;
- ``structured``: what the structured solves below share (arguments, ``check_finite``, SciPy kernels over
  stacks, the solve rules' shapes and batching);
- ``triangular``: ``solve_triangular``, ``cho_factor``, ``cho_solve`` (SciPy's signatures);
- ``lu``: ``lu_factor``, ``lu_solve`` (SciPy's signatures).

``EXTENSIONS`` names the functions polyad adds to the standard's ``linalg`` (SciPy's structured solves,
which Gaussian-process and Kalman-filter code needs): ``polyad.xp.linalg`` has them next to the
standard's, and ``polyad.linalg`` re-exports them.

Complex cotangents follow PyTorch (``g * conj(f'(x))``); every rule is written in polyad ops, so it is
itself differentiable (higher derivatives) and batchable. ``polyad.xp`` finds the functions here, so
``polyad.ops.linalg.<name>`` is each of them whichever file defines it.
"""

from polyad.ops.linalg.decompositions import (
    EighResult,
    QRResult,
    SVDResult,
    cholesky,
    eigh,
    eigvalsh,
    qr,
    svd,
    svdvals,
)
from polyad.ops.linalg.diagonals import diag_embed, diagonal, trace
from polyad.ops.linalg.eig import EigResult, eig, eigvals
from polyad.ops.linalg.lu import lu_factor, lu_solve
from polyad.ops.linalg.norms import matrix_norm, vector_norm
from polyad.ops.linalg.products import cross, matmul, matrix_transpose, outer, tensordot, vecdot
from polyad.ops.linalg.shared import leading_batch, leading_batch_multi
from polyad.ops.linalg.solves import (
    SlogdetResult,
    det,
    inv,
    matrix_power,
    matrix_rank,
    pinv,
    slogdet,
    solve,
)
from polyad.ops.linalg.triangular import cho_factor, cho_solve, solve_triangular

# not in the standard: SciPy's structured solves (polyad.xp.linalg and polyad.linalg have them)
EXTENSIONS = ("solve_triangular", "cho_factor", "cho_solve", "lu_factor", "lu_solve")

__all__ = [
    "EXTENSIONS",
    "EigResult",
    "EighResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "cross",
    "det",
    "diag_embed",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "leading_batch",
    "leading_batch_multi",
    "lu_factor",
    "lu_solve",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
]

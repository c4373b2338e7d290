"""The eigendecomposition of a general square matrix: ``eig`` and ``eigvals`` (standard 2025.12).

Values. ``x = V diag(w) V^-1``: the eigenvalues ``w`` (..., M) and the eigenvectors ``V`` (..., M, M, as
columns) are complex whatever the input (the standard: the complex dtype of ``x``'s precision), in the
backend's order (the standard leaves it unspecified; LAPACK's ``geev`` for NumPy). The backend normalises
each eigenvector to unit 2-norm and fixes its phase (LAPACK: its largest component real).

Derivatives, where the eigenvalues are distinct (``F[i, j] = 1 / (w_j - w_i)`` off the diagonal, 0 on it;
``S = V^-1 dA V``):

- ``dw = diag(S)``: the eigenvalues' derivative needs no convention;
- ``dV = V (F o S) + V C``, ``C`` diagonal: ``V (F o S)`` keeps ``V^-1 dV`` zero on its diagonal, and the
  diagonal ``C`` (a change of each eigenvector's scale and phase, which leaves it an eigenvector) is fixed
  by polyad's gauge: ``v_k^H dv_k = 0`` for each column, so ``Re(v_k^H dv_k) = 0`` keeps the unit norm
  (exactly the backend's normalisation) and ``Im(v_k^H dv_k) = 0`` moves no phase. This is the gauge of
  polyad's ``eigh`` and ``svd``. It is not LAPACK's phase convention, which has no smooth derivative (its
  largest component can change): for complex eigenvectors (a complex input, or a real input with complex
  eigenvalues) only functions that do not depend on each eigenvector's phase (``|V|^2`` elementwise,
  ``v_k v_k^H``, ``V diag(w) V^-1``, anything of ``w``) have derivatives that match finite differences of
  the backend's values. Real eigenvectors (a real input with real eigenvalues) are real with unit norm
  in both conventions, determined up to a sign that stays put under small changes: their derivative
  matches the backend's values themselves.
- VJP, the adjoint for ``Re <., .>``: with ``P = V^H gV`` and ``Q = P - (V^H V) diag(diag(P))`` (the gauge's
  share), ``gA = V^-H (diag(gw) + conj(F) o Q) V^H``; its real part for a real input.

Where two eigenvalues are equal the eigenvectors have no derivative (for a defective matrix ``V`` is
singular and the solves give inf or nan); as ``eigh`` does, polyad then drops the term that would divide
by zero, which keeps the eigenvalues' derivative exact at a diagonalisable matrix with repeated
eigenvalues. ``eigvals``'s derivatives use the eigenvectors, computed again by ``eig``.

Dask's linalg has no ``eig``: there both functions raise, naming the backend.
"""

from collections import namedtuple

from polyad.core import bind, dispatch
from polyad.core.avals import ShapeDtype, is_complex, is_floating, ndim_of, shape_of
from polyad.ops.base import conj_if_complex, expand_dims, real
from polyad.ops.common import define
from polyad.ops.creation import eye
from polyad.ops.linalg.decompositions import diag_matrix, inverse_gaps
from polyad.ops.linalg.diagonals import diagonal
from polyad.ops.linalg.products import conj_transpose, matmul
from polyad.ops.linalg.shared import leading_batch, leading_batch_multi
from polyad.ops.linalg.solves import solve
from polyad.ops.manipulation import concat

EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def _complex_dtype(xp, dtype):
    return xp.complex64 if dtype in (xp.float32, xp.complex64) else xp.complex128


def _native_eig(xp, x, name):
    f = getattr(xp.linalg, name, None)
    if f is None:
        backend = dispatch.backend_of([x]).name
        raise NotImplementedError(f"linalg.{name}: the {backend} backend's library has no linalg.{name}")
    return f


def _eig_kernel(xp, x):
    w, v = _native_eig(xp, x, "eig")(x)
    cd = _complex_dtype(xp, x.dtype)
    return xp.astype(w, cd), xp.astype(v, cd)


def _eigvals_kernel(xp, x):
    return xp.astype(_native_eig(xp, x, "eigvals")(x), _complex_dtype(xp, x.dtype))


def _eig_abstract(xp, x):
    cd = _complex_dtype(xp, x.dtype)
    return ShapeDtype(x.shape[:-1], cd, x.device), ShapeDtype(x.shape, cd, x.device)


def _real_for(ga, x):
    """The cotangent of ``x``: the real part of ``ga`` for a real ``x`` (polyad's complex convention)."""
    return ga if is_complex(x) else real(ga)


def _columns_scaled(m, d):
    """``m @ diag(d)``: each column of ``m`` times the matching entry of ``d`` (..., M)."""
    return m * expand_dims(d, axis=-2)


def _eig_jvp(ts, out, x):
    w, v = out
    s = solve(v, matmul(ts[0], v))  # V^-1 dA V
    dv = matmul(v, inverse_gaps(w) * s)
    dv = dv - _columns_scaled(v, diagonal(matmul(conj_transpose(v), dv)))  # the gauge: v_k^H dv_k = 0
    return diagonal(s), dv


def _eig_vjp(g, out, x):
    gw, gv = g
    w, v = out
    vh = conj_transpose(v)
    p = matmul(vh, gv)
    q = p - _columns_scaled(matmul(vh, v), diagonal(p))
    z = diag_matrix(gw) + conj_if_complex(inverse_gaps(w)) * q
    return (_real_for(solve(vh, matmul(z, vh)), x),)  # V^-H Z V^H


_eig = define("linalg.eig", _eig_kernel, abstract_eval=_eig_abstract, vjp=_eig_vjp, jvp=_eig_jvp,
              multiple_results=True)  # fmt: skip
_eig.rules["batch"] = leading_batch_multi(_eig, 2)


def _eigvals_jvp(ts, w, x):
    _, v = eig(x)
    return diagonal(solve(v, matmul(ts[0], v)))


def _eigvals_vjp(g, w, x):
    _, v = eig(x)
    vh = conj_transpose(v)
    return (_real_for(solve(vh, matmul(diag_matrix(g), vh)), x),)


_eigvals = define(
    "linalg.eigvals",
    _eigvals_kernel,
    abstract_eval=lambda xp, x: _eig_abstract(xp, x)[0],
    vjp=_eigvals_vjp,
    jvp=_eigvals_jvp,
)
_eigvals.rules["batch"] = leading_batch(_eigvals)


def _check(x, name):
    if not hasattr(x, "dtype") or not is_floating(x):
        got = getattr(x, "dtype", type(x).__name__)
        raise TypeError(f"linalg.{name} needs a floating-point array, got {got}")
    shape = shape_of(x)
    if ndim_of(x) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"linalg.{name} needs square matrices (..., M, M), got shape {shape}")


def eig(x, /):
    """Eigenvalues and eigenvectors of the square matrices in ``x`` (standard 2025.12): a namedtuple
    ``(eigenvalues, eigenvectors)`` with ``x = V diag(w) V^-1``, both complex (the complex dtype of ``x``'s
    precision), the eigenvectors the columns of ``V`` with unit 2-norm, in the backend's order.

    Derivatives where the eigenvalues are distinct; the eigenvectors' derivative takes the gauge
    ``v_k^H dv_k = 0`` (the unit norm kept, no phase moved): functions that depend on an eigenvector's
    complex phase have none that matches the backend's values (module notes).

    Args:
        x: a floating-point array of shape (..., M, M).

    Returns:
        ``EigResult(eigenvalues, eigenvectors)``, of shapes (..., M) and (..., M, M).

    Example:
        >>> import numpy as np
        >>> from polyad import xp
        >>> w, v = xp.linalg.eig(np.array([[2.0, 1.0], [0.0, 3.0]]))
        >>> w
        array([2.+0.j, 3.+0.j])
    """
    _check(x, "eig")
    return EigResult(*bind(_eig, x))


def eigvals(x, /):
    """Eigenvalues of the square matrices in ``x`` (standard 2025.12), complex (the complex dtype of
    ``x``'s precision), in the backend's order; differentiable where they are distinct.

    Args:
        x: a floating-point array of shape (..., M, M).

    Returns:
        An array of shape (..., M).

    Example:
        >>> import numpy as np
        >>> from polyad import xp
        >>> xp.linalg.eigvals(np.array([[0.0, -1.0], [1.0, 0.0]]))  # a rotation: +-i
        array([0.+1.j, 0.-1.j])
    """
    _check(x, "eigvals")
    return bind(_eigvals, x)


def roots(p, /):
    """The roots of the polynomial whose coefficients ``p`` are given highest power first, as
    ``numpy.roots``: the eigenvalues of its companion matrix built as NumPy builds it (the first row
    ``-p[1:] / p[0]``, ones below the diagonal), so in NumPy's order; complex, differentiable where they are
    distinct. Not in the standard: SciPy's array-API code asks ``xp.roots`` first (``scipy.signal.tf2zpk``),
    and its own companion matrix (another layout) gave the same roots in another order (issue 31).

    Unlike NumPy, leading and trailing zero coefficients are not stripped (that needs the values): the
    leading coefficient must not be zero, and a trailing zero gives a zero root in LAPACK's place.

    Args:
        p: a real or complex floating array of shape (N,).

    Returns:
        An array of shape (N - 1,), complex.

    Example:
        >>> import numpy as np
        >>> from polyad import xp
        >>> xp.roots(np.array([1.0, 1.5, 0.5]))  # (z + 1)(z + 0.5)
        array([-1. +0.j, -0.5+0.j])
    """
    if ndim_of(p) != 1:
        raise ValueError(
            f"roots: p must be 1-D (a polynomial's coefficients), got shape {tuple(shape_of(p))}"
        )
    n = shape_of(p)[0]
    if n < 2:
        return eigvals(eye(0, dtype=p.dtype, device=p.device))
    first = expand_dims(-p[1:] / p[0], axis=0)
    below = eye(n - 2, n - 1, dtype=p.dtype, device=p.device)
    return eigvals(concat([first, below], axis=0))


eig.op = _eig
eigvals.op = _eigvals

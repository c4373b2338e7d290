"""``np.linalg`` and ``np.fft`` with NumPy's signatures and semantics (``np.linalg.eigh`` reads one
triangle, ``np.linalg.norm`` picks a vector or matrix norm from the shape and ``ord``, ``np.fft.fft2`` is
``fftn`` over the last two axes), as compositions of polyad ops; the functions polyad has no counterpart
for are refused with what fits instead.
"""

import polyad.xp as pxp
from polyad.interop.numpy.common import (
    NONE_DISCRETE,
    arr,
    arrays,
    floating,
    implements,
    is_complex,
    refuse,
    write_out,
    xp_of,
)

# ------------------------------------------------------------------------------ solves and decompositions


def _floating_function(name):
    f = getattr(pxp.linalg, name)
    implements(f"linalg.{name}", how=f"xp.linalg.{name}")(lambda a: f(floating(a)))


for _name in ("inv", "det", "slogdet"):
    _floating_function(_name)


@implements("linalg.solve", how="xp.linalg.solve")
def solve(a, b):
    return pxp.linalg.solve(floating(a), floating(b))


@implements("linalg.cholesky", how="xp.linalg.cholesky")
def cholesky(a, /, *, upper=False):
    return pxp.linalg.cholesky(floating(a), upper=upper)


def _hermitian(a, uplo):
    """The Hermitian matrix NumPy's (LAPACK's) eigh sees in ``a``: the triangle ``uplo``, mirrored, with a
    real diagonal."""
    a = floating(a)
    triangle = pxp.tril if uplo == "L" else pxp.triu
    strict = triangle(a, k=-1 if uplo == "L" else 1)
    diagonal = triangle(a, k=0) - strict
    mirror = pxp.matrix_transpose(strict)
    if is_complex(a):
        mirror = pxp.conj(mirror)
        diagonal = pxp.astype(pxp.real(diagonal), a.dtype)
    return strict + mirror + diagonal


@implements("linalg.eigh", how="xp.linalg.eigh of the triangle UPLO, mirrored")
def eigh(a, UPLO="L"):
    return pxp.linalg.eigh(_hermitian(a, UPLO))


@implements("linalg.eigvalsh", how="xp.linalg.eigvalsh of the triangle UPLO, mirrored")
def eigvalsh(a, UPLO="L"):
    return pxp.linalg.eigvalsh(_hermitian(a, UPLO))


@implements("linalg.svd", how="xp.linalg.svd, or xp.linalg.svdvals (compute_uv=False)")
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    a = floating(a)
    if not compute_uv:
        return pxp.linalg.svdvals(a)
    return pxp.linalg.svd(a, full_matrices=full_matrices)


@implements("linalg.qr", how="xp.linalg.qr")
def qr(a, mode="reduced"):
    a = floating(a)
    if mode in ("reduced", "complete"):
        return pxp.linalg.qr(a, mode=mode)
    if mode == "r":
        return pxp.linalg.qr(a, mode="reduced").R
    raise TypeError(f"np.linalg.qr(mode={mode!r}) on polyad tensors: modes 'reduced', 'complete' and 'r'")


@implements("linalg.pinv", how="xp.linalg.pinv")
def pinv(a, rcond=None, hermitian=False, *, rtol=None):
    return pxp.linalg.pinv(floating(a), rtol=rtol if rcond is None else rcond)


@implements("linalg.matrix_rank", derivative=NONE_DISCRETE, how="xp.linalg.matrix_rank, or svdvals > tol")
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    a = floating(A)
    if a.ndim < 2:
        return pxp.astype(pxp.any(a != 0), xp_of(a).int64)
    if tol is not None:
        return pxp.count_nonzero(pxp.linalg.svdvals(a) > tol, axis=-1)
    return pxp.linalg.matrix_rank(a, rtol=rtol)


@implements("linalg.matrix_power", how="xp.linalg.matrix_power")
def matrix_power(a, n):
    return pxp.linalg.matrix_power(floating(a) if n < 0 else arr(a), n)


@implements("linalg.multi_dot", how="xp.matmul, left to right")
def multi_dot(arrays_, *, out=None):
    xs = arrays(arrays_)
    result = xs[0]
    for x in xs[1:]:
        result = pxp.matmul(result, x)
    return write_out(out, result)


@implements("linalg.lstsq", how="xp.linalg.pinv (the solution), svdvals, a rank")
def lstsq(a, b, rcond=None):
    a, b = floating(a), floating(b)
    s = pxp.linalg.svdvals(a)
    m, n = a.shape
    rtol = max(m, n) * pxp.finfo(a.dtype).eps if rcond is None else rcond
    x = pxp.matmul(pxp.linalg.pinv(a, rtol=rtol), b)
    rank = int(pxp.count_nonzero(s > rtol * pxp.max(s))) if s.shape[0] else 0
    if rank == n and m > n:
        r = b - pxp.matmul(a, x)
        residuals = pxp.sum(pxp.real(r * pxp.conj(r)) if is_complex(r) else r * r, axis=0)
        residuals = pxp.reshape(residuals, (1,)) if residuals.ndim == 0 else residuals
    else:
        residuals = xp_of(s).zeros((0,), dtype=s.dtype, device=s.device)
    return x, residuals, rank, s


@implements("linalg.cond", how="ratios of xp.linalg.svdvals, or norm(x) norm(inv(x))")
def cond(x, p=None):
    x = floating(x)
    if p in (None, 2, -2):
        s = pxp.linalg.svdvals(x)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    return norm(x, p, axis=(-2, -1)) * norm(pxp.linalg.inv(x), p, axis=(-2, -1))


@implements("linalg.norm", how="xp.linalg.vector_norm or xp.linalg.matrix_norm, by the shape and ord")
def norm(x, ord=None, axis=None, keepdims=False):
    x = floating(x)
    if axis is None:
        if ord is None or (ord in ("fro", "f") and x.ndim == 2) or (ord == 2 and x.ndim == 1):
            result = pxp.linalg.vector_norm(x, ord=2)  # the 2-norm of the flattened array
            return pxp.reshape(result, (1,) * x.ndim) if keepdims else result
        if x.ndim == 1:
            return pxp.linalg.vector_norm(x, ord=ord, keepdims=keepdims)
        if x.ndim == 2:
            return pxp.linalg.matrix_norm(x, ord=ord, keepdims=keepdims)
        raise ValueError("Improper number of dimensions to norm.")
    if isinstance(axis, int) or len(axis) == 1:
        if isinstance(ord, str):
            raise ValueError(f"Invalid norm order {ord!r} for vectors")
        ax = axis if isinstance(axis, int) else axis[0]
        return pxp.linalg.vector_norm(x, axis=ax, ord=2 if ord is None else ord, keepdims=keepdims)
    row, col = (a % x.ndim for a in axis)
    moved = pxp.moveaxis(x, (row, col), (-2, -1))
    result = pxp.linalg.matrix_norm(moved, ord="fro" if ord in (None, "f") else ord)
    if keepdims:
        shape = list(x.shape)
        shape[row] = shape[col] = 1
        result = pxp.reshape(result, tuple(shape))
    return result


for _name in ("vector_norm", "matrix_norm", "matrix_transpose", "diagonal", "trace", "svdvals"):
    implements(f"linalg.{_name}", how=f"xp.linalg.{_name}")(getattr(pxp.linalg, _name))
implements("linalg.matmul", how="xp.matmul")(pxp.matmul)

refuse("linalg.tensorsolve", "not in polyad: reshape to a matrix and use np.linalg.solve")
refuse("linalg.tensorinv", "not in polyad: reshape to a matrix and use np.linalg.inv")
# general eigenvalues: always complex (NumPy's are real where every imaginary part is zero: a dtype that
# depends on the values, which a traced value cannot have), in the backend's order
implements("linalg.eig", how="xp.linalg.eig (complex)")(pxp.linalg.eig)
implements("linalg.eigvals", how="xp.linalg.eigvals (complex)")(pxp.linalg.eigvals)
implements("roots", how="xp.roots: NumPy's companion matrix, so NumPy's order (complex)")(pxp.roots)

# ------------------------------------------------------------------------------ fft


def _fft_1d(name):
    f = getattr(pxp.fft, name)

    def transform(a, n=None, axis=-1, norm=None, out=None):
        return write_out(out, f(floating(a), n=n, axis=axis, norm=norm or "backward"))

    implements(f"fft.{name}", how=f"xp.fft.{name}")(transform)


def _fft_nd(name, default_axes=None):
    standard = name.replace("2", "n")
    f = getattr(pxp.fft, standard)

    def transform(a, s=None, axes=default_axes, norm=None, out=None):
        s = None if s is None else tuple(s)
        axes = None if axes is None else tuple(axes)
        return write_out(out, f(floating(a), s=s, axes=axes, norm=norm or "backward"))

    implements(f"fft.{name}", how=f"xp.fft.{standard}")(transform)


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    _fft_1d(_name)
for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    _fft_nd(_name)
for _name in ("fft2", "ifft2", "rfft2", "irfft2"):
    _fft_nd(_name, default_axes=(-2, -1))


@implements("fft.fftshift", how="xp.fft.fftshift")
def fftshift(x, axes=None):
    return pxp.fft.fftshift(arr(x), axes=axes)


@implements("fft.ifftshift", how="xp.fft.ifftshift")
def ifftshift(x, axes=None):
    return pxp.fft.ifftshift(arr(x), axes=axes)

"""Triangular and Cholesky solves, SciPy's signatures: ``solve_triangular``, ``cho_factor``,
``cho_solve`` (shared conventions: ``structured.py``).

What each reads, and so what its derivative is a derivative of:

- ``solve_triangular`` reads one triangle of ``a`` (``lower`` or upper), and not its diagonal with
  ``unit_diagonal``, as LAPACK does; the cotangent of ``a`` is zero elsewhere.
- ``cho_factor`` reads one triangle of ``a`` and the real part of its diagonal, the Hermitian matrix
  they define being factored (LAPACK's ``potrf``). It returns the factor with **zeros in the other
  triangle** (SciPy leaves arbitrary values there): ``c`` is exactly ``L`` (``lower``) or ``U = L^H``,
  whose derivative is the Cholesky factor's (the rules of ``xp.linalg.cholesky``), and ``c`` may be used
  as the triangular matrix it is. The cotangent of ``a`` lies in the triangle read.
- ``cho_solve`` reads the triangle of ``c`` that ``lower`` names (SciPy's ``cho_factor`` output works
  as it is); the cotangent of ``c`` lies in that triangle.
"""

from polyad.core import bind
from polyad.core.avals import ShapeDtype, is_complex
from polyad.ops.base import conj_if_complex, unbroadcast
from polyad.ops.common import define
from polyad.ops.creation import tril, triu
from polyad.ops.linalg.decompositions import diag_matrix
from polyad.ops.linalg.diagonals import diagonal
from polyad.ops.linalg.products import conj_transpose, matmul
from polyad.ops.linalg.shared import leading_batch, real_if_complex
from polyad.ops.linalg.structured import (
    adjoint_trans,
    as_floating,
    check_finite,
    check_rhs,
    check_square,
    column,
    common_dtype,
    cotangent_of_a,
    empty_result,
    from_matrix,
    has_empty,
    one_at_a_time,
    op_kernel,
    op_of,
    parse_trans,
    per_matrix,
    scipy_linalg_for,
    small_stack,
    solve_abstract,
    solve_batch,
    solve_kernel,
    triangle,
    triangle_kernel,
)

# ------------------------------------------------------------------------------ solve_triangular


def _tri_generic(xp, a, b, *, trans=0, lower=False, unit_diagonal=False):
    if has_empty(a, b):
        return empty_result(xp, solve_abstract(xp, a, b))

    def one(a, b):
        return solve_kernel(xp, op_kernel(xp, triangle_kernel(xp, a, lower, unit_diagonal), trans), b)

    out = one_at_a_time(xp, one, (a, b), (2, min(b.ndim, 2)))
    return one(a, b) if out is None else out


def _tri_cpu(xp, a, b, *, trans=0, lower=False, unit_diagonal=False):
    sl = scipy_linalg_for((a, b))
    if sl is None or has_empty(a, b) or small_stack(a, b):
        return _tri_generic(xp, a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)

    def one(a2, b2):
        return sl.solve_triangular(
            a2, b2, trans=trans, lower=lower, unit_diagonal=unit_diagonal, check_finite=False
        )

    return per_matrix(xp, one, (a, b), (2, b.ndim if b.ndim == 1 else 2))


def triangular_solve(a, b, trans, lower, unit_diagonal):
    return bind(_solve_triangular, a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)


def _tri_adjoint_solve(a, g, trans, lower, unit_diagonal):
    """``op(A)^-H g`` for ``op(A)`` the matrix ``trans`` names."""
    t, conjugate = adjoint_trans(trans)
    if conjugate and is_complex(a):
        return conj_if_complex(triangular_solve(a, conj_if_complex(g), t, lower, unit_diagonal))
    return triangular_solve(a, g, t, lower, unit_diagonal)


def _tri_vjp(g, x, a, b, *, trans=0, lower=False, unit_diagonal=False):
    vec = len(b.shape) == 1
    g2 = column(g) if vec else g
    cache = []

    def gb():  # op(A)^-H g, shared by both cotangents
        if not cache:
            cache.append(_tri_adjoint_solve(a, g2, trans, lower, unit_diagonal))
        return cache[0]

    def ga():
        x2 = column(x) if vec else x
        gm = -matmul(gb(), conj_transpose(x2))  # the cotangent of M = op(A), as for solve
        return unbroadcast(triangle(cotangent_of_a(gm, trans), lower, strict=unit_diagonal), a)

    def gb_():
        return unbroadcast(from_matrix(gb(), vec), b)

    return ga, gb_


def _tri_jvp(ts, x, a, b, *, trans=0, lower=False, unit_diagonal=False):
    ta, tb = ts
    vec = len(b.shape) == 1
    if ta is None:
        return triangular_solve(a, tb, trans, lower, unit_diagonal)
    x2 = column(x) if vec else x
    r = -matmul(op_of(triangle(ta, lower, strict=unit_diagonal), trans), x2)
    if tb is not None:
        r = r + (column(tb) if vec else tb)
    return from_matrix(triangular_solve(a, r, trans, lower, unit_diagonal), vec)


_solve_triangular = define(
    "linalg.solve_triangular",
    _tri_generic,
    abstract_eval=solve_abstract,
    vjp=_tri_vjp,
    jvp=_tri_jvp,
)
_solve_triangular.kernels["cpu"] = _tri_cpu
_solve_triangular.rules["batch"] = solve_batch(_solve_triangular, (2,))


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` for a triangular ``a`` (SciPy's ``scipy.linalg.solve_triangular``).

    Only the triangle of ``a`` named by ``lower`` is read, and not its diagonal with ``unit_diagonal``
    (taken as ones); so the cotangent of ``a`` lies in that triangle (the strict triangle with
    ``unit_diagonal``). Derivatives in ``a`` and ``b`` to every order, batched by rule. Computed by SciPy
    on NumPy arrays, ``cupyx.scipy.linalg`` on CUDA arrays, a general solve of the triangle (an Array API
    kernel) on other libraries and without SciPy.

    Args:
        a: ``(..., M, M)``: the triangular matrix, or a stack of them.
        b: ``(M,)``, one right-hand side for every matrix, or ``(..., M, K)``, stacks broadcast against
            ``a``'s.
        trans: the system solved: 0 or 'N' ``a x = b``, 1 or 'T' ``a^T x = b``, 2 or 'C' ``a^H x = b``.
        lower: read the lower triangle of ``a`` (default: the upper).
        unit_diagonal: take ``a``'s diagonal as ones, without reading it.
        overwrite_b: accepted for SciPy's signature and ignored: polyad never writes into an argument.
        check_finite: raise ValueError if ``a`` or ``b`` holds inf or nan (where values are at hand: not
            while ``pa.jit`` traces, not on lazy Dask arrays).

    Returns:
        ``x``, shaped like ``b`` with the stacks broadcast, in the promoted floating dtype of ``a`` and
        ``b`` (integers compute as the default floating dtype).

    Example:
        >>> import numpy as np
        >>> from polyad.scipy import linalg
        >>> a = np.array([[2.0, 0.0], [1.0, 4.0]])
        >>> linalg.solve_triangular(a, np.array([2.0, 9.0]), lower=True)
        array([1., 2.])
    """
    del overwrite_b
    fname = "solve_triangular"
    trans = parse_trans(fname, trans)
    a, b = as_floating(fname, "a", a), as_floating(fname, "b", b)
    check_square(fname, "a", a)
    check_rhs(fname, "a", a, b)
    if check_finite:
        _check_finite(fname, a=a, b=b)
    a, b = common_dtype(a, b)
    return triangular_solve(a, b, trans, bool(lower), bool(unit_diagonal))


def _check_finite(fname, **arrays):
    for name, x in arrays.items():
        check_finite(fname, name, x)


# ------------------------------------------------------------------------------ cho_factor


def _hermitian_kernel(xp, a, lower):
    """The Hermitian matrix one triangle of ``a`` and the real part of its diagonal define."""
    strict = xp.tril(a, k=-1) if lower else xp.triu(a, k=1)
    other = xp.matrix_transpose(strict)
    n = a.shape[-1]
    idx = xp.arange(n, device=a.device)
    diag = xp.where(idx[:, None] == idx[None, :], a, xp.zeros((), dtype=a.dtype, device=a.device))
    if xp.isdtype(a.dtype, "complex floating"):
        other = xp.conj(other)
        diag = xp.astype(xp.real(diag), a.dtype)
    return strict + other + diag


def _cho_factor_generic(xp, a, *, lower=False):
    if has_empty(a):
        return xp.zeros(a.shape, dtype=a.dtype, device=a.device)

    def one(a):
        low = xp.linalg.cholesky(_hermitian_kernel(xp, a, lower))
        return low if lower else op_kernel(xp, low, 2)

    out = one_at_a_time(xp, one, (a,), (2,))
    return one(a) if out is None else out


def _cho_factor_cpu(xp, a, *, lower=False):
    sl = scipy_linalg_for((a,))
    if sl is None or a.ndim > 2 or has_empty(a):  # stacks: NumPy's cholesky batches in C
        return _cho_factor_generic(xp, a, lower=lower)
    return sl.cholesky(a, lower=lower, check_finite=False)  # zeros in the other triangle


def _hermitian_adjoint(s, lower):
    """The cotangent of ``a`` given the cotangent ``s`` of the Hermitian matrix its triangle defines
    (the adjoint of ``_hermitian_kernel``: off the diagonal both mirror images, on it the real part)."""
    both = s + conj_transpose(s)
    strict = tril(both, k=-1) if lower else triu(both, k=1)
    return strict + diag_matrix(real_if_complex(diagonal(s)))


def _hermitian(t, lower):
    strict = tril(t, k=-1) if lower else triu(t, k=1)
    return strict + conj_transpose(strict) + diag_matrix(real_if_complex(diagonal(t)))


def _low_solve(c, y, lower, adjoint=False):
    """``L^-1 y`` (or ``L^-H y``) for the lower factor ``L`` that ``c`` holds: ``c`` itself (``lower``)
    or ``c^H`` (``c = U = L^H``), by one triangular solve."""
    if lower:
        return triangular_solve(c, y, 2 if adjoint else 0, True, False)
    return triangular_solve(c, y, 0 if adjoint else 2, False, False)


def _phi(w):
    """The lower triangle of ``w`` with its diagonal halved (the Cholesky derivative's projection)."""
    return 0.5 * (tril(w) + tril(w, k=-1))


def _cho_factor_vjp(g, c, a, *, lower=False):
    # the Cholesky factor's cotangent (as xp.linalg.cholesky's rule, by triangular solves): with L the
    # lower factor and G its cotangent, L^-H Phi'(L^H G) L^-1, Phi' mirroring the strict lower part;
    # then through the triangle a is read from (_hermitian_adjoint)
    low = c if lower else conj_transpose(c)
    gl = g if lower else conj_transpose(g)
    t = tril(matmul(conj_transpose(low), gl))
    m = 0.5 * (t + conj_transpose(tril(t, k=-1)))
    left = _low_solve(c, m, lower, adjoint=True)  # L^-H m
    s = conj_transpose(_low_solve(c, conj_transpose(left), lower, adjoint=True))  # L^-H m L^-1
    return (_hermitian_adjoint(s, lower),)


def _cho_factor_jvp(ts, c, a, *, lower=False):
    # dL = L Phi(L^-1 dA L^-H), dA the Hermitian tangent the read triangle defines
    da = _hermitian(ts[0], lower)
    z = _low_solve(c, da, lower)  # L^-1 dA
    w = conj_transpose(_low_solve(c, conj_transpose(z), lower))  # L^-1 dA L^-H
    low = c if lower else conj_transpose(c)
    dl = matmul(low, _phi(w))
    return dl if lower else conj_transpose(dl)


_cho_factor = define(
    "linalg.cho_factor",
    _cho_factor_generic,
    abstract_eval=lambda xp, a, *, lower=False: ShapeDtype(a.shape, a.dtype, a.device),
    vjp=_cho_factor_vjp,
    jvp=_cho_factor_jvp,
)
_cho_factor.kernels["cpu"] = _cho_factor_cpu
_cho_factor.rules["batch"] = leading_batch(_cho_factor)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """Cholesky factorisation of a Hermitian positive definite ``a``, for ``cho_solve`` (SciPy's
    ``scipy.linalg.cho_factor``).

    Reads one triangle of ``a`` (``lower`` or upper) and the real part of its diagonal, as SciPy does.
    Unlike SciPy, which leaves arbitrary values in the other triangle of ``c``, polyad puts zeros there:
    ``c`` is the Cholesky factor itself (``L`` with ``a = L L^H``, or ``U`` with ``a = U^H U``), so its
    derivative is well defined and ``c`` can be used as a triangular matrix. Differentiable to every
    order (the rules of ``xp.linalg.cholesky``); the cotangent of ``a`` lies in the triangle read.
    Computed by SciPy on NumPy matrices, by the namespace's ``cholesky`` on stacks, other libraries and
    without SciPy.

    Args:
        a: ``(..., M, M)``: the matrix, or a stack of them.
        lower: factor as ``L L^H`` from the lower triangle (default: ``U^H U`` from the upper one).
        overwrite_a: accepted for SciPy's signature and ignored: polyad never writes into an argument.
        check_finite: raise ValueError if ``a`` holds inf or nan (where values are at hand).

    Returns:
        ``(c, lower)``: the factor, shaped like ``a``, zero outside its triangle, and the flag (a Python
        bool), as ``cho_solve`` takes them. A function given to ``pa.vmap`` returns ``c`` (or what it
        computes with the pair), not the flag, which is no array.

    Example:
        >>> import numpy as np
        >>> from polyad.scipy import linalg
        >>> c, lower = linalg.cho_factor(np.array([[4.0, 2.0], [2.0, 5.0]]))
        >>> c, lower
        (array([[2., 1.],
               [0., 2.]]), False)
    """
    del overwrite_a
    fname = "cho_factor"
    a = as_floating(fname, "a", a)
    check_square(fname, "a", a)
    if check_finite:
        _check_finite(fname, a=a)
    lower = bool(lower)
    return bind(_cho_factor, a, lower=lower), lower


# ------------------------------------------------------------------------------ cho_solve


def _cho_solve_generic(xp, c, b, *, lower=False):
    if has_empty(c, b):
        return empty_result(xp, solve_abstract(xp, c, b))

    def one(c, b):
        t = triangle_kernel(xp, c, lower)
        first, second = (t, op_kernel(xp, t, 2)) if lower else (op_kernel(xp, t, 2), t)
        vec = b.ndim == 1  # as a column: the first solve's result is a stack when c is
        x = solve_kernel(xp, second, solve_kernel(xp, first, b[:, None] if vec else b))
        return x[..., 0] if vec else x

    out = one_at_a_time(xp, one, (c, b), (2, min(b.ndim, 2)))
    return one(c, b) if out is None else out


def _cho_solve_cpu(xp, c, b, *, lower=False):
    sl = scipy_linalg_for((c, b))
    if sl is None or has_empty(c, b) or small_stack(c, b):
        return _cho_solve_generic(xp, c, b, lower=lower)

    def one(c2, b2):
        return sl.cho_solve((c2, lower), b2, check_finite=False)

    return per_matrix(xp, one, (c, b), (2, b.ndim if b.ndim == 1 else 2))


def _cho(c, b, lower):
    return bind(_cho_solve, c, b, lower=lower)


def _gram_apply(t, x, lower):
    """``A x`` for ``A = t t^H`` (``lower``) or ``t^H t``."""
    return matmul(t, matmul(conj_transpose(t), x)) if lower else matmul(conj_transpose(t), matmul(t, x))


def _cho_solve_vjp(g, x, c, b, *, lower=False):
    vec = len(b.shape) == 1
    g2 = column(g) if vec else g
    cache = []

    def gb():  # A^-1 g (A is Hermitian), shared by both cotangents
        if not cache:
            cache.append(_cho(c, g2, lower))
        return cache[0]

    def gc():
        # the cotangent of A is -gb x^H; through A = L L^H it is (G + G^H) L, through A = U^H U it is
        # U (G + G^H); G + G^H = -(gb x^H + x gb^H)
        t = triangle(c, lower)
        x2 = column(x) if vec else x
        if lower:
            out = -(matmul(gb(), matmul(conj_transpose(x2), t)) + matmul(x2, matmul(conj_transpose(gb()), t)))
        else:
            out = -(matmul(matmul(t, gb()), conj_transpose(x2)) + matmul(matmul(t, x2), conj_transpose(gb())))
        return unbroadcast(triangle(out, lower), c)

    def gb_():
        return unbroadcast(from_matrix(gb(), vec), b)

    return gc, gb_


def _cho_solve_jvp(ts, x, c, b, *, lower=False):
    tc, tb = ts
    vec = len(b.shape) == 1
    if tc is None:
        return _cho(c, tb, lower)
    t, dt = triangle(c, lower), triangle(tc, lower)
    x2 = column(x) if vec else x
    # dA x for A = t t^H: dt (t^H x) + t (dt^H x); for A = t^H t: dt^H (t x) + t^H (dt x)
    if lower:
        da_x = matmul(dt, matmul(conj_transpose(t), x2)) + matmul(t, matmul(conj_transpose(dt), x2))
    else:
        da_x = matmul(conj_transpose(dt), matmul(t, x2)) + matmul(conj_transpose(t), matmul(dt, x2))
    r = -da_x if tb is None else (column(tb) if vec else tb) - da_x
    return from_matrix(_cho(c, r, lower), vec)


_cho_solve = define(
    "linalg.cho_solve",
    _cho_solve_generic,
    abstract_eval=solve_abstract,
    vjp=_cho_solve_vjp,
    jvp=_cho_solve_jvp,
)
_cho_solve.kernels["cpu"] = _cho_solve_cpu
_cho_solve.rules["batch"] = solve_batch(_cho_solve, (2,))


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` given the Cholesky factorisation of ``a`` from ``cho_factor`` (SciPy's
    ``scipy.linalg.cho_solve``).

    Reads the triangle of ``c`` that ``lower`` names (so SciPy's own ``cho_factor`` output works too);
    the cotangent of ``c`` lies in that triangle. Derivatives in ``c`` and ``b`` to every order, batched
    by rule: with ``cho_factor``, the derivative of ``a^-1 b`` in ``a`` and ``b``. Computed by SciPy on
    NumPy arrays, ``cupyx.scipy.linalg`` triangular solves on CUDA arrays, two general solves of the
    triangle (an Array API kernel) on other libraries and without SciPy.

    Args:
        c_and_lower: ``(c, lower)`` as ``cho_factor`` returns them: ``c`` is ``(..., M, M)``.
        b: ``(M,)``, one right-hand side for every matrix, or ``(..., M, K)``, stacks broadcast against
            ``c``'s.
        overwrite_b: accepted for SciPy's signature and ignored: polyad never writes into an argument.
        check_finite: raise ValueError if ``c`` or ``b`` holds inf or nan (where values are at hand).

    Returns:
        ``x``, shaped like ``b`` with the stacks broadcast.

    Example:
        >>> import numpy as np
        >>> from polyad.scipy import linalg
        >>> a = np.array([[4.0, 2.0], [2.0, 5.0]])
        >>> linalg.cho_solve(linalg.cho_factor(a), np.array([6.0, 7.0]))
        array([1., 1.])
    """
    del overwrite_b
    fname = "cho_solve"
    try:
        c, lower = c_and_lower
    except (TypeError, ValueError):
        raise TypeError(
            f"{fname}: c_and_lower must be the pair (c, lower) that cho_factor returns, got "
            f"{type(c_and_lower).__name__}"
        ) from None
    c, b = as_floating(fname, "c", c), as_floating(fname, "b", b)
    check_square(fname, "c", c)
    check_rhs(fname, "c", c, b)
    if check_finite:
        _check_finite(fname, c=c, b=b)
    c, b = common_dtype(c, b)
    return _cho(c, b, bool(lower))


__all__ = ["cho_factor", "cho_solve", "solve_triangular"]

"""LU factorisation with partial pivoting and its solve, SciPy's signatures: ``lu_factor``,
``lu_solve`` (shared conventions: ``structured.py``).

``lu_factor`` returns LAPACK's packed form, as SciPy does: ``lu`` holds ``U`` on and above the diagonal
and the strictly lower part of the unit lower triangular ``L``; ``piv`` (int32) says that row ``i`` was
interchanged with row ``piv[i]``, in order ``i = 0, 1, ...``, so that ``P^T a = L U``. The pivots are
integers and carry no derivative: derivatives hold where the pivoting does not change under a small
change of ``a`` (no tie between candidate pivots), as everywhere but on a set of measure zero.

Derivatives (square ``a``): from ``P^T da = dL U + L dU``, ``F = L^-1 P^T da U^-1`` splits into
``L^-1 dL`` (strictly lower) and ``dU U^-1`` (upper), so ``dL = L tril(F, -1)`` and ``dU = triu(F) U``
(the forward-mode formula of the LU factorisation); the VJP is its adjoint,
``P L^-H (tril(L^H G, -1) + triu(G U^H)) U^-H``. ``lu_solve`` differentiates ``op(a)^-1 b`` through
``a = P L U`` in ``lu`` and ``b``.
"""

from polyad.core import bind
from polyad.core.avals import ShapeDtype, broadcast_shape, dtype_kind, is_complex, ndim_of, shape_of
from polyad.ops.base import broadcast_to, conj_if_complex, expand_dims, unbroadcast
from polyad.ops.common import define
from polyad.ops.creation import asarray, eye, tril, triu
from polyad.ops.indexing import take_along_axis
from polyad.ops.linalg.products import conj_transpose, matmul, matrix_transpose
from polyad.ops.linalg.shared import leading_batch, leading_batch_multi
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
    on_numpy,
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
    triangle_kernel,
)
from polyad.ops.linalg.triangular import triangular_solve
from polyad.ops.searching import argsort

# ------------------------------------------------------------------------------ pivots -> permutation


def _perm_generic(xp, piv):
    """The row permutation ``perm`` with ``(P^T a)[i] = a[perm[i]]``: LAPACK's interchanges applied in
    order to ``0, 1, ..., n - 1`` (one vectorised step per row, for every matrix of a stack at once)."""
    n = piv.shape[-1]
    idx = xp.arange(n, dtype=piv.dtype, device=piv.device)
    perm = xp.broadcast_to(idx, piv.shape)
    for i in range(n):
        p = piv[..., i : i + 1]
        at_i = perm[..., i : i + 1]
        at_p = xp.take_along_axis(perm, p, axis=-1)
        perm = xp.where(idx == i, at_p, xp.where(idx == p, at_i, perm))
    return perm


def _perm_cpu(xp, piv):
    if not on_numpy((piv,)) or piv.ndim != 1:
        return _perm_generic(xp, piv)
    perm = list(range(piv.shape[0]))  # one matrix: Python's list swaps beat n array steps
    for i, p in enumerate(piv.tolist()):
        perm[i], perm[p] = perm[p], perm[i]
    return xp.asarray(perm, dtype=piv.dtype, device=piv.device)


_pivots_to_permutation = define(
    "linalg.lu_pivots_to_permutation",
    _perm_generic,
    abstract_eval=lambda xp, piv: ShapeDtype(piv.shape, piv.dtype, piv.device),
    nondiff=True,
)
_pivots_to_permutation.kernels["cpu"] = _perm_cpu
_pivots_to_permutation.rules["batch"] = leading_batch(_pivots_to_permutation, min_ndim=1)


def pivots_to_permutation(piv):
    """The permutation ``perm`` (same shape and dtype as ``piv``) with ``P^T a = a[perm]`` for LAPACK's
    pivots ``piv`` as ``lu_factor`` returns them: ``lu_factor``'s ``P^T a = L U`` reads
    ``a[perm] = L U``. No derivative (integers); batched by rule."""
    return bind(_pivots_to_permutation, piv)


def _rows(x, perm):
    """``x[..., perm, :]`` for the stacks of ``x`` and ``perm``, broadcast (``P^T x``)."""
    xs, ps = shape_of(x), shape_of(perm)
    lead = broadcast_shape(xs[:-2], ps[:-1])
    if xs[:-2] != lead:
        x = broadcast_to(x, lead + xs[-2:])
    index = broadcast_to(expand_dims(perm, axis=-1), lead + (ps[-1], xs[-1]))
    return take_along_axis(x, index, axis=-2)


def _apply_p(x, perm):
    """``P x``: the rows of ``x`` put back in place (``(P x)[perm] = x``)."""
    return _rows(x, argsort(perm, axis=-1))


# ------------------------------------------------------------------------------ lu_factor


def _lu_abstract(xp, a):
    return ShapeDtype(a.shape, a.dtype, a.device), ShapeDtype(a.shape[:-1], xp.int32, a.device)


def _lu_generic(xp, a):
    """Doolittle's elimination with partial pivoting (LAPACK's choice: the first row of largest
    magnitude), one vectorised step per column for every matrix of a stack at once."""
    n = a.shape[-1]
    piv = xp.zeros(a.shape[:-1], dtype=xp.int32, device=a.device)
    if has_empty(a):
        return a, piv
    idx = xp.arange(n, device=a.device)
    rows, cols = idx[:, None], idx[None, :]
    zero = xp.zeros((), dtype=a.dtype, device=a.device)
    one = xp.ones((), dtype=a.dtype, device=a.device)
    complex_ = xp.isdtype(a.dtype, "complex floating")
    lu = a
    for k in range(n):
        col = lu[..., :, k]
        # LAPACK's i?amax: |x| for real x, |Re x| + |Im x| for complex x
        mag = xp.abs(xp.real(col)) + xp.abs(xp.imag(col)) if complex_ else xp.abs(col)
        mag = xp.where(idx >= k, mag, -xp.ones((), dtype=mag.dtype, device=a.device))
        p = xp.argmax(mag, axis=-1)  # (...,)
        piv = xp.where(idx == k, xp.astype(p, xp.int32)[..., None], piv)
        p_index = xp.broadcast_to(p[..., None, None], lu.shape[:-2] + (1, n))
        row_k, row_p = lu[..., k : k + 1, :], xp.take_along_axis(lu, p_index, axis=-2)
        lu = xp.where(rows == k, row_p, xp.where(rows == p[..., None, None], row_k, lu))
        pivot = lu[..., k : k + 1, k : k + 1]
        # a zero pivot (a singular matrix) leaves its column as it is, as LAPACK does
        mult = xp.where(rows > k, lu[..., :, k : k + 1] / xp.where(pivot == zero, one, pivot), zero)
        update = xp.where(cols > k, mult * lu[..., k : k + 1, :], zero)
        lu = xp.where((rows > k) & (cols == k), mult, lu - update)
    return lu, piv


def _lu_cpu(xp, a):
    sl = scipy_linalg_for((a,))
    if sl is None or has_empty(a):
        return _lu_generic(xp, a)

    def one(a2):
        lu, piv = sl.lu_factor(a2, check_finite=False)
        return lu, xp.astype(piv, xp.int32)

    return per_matrix(xp, one, (a,), (2,))


def _unit_lower(lu):
    n = shape_of(lu)[-1]
    return tril(lu, k=-1) + eye(n, dtype=lu.dtype, device=lu.device)


def _right_upper_solve(y, lu):
    """``y U^-1`` for ``U = triu(lu)``: ``(U^-T y^T)^T``, one triangular solve."""
    return matrix_transpose(triangular_solve(lu, matrix_transpose(y), 1, False, False))


def _lu_factor_jvp(ts, out, a):
    lu, piv = out
    perm = pivots_to_permutation(piv)
    f = _right_upper_solve(triangular_solve(lu, _rows(ts[0], perm), 0, True, True), lu)  # L^-1 P^T da U^-1
    dlu = matmul(_unit_lower(lu), tril(f, k=-1)) + matmul(triu(f), triu(lu))
    return dlu, None


def _lu_factor_vjp(g, out, a):
    gl, _ = g  # the pivots' cotangent: integers, no derivative
    lu, piv = out
    h = tril(matmul(conj_transpose(_unit_lower(lu)), gl), k=-1) + triu(matmul(gl, conj_transpose(triu(lu))))
    left = triangular_solve(lu, h, 2, True, True)  # L^-H h
    z = conj_transpose(triangular_solve(lu, conj_transpose(left), 0, False, False))  # L^-H h U^-H
    return (_apply_p(z, pivots_to_permutation(piv)),)


_lu_factor = define(
    "linalg.lu_factor",
    _lu_generic,
    abstract_eval=_lu_abstract,
    vjp=_lu_factor_vjp,
    jvp=_lu_factor_jvp,
    multiple_results=True,
)
_lu_factor.kernels["cpu"] = _lu_cpu
_lu_factor.rules["batch"] = leading_batch_multi(_lu_factor, 2)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """LU factorisation of a square ``a`` with partial pivoting, for ``lu_solve`` (SciPy's
    ``scipy.linalg.lu_factor``).

    ``P^T a = L U`` in LAPACK's packed form: ``lu`` holds ``U`` on and above the diagonal and the
    strictly lower part of the unit lower triangular ``L``; ``piv[i]`` (int32) is the row that row
    ``i`` was interchanged with. ``lu`` is differentiable to every order (the pivots are integers, with
    no derivative); batched by rule. Computed by SciPy on NumPy arrays, ``cupyx.scipy.linalg`` on CUDA
    arrays, an Array API elimination (one vectorised step per column, the same pivots) on other
    libraries and without SciPy. A singular ``a`` gives a zero on ``U``'s diagonal (SciPy warns);
    ``lu_solve`` with it divides by zero.

    Args:
        a: ``(..., M, M)``: the matrix, or a stack of them (polyad factors square matrices only).
        overwrite_a: accepted for SciPy's signature and ignored: polyad never writes into an argument.
        check_finite: raise ValueError if ``a`` holds inf or nan (where values are at hand).

    Returns:
        ``(lu, piv)``: ``lu`` shaped like ``a``, ``piv`` of shape ``(..., M)``, as ``lu_solve`` takes them.

    Example:
        >>> import numpy as np
        >>> from polyad.scipy import linalg
        >>> lu, piv = linalg.lu_factor(np.array([[1.0, 2.0], [4.0, 2.0]]))
        >>> lu, piv
        (array([[4.  , 2.  ],
               [0.25, 1.5 ]]), array([1, 1], dtype=int32))
    """
    del overwrite_a
    fname = "lu_factor"
    a = as_floating(fname, "a", a)
    check_square(fname, "a", a)
    if check_finite:
        check_finite_(fname, a=a)
    return tuple(bind(_lu_factor, a))


def check_finite_(fname, **arrays):
    for name, x in arrays.items():
        check_finite(fname, name, x)


# ------------------------------------------------------------------------------ lu_solve


def _lu_solve_generic(xp, lu, piv, b, *, trans=0):
    if has_empty(lu, b):
        return empty_result(xp, solve_abstract(xp, lu, piv, b))
    out = one_at_a_time(
        xp, lambda *m: _lu_solve_2d(xp, *m, trans=trans), (lu, piv, b), (2, 1, min(b.ndim, 2))
    )
    return _lu_solve_2d(xp, lu, piv, b, trans=trans) if out is None else out


def _lu_solve_2d(xp, lu, piv, b, *, trans=0):
    """The generic solve (stacks too, where the library's linalg takes them)."""
    vec = b.ndim == 1
    lead = tuple(broadcast_shape(lu.shape[:-2], piv.shape[:-1], () if vec else b.shape[:-2]))
    n = lu.shape[-1]
    bm = b[:, None] if vec else b
    bm = xp.broadcast_to(bm, lead + tuple(bm.shape[-2:]))
    perm = xp.broadcast_to(_perm_generic(xp, piv), lead + (n,))
    low = triangle_kernel(xp, lu, True, unit_diagonal=True)
    up = triangle_kernel(xp, lu, False)
    index = xp.broadcast_to(perm[..., None], lead + (n, bm.shape[-1]))
    if trans == 0:  # x = U^-1 L^-1 P^T b
        x = solve_kernel(xp, up, solve_kernel(xp, low, xp.take_along_axis(bm, index, axis=-2)))
    else:  # op(a) = op(U) op(L) P^T: x = P op(L)^-1 op(U)^-1 b
        w = solve_kernel(xp, op_kernel(xp, low, trans), solve_kernel(xp, op_kernel(xp, up, trans), bm))
        inverse = xp.broadcast_to(xp.argsort(perm, axis=-1)[..., None], index.shape)
        x = xp.take_along_axis(w, inverse, axis=-2)
    return x[..., 0] if vec else x


def _lu_solve_cpu(xp, lu, piv, b, *, trans=0):
    sl = scipy_linalg_for((lu, piv, b))
    if sl is None or has_empty(lu, b) or small_stack(lu, piv, b):
        return _lu_solve_generic(xp, lu, piv, b, trans=trans)

    def one(lu2, piv2, b2):
        return sl.lu_solve((lu2, piv2), b2, trans=trans, check_finite=False)

    return per_matrix(xp, one, (lu, piv, b), (2, 1, b.ndim if b.ndim == 1 else 2))


def _lus(lu, piv, b, trans):
    return bind(_lu_solve, lu, piv, b, trans=trans)


def _lu_solve_vjp(g, x, lu, piv, b, *, trans=0):
    vec = ndim_of(b) == 1
    g2 = column(g) if vec else g
    cache = []

    def gb():  # op(A)^-H g, shared by both cotangents
        if not cache:
            t, conjugate = adjoint_trans(trans)
            if conjugate and is_complex(lu):
                cache.append(conj_if_complex(_lus(lu, piv, conj_if_complex(g2), t)))
            else:
                cache.append(_lus(lu, piv, g2, t))
        return cache[0]

    def glu():
        # the cotangent of A: G_A = op^T(-gb x^H); through A = P L U it is
        # tril(P^T G_A U^H, -1) + triu(L^H P^T G_A)
        x2 = column(x) if vec else x
        ga = cotangent_of_a(-matmul(gb(), conj_transpose(x2)), trans)
        pga = _rows(ga, pivots_to_permutation(piv))
        out = tril(matmul(pga, conj_transpose(triu(lu))), k=-1) + triu(
            matmul(conj_transpose(_unit_lower(lu)), pga)
        )
        return unbroadcast(out, lu)

    def gb_():
        return unbroadcast(from_matrix(gb(), vec), b)

    return glu, None, gb_


def _lu_solve_jvp(ts, x, lu, piv, b, *, trans=0):
    tlu, _, tb = ts
    vec = ndim_of(b) == 1
    if tlu is None:
        return _lus(lu, piv, tb, trans)
    x2 = column(x) if vec else x
    low, up = _unit_lower(lu), triu(lu)
    dl, du = tril(tlu, k=-1), triu(tlu)
    perm = pivots_to_permutation(piv)
    if trans == 0:  # dA x = P (dL U x + L dU x)
        da_x = _apply_p(matmul(dl, matmul(up, x2)) + matmul(low, matmul(du, x2)), perm)
    else:  # op(dA) x = (op(U) op(dL) + op(dU) op(L)) P^T x
        y = _rows(x2, perm)
        da_x = matmul(op_of(up, trans), matmul(op_of(dl, trans), y)) + matmul(
            op_of(du, trans), matmul(op_of(low, trans), y)
        )
    r = -da_x if tb is None else (column(tb) if vec else tb) - da_x
    return from_matrix(_lus(lu, piv, r, trans), vec)


_lu_solve = define(
    "linalg.lu_solve",
    _lu_solve_generic,
    abstract_eval=solve_abstract,
    vjp=_lu_solve_vjp,
    jvp=_lu_solve_jvp,
)
_lu_solve.kernels["cpu"] = _lu_solve_cpu
_lu_solve.rules["batch"] = solve_batch(_lu_solve, (2, 1))


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` given the LU factorisation of ``a`` from ``lu_factor`` (SciPy's
    ``scipy.linalg.lu_solve``).

    Differentiable in ``lu`` and ``b`` to every order (the pivots carry no derivative), batched by rule:
    with ``lu_factor``, the derivative of ``op(a)^-1 b`` in ``a`` and ``b``. Computed by SciPy on NumPy
    arrays, ``cupyx.scipy.linalg`` on CUDA arrays, a row permutation and two general solves of the
    triangles (an Array API kernel) on other libraries and without SciPy.

    Args:
        lu_and_piv: ``(lu, piv)`` as ``lu_factor`` returns them: ``lu`` is ``(..., M, M)``, ``piv``
            ``(..., M)`` integers.
        b: ``(M,)``, one right-hand side for every matrix, or ``(..., M, K)``, stacks broadcast against
            ``lu``'s.
        trans: the system solved: 0 or 'N' ``a x = b``, 1 or 'T' ``a^T x = b``, 2 or 'C' ``a^H x = b``
            (SciPy's ``lu_solve`` takes the integers only; polyad both, as ``solve_triangular``).
        overwrite_b: accepted for SciPy's signature and ignored: polyad never writes into an argument.
        check_finite: raise ValueError if ``lu`` or ``b`` holds inf or nan (where values are at hand).

    Returns:
        ``x``, shaped like ``b`` with the stacks broadcast.

    Example:
        >>> import numpy as np
        >>> from polyad.scipy import linalg
        >>> a = np.array([[1.0, 2.0], [4.0, 2.0]])
        >>> linalg.lu_solve(linalg.lu_factor(a), np.array([3.0, 6.0]))
        array([1., 1.])
    """
    del overwrite_b
    fname = "lu_solve"
    trans = parse_trans(fname, trans)
    try:
        lu, piv = lu_and_piv
    except (TypeError, ValueError):
        raise TypeError(
            f"{fname}: lu_and_piv must be the pair (lu, piv) that lu_factor returns, got "
            f"{type(lu_and_piv).__name__}"
        ) from None
    lu, b = as_floating(fname, "lu", lu), as_floating(fname, "b", b)
    n = check_square(fname, "lu", lu)
    if not hasattr(piv, "shape") and isinstance(piv, list | tuple):  # array-likes, as SciPy takes them
        piv = asarray(piv, device=getattr(lu, "device", None))
    if not hasattr(piv, "dtype") or dtype_kind(piv.dtype) != "i":
        raise TypeError(
            f"{fname}: piv must be an integer array (lu_factor's pivots), got "
            f"{getattr(piv, 'dtype', type(piv).__name__)}"
        )
    if shape_of(piv)[-1:] != (n,):
        raise ValueError(
            f"{fname}: piv must have shape (..., {n}) for lu of shape {shape_of(lu)}, got {shape_of(piv)}"
        )
    check_rhs(fname, "lu", lu, b)
    if check_finite:
        check_finite_(fname, lu=lu, b=b)
    lu, b = common_dtype(lu, b)
    return _lus(lu, piv, b, trans)


__all__ = ["lu_factor", "lu_solve", "pivots_to_permutation"]

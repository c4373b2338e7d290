"""Inverses and solves: ``inv``, ``det``, ``slogdet``, ``solve``, ``matrix_power``, ``matrix_rank`` and
``pinv``. Their rules solve rather than invert where they can (``right_solve``: ``x @ inv(a)`` by one
solve).
"""

import math
from collections import namedtuple

from polyad.core import bind
from polyad.core.avals import ShapeDtype, broadcast_shape, device_of, is_complex, ndim_of, shape_of
from polyad.ops.base import (
    broadcast_batch_args,
    broadcast_to,
    conj,
    conj_if_complex,
    expand_dims,
    move_to_front,
    real,
    reshape,
    unbroadcast,
    where,
)
from polyad.ops.base import sum as _sum
from polyad.ops.common import define
from polyad.ops.creation import eye
from polyad.ops.elementwise import imag
from polyad.ops.fills import zeros_like
from polyad.ops.linalg.diagonals import trace
from polyad.ops.linalg.products import conj_transpose, matmul, matrix_transpose
from polyad.ops.linalg.shared import (
    add_optional,
    check_example_ndim,
    leading_batch,
    leading_batch_multi,
    real_dtype,
    times_i,
)
from polyad.ops.manipulation import squeeze

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])

# ------------------------------------------------------------------------------ inv, det, slogdet


def _same(xp, x):
    return ShapeDtype(x.shape, x.dtype, x.device)


_inv = define(
    "linalg.inv",
    abstract_eval=_same,
    vjp=lambda g, y, x: (-matmul(conj_transpose(y), matmul(g, conj_transpose(y))),),
    jvp=lambda ts, y, x: -matmul(y, matmul(ts[0], y)),
)
_inv.register_rule("batch", leading_batch(_inv))


def inv(x, /):
    """Inverse of the square matrices in ``x``."""
    return bind(_inv, x)


def _adjugate_kernel(xp, x):
    """``adj(x) = det(x) inv(x)``, also where ``x`` is singular (the LU behind ``inv`` met a zero pivot,
    so ``det`` is exactly 0): there by the SVD ``x = U S Vh``, ``adj(x) = det(U) det(Vh) V diag(p) U^H``
    with ``p_i`` the product of the singular values other than ``s_i``."""
    d = xp.linalg.det(x)
    singular = (d == 0)[..., None, None]
    eye = xp.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    out = d[..., None, None] * xp.linalg.inv(xp.where(singular, eye, x))
    if not bool(xp.any(singular)):
        return out
    u, s, vh = xp.linalg.svd(x)
    s_row = s[..., None, :]
    k = xp.arange(x.shape[-1], device=x.device)
    others = xp.prod(xp.where(k[:, None] == k[None, :], xp.ones_like(s_row), s_row), axis=-1)
    phase = xp.linalg.det(u) * xp.linalg.det(vh)
    vhh, uh = xp.matrix_transpose(vh), xp.matrix_transpose(u)
    if xp.isdtype(x.dtype, "complex floating"):
        vhh, uh = xp.conj(vhh), xp.conj(uh)
    by_svd = phase[..., None, None] * ((vhh * xp.astype(others[..., None, :], x.dtype)) @ uh)
    return xp.where(singular, by_svd, out)


def _adjugate_jvp(ts, y, x):
    # d adj(x) = adj(x) tr(x^-1 dx) - adj(x) dx x^-1, for invertible x (a singular x raises in inv)
    t = ts[0]
    xi = inv(x)
    return y * _trace_of_product(xi, t) - matmul(y, matmul(t, xi))


def _adjugate_vjp(g, y, x):
    xih = conj_transpose(inv(x))
    return (
        _trace_of_product(conj_if_complex(y), matrix_transpose(g)) * xih
        - matmul(conj_transpose(y), matmul(g, xih)),
    )


def _trace_of_product(a, b):
    """``tr(a @ b)`` of the matrices in ``a`` and ``b``, kept as (..., 1, 1) to broadcast."""
    return _sum(a * matrix_transpose(b), axis=(-2, -1), keepdims=True)


_adjugate = define(
    "linalg.adjugate",
    _adjugate_kernel,
    abstract_eval=_same,
    vjp=_adjugate_vjp,
    jvp=_adjugate_jvp,
)
_adjugate.register_rule("batch", leading_batch(_adjugate))


def adjugate(x, /):
    """The adjugate ``det(x) inv(x)`` of the square matrices in ``x``, finite at singular ``x`` too
    (polyad's own, not a standard function: ``det``'s derivatives are made of it). Its derivatives need
    an invertible ``x``; at a singular one the backend's ``inv`` raises."""
    return bind(_adjugate, x)


def _det_vjp(g, y, x):
    return (expand_dims(expand_dims(g, axis=-1), axis=-1) * conj_transpose(adjugate(x)),)


_det = define(
    "linalg.det",
    abstract_eval=lambda xp, x: ShapeDtype(x.shape[:-2], x.dtype, x.device),
    vjp=_det_vjp,
    jvp=lambda ts, y, x: squeeze(_trace_of_product(adjugate(x), ts[0]), axis=(-2, -1)),
)
_det.register_rule("batch", leading_batch(_det))


def det(x, /):
    """Determinant of the square matrices in ``x``. Its derivative is the adjugate (``d det = tr(adj(x)
    dx)``), finite at singular matrices too: ``grad(det)`` at ``[[1, 2], [2, 4]]`` is
    ``[[4, -2], [-2, 1]]``. Second derivatives need an invertible ``x`` (at a singular one ``inv``
    raises)."""
    return bind(_det, x)


def _regular(x, singular):
    """``x`` with its singular matrices (where ``singular``, shaped ``x.shape[:-2]``) replaced by the
    identity, so that solves with it run; results there are then overwritten."""
    mask = expand_dims(expand_dims(singular, axis=-1), axis=-1)
    return where(mask, eye(shape_of(x)[-1], dtype=x.dtype, device=device_of(x)), x)


def _slogdet_vjp(g, out, x):
    gs, gl = g
    s, _ = out
    ct = gl
    if is_complex(x):
        # d sign = sign * i Im(t), d logabsdet = Re(t), with t = tr(x^-1 dx)
        ct = gl - times_i(imag(conj(gs) * s), x)
    singular = s == 0
    ct = expand_dims(expand_dims(where(singular, math.nan, ct), axis=-1), axis=-1)
    return (ct * conj_transpose(inv(_regular(x, singular))),)


def _slogdet_jvp(ts, out, x):
    s, _ = out
    singular = s == 0
    t = where(singular, math.nan, trace(solve(_regular(x, singular), ts[0])))
    if is_complex(x):
        return s * times_i(imag(t), x), real(t)
    return None, t


_slogdet = define(
    "linalg.slogdet",
    lambda xp, x: tuple(xp.linalg.slogdet(x)),
    abstract_eval=lambda xp, x: (
        ShapeDtype(x.shape[:-2], x.dtype, x.device),
        ShapeDtype(x.shape[:-2], real_dtype(xp, x.dtype), x.device),
    ),
    vjp=_slogdet_vjp,
    jvp=_slogdet_jvp,
    multiple_results=True,
)
_slogdet.register_rule("batch", leading_batch_multi(_slogdet, 2))


def slogdet(x, /):
    """Sign and natural log of the absolute determinant: a namedtuple ``(sign, logabsdet)``. The sign
    carries no derivative for real ``x``; for complex ``x`` it moves with the phase of the determinant.

    At a singular matrix (sign 0, logabsdet -inf) the derivatives do not exist: they come back as nan,
    without an error (JAX and PyTorch give inf or nan there too, from their LU solves)."""
    return SlogdetResult(*bind(_slogdet, x))


# ------------------------------------------------------------------------------ solve


def _solve_abstract(xp, a, b):
    dtype = xp.result_type(a.dtype, b.dtype)
    if len(b.shape) == 1:
        return ShapeDtype(a.shape[:-1], dtype, a.device)
    return ShapeDtype(broadcast_shape(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], dtype, a.device)


def _solve_vjp(g, y, a, b):
    vec = ndim_of(b) == 1
    cache = []

    def gb():  # a^-H g, shared by both cotangents
        if not cache:
            cache.append(solve(conj_transpose(a), expand_dims(g, axis=-1) if vec else g))
        return cache[0]

    def ga():
        x = expand_dims(y, axis=-1) if vec else y
        return unbroadcast(-matmul(gb(), conj_transpose(x)), a)

    def gb_():
        r = gb()
        return unbroadcast(squeeze(r, axis=-1) if vec else r, b)

    return ga, gb_


def _bcast(t, y):
    return t if shape_of(t) == shape_of(y) else broadcast_to(t, shape_of(y))


def _solve_jvp(ts, y, a, b):
    ta, tb = ts
    vec = ndim_of(b) == 1
    if ta is None:
        return _bcast(solve(a, tb), y)
    x = expand_dims(y, axis=-1) if vec else y
    r = -matmul(ta, x)
    if tb is not None:
        r = r + (expand_dims(tb, axis=-1) if vec else tb)
    out = solve(a, r)
    return squeeze(out, axis=-1) if vec else out


def _solve_batch(info, dims, a, b):
    da, db = dims
    vec = ndim_of(b) - (db is not None) == 1
    if vec and db is None:  # a 1-D b broadcasts against every matrix of a
        return solve(move_to_front(a, da), b), 0
    if vec:
        b, db = expand_dims(move_to_front(b, db), axis=-1), 0
    a, b = broadcast_batch_args((da, db), (a, b))
    out = solve(a, b)
    return (squeeze(out, axis=-1) if vec else out), 0


_solve = define(
    "linalg.solve",
    abstract_eval=_solve_abstract,
    vjp=_solve_vjp,
    jvp=_solve_jvp,
    batch=_solve_batch,
)


def solve(x1, x2, /):
    """The solution ``x`` of ``x1 @ x = x2`` for square ``x1``; a 1-D ``x2`` is one right-hand side for
    every matrix of ``x1``, else ``x2`` is a stack of matrices broadcast against ``x1``. The VJP costs one
    solve with ``x1^H``."""
    return bind(_solve, x1, x2)


def right_solve(x, a):
    """``x @ inv(a)`` by one solve: ``(a^-H x^H)^H``."""
    return conj_transpose(solve(conj_transpose(a), conj_transpose(x)))


def right_solve_h(x, a):
    """``x @ inv(a)^H`` by one solve: ``(a^-1 x^H)^H``."""
    return conj_transpose(solve(a, conj_transpose(x)))


# ------------------------------------------------------------------------------ matrix_power


def _mat_powers(b, k):
    """``[None, b, b^2, ..., b^(k-1)]`` (None stands for the identity)."""
    ps = [None]
    for _ in range(1, k):
        ps.append(b if ps[-1] is None else matmul(ps[-1], b))
    return ps


def _sandwich(ps, mid, k):
    """``sum_j ps[j] mid ps[k-1-j]``."""
    total = None
    for j in range(k):
        left, right = ps[j], ps[k - 1 - j]
        term = mid if left is None else matmul(left, mid)
        term = term if right is None else matmul(term, right)
        total = add_optional(total, term)
    return total


def _mpow_vjp(g, y, x, *, n):
    if n == 0:
        return (zeros_like(x),)
    base = x if n > 0 else inv(x)
    bh = conj_transpose(base)
    gb = _sandwich(_mat_powers(bh, abs(n)), g, abs(n))
    if n > 0:
        return (gb,)
    return (-matmul(bh, matmul(gb, bh)),)


def _mpow_jvp(ts, y, x, *, n):
    if n == 0:
        return zeros_like(y)
    t = ts[0]
    base = x if n > 0 else inv(x)
    db = t if n > 0 else -matmul(base, matmul(t, base))
    return _sandwich(_mat_powers(base, abs(n)), db, abs(n))


_matrix_power = define(
    "linalg.matrix_power",
    lambda xp, x, *, n: xp.linalg.matrix_power(x, n),
    abstract_eval=lambda xp, x, *, n: ShapeDtype(x.shape, x.dtype, x.device),
    vjp=_mpow_vjp,
    jvp=_mpow_jvp,
)
_matrix_power.register_rule("batch", leading_batch(_matrix_power))


def matrix_power(x, n, /):
    """``x`` raised to the integer power ``n`` (``n = 0``: identity; ``n < 0``: powers of the inverse)."""
    return bind(_matrix_power, x, n=int(n))


# ------------------------------------------------------------------------------ matrix_rank, pinv


def _rtol_batch(op):
    """Batching rule of ``op(x, rtol)`` where ``rtol`` (None, a float or an array) broadcasts against
    the stack shape ``x.shape[:-2]``."""

    def rule(info, dims, x, rtol):
        dx, dr = dims
        if dx is not None:
            check_example_ndim(op, x, 2)
        if dr is None:
            return bind(op, move_to_front(x, dx), rtol), 0
        rtol = move_to_front(rtol, dr)
        if dx is None:
            x = broadcast_to(expand_dims(x, axis=0), (rtol.shape[0], *shape_of(x)))
        else:
            x = move_to_front(x, dx)
        stack = ndim_of(x) - 2
        r = ndim_of(rtol)
        if r < stack:
            s = shape_of(rtol)
            rtol = reshape(rtol, (s[0],) + (1,) * (stack - r) + s[1:])
        return bind(op, x, rtol), 0

    return rule


def _rtol_kernel(name):
    def kernel(xp, x, rtol):
        return getattr(xp.linalg, name)(x, rtol=rtol)

    return kernel


def _stack_shape(x, rtol):
    lead = x.shape[:-2]
    if hasattr(rtol, "shape"):
        lead = broadcast_shape(lead, rtol.shape)
    return lead


_matrix_rank = define(
    "linalg.matrix_rank",
    _rtol_kernel("matrix_rank"),
    abstract_eval=lambda xp, x, rtol: ShapeDtype(
        _stack_shape(x, rtol), xp.__array_namespace_info__().default_dtypes()["indexing"], x.device
    ),
    nondiff=True,
)
_matrix_rank.register_rule("batch", _rtol_batch(_matrix_rank))


def matrix_rank(x, /, *, rtol=None):
    """Rank of the matrices in ``x``: singular values above ``rtol * max singular value`` (no derivative)."""
    return bind(_matrix_rank, x, rtol)


def _pinv_vjp(g, p, x, rtol):
    def gx():
        m, n = shape_of(x)[-2:]
        ph = conj_transpose(p)
        gh = conj_transpose(g)
        out = -matmul(ph, matmul(g, ph))
        # (I - x p) g^H p p^H  and  p^H p g^H (I - p x): zero for square invertible x
        left = matmul(gh, matmul(p, ph))
        out = out + left - matmul(x, matmul(p, left))
        right = matmul(matmul(ph, p), gh)
        out = out + right - matmul(right, matmul(p, x))
        return out

    return gx, None


def _pinv_jvp(ts, p, x, rtol):
    t = ts[0]
    th = conj_transpose(t)
    out = -matmul(p, matmul(t, p))
    a = matmul(matmul(p, conj_transpose(p)), th)  # p p^H t^H (I - x p)
    out = out + a - matmul(a, matmul(x, p))
    b = matmul(th, matmul(conj_transpose(p), p))  # (I - p x) t^H p^H p
    return out + b - matmul(p, matmul(x, b))


_pinv = define(
    "linalg.pinv",
    _rtol_kernel("pinv"),
    abstract_eval=lambda xp, x, rtol: ShapeDtype(
        _stack_shape(x, rtol) + (x.shape[-1], x.shape[-2]), x.dtype, x.device
    ),
    vjp=_pinv_vjp,
    jvp=_pinv_jvp,
)
_pinv.register_rule("batch", _rtol_batch(_pinv))


def pinv(x, /, *, rtol=None):
    """Moore-Penrose pseudo-inverse of the matrices in ``x`` (singular values below ``rtol`` times the
    largest are treated as zero). Differentiable where the rank is locally constant."""
    return bind(_pinv, x, rtol)

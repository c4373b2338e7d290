"""CUDA kernels of polyad's structured solves (``polyad.linalg``: SciPy's ``solve_triangular``,
``cho_solve``, ``lu_factor``, ``lu_solve``), by ``cupyx.scipy.linalg``; merged into ``KERNELS``
(``kernels.py``). ``cho_factor`` and the pivots' permutation need none: their generic kernels (CuPy's
batched ``cholesky``, a few element-wise steps) run on the GPU as they are.

cupyx's functions take one 2-D matrix (older CuPy releases), so a stack runs one matrix at a time;
the arguments arrive as the ops give them (one dtype, ``trans`` 0, 1 or 2, ``piv`` int32). Written against
CuPy's documented API; **not yet run on a GPU** (the machines polyad is tested on have none).
"""

import math

import cupy
import cupyx
import cupyx.scipy.linalg as _linalg
import numpy


def _stack_shape(arrays, cores):
    leads = [a.shape[: a.ndim - c] for a, c in zip(arrays, cores)]
    return tuple(numpy.broadcast_shapes(*leads)) if leads else ()


def _per_matrix(f, arrays, cores):
    """``f`` on the 2-D (1-D) slices of the broadcast stack of ``arrays``, results stacked."""
    lead = _stack_shape(arrays, cores)
    if not lead:
        return f(*arrays)
    count = math.prod(lead)
    flat = []
    for a, c in zip(arrays, cores):
        core = a.shape[a.ndim - c :]
        flat.append(cupy.broadcast_to(a, lead + core).reshape((count,) + core))
    outs = [f(*(x[i] for x in flat)) for i in range(count)]
    if isinstance(outs[0], tuple):
        return tuple(cupy.stack(col).reshape(lead + col[0].shape) for col in zip(*outs))
    return cupy.stack(outs).reshape(lead + outs[0].shape)


def _solve_cores(b, n_mats):
    return (2,) * n_mats + (1 if b.ndim == 1 else 2,)


def _empty_solution(mats, b):
    """The (empty) solution for matrices ``mats`` (``a``; or ``lu, piv``) and ``b``."""
    arrays = list(mats) + ([b] if b.ndim > 1 else [])
    cores = [2, 1][: len(mats)] + ([2] if b.ndim > 1 else [])
    core = b.shape if b.ndim == 1 else b.shape[-2:]
    return cupy.zeros(_stack_shape(arrays, cores) + core, dtype=b.dtype)


def _solve_triangular(xp, a, b, *, trans=0, lower=False, unit_diagonal=False):
    if a.size == 0 or b.size == 0:
        return _empty_solution((a,), b)

    def one(a2, b2):
        return _linalg.solve_triangular(a2, b2, trans=trans, lower=lower, unit_diagonal=unit_diagonal)

    return _per_matrix(one, (a, b), _solve_cores(b, 1))


def _cho_solve(xp, c, b, *, lower=False):
    if c.size == 0 or b.size == 0:
        return _empty_solution((c,), b)

    def one(c2, b2):  # A = L L^H: L (L^H x) = b; A = U^H U: U^H (U x) = b
        first, second = (0, 2) if lower else (2, 0)
        y = _linalg.solve_triangular(c2, b2, trans=first, lower=lower)
        return _linalg.solve_triangular(c2, y, trans=second, lower=lower)

    return _per_matrix(one, (c, b), _solve_cores(b, 1))


def _lu_factor(xp, a):
    if a.size == 0:
        return a.copy(), cupy.zeros(a.shape[:-1], dtype=cupy.int32)

    def one(a2):
        lu, piv = _linalg.lu_factor(a2)
        return lu, piv.astype(cupy.int32)

    return _per_matrix(one, (a,), (2,))


def _lu_solve(xp, lu, piv, b, *, trans=0):
    if lu.size == 0 or b.size == 0:
        return _empty_solution((lu, piv), b)

    def one(lu2, piv2, b2):
        return _linalg.lu_solve((lu2, piv2), b2, trans=trans)

    return _per_matrix(one, (lu, piv, b), (2, 1, 1 if b.ndim == 1 else 2))


LINALG = {
    "linalg.solve_triangular": {"cuda": _solve_triangular},
    "linalg.cho_solve": {"cuda": _cho_solve},
    "linalg.lu_factor": {"cuda": _lu_factor},
    "linalg.lu_solve": {"cuda": _lu_solve},
}


def _solve(xp, a, b):
    """The standard's ``solve``: a 1-D ``b`` is one right-hand side for every matrix of ``a``, else the
    stacks broadcast; ``cupy.linalg.solve`` needs equal batch shapes, so both are broadcast first. A
    singular matrix raises ``LinAlgError`` as NumPy's solve does (CuPy's default is silence)."""
    with cupyx.errstate(linalg="raise"):
        return _solve_broadcast(a, b)


def _solve_broadcast(a, b):
    if b.ndim == 1:
        b2 = cupy.broadcast_to(b[:, None], (*a.shape[:-1], 1))
        return cupy.linalg.solve(a, cupy.ascontiguousarray(b2))[..., 0]
    batch = numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a2 = cupy.ascontiguousarray(cupy.broadcast_to(a, (*batch, *a.shape[-2:])))
    b2 = cupy.ascontiguousarray(cupy.broadcast_to(b, (*batch, *b.shape[-2:])))
    return cupy.linalg.solve(a2, b2)


LINALG["linalg.solve"] = {"cuda": _solve}

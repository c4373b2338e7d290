"""What the structured solves share (``solve_triangular``, ``cho_factor``/``cho_solve``,
``lu_factor``/``lu_solve``: SciPy's ``scipy.linalg`` functions, in ``triangular.py`` and ``lu.py``).

- **Arguments** as SciPy takes them: array-likes become arrays, integer and bool arrays the default
  floating dtype, ``a`` and ``b`` one common dtype; ``trans`` is 0, 1, 2 or 'N', 'T', 'C'. Bad shapes
  and values raise ValueError naming the function, the argument, what was expected and what was given.
- **check_finite**: SciPy's check (ValueError "array must not contain infs or NaNs") wherever the values
  are at hand: on plain arrays, and inside ``grad``, ``jvp`` and ``vmap``, which run on values. Not while
  ``pa.jit`` or ``eval_shape`` trace (there are no values yet), and not on lazy arrays (Dask: the check
  would compute them).
- **Kernels**: ``scipy.linalg`` on NumPy arrays (SciPy is an optional extra, ``pip install
  polyad[scipy]``; without it the generic kernel runs), one 2-D call per matrix of a stack (``per_matrix``:
  SciPy before 1.15 does not batch), except for stacks of small matrices, where the generic kernel's
  batched NumPy calls are faster (``small_stack``); the generic Array API kernel on every other CPU library
  (array_api_strict; Dask, one matrix at a time as its linalg takes them); ``cupyx.scipy.linalg`` on CUDA
  arrays, declared by the CuPy backend (``backends/cupy/kernels.py``).
- **Shapes**: ``a`` is ``(..., M, M)``; ``b`` is ``(M,)`` (one right-hand side for every matrix) or
  ``(..., M, K)`` with its leading dimensions broadcast against ``a``'s, as the standard's ``solve`` and
  SciPy 1.15's batching read them. The solve ops' abstract evaluation and batching rule live here.
"""

import math

from polyad.core import bind, dispatch
from polyad.core.avals import ShapeDtype, bottom, broadcast_shape, dtype_kind, ndim_of, shape_of, xp_of
from polyad.ops.base import astype, expand_dims, move_to_front, reshape
from polyad.ops.creation import asarray, tril, triu
from polyad.ops.linalg.products import conj_transpose, matrix_transpose
from polyad.ops.manipulation import squeeze

_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}

# --------------------------------------------------------------------------------------------- arguments


def parse_trans(fname, trans):
    """SciPy's ``trans`` (0/'N': ``a x = b``, 1/'T': ``a^T x = b``, 2/'C': ``a^H x = b``) as 0, 1 or 2."""
    key = trans if isinstance(trans, str) else _index(trans)
    if key not in _TRANS:
        raise ValueError(f"{fname}: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    return _TRANS[key]


def _index(x):
    """An integer-like value (a NumPy integer too) as an int, anything else as None."""
    try:
        return x.__index__()
    except (AttributeError, TypeError):
        return None


def as_floating(fname, argname, x):
    """``x`` as an array (array-likes converted), integer and bool arrays as the default floating dtype,
    as SciPy computes them."""
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        x = asarray(x)
    if dtype_kind(x.dtype) in "fc":
        return x
    default = xp_of(x).__array_namespace_info__().default_dtypes(device=x.device)["real floating"]
    return astype(x, default)


def common_dtype(a, b):
    """``a`` and ``b`` cast to their promoted dtype (SciPy computes a float32 matrix with a float64
    right-hand side in float64), so the ops see one dtype."""
    if a.dtype == b.dtype:
        return a, b
    dtype = xp_of(a, b).result_type(a.dtype, b.dtype)
    return (a if a.dtype == dtype else astype(a, dtype)), (b if b.dtype == dtype else astype(b, dtype))


def check_square(fname, argname, a):
    s = shape_of(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(
            f"{fname}: {argname} must be a square matrix or a stack of them, shape (..., M, M); got shape {s}"
        )
    return s[-1]


def check_rhs(fname, a_name, a, b):
    """``b`` is ``(M,)`` or ``(..., M, K)`` for ``a`` of shape ``(..., M, M)``, batches broadcasting."""
    sa, sb = shape_of(a), shape_of(b)
    n = sa[-1]
    if len(sb) == 0:
        raise ValueError(f"{fname}: b must have shape (M,) or (..., M, K), got a 0-d array")
    rows = sb[0] if len(sb) == 1 else sb[-2]
    if rows != n:
        raise ValueError(
            f"{fname}: shapes of {a_name} {sa} and b {sb} are incompatible: b needs {n} rows (shape "
            f"({n},) or (..., {n}, K)), it has {rows}"
        )
    try:
        broadcast_shape(sa[:-2], sb[:-2])
    except ValueError:
        raise ValueError(
            f"{fname}: the stack dimensions of {a_name} {sa[:-2]} and b {sb[:-2]} do not broadcast"
        ) from None


def check_finite(fname, argname, x):
    """SciPy's ``check_finite``, where the values are at hand (module notes)."""
    v = bottom(x)
    backend = dispatch.backend_of_array(v)
    if backend is None or hasattr(v, "__dask_graph__"):  # traced by jit/eval_shape, or lazy
        return
    xp = backend.xp
    if not bool(xp.all(xp.isfinite(v))):
        raise ValueError(f"{fname}: array must not contain infs or NaNs ({argname}; check_finite=True)")


# --------------------------------------------------------------------------------------------- kernels

_SCIPY = []  # scipy.linalg, or None without SciPy: decided on first use


def on_numpy(args):
    """Whether the arrays among ``args`` are NumPy arrays (SciPy's kernels take them as they are)."""
    return dispatch.backend_of([a for a in args if hasattr(a, "shape")]).host_arrays


def scipy_linalg_for(args):
    """``scipy.linalg`` when the arrays among ``args`` are NumPy arrays and SciPy is installed, else None
    (then the generic kernel runs: on array_api_strict and Dask, and on NumPy without SciPy)."""
    if not on_numpy(args):
        return None
    if not _SCIPY:
        try:
            import scipy.linalg
        except ImportError:
            _SCIPY.append(None)
        else:
            _SCIPY.append(scipy.linalg)
    return _SCIPY[0]


SMALL = 16  # stacks of matrices up to this size: NumPy's batched LAPACK beats one SciPy call per matrix


def small_stack(*arrays):
    """Whether ``arrays`` (matrices first) form a stack of small matrices: there SciPy's cost is its
    per-call overhead (several microseconds a matrix) and the generic kernel's batched NumPy calls (one
    loop in C) win; on larger matrices SciPy's triangular solves win (``scripts/bench_gp.py --stacks``
    prints both)."""
    a = arrays[0]
    stacked = any(x.ndim > 2 for x in arrays)
    return stacked and a.shape[-1] <= SMALL


def per_matrix(xp, f, arrays, cores):
    """``f`` on 2-D (or 1-D) slices: each of ``arrays`` has ``cores[i]`` core dimensions and leading ones
    that broadcast; ``f`` runs once per element of the broadcast stack and the results are stacked (a
    tuple when ``f`` returns one). Callers handle empty arrays before (the result's shape is theirs)."""
    leads = [tuple(a.shape[: a.ndim - c]) for a, c in zip(arrays, cores)]
    lead = broadcast_shape(*leads)
    if not lead:
        return f(*arrays)
    count = math.prod(lead)
    flat = [
        xp.reshape(
            xp.broadcast_to(a, lead + tuple(a.shape[a.ndim - c :])), (count,) + tuple(a.shape[a.ndim - c :])
        )
        for a, c in zip(arrays, cores)
    ]
    outs = [f(*(x[i, ...] for x in flat)) for i in range(count)]
    if isinstance(outs[0], tuple):
        return tuple(xp.reshape(xp.stack(col), lead + tuple(col[0].shape)) for col in zip(*outs))
    return xp.reshape(xp.stack(outs), lead + tuple(outs[0].shape))


def one_at_a_time(xp, kernel, arrays, cores):
    """``kernel`` (a generic kernel of 2-D matrices) over a stack, one matrix at a time, when the
    library's linalg takes one 2-D matrix only (Dask's: a lazy collection); None when it takes stacks
    (the kernel then runs once on the whole stack)."""
    if not hasattr(arrays[0], "__dask_graph__"):
        return None
    if all(a.ndim == c for a, c in zip(arrays, cores)):
        return None
    return per_matrix(xp, kernel, arrays, cores)


def empty_result(xp, aval):
    """The (empty) result ``aval`` describes, for a call with an empty matrix or right-hand side."""
    return xp.zeros(aval.shape, dtype=aval.dtype, device=aval.device)


def has_empty(*arrays):
    return any(math.prod(a.shape) == 0 for a in arrays)


def triangle_kernel(xp, a, lower, unit_diagonal=False):
    """The triangle of ``a`` that SciPy reads (``lower`` or upper), with ones on the diagonal if
    ``unit_diagonal`` (the diagonal of ``a`` is then not read)."""
    m = xp.tril(a) if lower else xp.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        idx = xp.arange(n, device=a.device)
        m = xp.where(idx[:, None] == idx[None, :], xp.ones((), dtype=a.dtype, device=a.device), m)
    return m


def op_kernel(xp, m, trans):
    """``m``, ``m^T`` or ``m^H`` for ``trans`` 0, 1, 2."""
    if trans == 0:
        return m
    t = xp.matrix_transpose(m)
    return xp.conj(t) if trans == 2 and xp.isdtype(m.dtype, "complex floating") else t


def solve_kernel(xp, m, b):
    """``m^-1 b`` by the namespace's general solve (``b`` is ``(M,)`` or ``(..., M, K)``)."""
    if b.ndim == 1 and m.ndim > 2:  # one right-hand side for every matrix, as the standard reads it
        b = xp.broadcast_to(b[:, None], m.shape[:-2] + (b.shape[0], 1))
        return xp.linalg.solve(m, b)[..., 0]
    return xp.linalg.solve(m, b)


# --------------------------------------------------------------------------------------------- rules


def solve_abstract(xp, *avals, **params):
    """Abstract evaluation of a solve ``(a, [piv,] b)``: ``b``'s shape and dtype, the stacks of ``a``
    (two core dimensions), ``piv`` (one) and ``b`` broadcast."""
    a, *pivs, b = avals
    leads = [tuple(a.shape[:-2])] + [tuple(p.shape[:-1]) for p in pivs]
    if len(b.shape) == 1:
        return ShapeDtype(broadcast_shape(*leads) + tuple(b.shape), b.dtype, a.device)
    return ShapeDtype(broadcast_shape(*leads, tuple(b.shape[:-2])) + tuple(b.shape[-2:]), b.dtype, a.device)


def align_batches(dims, values, cores):
    """vmap's batch dimensions moved to the front, each batched value padded with size-1 axes so that
    the stacks of all values broadcast (``cores[i]``: the core dimensions of value ``i``)."""
    ranks = [ndim_of(v) - (d is not None) - c for v, d, c in zip(values, dims, cores)]
    top = max(ranks)
    out = []
    for v, d, r in zip(values, dims, ranks):
        if d is None:
            out.append(v)
            continue
        v = move_to_front(v, d)
        if r < top:
            s = shape_of(v)
            v = reshape(v, (s[0],) + (1,) * (top - r) + s[1:])
        out.append(v)
    return out


def solve_batch(op, mat_cores):
    """Batching rule of a solve op ``(matrices..., b)``: the stacks of the op broadcast, so the batch
    becomes one more stack dimension; a batched 1-D ``b`` becomes a stack of one-column matrices."""

    def rule(info, dims, *values, **params):
        *mats, b = values
        *mdims, db = dims
        vec = ndim_of(b) - (db is not None) == 1
        column = vec and db is not None  # a batched 1-D b: a stack of one-column matrices
        if column:
            b, db = expand_dims(move_to_front(b, db), axis=-1), 0
        # an unbatched 1-D b stays one vector for every matrix (the matrices carry the batch)
        cores = tuple(mat_cores) + (1 if vec and not column else 2,)
        out = bind(op, *align_batches((*mdims, db), (*mats, b), cores), **params)
        return (squeeze(out, axis=-1) if column else out), 0

    return rule


def column(x):
    """``x`` with a trailing axis of one: a 1-D right-hand side's cotangent, tangent or solution as a
    one-column matrix (of each stack: under a stack, a 1-D ``b``'s solution is 2-D)."""
    return expand_dims(x, axis=-1)


def from_matrix(x, vec):
    return squeeze(x, axis=-1) if vec else x


def triangle(x, lower, strict=False):
    """The triangle of ``x`` a rule keeps (the one the op reads), without the diagonal if ``strict``."""
    k = (-1 if lower else 1) if strict else 0
    return tril(x, k=k) if lower else triu(x, k=k)


def op_of(m, trans):
    """``m``, ``m^T`` or ``m^H`` for ``trans`` 0, 1, 2, in polyad ops."""
    if trans == 0:
        return m
    return matrix_transpose(m) if trans == 1 else conj_transpose(m)


def adjoint_trans(trans):
    """For ``op(A) = A, A^T, A^H`` (``trans``), the ``trans`` whose op is ``op(A)^H`` and whether the
    solve needs conjugated input and output (``op(A)^H = conj(A)`` for ``trans`` 1: ``conj(A)^-1 g`` is
    ``conj(A^-1 conj(g))``)."""
    return {0: (2, False), 1: (0, True), 2: (0, False)}[trans]


def cotangent_of_a(gm, trans):
    """The cotangent of ``A`` from that of ``M = op(A)``."""
    if trans == 0:
        return gm
    return matrix_transpose(gm) if trans == 1 else conj_transpose(gm)

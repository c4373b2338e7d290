"""The per-op rules of the sparsity transform (``polyad.transforms.sparsity``): which elements of its array
arguments each element of an op's output depends on.

A rule has the one signature of the rule kind ``"sparsity"``::

    sparsity(traced, out, *values, **params) -> deps

``traced[i]`` says whether argument ``i`` depends on the differentiated inputs; the values of the others
are constants, facts a rule may use (a zero of a constant factor removes a dependence). ``out`` is the
op's result on ``values``. ``deps`` holds one entry per positional argument (for an op with several
results, one such tuple per result), each one of:

- ``None``: no output element depends on the argument (integer indices, conditions, constants);
- ``SAME``: output element ``i`` depends on element ``i`` of the argument, which has the output's size;
- an integer array ``src`` (host NumPy) of the output's size: output element ``i`` depends on element
  ``src[i] - 1`` of the argument, on none where ``src[i]`` is 0;
- a SciPy sparse matrix (or a dense 2-D array), (output elements, argument elements): the op's own
  dependence pattern;
- ``ALL``: every output element depends on every element of the argument.

Elements are numbered in C order. Families share their rules: element-wise ops (recognised by their
element-wise abstract evaluation) take the union over the broadcast; ops that move elements are applied
to the arrays of element numbers themselves, so their rule is their kernel; reductions, scans, sorts,
softmaxes and FFTs depend along their axes; products with a constant operand use its non-zeros;
matrix functions depend on each whole matrix of a batch. Every rule is value-independent for traced
arguments (``where`` unites both branches, ``sort`` its whole axis), so a pattern found at one point
holds at every point where Python control flow takes the same branches.

Index arithmetic runs on the host with the NumPy backend's library; SciPy (an optional extra,
``polyad[scipy]``) is imported on first use.
"""

import math

import polyad.core.dispatch as dispatch
from polyad.backends.host import np
from polyad.core import eval_raw, rule_of
from polyad.core.avals import bottom
from polyad.ops.common import ABSTRACT_BOOL, ABSTRACT_REAL, ABSTRACT_SAME
from polyad.ops.indexing import getitem_op
from polyad.ops.special.shared import abstract_float
from polyad.transforms.abstract import ABSTRACT_EVAL

SCIPY_EXTRA = "pip install polyad[scipy]"


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


SAME = _Marker("SAME")
ALL = _Marker("ALL")


def scipy_sparse():
    """``scipy.sparse``, imported on first use; an ImportError naming the fix without SciPy."""
    try:
        import scipy.sparse
    except ImportError as exc:
        raise ImportError(
            "polyad's sparse Jacobians build scipy.sparse matrices, and SciPy is not installed: "
            + SCIPY_EXTRA
        ) from exc
    return scipy.sparse


def pattern(rows, cols, shape):
    """The CSR pattern (float32 ones) with entries at ``(rows, cols)``; repeated entries merge."""
    sp = scipy_sparse()
    m = sp.csr_array((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=shape)
    m.sum_duplicates()
    return m


def host(x):
    """Backend array ``x`` (or a polyad tensor's value) as a host NumPy array; other values as they are."""
    x = bottom(x)
    backend = dispatch.backend_of_array(x)
    if backend is None or backend.host_arrays:
        return x
    return np.asarray(backend.to_numpy(x))


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else None


def numbers(shape, start=1):
    """The element numbers ``start, start + 1, ...`` of an array of ``shape``, in C order."""
    n = math.prod(shape)
    return np.arange(start, start + n, dtype=np.int64).reshape(shape)


def ragged(starts, lengths):
    """``(owner, position)`` of the concatenated ranges ``starts[r] : starts[r] + lengths[r]``."""
    total = int(lengths.sum())
    owner = np.repeat(np.arange(len(lengths)), lengths)
    offsets = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    return owner, np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


def _broadcast_src(shape, out_shape):
    """``src`` of an argument of ``shape`` broadcast to ``out_shape`` (None when they are equal)."""
    if shape == out_shape:
        return None
    return np.broadcast_to(numbers(shape), out_shape).ravel()


def _dep(src):
    return SAME if src is None else src


# ------------------------------------------------------------------------------ element-wise


def elementwise(traced, out, *values, **params):
    """An element-wise op: each output element depends on the broadcast-matching element of each array."""
    o = tuple(out.shape)
    return tuple(_dep(_broadcast_src(tuple(v.shape), o)) if t else None for t, v in zip(traced, values))


def _nonzero_mask(v, out_shape):
    """Where constant ``v`` (array or Python number), broadcast to ``out_shape``, is non-zero; None: all."""
    if hasattr(v, "shape"):
        mask = host(v) != 0
        return None if mask.all() else np.broadcast_to(mask, out_shape).ravel()
    return None if v != 0 else np.zeros(math.prod(out_shape), dtype=bool)


def _masked(dep, mask, size):
    if mask is None or dep is None:
        return dep
    src = np.arange(1, size + 1, dtype=np.int64) if dep is SAME else dep
    return np.where(mask, src, 0)


def multiply(traced, out, x1, x2):
    """``x1 * x2``: where a constant factor is zero, the product depends on neither factor there."""
    deps = elementwise(traced, out, x1, x2)
    o, size = tuple(out.shape), math.prod(out.shape)
    return (
        _masked(deps[0], None if traced[1] else _nonzero_mask(x2, o), size),
        _masked(deps[1], None if traced[0] else _nonzero_mask(x1, o), size),
    )


def where_rule(traced, out, condition, x1, x2):
    """``where``: no dependence on the condition; a constant condition selects one branch per element."""
    _, d1, d2 = elementwise(traced, out, condition, x1, x2)
    if traced[0] or not hasattr(condition, "shape"):
        return None, d1, d2
    chosen = np.broadcast_to(host(condition), tuple(out.shape)).ravel().astype(bool)
    size = math.prod(out.shape)
    return None, _masked(d1, chosen, size), _masked(d2, ~chosen, size)


def _per_output(out, deps):
    """``deps`` for each of an op's results (a tuple of them), else ``deps``."""
    return tuple(deps for _ in out) if isinstance(out, tuple) else deps


def no_dependence(traced, out, *values, **params):
    return _per_output(out, (None,) * len(values))


def every_element(traced, out, *values, **params):
    """Every output element depends on every element of each array argument (value-dependent outputs)."""
    return _per_output(out, tuple(ALL if t else None for t in traced))


def same(traced, out, x, *rest, **params):
    """A one-array op that keeps every element in place (dtype casts, device copies)."""
    return (SAME if traced[0] else None,) + (None,) * len(rest)


# ------------------------------------------------------------------------------ moves


def moves(op, positions=None):
    """An op that moves, copies or drops elements of the arrays at ``positions`` (None: every array):
    applied to those arrays' element numbers (each argument numbered after the previous, 0 standing for
    "none", which zero-filling ops write), it tells where each output element comes from."""

    def rule(traced, out, *values, **params):
        args, ranges, start = [], [], 1
        for i, (t, v) in enumerate(zip(traced, values)):
            if hasattr(v, "shape") and (positions is None or i in positions):
                args.append(numbers(tuple(v.shape), start))
                ranges.append((start, start + math.prod(v.shape)) if t else None)
                start += math.prod(v.shape)
            else:
                args.append(host(v))
                ranges.append(None)
        moved = eval_raw(op, args, params)
        results = moved if op.multiple_results else (moved,)
        deps = []
        for r in results:
            flat = np.asarray(r).ravel().astype(np.int64)
            per_arg = []
            for span in ranges:
                if span is None:
                    per_arg.append(None)
                elif len(ranges) == 1:
                    per_arg.append(SAME if _in_order(flat, span) else flat)
                else:
                    lo, hi = span
                    per_arg.append(np.where((flat >= lo) & (flat < hi), flat - (lo - 1), 0))
            deps.append(tuple(per_arg))
        return tuple(deps) if op.multiple_results else deps[0]

    return rule


def _in_order(flat, span):
    """Whether element numbers ``flat`` are the whole argument ``span`` in order (a reshape)."""
    lo, hi = span
    return len(flat) == hi - lo and (not len(flat) or (flat[0] == lo and (np.diff(flat) == 1).all()))


def _written(x_shape, region_key, arrays, v_shape):
    """``(region, v_src)`` of a write ``x[key] = v``: the flat positions (0-based) the key selects, and
    for each the element of ``v`` (0-based) written there, ``v`` broadcast to the region."""
    from_numbers = eval_raw(
        getitem_op, [numbers(x_shape, 0), *[host(a) for a in arrays]], {"key": region_key}
    )
    region = np.asarray(from_numbers)
    v_src = np.broadcast_to(numbers(v_shape, 0), region.shape).ravel() if v_shape is not None else None
    return region.ravel(), v_src


def index_update(traced, out, x, v, *arrays, key):
    """``x`` with ``x[key] = v``: written positions depend on what is written there, the others on ``x``."""
    size = math.prod(out.shape)
    region, v_src = _written(tuple(x.shape), key, arrays, _shape(v))
    dx = None
    if traced[0]:
        dx = np.arange(1, size + 1, dtype=np.int64)
        dx[region] = 0
    dv = pattern(region, v_src, (size, math.prod(v.shape))) if traced[1] else None
    return (dx, dv) + (None,) * len(arrays)


def index_add(traced, out, x, v, *arrays, key):
    """``x`` with ``v`` added at ``key``: every position depends on ``x``, written ones on ``v`` too."""
    dv = None
    if traced[1]:
        region, v_src = _written(tuple(x.shape), key, arrays, _shape(v))
        dv = pattern(region, v_src, (math.prod(out.shape), math.prod(v.shape)))
    return (SAME if traced[0] else None, dv) + (None,) * len(arrays)


def scatter_add(traced, out, target, indices, values, *, axis):
    """``target`` with ``values`` added at ``indices`` along ``axis``: the transpose of ``take``."""
    dv = None
    if traced[2]:
        dest = np.take(numbers(tuple(target.shape), 0), host(indices).astype(np.int64), axis=axis).ravel()
        dv = pattern(dest, np.arange(dest.size), (math.prod(out.shape), math.prod(values.shape)))
    return SAME if traced[0] else None, None, dv


# ------------------------------------------------------------------------------ along axes


def groups(shape, axes):
    """Each element's group: the position of its coordinates outside ``axes`` (C order)."""
    rest = [a for a in range(len(shape)) if a not in axes]
    ids = numbers(shape, 0).transpose(rest + list(axes)).ravel()
    inner = math.prod(shape[a] for a in axes)
    g = np.empty(ids.size, dtype=np.int64)
    g[ids] = np.arange(ids.size, dtype=np.int64) // max(inner, 1)
    return g


def joined(out_groups, in_groups, shape):
    """The pattern in which output element ``i`` depends on every argument element of its group."""
    order = np.argsort(in_groups, kind="stable")
    n_groups = int(max(in_groups.max(initial=-1), out_groups.max(initial=-1))) + 1
    counts = np.bincount(in_groups, minlength=n_groups)
    starts = np.zeros(n_groups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    owner, pos = ragged(starts[out_groups], counts[out_groups])
    return pattern(owner, order[pos], shape)


def _normal_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    return tuple(sorted({a % ndim for a in axes})) if ndim else ()


def along(axes_of, keep=None):
    """Output elements depend on every element of their argument's group along the axes
    ``axes_of(shape, **params)`` (of the arguments broadcast together). ``keep(params)``: whether the
    output keeps those axes (softmax, sort, FFTs) or drops them (reductions, unless ``keepdims``)."""

    def rule(traced, out, *values, **params):
        arrays = [v for v in values if hasattr(v, "shape")]
        shape = tuple(np.broadcast_shapes(*[tuple(v.shape) for v in arrays]))
        axes = axes_of(shape, **params)
        g_in = groups(shape, axes)
        outs = out if isinstance(out, tuple) else (out,)
        deps = []
        for o in outs:
            o_shape = tuple(o.shape)
            kept = keep is None or keep(params)
            g_out = groups(o_shape, axes) if kept and len(o_shape) == len(shape) else np.arange(o.size)
            base = joined(g_out, g_in, (math.prod(o_shape), math.prod(shape)))
            per = []
            for t, v in zip(traced, values):
                if not t:
                    per.append(None)
                    continue
                src = _broadcast_src(tuple(v.shape), shape)
                per.append(base if src is None else base @ _selection(src, math.prod(v.shape)))
            deps.append(tuple(per))
        return tuple(deps) if isinstance(out, tuple) else deps[0]

    return rule


def _selection(src, size):
    """The (len(src), size) matrix selecting element ``src[i] - 1`` for row ``i``."""
    rows = np.nonzero(src)[0]
    return pattern(rows, src[rows] - 1, (len(src), size))


def _reduced_axes(shape, axis=None, **params):
    return _normal_axes(axis, len(shape))


def _keepdims(params):
    return params.get("keepdims", False)


def _last(n):
    return lambda shape, **params: tuple(range(len(shape) - n, len(shape)))


def _one_axis(shape, axis=-1, **params):
    return _normal_axes(axis, len(shape))


def _fft_axes(shape, axes, **params):
    return tuple(axes)


def cumulative(traced, out, x, *, axis=None, include_initial=False, **params):
    """A scan along ``axis``: output position ``t`` depends on input positions up to ``t`` (before ``t``
    with ``include_initial``)."""
    if not traced[0]:
        return (None,)
    shape = tuple(x.shape)
    a = 0 if axis is None or not shape else axis % len(shape)
    if not shape:
        return (SAME,)
    lines = math.prod(d for i, d in enumerate(shape) if i != a)
    o_numbers = np.moveaxis(numbers(tuple(out.shape), 0), a, -1).reshape(lines, out.shape[a])
    i_numbers = np.moveaxis(numbers(shape, 0), a, -1).reshape(lines, shape[a])
    t, s = np.tril_indices(out.shape[a], k=-1 if include_initial else 0)  # s < t, or s <= t
    rows, cols = o_numbers[:, t].ravel(), i_numbers[:, s].ravel()
    return (pattern(rows, cols, (math.prod(out.shape), math.prod(shape))),)


def diff(traced, out, x, prepend, append, *, axis=-1, n=1):
    """The ``n``-th difference along ``axis`` of ``prepend``, ``x``, ``append`` joined: output position
    ``t`` depends on joined positions ``t`` to ``t + n``."""
    parts = [(i, v) for i, v in ((1, prepend), (0, x), (2, append)) if v is not None]
    a = axis % len(x.shape)
    if n == 0:
        return SAME if traced[0] else None, None, None
    start, blocks, spans = 1, [], {}
    for i, v in parts:
        blocks.append(numbers(tuple(v.shape), start))
        spans[i] = (start, start + math.prod(v.shape))
        start += math.prod(v.shape)
    joined_numbers = np.concatenate(blocks, axis=a)
    length = out.shape[a]
    shifted = [np.take(joined_numbers, np.arange(k, k + length), axis=a).ravel() for k in range(n + 1)]
    deps = []
    for i, v in ((0, x), (1, prepend), (2, append)):
        if v is None or not traced[i]:
            deps.append(None)
            continue
        lo, hi = spans[i]
        rows, cols = [], []
        for s in shifted:
            hit = np.nonzero((s >= lo) & (s < hi))[0]
            rows.append(hit)
            cols.append(s[hit] - lo)
        deps.append(pattern(np.concatenate(rows), np.concatenate(cols), (out.size, math.prod(v.shape))))
    return tuple(deps)


def trace(traced, out, x, *, offset=0, dtype=None):
    """The sum of each matrix's diagonal ``offset``."""
    if not traced[0]:
        return (None,)
    diag = np.diagonal(numbers(tuple(x.shape), 0), offset=offset, axis1=-2, axis2=-1)
    diag = diag.reshape(-1, diag.shape[-1])
    rows = np.repeat(np.arange(diag.shape[0]), diag.shape[1])
    return (pattern(rows, diag.ravel(), (math.prod(out.shape), math.prod(x.shape))),)


# ------------------------------------------------------------------------------ products


def _mask(value, traced, shape):
    """Where operand ``value`` may be non-zero: everywhere if it is traced, else where the constant is."""
    if traced:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(host(value) != 0, shape)


def _by_batch(batch, n_batches, of_out):
    """``(beta, e)``: for each output batch ``beta``, the entries ``e`` (sorted by ``batch``) of the
    operand batch ``of_out[beta]``."""
    counts = np.bincount(batch, minlength=n_batches)
    starts = np.zeros(n_batches, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return ragged(starts[of_out], counts[of_out])


def contract(out_size, a, b, a_mask, b_mask, need):
    """The dependence of ``out[β, i, j] = Σ_k a[β, i, k] b[β, k, j]`` (batches broadcast, output elements
    in C order of ``(β..., i, j)``) on ``a`` and ``b``. ``a`` (..., m, K) and ``b`` (..., K, n) hold each
    position's element number in its operand; ``a_mask``/``b_mask`` where each may be non-zero. Output
    ``(i, j)`` depends on ``a[i, k]`` where ``b[k, j]`` may be non-zero, and on ``b[k, j]`` where
    ``a[i, k]`` may be: only the other operand's non-zeros are ever enumerated."""
    ba_shape, bb_shape = a.shape[:-2], b.shape[:-2]
    (m, k_len), n = a.shape[-2:], b.shape[-1]
    batches = tuple(np.broadcast_shapes(ba_shape, bb_shape))
    ba = np.broadcast_to(numbers(ba_shape, 0), batches).ravel()
    bb = np.broadcast_to(numbers(bb_shape, 0), batches).ravel()
    a3, b3 = a.reshape(math.prod(ba_shape), m, k_len), b.reshape(math.prod(bb_shape), k_len, n)
    da = db = None
    if need[0]:
        batch, k, j = np.nonzero(b_mask.reshape(b3.shape))
        beta, e = _by_batch(batch, b3.shape[0], bb)
        i = np.arange(m)[None, :]
        rows = ((beta[:, None] * m + i) * n + j[e][:, None]).ravel()
        cols = a3[ba[beta][:, None], i, k[e][:, None]].ravel()
        da = pattern(rows, cols, (out_size, a.size))
    if need[1]:
        batch, i, k = np.nonzero(a_mask.reshape(a3.shape))
        beta, e = _by_batch(batch, a3.shape[0], ba)
        j = np.arange(n)[None, :]
        rows = ((beta[:, None] * m + i[e][:, None]) * n + j).ravel()
        cols = b3[bb[beta][:, None], k[e][:, None], j].ravel()
        db = pattern(rows, cols, (out_size, b.size))
    return da, db


def _operands(traced, x1, x2, arrange):
    """Element numbers and masks of both operands, laid out by ``arrange(array, which)`` as (..., m, K)
    and (..., K, n)."""
    a, b = arrange(numbers(tuple(x1.shape), 0), 0), arrange(numbers(tuple(x2.shape), 0), 1)
    a_mask = arrange(_mask(x1, traced[0], tuple(x1.shape)), 0)
    b_mask = arrange(_mask(x2, traced[1], tuple(x2.shape)), 1)
    return a, b, a_mask, b_mask


def matmul(traced, out, x1, x2):
    """``x1 @ x2`` (1-D operands promoted as the standard says)."""

    def arrange(v, which):
        if v.ndim == 1:
            return v[None, :] if which == 0 else v[:, None]
        return v

    return contract(out.size, *_operands(traced, x1, x2, arrange), traced)


def tensordot(traced, out, x1, x2, *, axes):
    """``tensordot``: the free axes of each operand flattened against the contracted ones."""

    def arrange(v, which):
        contracted = axes[which]
        free = [d for d in range(v.ndim) if d not in contracted]
        k = math.prod(v.shape[d] for d in contracted)
        if which == 0:
            return v.transpose(free + list(contracted)).reshape(-1, k)
        return v.transpose(list(contracted) + free).reshape(k, -1)

    return contract(out.size, *_operands(traced, x1, x2, arrange), traced)


def vecdot(traced, out, x1, x2, *, axis):
    """``vecdot``: a product of (..., 1, K) and (..., K, 1) along ``axis``, the other axes broadcast."""
    ndim = max(x1.ndim, x2.ndim)

    def arrange(v, which):
        v = v.reshape((1,) * (ndim - v.ndim) + v.shape)
        v = np.moveaxis(v, axis % ndim, -1)
        return v[..., None, :] if which == 0 else v[..., :, None]

    return contract(out.size, *_operands(traced, x1, x2, arrange), traced)


def outer(traced, out, x1, x2):
    """``outer``: a product of (m, 1) and (1, n)."""
    return contract(
        out.size, *_operands(traced, x1, x2, lambda v, w: v[:, None] if w == 0 else v[None, :]), traced
    )


def matrices(core_ndims):
    """A function of whole matrices, batched over leading axes (inverses, decompositions, solves):
    each output element depends on every element of the matching matrix (of each argument, with
    ``core_ndims[i]`` trailing axes; batches must match, else every element)."""

    def rule(traced, out, *values, **params):
        core = [core_ndims[i] if i < len(core_ndims) else 0 for i in range(len(values))]
        batch = {tuple(v.shape[: v.ndim - core[i]]) for i, v in enumerate(values) if hasattr(v, "shape")}
        outs = out if isinstance(out, tuple) else (out,)
        n_batch = math.prod(next(iter(batch))) if len(batch) == 1 else 0
        deps = []
        for o in outs:
            per = []
            for i, v in enumerate(values):
                if not traced[i]:
                    per.append(None)
                elif n_batch == 0 or o.size % n_batch or v.size % n_batch:
                    per.append(ALL)
                else:  # leading batch axes: element number // block size is the batch
                    g_out = np.arange(o.size) // (o.size // n_batch)
                    g_in = np.arange(v.size) // (v.size // n_batch)
                    per.append(joined(g_out, g_in, (o.size, v.size)))
            deps.append(tuple(per))
        return tuple(deps) if isinstance(out, tuple) else deps[0]

    return rule


# ------------------------------------------------------------------------------ the table

# the abstract rules of element-wise ops
ELEMENTWISE_ABSTRACT = (ABSTRACT_SAME, ABSTRACT_BOOL, ABSTRACT_REAL, abstract_float)

_ALONG_REDUCED = along(_reduced_axes, keep=_keepdims)
_ALONG_AXIS = along(_one_axis)
_ALONG_FFT = along(_fft_axes)

# op name -> its sparsity rule (attached to the op by polyad.transforms.sparsity)
RULES = {
    "multiply": multiply,
    "where": where_rule,
    "clip": elementwise,
    "astype": same,
    "to_device": same,
    "asarray_copy": same,
    "index_update": index_update,
    "index_add": index_add,
    "scatter_add": scatter_add,
    "cumulative_sum": cumulative,
    "cumulative_prod": cumulative,
    "diff": diff,
    "linalg.trace": trace,
    "matmul": matmul,
    "tensordot": tensordot,
    "vecdot": vecdot,
    "linalg.outer": outer,
    "linalg.cross": _ALONG_AXIS,
    "sort": _ALONG_AXIS,
    "special.softmax": _ALONG_AXIS,
    "special.log_softmax": _ALONG_AXIS,
    "special.logsumexp": _ALONG_REDUCED,
    "linalg.vector_norm": _ALONG_REDUCED,
    "linalg.matrix_norm": along(_last(2), keep=_keepdims),
    "unique_all": every_element,
    "unique_counts": every_element,
    "unique_inverse": every_element,
    "unique_values": every_element,
}
for _name in ("sum", "prod", "mean", "max", "min", "std", "var"):
    RULES[_name] = _ALONG_REDUCED
for _name in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft"):
    RULES["fft." + _name] = _ALONG_FFT
for _name in ("dctn", "dstn"):  # the DCT/DST ops (polyad/ops/dct.py), one per type
    for _t in (1, 2, 3, 4):
        RULES[f"fft.{_name}_type{_t}"] = _ALONG_FFT
for _name in ("cholesky", "det", "inv", "pinv", "eig", "eigh", "eigvals", "eigvalsh", "svd", "svdvals", "qr",
              "slogdet", "matrix_power", "adjugate"):  # fmt: skip
    RULES["linalg." + _name] = matrices((2,))
RULES["linalg.solve"] = lambda traced, out, x1, x2: matrices((2, 2 if x2.ndim > 1 else 1))(
    traced, out, x1, x2
)


def _structured_solve(*mat_cores):
    """The structured solves ``(matrices..., b)`` (``polyad.linalg``): whole matrices, as ``solve``."""
    return lambda traced, out, *v, **p: matrices((*mat_cores, 2 if v[-1].ndim > 1 else 1))(traced, out, *v)


RULES["linalg.cho_factor"] = RULES["linalg.lu_factor"] = matrices((2,))
RULES["linalg.solve_triangular"] = RULES["linalg.cho_solve"] = _structured_solve(2)
RULES["linalg.lu_solve"] = _structured_solve(2, 1)

# ops that move elements: applied to element numbers (positions: the arrays moved; None: every array)
MOVES = {
    "reshape": None,
    "permute_dims": None,
    "moveaxis": None,
    "expand_dims": None,
    "squeeze": None,
    "broadcast_to": None,
    "broadcast_arrays": None,
    "meshgrid": None,
    "full_like_array": (1,),
    "flip": None,
    "roll": None,
    "tile": None,
    "concat": None,
    "stack": None,
    "unstack": None,
    "matrix_transpose": None,
    "tril": None,
    "triu": None,
    "linalg.diagonal": None,
    "linalg.diag_embed": None,
    "fft.fftshift": None,
    "fft.ifftshift": None,
    "fft_resize": None,
    "getitem": (0,),
    "take": (0,),
    "take_along_axis": (0,),
    "take_index": (0,),
    "repeat": (0,),
}


def table(ops):
    """``{op name: sparsity rule}`` of the ops the tables name (``ops``: the registry), for
    ``polyad.transforms.sparsity`` to attach to them."""
    out = dict(RULES)
    out.update({name: moves(ops[name], positions) for name, positions in MOVES.items()})
    return out


def derive(op):
    """The sparsity rule of ``op`` from its markers and family, for an op the tables do not name: none for
    an op whose output carries no derivative or depends only on shapes; the element-wise union for an op
    with an element-wise abstract evaluation; else None (the interpreter falls back to every element)."""
    if op.nondiff or op.shape_only is not None:
        return no_dependence
    if rule_of(op, ABSTRACT_EVAL) in ELEMENTWISE_ABSTRACT:
        return elementwise
    return None

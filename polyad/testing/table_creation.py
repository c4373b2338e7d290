"""Op table rows: creation functions (``meshgrid`` is with manipulation).

References are built independently of the function under test where that is cheap: from Python lists
(``arange``, ``linspace``, ``eye``, ``zeros``/``ones``/``full`` and their ``*_like``) or from index masks
(``tril``/``triu``). ``empty``/``empty_like`` have undefined values, so their samples are zero-size
arrays: the check then compares shape and dtype only, against zeros of the expected shape and dtype
(tests/test_namespace.py checks shape and dtype of non-empty ones).
"""

import math

from polyad.testing.op_table import OpInfo, Sample, on_backend


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _filled(xp, shape, value, dtype=None):
    """An array of ``shape`` holding ``value`` everywhere, built from a Python list."""
    shape = _shape(shape)
    return xp.reshape(xp.asarray([value] * _prod(shape), dtype=dtype), shape)


# ------------------------------------------------------------------------------ references


def _number(v):
    """A 0-d array sample as a Python float (the references compute on Python numbers)."""
    return float(v) if hasattr(v, "shape") else v


def _arange_ref(xp, start, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    n = max(0, math.ceil((stop - start) / step))
    vals = [start + i * step for i in range(n)]
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, stop, step))
        dtype = xp.float64 if is_float else xp.int64
    return xp.asarray(vals, dtype=dtype)


def _linspace_ref(xp, start, stop, num, *, dtype=None, device=None, endpoint=True):
    start, stop = _number(start), _number(stop)
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    vals = [start + i * step for i in range(num)]
    if endpoint and num > 1:
        vals[-1] = stop
    return xp.asarray(vals, dtype=dtype if dtype is not None else xp.float64)


def _eye_ref(xp, n_rows, n_cols=None, *, k=0, dtype=None, device=None):
    n_cols = n_rows if n_cols is None else n_cols
    rows = [[1.0 if j - i == k else 0.0 for j in range(n_cols)] for i in range(n_rows)]
    return xp.reshape(xp.asarray(rows, dtype=dtype if dtype is not None else xp.float64), (n_rows, n_cols))


def _zeros_ref(xp, shape, *, dtype=None, device=None):
    return _filled(xp, shape, 0.0, dtype if dtype is not None else xp.float64)


def _ones_ref(xp, shape, *, dtype=None, device=None):
    return _filled(xp, shape, 1.0, dtype if dtype is not None else xp.float64)


def _full_ref(xp, shape, fill_value, *, dtype=None, device=None):
    if hasattr(fill_value, "shape"):  # a 0-d array: its dtype unless given
        dtype = fill_value.dtype if dtype is None else dtype
        fill_value = float(fill_value) if "float" in str(fill_value.dtype) else fill_value
    return _filled(xp, shape, fill_value, dtype)


def _like_ref(value):
    def ref(xp, x, *, dtype=None, device=None):
        return _filled(xp, x.shape, value, dtype if dtype is not None else x.dtype)

    return ref


def _full_like_ref(xp, x, fill_value, *, dtype=None, device=None):
    if hasattr(fill_value, "shape"):
        fill_value = float(fill_value)
    return _filled(xp, x.shape, fill_value, dtype if dtype is not None else x.dtype)


def _tri_ref(lower):
    def ref(xp, x, *, k=0):
        n, m = x.shape[-2], x.shape[-1]
        i = xp.reshape(xp.arange(n), (n, 1))
        j = xp.reshape(xp.arange(m), (1, m))
        keep = (j - i <= k) if lower else (j - i >= k)
        return xp.where(keep, x, xp.zeros_like(x))

    return ref


# ------------------------------------------------------------------------------ samples


def arange_samples(s):
    return [
        Sample((5,), name="stop"),
        Sample((1, 7, 2), name="start stop step"),
        Sample((0.0, 1.0, 0.25), name="float"),
        Sample((5, 1, -2), name="negative step"),
        Sample((3, 3), name="empty"),
        Sample((4,), {"dtype": s.xp.float32}, name="dtype"),
    ]


def linspace_samples(s):
    return [
        Sample((0.0, 1.0, 5), name="endpoint"),
        Sample((-1.0, 2.0, 4), {"endpoint": False}, name="no endpoint"),
        Sample((2.0, 2.0, 1), name="one"),
        Sample((0.0, 1.0, 0), name="empty"),
        Sample((0, 3, 4), {"dtype": s.xp.float32}, name="dtype"),
        # array start and stop: the values are differentiable in them
        Sample((s.float(), s.float(), 5), name="array start stop"),
        Sample((s.float(), 2.0, 4), {"endpoint": False}, name="array start, no endpoint"),
        Sample((1.0, s.float(), 1), name="array stop, one"),
    ]


def eye_samples(s):
    return [
        Sample((3,), name="square"),
        Sample((2, 4), {"k": 1}, name="wide k=1"),
        Sample((4, 3), {"k": -2}, name="tall k=-2"),
        Sample((0,), name="empty"),
        Sample((3,), {"dtype": s.xp.int32}, name="dtype"),
    ]


def shape_samples(s):
    return [
        Sample(((2, 3),), name="2-d"),
        Sample((4,), name="int shape"),
        Sample(((),), name="0-d"),
        Sample(((0, 3),), name="empty"),
        Sample(((2, 2),), {"dtype": s.xp.int32}, name="dtype"),
    ]


def full_samples(s):
    return [
        Sample(((2, 3), 1.5), name="float"),
        Sample((4, 7), name="int"),
        Sample(((2,), True), name="bool"),
        Sample(((), -2.0), name="0-d"),
        Sample(((0, 2), 3.0), name="empty"),
        Sample(((2, 2), 2), {"dtype": s.xp.float32}, name="dtype"),
        Sample(((2, 3), s.float()), name="array fill"),
    ]


def empty_samples(s):
    return [
        Sample(((0,),), name="empty"),
        Sample(((2, 0),), {"dtype": s.xp.int32}, name="dtype"),
        Sample((0,), {"dtype": s.xp.bool}, name="bool"),
    ]


def like_samples(s):
    return [
        Sample((s.float(2, 3),), name="2-d"),
        Sample((s.float(),), name="0-d"),
        Sample((s.float(0, 2),), name="empty"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
        Sample((s.int(3),), name="int"),
        Sample((s.float(3),), {"dtype": s.xp.int32}, name="dtype"),
    ]


def full_like_samples(s):
    return [
        Sample((s.float(2, 3), 0.5), name="2-d"),
        Sample((s.float(), 2.0), name="0-d"),
        Sample((s.float(0, 2), 1.0), name="empty"),
        Sample((s.int(3), 4), name="int"),
        Sample((s.int(3), 7), {"dtype": s.xp.float32}, name="dtype"),
        Sample((s.float(2, 3), s.float()), name="array fill"),
    ]


def empty_like_samples(s):
    return [
        Sample((s.float(0, 2),), name="empty"),
        Sample((s.int(0),), name="int"),
        Sample((s.float(3, 0),), {"dtype": s.xp.float32}, name="dtype"),
    ]


def asarray_samples(s):
    return [
        Sample(([[1.0, 2.0], [3.0, 4.0]],), name="nested list"),
        Sample(([1, 2, 3],), name="int list"),
        Sample((2.5,), name="python scalar"),
        Sample((s.float(2, 3),), name="array"),
        Sample((s.float(2, 3),), {"copy": True}, name="copy"),
        Sample((s.float(3),), {"dtype": s.xp.complex128}, name="to complex"),
        Sample((s.int(3),), {"dtype": s.xp.float64}, name="int to float"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
        Sample((s.float(0),), name="empty"),
    ]


def _dlpack_ref(xp, x, **kw):
    """The library's own from_dlpack; a copy it cannot make through DLPack (CuPy exports copies only to
    the host: "BufferError: copy=True only supported for copy to CPU") is its import, copied."""
    try:
        return xp.from_dlpack(x, **kw)
    except BufferError:
        if not kw.get("copy"):
            raise
        return xp.asarray(xp.from_dlpack(x), copy=True)


def dlpack_samples(s):
    return [
        Sample((s.float(2, 3),), name="2-d"),
        Sample((s.float(),), name="0-d"),
        Sample((s.float(0, 3),), name="empty"),
        Sample((s.int(4),), name="int"),
        Sample((s.float(3),), {"copy": True}, name="copy"),
    ]


def tri_samples(s):
    return [
        Sample((s.float(3, 3),), name="square"),
        Sample((s.float(2, 4),), {"k": 1}, name="wide k=1"),
        Sample((s.float(4, 3),), {"k": -1}, name="tall k=-1"),
        Sample((s.float(2, 3, 3),), name="batch"),
        Sample((s.float(0, 3),), name="empty"),
        Sample((s.noncontiguous(3, 3),), name="non-contiguous"),
        Sample((s.complex(2, 2),), name="complex"),
    ]


ND = {"differentiable": False}
ROWS = [
    # differentiable in traced start/step (tests/test_edges.py: the length depends on the values, so
    # neither eval_shape nor vmap without a loop can take an array start)
    OpInfo("arange", arange_samples, ref=_arange_ref, **ND),
    OpInfo("linspace", linspace_samples, ref=_linspace_ref, rtol=1e-12, atol=1e-14),
    OpInfo(
        "eye",
        eye_samples,
        ref=_eye_ref,
        **ND,
        backend_failures=on_backend("dask", "Dask's eye(n, m, k=1) with m > n misses a chunk when computed"),
    ),
    OpInfo("zeros", shape_samples, ref=_zeros_ref, **ND),
    OpInfo("ones", shape_samples, ref=_ones_ref, **ND),
    OpInfo("empty", empty_samples, ref=_zeros_ref, **ND),
    # differentiable in an array fill_value (broadcast); constant otherwise
    OpInfo("full", full_samples, ref=_full_ref),
    OpInfo("zeros_like", like_samples, ref=_like_ref(0), **ND),
    OpInfo("ones_like", like_samples, ref=_like_ref(1), **ND),
    OpInfo("empty_like", empty_like_samples, ref=_like_ref(0), **ND),
    OpInfo("full_like", full_like_samples, ref=_full_like_ref),
    OpInfo("asarray", asarray_samples),
    OpInfo("from_dlpack", dlpack_samples, ref=_dlpack_ref),
    OpInfo("tril", tri_samples, ref=_tri_ref(lower=True)),
    OpInfo("triu", tri_samples, ref=_tri_ref(lower=False)),
]

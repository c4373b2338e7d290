"""Op table rows: searching, sorting and set functions (argmax, argmin, nonzero, searchsorted, sort,
argsort, unique_*).

Samples are NaN-free. Float samples have distinct values (a sort or unique is differentiable there);
repeated values (ties) come as integer samples, or as float samples with ``diff_argnums=()`` since finite
differences across a tie see a kink. Sorted sequences for ``searchsorted`` keep gaps wider than the vmap
test's perturbation (0.05), so they stay sorted per batch element.
"""

from polyad.testing.op_table import OpInfo, Sample, on_backend

_DATA_DEPENDENT = (
    "data-dependent output shape: the length of the result depends on the values, so eval_shape reports "
    "None for it (the standard's convention) and cannot match the concrete shape"
)
_NO_VMAP = (
    "data-dependent output shape: the test perturbs float samples per batch element, so the per-element "
    "results have different lengths and cannot be stacked; vmap raises a ConcretizationError saying so "
    "(results of equal lengths are stacked: tests/test_closure.py)"
)


def _ties(s, *shape, dtype=None):
    """An array of ``shape`` with many repeated small values (float64 unless ``dtype``)."""
    return s.xp.astype(s.int(*shape, low=0, high=3), dtype or s.xp.float64)


def arg_reduce_samples(s):
    return [
        Sample((s.float(),), name="0-d"),
        Sample((s.float(5),), name="1-d"),
        Sample((s.float(3, 4),), {"axis": 0}, name="axis 0"),
        Sample((s.float(3, 4),), {"axis": -1, "keepdims": True}, name="axis -1 keepdims"),
        Sample((s.float(2, 3),), {"keepdims": True}, name="flat keepdims"),
        Sample((s.float(2, 3, 2),), {"axis": 1}, name="3-d"),
        Sample((s.noncontiguous(3, 4),), {"axis": 1}, name="non-contiguous"),
        Sample((s.int(3, 4, low=0, high=3),), {"axis": 1}, name="int ties"),
        Sample((s.float(2, 0),), {"axis": 0}, name="empty result"),
    ]


def nonzero_samples(s):
    return [
        Sample((s.bool(2, 3),), name="bool 2-d"),
        Sample((s.int(7, low=0, high=3),), name="int 1-d"),
        Sample((s.xp.astype(s.int(2, 2, 3, low=0, high=2), s.xp.float64),), name="float 3-d"),
        Sample((s.float(0, 3),), name="empty"),
        Sample((s.xp.zeros((4,), dtype=s.xp.float64),), name="all zero"),
    ]


def _well_spaced(s, n, start=-1.5, gap=0.4):
    """``n`` increasing floats with gaps in [gap, 2 * gap)."""
    vals, v = [], start
    for _ in range(n):
        vals.append(v)
        v += gap + s.rng.uniform(0.0, gap)
    return s.xp.asarray(vals, dtype=s.xp.float64)


def searchsorted_samples(s):
    xp = s.xp
    x1 = _well_spaced(s, 6)
    unsorted = xp.asarray([0.3, -1.1, 1.4, -0.2, 0.8], dtype=xp.float64)
    ties = xp.asarray([0, 1, 1, 3, 3, 3, 5], dtype=xp.int64)
    needles = xp.asarray([[1, 3, 4], [-1, 6, 0]], dtype=xp.int64)
    return [
        Sample((x1, s.float(2, 3, low=-2.0, high=2.0)), name="2-d needles"),
        Sample((x1, s.float(low=-2.0, high=2.0)), {"side": "right"}, name="0-d needle right"),
        Sample((x1, s.float(0)), name="empty needles"),
        Sample((x1, s.noncontiguous(2, 2, low=-2.0, high=2.0)), name="non-contiguous"),
        Sample((unsorted, s.float(4, low=-2.0, high=2.0)), {"sorter": xp.argsort(unsorted)}, name="sorter"),
        Sample((unsorted, s.float(4, low=-2.0, high=2.0)), {"sorter": xp.argsort(unsorted), "side": "right"},
               name="sorter right"),
        Sample((ties, needles), {"side": "left"}, name="ties left"),
        Sample((ties, needles), {"side": "right"}, name="ties right"),
    ]  # fmt: skip


def sort_samples(s):
    return [
        Sample((s.float(5),), name="1-d"),
        Sample((s.float(3, 4),), {"axis": 0}, name="axis 0"),
        Sample((s.float(3, 4),), {"descending": True}, name="descending"),
        Sample((s.float(2, 3, 4),), {"axis": 1, "stable": False}, name="3-d unstable"),
        Sample((s.noncontiguous(3, 4),), {"axis": -1, "descending": True}, name="non-contiguous"),
        Sample((s.float(0),), name="empty"),
        Sample((s.float(2, 0),), {"axis": 0}, name="empty axis"),
        Sample((s.float(1),), name="single"),
        Sample((_ties(s, 3, 5),), name="float ties", diff_argnums=()),
        Sample((_ties(s, 3, 5),), {"descending": True}, name="float ties descending", diff_argnums=()),
        Sample((s.int(2, 6, low=0, high=3),), {"axis": 1}, name="int ties"),
        Sample((s.float(2, 3, dtype=s.xp.float32),), name="float32", diff_argnums=()),
    ]


def argsort_samples(s):
    return [
        *sort_samples(s)[:8],
        Sample((_ties(s, 3, 5),), {"stable": True}, name="ties stable"),
        Sample((_ties(s, 3, 5),), {"descending": True}, name="ties stable descending"),
        Sample((s.int(2, 6, low=0, high=3),), {"axis": 0}, name="int ties"),
    ]


def unique_samples(s):
    return [
        Sample((s.float(5),), name="1-d"),
        Sample((s.float(2, 3),), name="2-d"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
        Sample((s.float(),), name="0-d"),
        Sample((s.float(0),), name="empty"),
        Sample((_ties(s, 3, 4),), name="float repeats", diff_argnums=()),
        Sample((s.int(9, low=0, high=4),), name="int repeats"),
        Sample((_ties(s, 2, 3, dtype=s.xp.float32),), name="float32 repeats", diff_argnums=()),
    ]


# Dask computes nothing to build unique's result: its size is unknown (NaN), which no transform can use
_DASK_UNKNOWN_SIZE = "Dask's unique has an unknown (NaN) size until computed; derivatives need the shape"

ROWS = [
    OpInfo("argmax", arg_reduce_samples, differentiable=False),
    OpInfo("argmin", arg_reduce_samples, differentiable=False),
    OpInfo("nonzero", nonzero_samples, differentiable=False,
           known_failures={"abstract": _DATA_DEPENDENT, "vmap": _NO_VMAP}),
    OpInfo("searchsorted", searchsorted_samples, differentiable=False,
           backend_failures=on_backend("dask", "Dask's searchsorted has no sorter and no 0-d needle")),
    OpInfo("sort", sort_samples),
    OpInfo("argsort", argsort_samples, differentiable=False),
    *[OpInfo(name, unique_samples, known_failures={"abstract": _DATA_DEPENDENT, "vmap": _NO_VMAP},
             backend_failures=on_backend("dask", _DASK_UNKNOWN_SIZE, "vjp", "jvp", "grad2", "lazy"))
      for name in ("unique_all", "unique_counts", "unique_inverse", "unique_values")],
]  # fmt: skip

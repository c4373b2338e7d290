"""Op table rows: reductions, statistical, cumulative and utility functions."""

from polyad.testing.op_table import OpInfo, Sample, on_backend


def _arr(s, rows, dtype=None):
    """An explicit array (ties, zeros) on the sampler's backend."""
    return s.xp.asarray(rows, dtype=dtype or s.xp.float64)


def reduce_samples(low=-1.0, high=1.0, empty_axis=True, complex_ok=False, extra=None):
    """Samples of ``f(x, /, *, axis=None, keepdims=False)``: 0-d, every axis form, keepdims, empty inputs
    (``empty_axis``: also reducing over an axis of size 0), non-contiguous."""

    def gen(s):
        f = lambda *shape: s.float(*shape, low=low, high=high)  # noqa: E731
        out = [
            Sample((f(),), name="0-d"),
            Sample((f(2, 3),), name="all axes"),
            Sample((f(2, 3),), {"keepdims": True}, name="all axes keepdims"),
            Sample((f(2, 3),), {"axis": 0}, name="axis 0"),
            Sample((f(2, 3),), {"axis": -1, "keepdims": True}, name="axis -1 keepdims"),
            Sample((f(2, 3, 2),), {"axis": (0, 2)}, name="axis tuple"),
            Sample((f(2, 3, 2),), {"axis": (-1, 1), "keepdims": True}, name="axis tuple keepdims"),
            Sample((f(4),), {"axis": ()}, name="axis ()"),
            Sample((f(0, 3),), {"axis": 1}, name="empty"),
            Sample((s.noncontiguous(2, 3, low=low, high=high),), {"axis": 1}, name="non-contiguous"),
        ]
        if empty_axis:
            out.append(Sample((f(0, 3),), {"axis": 0}, name="empty axis"))
            out.append(Sample((f(0),), name="empty all"))
        if complex_ok:
            out.append(Sample((s.complex(2, 3),), {"axis": 1}, name="complex"))
        if extra is not None:
            out.extend(extra(s))
        return out

    return gen


def _int_samples(s):
    return [
        Sample((s.int(2, 3, dtype=s.xp.int32),), {"axis": 1}, name="int32"),
    ]


def _sum_extra(s):
    return _int_samples(s) + [Sample((s.float(2, 3),), {"axis": 0, "dtype": s.xp.float64}, name="dtype")]


def _prod_extra(s):
    zeros = _arr(s, [[2.0, 0.0, 3.0, 1.5], [0.0, 0.0, 1.5, -2.0], [1.0, -2.0, 0.5, 0.0]])
    return _int_samples(s) + [
        Sample((zeros,), {"axis": 1}, name="zeros"),
        Sample((zeros,), {"axis": 0, "keepdims": True}, name="zeros axis 0"),
        Sample((_arr(s, [[2.0, 0.0], [0.5, 1.5]]),), name="one zero, all axes"),
    ]


def _ties(s):
    # two-way ties only: central differences at a k-way tie give (max + min) / 2 of the direction, which
    # is the equal share only for k = 2
    x = _arr(s, [[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.5, -1.0], [2.0, -4.0, -4.0, 0.5]])
    return [
        Sample((x,), {"axis": 1}, name="ties"),
        Sample((x,), name="ties all axes"),
        Sample((x,), {"axis": 0, "keepdims": True}, name="ties axis 0"),
    ]


_TIE_REASON = ("the derivative jumps at a tie: second-order finite differences straddle it, while the "
               "rule (shared cotangent) is constant there")  # fmt: skip


def stat_samples(s):
    f = s.float
    return [
        Sample((f(),), name="0-d"),
        Sample((f(2, 3),), name="all axes"),
        Sample((f(2, 3),), {"axis": 0}, name="axis 0"),
        Sample(
            (f(2, 3),), {"axis": -1, "keepdims": True, "correction": 1.0}, name="axis -1 keepdims correction"
        ),
        Sample((f(2, 3, 2),), {"axis": (0, 2)}, name="axis tuple"),
        Sample((f(2, 4),), {"correction": 1.5, "keepdims": True}, name="fractional correction"),
        Sample((f(0, 3),), {"axis": 1}, name="empty"),
        Sample((s.noncontiguous(2, 3),), {"axis": 1}, name="non-contiguous"),
    ]


def cumulative_samples(low=-1.0, high=1.0, extra=None):
    def gen(s):
        f = lambda *shape: s.float(*shape, low=low, high=high)  # noqa: E731
        out = [
            Sample((f(4),), name="1-d axis None"),
            Sample((f(4),), {"include_initial": True}, name="1-d include_initial"),
            Sample((f(3, 4),), {"axis": 0}, name="axis 0"),
            Sample((f(3, 4),), {"axis": -1, "include_initial": True}, name="axis -1 include_initial"),
            Sample((f(2, 5, 2),), {"axis": 1}, name="3-d axis 1"),
            Sample((f(1, 3),), {"axis": 0}, name="length 1"),
            Sample((f(0, 3),), {"axis": 0, "include_initial": True}, name="empty include_initial"),
            Sample((f(2, 0),), {"axis": 0}, name="empty"),
            Sample((s.noncontiguous(3, 4, low=low, high=high),), {"axis": 1}, name="non-contiguous"),
            Sample((s.complex(5),), name="complex"),
            Sample((s.int(2, 3, dtype=s.xp.int32),), {"axis": 1}, name="int32"),
            Sample((f(2, 3),), {"axis": 1, "dtype": s.xp.float64}, name="dtype"),
        ]
        if extra is not None:
            out.extend(extra(s))
        return out

    return gen


def _cumprod_zeros(s):
    return [
        Sample((_arr(s, [2.0, 0.0, 3.0, 0.0, 1.5, -0.5]),), name="zeros"),
        Sample((_arr(s, [[0.0, 2.0, 0.5], [1.5, 0.0, 0.0], [2.0, -1.0, 0.0]]),),
               {"axis": 1, "include_initial": True}, name="zeros include_initial"),
        Sample((_arr(s, [[0.0, 2.0, 0.5], [1.5, 0.0, 3.0]]),), {"axis": 0}, name="zeros axis 0"),
        Sample((s.float(9, low=0.5, high=1.5),), name="long (four scan steps)"),
    ]  # fmt: skip


def logical_samples(s):
    mixed = _arr(s, [[0.0, 1.5, -2.0], [0.0, 0.0, 0.0]])
    return [
        Sample((s.bool(),), name="0-d"),
        Sample((s.bool(2, 3),), name="all axes"),
        Sample((s.bool(2, 3),), {"axis": 0}, name="axis 0"),
        Sample((s.bool(2, 3, 2),), {"axis": (-1, 0), "keepdims": True}, name="axis tuple keepdims"),
        Sample((s.bool(0, 3),), {"axis": 0}, name="empty axis"),
        Sample((mixed,), {"axis": 1}, name="float"),
        Sample((s.int(2, 3, low=0, high=2),), {"axis": -1, "keepdims": True}, name="int keepdims"),
        Sample((mixed[..., ::2],), {"axis": 1}, name="non-contiguous"),
    ]


def diff_samples(s):
    f = s.float
    return [
        Sample((f(5),), name="1-d"),
        Sample((f(3, 4),), {"axis": 0}, name="axis 0"),
        Sample((f(3, 4),), {"n": 2}, name="n 2"),
        Sample((f(2, 5, 2),), {"axis": 1, "n": 3}, name="3-d n 3"),
        Sample((f(3, 4),), {"axis": 1, "prepend": f(3, 1), "append": f(3, 2)}, name="prepend append"),
        Sample((f(2, 3),), {"axis": 0, "n": 2, "prepend": f(1, 3)}, name="prepend n 2"),
        Sample((f(4),), {"n": 3, "append": f(1)}, name="append n 3"),
        Sample((f(1, 3),), {"axis": 0}, name="length 1"),
        Sample((f(0),), name="empty"),
        Sample((s.noncontiguous(3, 4),), {"axis": -1}, name="non-contiguous"),
        Sample((s.complex(4),), name="complex"),
    ]


_DASK_EMPTY_SET = "Dask's assignment into an empty array refuses the values' shape (grad2 of empty samples)"
_DASK_EMPTY_MAX = on_backend(
    "dask", "Dask's max and min of an empty array along its other axis raise", "value", "vjp", "jvp", "grad2"
)

ROWS = [
    OpInfo("sum", reduce_samples(complex_ok=True, extra=_sum_extra)),
    OpInfo("prod", reduce_samples(0.5, 1.5, complex_ok=True, extra=_prod_extra),
           backend_failures=on_backend("dask", _DASK_EMPTY_SET, "grad2")),
    OpInfo("mean", reduce_samples(empty_axis=False, complex_ok=True)),
    OpInfo("max", reduce_samples(empty_axis=False), backend_failures=_DASK_EMPTY_MAX),
    OpInfo("min", reduce_samples(empty_axis=False), backend_failures=_DASK_EMPTY_MAX),
    OpInfo("max", _ties, known_failures={"grad2": _TIE_REASON}),
    OpInfo("min", lambda s: [Sample((-smp.args[0],), smp.kwargs, name=smp.name) for smp in _ties(s)],
           known_failures={"grad2": _TIE_REASON}),
    OpInfo("var", stat_samples),
    OpInfo("std", stat_samples),
    OpInfo("cumulative_sum", cumulative_samples()),
    OpInfo("cumulative_prod", cumulative_samples(0.5, 1.5, extra=_cumprod_zeros),
           backend_failures=on_backend("dask", _DASK_EMPTY_SET, "grad2")),
    OpInfo("all", logical_samples, differentiable=False),
    OpInfo("any", logical_samples, differentiable=False),
    OpInfo("count_nonzero", logical_samples, differentiable=False),
    OpInfo("diff", diff_samples),
]  # fmt: skip

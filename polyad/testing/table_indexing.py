"""Op table rows: indexing functions (``take``, ``take_along_axis``)."""

from polyad.testing.op_table import OpInfo, Sample, on_backend


def take_samples(s):
    return [
        Sample((s.float(3, 4), s.int(5, low=0, high=4)), {"axis": 1}, name="axis 1, repeats"),
        Sample((s.float(3, 4), s.int(2, low=0, high=3)), {"axis": 0}, name="axis 0"),
        Sample((s.float(5), s.int(3, low=0, high=5)), name="1-d, axis None"),
        Sample((s.float(2, 3, 2), s.int(4, low=0, high=3)), {"axis": -2}, name="3-d, negative axis"),
        Sample((s.float(3, 4), s.int(0, low=0, high=4)), {"axis": 1}, name="empty indices"),
        Sample((s.noncontiguous(3, 4), s.int(3, low=0, high=4)), {"axis": 1}, name="non-contiguous"),
    ]


def take_along_samples(s):
    return [
        Sample((s.float(3, 4), s.int(3, 5, low=0, high=4)), {"axis": 1}, name="axis 1, repeats"),
        Sample((s.float(3, 4), s.int(2, 4, low=0, high=3)), {"axis": 0}, name="axis 0"),
        Sample((s.float(3, 4), s.int(1, 2, low=0, high=4)), name="broadcast indices"),
        Sample((s.float(5), s.int(7, low=0, high=5)), name="1-d"),
        Sample((s.float(2, 3, 2), s.int(2, 0, 2, low=0, high=3)), {"axis": 1}, name="empty"),
        Sample((s.noncontiguous(3, 4), s.int(3, 2, low=0, high=4)), {"axis": -1}, name="non-contiguous"),
    ]


ROWS = [
    OpInfo(
        "take",
        take_samples,
        backend_failures=on_backend("dask", "Dask's take of a batch with empty indices", "vmap"),
    ),
    OpInfo("take_along_axis", take_along_samples),
]

"""Op table rows: manipulation functions (reshape, axes, broadcasting, joining, flip/roll/repeat/tile)."""

from polyad.testing.op_table import OpInfo, Sample, on_backend


def reshape_samples(s):
    return [
        Sample((s.float(2, 3),), {"shape": (3, 2)}, name="2-d"),
        Sample((s.float(2, 3, 2),), {"shape": (-1, 4)}, name="-1"),
        Sample((s.float(),), {"shape": (1, 1)}, name="0-d"),
        Sample((s.float(1),), {"shape": ()}, name="to 0-d"),
        Sample((s.float(0, 3),), {"shape": (3, -1)}, name="empty"),
        Sample((s.noncontiguous(2, 3),), {"shape": (6,)}, name="non-contiguous"),
    ]


def permute_samples(s):
    return [
        Sample((s.float(2, 3, 4),), {"axes": (2, 0, 1)}, name="3-d"),
        Sample((s.float(2, 3),), {"axes": (1, 0)}, name="transpose"),
        Sample((s.float(),), {"axes": ()}, name="0-d"),
        Sample((s.float(0, 2),), {"axes": (1, 0)}, name="empty"),
        Sample((s.noncontiguous(2, 3),), {"axes": (1, 0)}, name="non-contiguous"),
    ]


def moveaxis_samples(s):
    return [
        Sample((s.float(2, 3, 4), 0, -1), name="int"),
        Sample((s.float(2, 3, 4), (0, 1), (2, 0)), name="tuples"),
        Sample((s.float(2, 0, 3), -1, 0), name="empty"),
        Sample((s.noncontiguous(2, 3), 1, 0), name="non-contiguous"),
    ]


def expand_samples(s):
    return [
        Sample((s.float(2, 3),), {"axis": 1}, name="middle"),
        Sample((s.float(2, 3),), {"axis": -1}, name="last"),
        Sample((s.float(),), {"axis": 0}, name="0-d"),
        Sample((s.float(0),), {"axis": 0}, name="empty"),
        Sample((s.float(2, 3),), {"axis": (0, -1)}, name="tuple of axes"),
        Sample((s.float(2, 3),), {"axis": (3, 1)}, name="tuple unsorted"),
    ]


def squeeze_samples(s):
    return [
        Sample((s.float(2, 1, 3),), {"axis": 1}, name="int"),
        Sample((s.float(1, 2, 1),), {"axis": (0, -1)}, name="tuple"),
        Sample((s.float(1),), {"axis": 0}, name="to 0-d"),
        Sample((s.float(0, 1),), {"axis": 1}, name="empty"),
    ]


def broadcast_to_samples(s):
    return [
        Sample((s.float(3),), {"shape": (2, 3)}, name="new axis"),
        Sample((s.float(2, 1),), {"shape": (2, 4)}, name="size-1 axis"),
        Sample((s.float(),), {"shape": (2, 2)}, name="0-d"),
        Sample((s.float(1, 3),), {"shape": (0, 3)}, name="empty"),
        Sample((s.noncontiguous(2, 1),), {"shape": (3, 2, 2)}, name="non-contiguous"),
    ]


def broadcast_arrays_samples(s):
    return [
        Sample((s.float(2, 1), s.float(3)), name="outer"),
        Sample((s.float(), s.float(2, 2), s.float(2, 1)), name="three"),
        Sample((s.float(0, 1), s.float(3)), name="empty"),
        Sample((s.float(4),), name="one"),
    ]


def broadcast_shapes_samples(s):
    """Shapes, not arrays: the backend's ``broadcast_shapes`` is the reference (NumPy's for Dask, whose
    namespace lacks it). Unknown (None) sizes: tests/test_standard_2025.py."""
    return [
        Sample(((2, 1), (3,)), name="two"),
        Sample(((4, 1, 3), (5, 1), (1,)), name="three"),
        Sample(((0, 1), (1, 5)), name="zero size"),
        Sample(((2, 3),), name="one"),
        Sample((), name="none"),
        Sample(((), (3, 2)), name="0-d shape"),
    ]


def meshgrid_samples(s):
    return [
        Sample((s.float(2), s.float(3)), name="xy"),
        Sample((s.float(2), s.float(3), s.float(4)), {"indexing": "ij"}, name="ij, three"),
        Sample((s.float(2), s.float(3), s.float(2)), {"indexing": "xy"}, name="xy, three"),
        Sample((s.float(3),), name="one"),
        Sample((s.float(0), s.float(2)), name="empty"),
    ]


def stack_samples(s):
    return [
        Sample((s.float(2, 3), s.float(2, 3)), name="axis 0"),
        Sample((s.float(2, 3), s.float(2, 3), s.float(2, 3)), {"axis": -1}, name="last axis"),
        Sample((s.float(), s.float()), name="0-d"),
        Sample((s.float(0, 2), s.float(0, 2)), {"axis": 1}, name="empty"),
        Sample((s.noncontiguous(2, 3), s.float(2, 3)), {"axis": 1}, name="non-contiguous"),
        Sample((s.float(2), s.complex(2)), name="real and complex"),
    ]


def concat_samples(s):
    return [
        Sample((s.float(2, 3), s.float(1, 3)), name="axis 0"),
        Sample((s.float(2, 3), s.float(2, 1), s.float(2, 2)), {"axis": -1}, name="last axis"),
        Sample((s.float(2, 3), s.float(4)), {"axis": None}, name="axis None"),
        Sample((s.float(0, 2), s.float(3, 2)), name="empty"),
        Sample((s.noncontiguous(2, 3), s.float(2, 3)), {"axis": 1}, name="non-contiguous"),
        Sample((s.complex(2), s.float(3)), name="complex and real"),
        Sample((s.float(2, 1), s.complex(2, 2)), {"axis": None}, name="real and complex, axis None"),
    ]


def unstack_samples(s):
    return [
        Sample((s.float(3, 2),), name="axis 0"),
        Sample((s.float(2, 3, 2),), {"axis": -2}, name="middle"),
        Sample((s.float(2),), name="1-d"),
        Sample((s.float(2, 0),), name="empty"),
        Sample((s.noncontiguous(2, 3),), {"axis": 1}, name="non-contiguous"),
    ]


def flip_samples(s):
    return [
        Sample((s.float(2, 3),), name="all axes"),
        Sample((s.float(2, 3, 2),), {"axis": 1}, name="int"),
        Sample((s.float(2, 3, 2),), {"axis": (0, -1)}, name="tuple"),
        Sample((s.float(),), name="0-d"),
        Sample((s.float(0, 2),), {"axis": 0}, name="empty"),
        Sample((s.noncontiguous(2, 3),), {"axis": 1}, name="non-contiguous"),
    ]


def roll_samples(s):
    return [
        Sample((s.float(2, 3),), {"shift": 2}, name="flattened"),
        Sample((s.float(2, 3),), {"shift": -1, "axis": 1}, name="int"),
        Sample((s.float(2, 3, 2),), {"shift": (1, 4), "axis": (0, -1)}, name="tuple"),
        Sample((s.float(2, 3),), {"shift": 1, "axis": (0, 1)}, name="int shift, tuple axis"),
        Sample((s.float(0, 2),), {"shift": 1, "axis": 1}, name="empty"),
        Sample((s.noncontiguous(2, 3),), {"shift": 1, "axis": 1}, name="non-contiguous"),
    ]


def repeat_int_samples(s):
    return [
        Sample((s.float(2, 3), 2), {"axis": 1}, name="int, axis 1"),
        Sample((s.float(2, 3), 3), name="int, flattened"),
        Sample((s.float(), 2), name="0-d"),
        Sample((s.float(0, 2), 2), {"axis": 0}, name="empty"),
        Sample((s.noncontiguous(2, 3), 2), {"axis": 0}, name="non-contiguous"),
    ]


def repeat_array_samples(s):
    return [
        Sample((s.float(2, 3), s.int(3, low=0, high=3)), {"axis": 1}, name="array, axis 1"),
        Sample((s.float(2, 2), s.int(4, low=1, high=3)), name="array, flattened"),
    ]


def tile_samples(s):
    return [
        Sample((s.float(2, 3), (2, 1)), name="same rank"),
        Sample((s.float(3), (2, 2)), name="more repetitions"),
        Sample((s.float(2, 3, 2), (2,)), name="fewer repetitions"),
        Sample((s.float(), (3,)), name="0-d"),
        Sample((s.float(0, 2), (2, 2)), name="empty"),
        Sample((s.noncontiguous(2, 3), (1, 2)), name="non-contiguous"),
    ]


_DASK_REPEAT = on_backend("dask", "Dask's repeat takes one integer count along one axis of a non-empty array")

ROWS = [
    OpInfo(
        "reshape",
        reshape_samples,
        backend_failures=on_backend("dask", "Dask cannot reshape a stack of empty arrays", "vmap"),
    ),
    OpInfo("permute_dims", permute_samples),
    OpInfo("moveaxis", moveaxis_samples),
    OpInfo("expand_dims", expand_samples),
    OpInfo("squeeze", squeeze_samples),
    OpInfo("broadcast_to", broadcast_to_samples),
    # tuples, as the 2025.12 revision says (a library still on 2024.12 may return a list)
    OpInfo("broadcast_arrays", broadcast_arrays_samples, ref=lambda xp, *a: tuple(xp.broadcast_arrays(*a))),
    OpInfo("meshgrid", meshgrid_samples, ref=lambda xp, *a, **k: tuple(xp.meshgrid(*a, **k))),
    OpInfo(
        "broadcast_shapes",
        broadcast_shapes_samples,
        differentiable=False,
        vmap_dims=(),
        known_failures={"abstract": "takes and returns shapes (tuples of ints), not arrays"},
    ),
    OpInfo("stack", stack_samples, sequence_arg=True),
    OpInfo("concat", concat_samples, sequence_arg=True),
    OpInfo("unstack", unstack_samples),
    OpInfo("flip", flip_samples),
    OpInfo("roll", roll_samples),
    OpInfo(
        "repeat",
        repeat_int_samples,
        backend_failures=_DASK_REPEAT,
    ),
    OpInfo(
        "repeat",
        repeat_array_samples,
        known_failures={"abstract": "the output length depends on the values of the array `repeats`"},
        batch_fallback="batched array `repeats`: per-example output lengths depend on the values (loop)",
        backend_failures=_DASK_REPEAT,
    ),
    OpInfo(
        "tile",
        tile_samples,
        backend_failures=on_backend(
            "dask",
            "the VJP of tile of an empty array: Dask's reduction raises AxisError",
            "vjp",
            "jvp",
            "grad2",
        ),
    ),
]

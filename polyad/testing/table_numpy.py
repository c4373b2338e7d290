"""The op table's rows for NumPy's functions on polyad tensors (``polyad/interop/numpy``): each row calls
NumPy's own function (``np.diag``, ``np.linalg.solve``...) on polyad tensors, so that NumPy dispatches it
to polyad, and checks it against NumPy's result on NumPy copies of the same arrays, then runs it through
the op table's derivative, second-order and batching checks (``tests/test_numpy_dispatch.py``).

A row's ``call(np, *args, **kwargs)`` is the code under test, written once: it runs with ``np`` = NumPy on
polyad tensors (the backend's arrays wrapped in ``pa.Tensor``, or a transform's tensors) and, for the
reference, on NumPy arrays. In-place calls (``x.sort()``, ``np.copyto``, ``out=``) write into a copy and
return it. ``NUMPY_TABLE`` collects the rows of this file and of ``table_numpy_more.py``.
"""

import dataclasses
from collections.abc import Callable

import polyad as pa
import polyad.core.dispatch as dispatch
from polyad.backends.host import np
from polyad.core import transform_active
from polyad.interop.numpy import EXACT, FUNCTIONS, METHODS, UFUNCS
from polyad.testing.op_table import OpInfo, Sample, on_backend

S = Sample


def _resolve(path):
    obj = np
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _wrap(x):
    """Backend arrays as plain polyad tensors, through lists, so that NumPy dispatches to polyad outside
    transforms (inside one, a transform's tensor among the arguments does; the others stay constants)."""
    if isinstance(x, list | tuple):
        return type(x)(_wrap(v) for v in x)
    if transform_active():
        return x
    return pa.Tensor(x) if dispatch.backend_of_array(x) is not None else x


def _unwrap(x):
    """An output as the checks compare it: plain tensors as their arrays, sequences as tuples."""
    if isinstance(x, list | tuple):
        return tuple(_unwrap(v) for v in x)
    if isinstance(x, pa.Tensor) and x._interp is None:
        return x.concrete()
    return x


def _to_numpy(x):
    if isinstance(x, list | tuple):
        return type(x)(_to_numpy(v) for v in x)
    backend = dispatch.backend_of_array(x)
    return np.asarray(backend.to_numpy(x)) if backend is not None else x


def _from_numpy(x, backend):
    if isinstance(x, list | tuple):
        return tuple(_from_numpy(v, backend) for v in x)
    if isinstance(x, np.ndarray | np.generic) and not isinstance(x, bool | int | float):
        return backend.compat.asarray(x)
    return x


@dataclasses.dataclass
class NumpyInfo(OpInfo):
    """A row calling NumPy's API: ``call(np, *args, **kwargs)`` (see the module)."""

    call: Callable | None = None
    entry: object = None

    def function(self):
        call = self.call

        def run(*args, **kwargs):
            return _unwrap(call(np, *_wrap(args), **kwargs))

        return self._pack(run)

    def reference(self, xp):
        call, backend = self.call, dispatch.default_backend()

        def run(*args, **kwargs):
            # keyword arrays too (where=, aweights=, to_begin=): NumPy handed a CuPy array dispatches to
            # CuPy's function, which lacks some of NumPy's arguments, and array_api_strict's device1 refuses
            kwargs = {k: _to_numpy(v) for k, v in kwargs.items()}
            return _from_numpy(_unwrap(call(np, *_to_numpy(args), **kwargs)), backend)

        return self._pack(run)


def _entry_of(name):
    if name.startswith("ndarray."):
        return METHODS.get(name[8:])
    if name in UFUNCS:
        return UFUNCS[name]
    module, _, leaf = name.rpartition(".")
    return FUNCTIONS.get(("numpy." + module if module else "numpy", leaf))


def row(name, samples, call=None, **options):
    """A row for NumPy's ``name`` (a path under ``numpy``, or ``ndarray.<method>``); ``call`` defaults to
    calling it with the sample's arguments."""
    if call is None:
        if name.startswith("ndarray."):
            method = name[8:].split(":")[0]
            call = lambda np_, x, *a, **k: getattr(x, method)(*a, **k)  # noqa: E731
        else:
            call = lambda np_, *a, **k: _resolve_in(np_, name)(*a, **k)  # noqa: E731
    entry = _entry_of(name.split(":")[0])
    options.setdefault("differentiable", entry is not None and entry.derivative == EXACT)
    return NumpyInfo(name=name, samples=samples, call=call, entry=entry, **options)


def _resolve_in(module, path):
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def inplace(method_or_function):
    """A ``call`` that writes into a copy of its first argument and returns the copy."""

    def call(np_, x, *a, **k):
        # a constant target inside a transform: an array of polyad's (a NumPy array cannot take the write)
        y = (
            pa.xp.asarray(x, copy=True)
            if dispatch.backend_of_array(x) is not None and transform_active()
            else x.copy()
        )
        result = method_or_function(np_, y, *a, **k)
        assert result is None or result is y
        return y

    return call


# ------------------------------------------------------------------------------ metadata, like, creation

ROWS = [
    row("shape", lambda s: [S((s.float(2, 3),))]),
    row("ndim", lambda s: [S((s.float(2, 3),))]),
    row("size", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": 1})]),
    row(
        "result_type",
        lambda s: [S((s.float(2), s.int(2)))],
        backend_failures=on_backend(
            "array_api_strict", "the strict backend has no mixed-kind promotion", "value", "abstract", "vmap"
        ),
    ),
    row("iscomplexobj", lambda s: [S((s.float(2),)), S((s.complex(2),))]),
    row("isrealobj", lambda s: [S((s.float(2),)), S((s.complex(2),))]),
    row("can_cast", lambda s: [S((s.float(2, dtype=s.xp.float32), "float64")), S((s.float(2), "float32"))]),
    row("may_share_memory", lambda s: [S((s.float(2), s.float(2)))]),
    row("shares_memory", lambda s: [S((s.float(2), s.float(2)))]),
    row("zeros_like", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"shape": (4,)})]),
    row("ones_like", lambda s: [S((s.float(2, 3),))]),
    row("empty_like", lambda s: [S((s.float(2, 3),))], call=lambda np_, x: np_.empty_like(x) * 0),
    row("full_like", lambda s: [S((s.float(2, 3), 2.5)), S((s.float(2, 3), s.float()))], vmap_dims=(0,)),
    row("copy", lambda s: [S((s.float(2, 3),))]),
    row(
        "linspace",
        lambda s: [
            S((s.float(), s.float(), 5)),
            S((s.float(2), s.float(2), 4), {"axis": 1}),
            S((0.0, s.float(), 6), {"endpoint": False}),
        ],
    ),
    row(
        "linspace:retstep",
        lambda s: [S((s.float(), s.float()))],
        call=lambda np_, a, b: np_.linspace(a, b, 5, retstep=True),
    ),
    row("logspace", lambda s: [S((s.float(), s.float(), 4)), S((s.float(), s.float(), 3), {"base": 2.0})]),
    row("geomspace", lambda s: [S((s.positive(), s.positive(), 5))]),
    row(
        "meshgrid",
        lambda s: [
            S((s.float(3), s.float(2))),
            S((s.float(3), s.float(2)), {"indexing": "ij"}),
            S((s.float(3), s.float(2)), {"sparse": True}),
        ],
    ),
]

# ------------------------------------------------------------------------------ reshaping, joining, splitting

ROWS += [
    row(
        "reshape",
        lambda s: [
            S((s.float(2, 3), (3, 2))),
            S((s.float(2, 3), -1)),
            S((s.float(2, 3), (3, 2)), {"order": "F"}),
        ],
    ),
    row("ravel", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"order": "F"})]),
    row("transpose", lambda s: [S((s.float(2, 3, 4),)), S((s.float(2, 3, 4), (1, 0, 2)))]),
    row("permute_dims", lambda s: [S((s.float(2, 3, 4), (2, 0, 1)))]),  # NumPy's alias of transpose
    row("matrix_transpose", lambda s: [S((s.float(2, 3, 4),))]),
    row("swapaxes", lambda s: [S((s.float(2, 3, 4), 0, 2))]),
    row("moveaxis", lambda s: [S((s.float(2, 3, 4), 0, -1)), S((s.float(2, 3, 4), (0, 1), (2, 0)))]),
    row("rollaxis", lambda s: [S((s.float(2, 3, 4), 2)), S((s.float(2, 3, 4), 0, 2))]),
    row("expand_dims", lambda s: [S((s.float(2, 3), 1)), S((s.float(2, 3), (0, 3)))]),
    row("squeeze", lambda s: [S((s.float(1, 3, 1),)), S((s.float(1, 3, 1), 0))]),
    row("atleast_1d", lambda s: [S((s.float(),)), S((s.float(3),))]),
    row("atleast_2d", lambda s: [S((s.float(),)), S((s.float(3),)), S((s.float(3), s.float(2, 2)))]),
    row("atleast_3d", lambda s: [S((s.float(3),)), S((s.float(2, 3),))]),
    row("broadcast_to", lambda s: [S((s.float(3), (2, 3)))]),
    row("broadcast_arrays", lambda s: [S((s.float(3), s.float(2, 1)))]),
    row("flip", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), 1))]),
    row("fliplr", lambda s: [S((s.float(2, 3),))]),
    row("flipud", lambda s: [S((s.float(2, 3),))]),
    row("rot90", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), 2)), S((s.float(2, 3), 3))]),
    row("roll", lambda s: [S((s.float(5), 2)), S((s.float(2, 3), 1), {"axis": 1}), S((s.float(2, 3), -1))]),
    row("tile", lambda s: [S((s.float(3), 2)), S((s.float(2, 3), (2, 1)))]),
    row("repeat", lambda s: [S((s.float(3), 2)), S((s.float(2, 3), 2), {"axis": 0})]),
    row("resize", lambda s: [S((s.float(3), (2, 4)))]),
    row(
        "concatenate",
        lambda s: [S((s.float(2, 3), s.float(1, 3))), S((s.float(2, 3), s.float(2, 2)), {"axis": 1})],
        sequence_arg=True,
    ),
    row(
        "concatenate:axis_none",
        lambda s: [S((s.float(2, 3), s.float(2)))],
        call=lambda np_, a, b: np_.concatenate([a, b], axis=None),
    ),
    row(
        "concatenate:concat",
        lambda s: [S((s.float(2, 3), s.float(1, 3)))],
        call=lambda np_, a, b: np_.concat([a, b]),
    ),
    row(
        "stack",
        lambda s: [S((s.float(3), s.float(3))), S((s.float(2, 3), s.float(2, 3)), {"axis": -1})],
        sequence_arg=True,
    ),
    row("vstack", lambda s: [S((s.float(3), s.float(3))), S((s.float(2, 3), s.float(3)))], sequence_arg=True),
    row(
        "hstack",
        lambda s: [S((s.float(3), s.float(2))), S((s.float(2, 3), s.float(2, 1)))],
        sequence_arg=True,
    ),
    row("dstack", lambda s: [S((s.float(3), s.float(3)))], sequence_arg=True),
    row("column_stack", lambda s: [S((s.float(3), s.float(3, 2)))], sequence_arg=True),
    row(
        "block",
        lambda s: [S((s.float(2, 2), s.float(2, 1), s.float(1, 3)))],
        call=lambda np_, a, b, c: np_.block([[a, b], [c]]),
    ),
    row("split", lambda s: [S((s.float(6), 3)), S((s.float(2, 4), [1, 3]), {"axis": 1})]),
    row("array_split", lambda s: [S((s.float(7), 3))]),
    row("hsplit", lambda s: [S((s.float(2, 4), 2))]),
    row("vsplit", lambda s: [S((s.float(4, 2), 2))]),
    row("dsplit", lambda s: [S((s.float(2, 2, 4), 2))]),
    row("unstack", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": 1})]),
    row("append", lambda s: [S((s.float(3), s.float(2))), S((s.float(2, 3), s.float(1, 3)), {"axis": 0})]),
    row("delete", lambda s: [S((s.float(5), 1)), S((s.float(3, 4), [0, 2]), {"axis": 1})]),
    row(
        "insert",
        lambda s: [
            S((s.float(4), 1, s.float())),
            S((s.float(4), [1, 3], s.float(2))),
            S((s.float(2, 3), 1, s.float(2)), {"axis": 1}),
        ],
    ),
    row(
        "pad",
        lambda s: (
            [S((s.float(3), 2)), S((s.float(2, 3), ((1, 0), (0, 2))), {"constant_values": 1.5})]
            + [
                S((s.float(4, 3), ((2, 1), (1, 2))), {"mode": m})
                for m in ("edge", "wrap", "reflect", "symmetric")
            ]
        ),
    ),
]

# ------------------------------------------------------------------------------ diagonals and indexing

ROWS += [
    row(
        "diag",
        lambda s: [S((s.float(3),)), S((s.float(3),), {"k": 1}), S((s.float(3, 4),)), S((s.float(3, 4), -1))],
    ),
    row("diagflat", lambda s: [S((s.float(2, 2),))]),
    row("diagonal", lambda s: [S((s.float(3, 4),)), S((s.float(2, 3, 4), 1, 1, 2))]),
    row("trace", lambda s: [S((s.float(3, 4),)), S((s.float(2, 3, 3),), {"axis1": 1, "axis2": 2})]),
    row("tril", lambda s: [S((s.float(3, 4),)), S((s.float(3),), {"k": -1})]),
    row("triu", lambda s: [S((s.float(3, 4), 1))]),
    row("triu_indices_from", lambda s: [S((s.float(3, 3),)), S((s.float(3, 4), 1))]),
    row("tril_indices_from", lambda s: [S((s.float(3, 3),))]),
    row("diag_indices_from", lambda s: [S((s.float(3, 3),))]),
    row(
        "take",
        lambda s: [
            S((s.float(5), s.int(3, high=5))),
            S((s.float(2, 5), s.int(2, 2, high=5)), {"axis": 1}),
            S((s.float(5), 7), {"mode": "wrap"}),
        ],
        vmap_dims=(0,),
    ),
    row("take_along_axis", lambda s: [S((s.float(3, 4), s.int(3, 2, high=4), 1))]),
    row(
        "put_along_axis",
        lambda s: [S((s.float(3, 4), s.int(3, 1, high=4), s.float(3, 1), 1))],
        call=inplace(lambda np_, x, i, v, axis: np_.put_along_axis(x, i, v, axis)),
    ),
    row(
        "copyto",
        lambda s: [S((s.float(2, 3), s.float(3))), S((s.float(2, 3), s.float(2, 3), s.bool(2, 3)))],
        call=inplace(lambda np_, d, s_, *w: np_.copyto(d, s_, where=w[0]) if w else np_.copyto(d, s_)),
    ),
    row(
        "putmask",
        lambda s: [S((s.float(2, 3), s.bool(2, 3), s.float(2, 3)))],
        call=inplace(lambda np_, x, m, v: np_.putmask(x, m, v)),
    ),
    row(
        "place",
        lambda s: [S((s.float(6), s.xp.asarray([True, False, True, True, False, False]), s.float(3)))],
        call=inplace(lambda np_, x, m, v: np_.place(x, m, v)),
        batch_fallback="a write through a boolean mask",
    ),
    row(
        "put",
        lambda s: [S((s.float(2, 3), s.xp.asarray([0, 4]), s.float(2)))],
        call=inplace(lambda np_, x, i, v: np_.put(x, i, v)),
    ),
    row(
        "fill_diagonal",
        lambda s: [S((s.float(3, 3), s.float())), S((s.float(3, 4), s.float(3)))],
        call=inplace(lambda np_, x, v: np_.fill_diagonal(x, v)),
    ),
    row("where", lambda s: [S((s.bool(2, 3), s.float(2, 3), s.float(3))), S((s.bool(3), s.float(3), 0.0))]),
    row(
        "where:nonzero",
        lambda s: [S((s.bool(2, 3),))],
        call=lambda np_, c: np_.where(c),
        known_failures={"vmap": "the number of non-zeros depends on the data"},
    ),
    row("nonzero", lambda s: [S((s.bool(2, 3),))], known_failures={"vmap": "data-dependent length"}),
    row("flatnonzero", lambda s: [S((s.float(2, 3),))], known_failures={"vmap": "data-dependent length"}),
    row("argwhere", lambda s: [S((s.bool(2, 3),))], known_failures={"vmap": "data-dependent length"}),
    row(
        "select",
        lambda s: [S((s.float(4),))],
        call=lambda np_, x: np_.select([x < -0.5, x < 0.5], [x * 2, x**2], default=x),
    ),
    row(
        "compress",
        lambda s: [S((s.xp.asarray([True, False, True]), s.float(3, 2)), {"axis": 0})],
        known_failures={"vmap": "data-dependent length"},
    ),
    row(
        "extract",
        lambda s: [S((s.bool(2, 3), s.float(2, 3)))],
        known_failures={"vmap": "data-dependent length"},
    ),
    row(
        "ravel_multi_index",
        lambda s: [S(((s.int(4, high=3), s.int(4, high=4)), (3, 4)))],
        call=lambda np_, i, shape: np_.ravel_multi_index(i, shape),
    ),
    row("unravel_index", lambda s: [S((s.int(4, high=12), (3, 4)))]),
]

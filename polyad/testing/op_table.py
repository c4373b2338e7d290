"""The op table: one row per namespace function, driving every value, derivative, batching and shape test.

A row (``OpInfo``) names the function, generates sample inputs on any backend (0-d, empty, broadcasting
and non-contiguous cases among them), and records as data which checks apply and which are known to
fail, each with its reason. Rows live in ``table_<family>.py`` next to this file; ``OP_TABLE`` collects
them. Adding a check over every op is one test function iterating ``OP_TABLE``.
"""

import dataclasses
import importlib
import random
from collections.abc import Callable

import polyad.core.dispatch as dispatch
import polyad.xp as pxp
from polyad.core.avals import is_floating

# "lazy": on a backend with lazy arrays (Dask), the function and its transforms compute nothing
# "edges": the values at inf, nan, zeros and exact points against SciPy (tests/test_special*.py)
CHECKS = ("value", "abstract", "vjp", "jvp", "grad2", "vmap", "lazy", "edges")
ALL = "all"  # in ``backend_failures``: every check fails on that backend


@dataclasses.dataclass
class Sample:
    """Positional ``args`` (arrays first, as the function takes them) and keyword ``kwargs``."""

    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)
    name: str = ""
    # positions of the args to differentiate; None: every floating array argument
    diff_argnums: tuple | None = None


@dataclasses.dataclass
class OpInfo:
    """One namespace function and how to test it.

    Attributes:
        name: path in the namespace ("sin", "linalg.inv", "fft.rfft").
        samples: ``samples(s: Sampler) -> list[Sample]``.
        ref: reference ``ref(xp, *args, **kwargs)`` on the backend namespace; default: the same path.
        differentiable: False for functions whose outputs carry no derivative.
        rtol, atol: tolerances of the value check; derivative checks use ``grad_rtol``/``grad_atol``.
        known_failures: ``{check: reason}`` for checks in ``CHECKS`` that are known to fail.
        backend_failures: ``{backend name: {check: reason}}`` for checks known to fail on one backend only
            (what its library lacks); the check ``ALL`` covers every check. ``on_backend`` builds one.
        batch_fallback: a reason if the function still uses vmap's loop fallback (aim: none).
        out_to_float: compare outputs after conversion (set for functions returning tuples of namedtuples).
        device_types: the device types the function has kernels for, or None (a generic kernel: any).
    """

    name: str
    samples: Callable
    ref: Callable | None = None
    differentiable: bool = True
    rtol: float = 1e-7
    atol: float = 1e-10
    grad_rtol: float = 1e-5
    grad_atol: float = 1e-6
    eps: float = 1e-6
    known_failures: dict = dataclasses.field(default_factory=dict)
    backend_failures: dict = dataclasses.field(default_factory=dict)
    batch_fallback: str | None = None
    vmap_dims: tuple | None = None  # positions that vmap tests may batch; None: every array argument
    sequence_arg: bool = False  # the function takes its arrays as one sequence (stack, concat)
    # pack(f): f as a function of the samples' positional arrays, for a signature that takes them some
    # other way (SciPy's ``cho_solve((c, lower), b)``); applied to the namespace function and to a
    # reference resolved by name (a ``ref`` takes the positional form itself)
    pack: Callable | None = None
    # the device types with a kernel (None: any, by a generic kernel); on others the dispatcher refuses
    device_types: tuple | None = None
    # a program of namespace calls, ``program(xp, *args, **kwargs)``, in place of one function: the row
    # runs it with ``polyad.xp`` and its reference is the same program on the backend's own namespace
    # (the view-mutation rows of table_views.py)
    program: Callable | None = None

    def function(self):
        if self.program is not None:
            return lambda *a, **k: self.program(pxp, *a, **k)
        return self._pack(_resolve(pxp, self.name))

    def reference(self, xp):
        if self.ref is not None:
            return lambda *a, **k: self.ref(xp, *a, **k)
        if self.program is not None:
            return lambda *a, **k: self.program(xp, *a, **k)
        return self._pack(_resolve(xp, self.name))

    def _pack(self, f):
        # samples keep arrays positional (so tests differentiate and batch each); pass them as one sequence
        if self.pack is not None:
            return self.pack(f)
        return (lambda *a, **k: f(list(a), **k)) if self.sequence_arg else f

    def skip_reason(self, check, backend=None):
        """Why ``check`` is known to fail on ``backend`` (a name; default: the default backend's), or None."""
        reason = self.known_failures.get(check)
        if reason is None and self.backend_failures:
            on = self.backend_failures.get(backend or dispatch.get_backend(), {})
            reason = on.get(check) or on.get(ALL)
        return reason


def on_backend(name, reason, *checks):
    """A ``backend_failures`` entry: ``checks`` (default: ``ALL``) known to fail on backend ``name``.

    Example:
        >>> on_backend("dask", "Dask has no linalg.det", "value", "abstract")
        {'dask': {'value': 'Dask has no linalg.det', 'abstract': 'Dask has no linalg.det'}}
    """
    return {name: {check: reason for check in checks or (ALL,)}}


def _resolve(ns, path):
    obj = ns
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


class Sampler:
    """Makes sample arrays on one backend from a seeded Python RNG (no numpy in the core)."""

    def __init__(self, backend=None, seed=0):
        self.backend = backend or dispatch.default_backend()
        self.xp = self.backend.xp
        self.rng = random.Random(seed)

    def _array(self, shape, vals, dtype):
        xp = self.xp
        shape = tuple(shape)
        return xp.reshape(xp.asarray(vals, dtype=dtype), shape)

    def float(self, *shape, low=-1.0, high=1.0, dtype=None):
        """Uniform floats in [low, high)."""
        n = _prod(shape)
        vals = [self.rng.uniform(low, high) for _ in range(n)]
        return self._array(shape, vals, dtype or self.xp.float64)

    def positive(self, *shape, low=0.5, high=2.0):
        return self.float(*shape, low=low, high=high)

    def complex(self, *shape, dtype=None):
        n = _prod(shape)
        vals = [complex(self.rng.uniform(-1, 1), self.rng.uniform(-1, 1)) for _ in range(n)]
        return self._array(shape, vals, dtype or self.xp.complex128)

    def int(self, *shape, low=0, high=5, dtype=None):
        n = _prod(shape)
        vals = [self.rng.randrange(low, high) for _ in range(n)]
        return self._array(shape, vals, dtype or self.xp.int64)

    def bool(self, *shape):
        n = _prod(shape)
        return self._array(shape, [self.rng.random() < 0.5 for _ in range(n)], self.xp.bool)

    def noncontiguous(self, *shape, low=-1.0, high=1.0):
        """A float array of ``shape`` that is a strided view (every other element of a larger array)."""
        big = self.float(*(s * 2 for s in shape[:-1]), shape[-1] * 2 if shape else 1, low=low, high=high)
        key = tuple(slice(None, None, 2) for _ in shape)
        return big[key] if shape else self.float(low=low, high=high)

    def spd(self, n, batch=()):
        """A symmetric positive definite matrix (or batch of them)."""
        xp = self.xp
        a = self.float(*batch, n, n)
        return a @ xp.matrix_transpose(a) + n * xp.eye(n, dtype=xp.float64)

    def well_conditioned(self, n, batch=()):
        xp = self.xp
        return self.float(*batch, n, n) + 3 * xp.eye(n, dtype=xp.float64)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


FAMILIES = ("elementwise", "creation", "dtypes", "manipulation", "indexing", "reductions", "searching",
            "sets", "linalg", "fft", "dct", "special", "special_more", "views", "rules")  # fmt: skip


def _collect():
    rows = []
    for fam in FAMILIES:
        try:
            mod = importlib.import_module(f"polyad.testing.table_{fam}")
        except ModuleNotFoundError as exc:
            if exc.name != f"polyad.testing.table_{fam}":
                raise
            continue
        rows.extend(mod.ROWS)
    return rows


def _runs_on_default_backend(row):
    """Whether the row's function has a kernel for the default backend's arrays (a row with no kernel
    there, ``special.hyp1f1`` on CUDA, is left out of the table the tests run; its refusal is tested)."""
    if row.device_types is None:
        return True
    return dispatch.device_type(dispatch.default_backend().xp.zeros(1)) in row.device_types


ALL_ROWS = _collect()
OP_TABLE = [row for row in ALL_ROWS if _runs_on_default_backend(row)]
BY_NAME = {row.name: row for row in ALL_ROWS}


def float_argnums(sample):
    """Positions of the floating array arguments of a sample (the ones to differentiate)."""
    if sample.diff_argnums is not None:
        return sample.diff_argnums
    return tuple(
        i for i, a in enumerate(sample.args) if dispatch.backend_of_array(a) is not None and is_floating(a)
    )

"""SciPy and scikit-learn functions, unchanged, under ``pa.grad``, ``pa.jvp`` and ``pa.vmap``: each row of
interop_table.py against central finite differences of the library's own eager results (grad: of a
random weighting of the outputs; jvp: along a random tangent) and against a loop of eager calls (vmap).

Run with ``SCIPY_ARRAY_API=1`` set before SciPy is first imported (``make test`` runs the fast subset,
``make test-interop`` everything: ``-m interop``); without it the module is skipped with that reason.
"""

import contextlib
import os
import zlib

import pytest

if os.environ.get("SCIPY_ARRAY_API") != "1":
    pytest.skip(
        "the interop suite needs SCIPY_ARRAY_API=1 before SciPy is imported: run `make test-interop` or "
        "SCIPY_ARRAY_API=1 pytest tests/interop",
        allow_module_level=True,
    )
scipy = pytest.importorskip("scipy")
pytest.importorskip("sklearn")
if not scipy._lib._array_api.SCIPY_ARRAY_API:
    pytest.skip("SciPy was imported before SCIPY_ARRAY_API=1 was set", allow_module_level=True)

import numpy as np  # noqa: E402
import optree  # noqa: E402
import sklearn  # noqa: E402
from helpers import to_numpy  # noqa: E402
from interop_table import ROWS, TRANSFORMS  # noqa: E402

import polyad as pa  # noqa: E402
from polyad.core import dispatch  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

EPS = 1e-6
BATCH = 3


def _cases():
    cases = []
    for row in ROWS:
        for transform in TRANSFORMS:
            marks = [] if row.fast else [pytest.mark.interop_full]
            fail = row.known_failures.get(transform)
            if fail is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=f"[{fail.side}] {fail.cause}"))
            cases.append(pytest.param(row, transform, marks=marks, id=f"{row.name}-{transform}"))
    return cases


def _library(row):
    if row.library == "scikit-learn":
        return sklearn.config_context(array_api_dispatch=True)
    return contextlib.nullcontext()


def _backend(a):
    return dispatch.default_backend().xp.asarray(np.asarray(a, dtype=np.float64))


def _numpy_leaves(out):
    """The outputs of an eager call as float64 NumPy arrays (a Python float becomes a 0-d array)."""
    return [np.asarray(to_numpy(o), dtype=np.float64) for o in optree.tree_leaves(out)]


def _leaves(out):
    return optree.tree_leaves(out)


def _close(got, expected, row, what):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    assert np.all(np.isfinite(expected)), f"{what}: the reference is not finite (a bad sample)"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(got, expected, rtol=row.rtol, atol=row.atol * scale, err_msg=what)


# a derivative polyad saw being lost (a float() that never came back) fails the check, not a warning
@pytest.mark.filterwarnings("error::polyad.DerivativeLostWarning")
@pytest.mark.parametrize("row,transform", _cases())
def test_interop(row, transform):
    rng = np.random.default_rng(zlib.crc32(row.name.encode()))
    inputs = row.inputs(rng)
    args = tuple(_backend(a) for a in inputs)
    with _library(row):
        expected = _numpy_leaves(row.fn(*args))
        {"grad": _check_grad, "jvp": _check_jvp, "vmap": _check_vmap}[transform](row, inputs, args,
                                                                             expected, rng)  # fmt: skip


def _with(args, nums, values):
    args = list(args)
    for n, v in zip(nums, values):
        args[n] = v
    return tuple(args)


def _check_grad(row, inputs, args, expected, rng):
    """grad of sum_k <w_k, out_k> against central differences of the same on eager results."""
    weights = [rng.uniform(-1, 1, e.shape) for e in expected]

    def loss(*a):
        out = _leaves(row.fn(*a))
        return sum(pa.xp.sum(pa.xp.asarray(o) * _backend(w)) for o, w in zip(out, weights))

    def loss_np(values):
        out = _numpy_leaves(row.fn(*_with(args, row.argnums, [_backend(v) for v in values])))
        return sum(float(np.sum(o * w)) for o, w in zip(out, weights))

    grads = pa.grad(loss, argnums=row.argnums)(*args)
    base = [np.asarray(inputs[n], dtype=np.float64) for n in row.argnums]
    for k, (n, g) in enumerate(zip(row.argnums, grads)):
        fd = np.zeros_like(base[k])
        for idx in np.ndindex(base[k].shape):
            plus = [b.copy() for b in base]
            minus = [b.copy() for b in base]
            plus[k][idx] += EPS
            minus[k][idx] -= EPS
            fd[idx] = (loss_np(plus) - loss_np(minus)) / (2 * EPS)
        _close(to_numpy(g), fd, row, f"grad of argument {n} vs finite differences")


def _check_jvp(row, inputs, args, expected, rng):
    tangents = [rng.uniform(-1, 1, np.shape(inputs[n])) for n in row.argnums]

    def f(*diff):
        return row.fn(*_with(args, row.argnums, diff))

    primals = tuple(args[n] for n in row.argnums)
    out, tangent = pa.jvp(f, primals, tuple(_backend(t) for t in tangents))

    def shifted(sign):
        values = [_backend(np.asarray(inputs[n]) + sign * EPS * t) for n, t in zip(row.argnums, tangents)]
        return _numpy_leaves(f(*values))

    fd = [(p - m) / (2 * EPS) for p, m in zip(shifted(1), shifted(-1))]
    for k, (o, e) in enumerate(zip(_leaves(out), expected)):
        _close(to_numpy(o), e, row, f"jvp primal output {k}")
    for k, (t, e) in enumerate(zip(_leaves(tangent), fd)):
        _close(to_numpy(t), e, row, f"jvp tangent output {k} vs finite differences")


def _check_vmap(row, inputs, args, expected, rng):
    """vmap over a batch of perturbed inputs (same signs) equals a loop of eager calls."""
    variants = [
        [
            np.asarray(inputs[n]) * (1 + 0.05 * k * rng.uniform(-1, 1, np.shape(inputs[n])))
            for n in row.argnums
        ]
        for k in range(BATCH)
    ]
    batched = [_backend(np.stack([v[i] for v in variants])) for i in range(len(row.argnums))]
    in_dims = tuple(0 if n in row.argnums else None for n in range(len(args)))
    got = pa.vmap(row.fn, in_dims=in_dims)(*_with(args, row.argnums, batched))
    loop = [_numpy_leaves(row.fn(*_with(args, row.argnums, [_backend(a) for a in v]))) for v in variants]
    for k, g in enumerate(_leaves(got)):
        _close(to_numpy(g), np.stack([per[k] for per in loop]), row, f"vmap output {k} vs a loop")

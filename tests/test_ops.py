"""Every row of the op table, on the backend under test: forward values against the backend library,
abstract evaluation against real shapes, VJP and JVP against finite differences at orders 1 and 2,
forward against reverse mode, and vmap against a loop."""

import random
import warnings

import optree
import pytest
from helpers import assert_close, diff_fn, to_numpy

import polyad as pa
from polyad import backends
from polyad.core import dispatch, standard
from polyad.testing import check_grads, check_jvp, check_vjp, check_vmap
from polyad.testing.op_table import OP_TABLE, Sampler


def _cases(predicate=lambda row: True):
    cases = []
    sampler = Sampler()
    for row in OP_TABLE:
        if not predicate(row):
            continue
        for i, sample in enumerate(row.samples(sampler)):
            cases.append(pytest.param(row, i, id=f"{row.name}-{sample.name or i}"))
    return cases


# Backends whose namespace wraps NumPy's (Dask: a graph of NumPy calls) are checked against NumPy on
# computed copies of the samples, not against their own wrapper (array-api-compat's Dask cholesky gave the
# upper factor: compared with itself, the value passed)
REFERENCE_ON_NUMPY = ("dask",)


def _numpy_copy(a):
    return to_numpy(a) if dispatch.backend_of_array(a) is not None else a


def _sample(row, i):
    return row.samples(Sampler())[i]


def _skip_known(row, check):
    reason = row.skip_reason(check)
    if reason:
        pytest.xfail(reason)


@pytest.mark.parametrize("row,i", _cases())
def test_value(row, i):
    _skip_known(row, "value")
    sample = _sample(row, i)
    got = row.function()(*sample.args, **sample.kwargs)
    backend = dispatch.default_backend()
    if backend.name in REFERENCE_ON_NUMPY:
        args, kwargs = optree.tree_map(_numpy_copy, (sample.args, sample.kwargs), none_is_leaf=True)
        expected = row.reference(backends.load("numpy").compat)(*args, **kwargs)
    else:
        expected = row.reference(backend.compat)(*sample.args, **sample.kwargs)
    assert type(to_numpy(got)) is type(to_numpy(expected))
    assert_close(got, expected, rtol=row.rtol, atol=row.atol)


@pytest.mark.parametrize("row,i", _cases())
def test_abstract_eval(row, i):
    _skip_known(row, "abstract")
    sample = _sample(row, i)
    f = row.function()
    avals = pa.eval_shape(lambda *a: f(*a, **sample.kwargs), *sample.args)
    real = f(*sample.args, **sample.kwargs)
    for a, r in zip(optree.tree_leaves(avals), optree.tree_leaves(real)):
        assert a.shape == tuple(r.shape)
        assert a.dtype == r.dtype


def _diff_cases():
    return _cases(lambda row: row.differentiable)


@pytest.mark.parametrize("row,i", _diff_cases())
def test_vjp(row, i):
    _skip_known(row, "vjp")
    fn, args = diff_fn(row, _sample(row, i))
    if not args:
        pytest.skip("sample has no floating argument")
    check_vjp(fn, args, eps=row.eps, atol=row.grad_atol, rtol=row.grad_rtol, against_jvp=False,
              rng=random.Random(i))  # fmt: skip


@pytest.mark.parametrize("row,i", _diff_cases())
def test_jvp(row, i):
    _skip_known(row, "jvp")
    fn, args = diff_fn(row, _sample(row, i))
    if not args:
        pytest.skip("sample has no floating argument")
    check_jvp(fn, args, eps=row.eps, atol=row.grad_atol, rtol=row.grad_rtol, rng=random.Random(i))
    check_vjp(fn, args, eps=row.eps, atol=row.grad_atol, rtol=row.grad_rtol, rng=random.Random(i))


@pytest.mark.parametrize("row,i", _diff_cases())
def test_second_order(row, i):
    _skip_known(row, "grad2")
    fn, args = diff_fn(row, _sample(row, i))
    if not args:
        pytest.skip("sample has no floating argument")
    check_grads(fn, args, order=2, eps=row.eps * 10, atol=row.grad_atol * 10, rtol=row.grad_rtol * 10,
                seed=i)  # fmt: skip


def _batched(x, size, rng):
    """``size`` variants of array ``x`` stacked on a new leading axis (floats perturbed per variant)."""
    xp = dispatch.backend_of_array(x).xp
    from polyad.core.avals import is_floating

    variants = []
    for k in range(size):
        if is_floating(x) and k:
            from polyad.testing import random_like

            variants.append(x + 0.05 * random_like(x, rng))
        else:
            variants.append(x)
    return xp.stack(variants)


def _is_array(a):
    return dispatch.backend_of_array(a) is not None


@pytest.mark.parametrize("row,i", _cases())
def test_vmap(row, i):
    """vmap equals a loop; a row not listed as using the loop fallback must not use it."""
    from polyad.transforms.batching import LoopFallbackWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if row.batch_fallback else "error", LoopFallbackWarning)
        _check_vmap_row(row, i)


def _check_vmap_row(row, i):
    _skip_known(row, "vmap")
    sample = _sample(row, i)
    f = row.function()
    rng = random.Random(i)
    positions = [
        p for p, a in enumerate(sample.args) if _is_array(a) and (row.vmap_dims is None or p in row.vmap_dims)
    ]
    if not positions:
        pytest.skip("no array argument to batch")

    def call(*args):
        return f(*args, **sample.kwargs)

    size = 3
    # every array argument batched at 0
    batched = tuple(_batched(a, size, rng) if p in positions else a for p, a in enumerate(sample.args))
    dims = tuple(0 if p in positions else None for p in range(len(sample.args)))
    check_vmap(call, batched, dims)
    # first array argument batched at its last axis, the rest unbatched; outputs batched at the end
    p0 = positions[0]
    xp = dispatch.backend_of_array(sample.args[p0]).xp
    moved = xp.moveaxis(_batched(sample.args[p0], size, rng), 0, -1)
    args = tuple(moved if p == p0 else a for p, a in enumerate(sample.args))
    dims = tuple(-1 if p == p0 else None for p in range(len(sample.args)))
    check_vmap(call, args, dims, out_dims=-1)
    # only the last array argument batched
    if len(positions) > 1:
        pl = positions[-1]
        args = tuple(_batched(a, size, rng) if p == pl else a for p, a in enumerate(sample.args))
        dims = tuple(0 if p == pl else None for p in range(len(sample.args)))
        check_vmap(call, args, dims)


def test_namespace_and_table_cover_the_standard():
    from polyad import xp
    from polyad.testing.op_table import BY_NAME

    missing_ns = [n for n in standard.FUNCTIONS if not hasattr(xp, n)]
    missing_ns += [f"linalg.{n}" for n in standard.LINALG if not hasattr(xp.linalg, n)]
    missing_ns += [f"fft.{n}" for n in standard.FFT if not hasattr(xp.fft, n)]
    missing_ns += [n for n in standard.CONSTANTS + standard.DTYPES if not hasattr(xp, n)]
    assert not missing_ns, f"missing from polyad.xp: {missing_ns}"
    names = [n for n in standard.FUNCTIONS if n != "__array_namespace_info__"]
    names += [f"linalg.{n}" for n in standard.LINALG] + [f"fft.{n}" for n in standard.FFT]
    missing_rows = [n for n in names if n not in BY_NAME]
    assert not missing_rows, f"namespace functions without an op table row: {missing_rows}"


def test_vmap_fallback_list_is_data():
    """The table records which functions still batch by the loop fallback, each with its reason."""
    for row in OP_TABLE:
        if row.batch_fallback is not None:
            assert isinstance(row.batch_fallback, str) and row.batch_fallback


def test_backend_failures_are_data():
    """Backend-specific known failures name a registered backend and checks of ``CHECKS`` (or ``ALL``),
    each with a reason."""
    from polyad import backends
    from polyad.testing.op_table import ALL, CHECKS

    for row in OP_TABLE:
        for name, checks in row.backend_failures.items():
            assert name in backends.names(), (row.name, name)
            for check, reason in checks.items():
                assert check in CHECKS + (ALL,), (row.name, check)
                assert isinstance(reason, str) and reason, (row.name, check)

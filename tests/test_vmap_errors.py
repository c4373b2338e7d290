"""Errors inside vmap are eager's: for every op table row, bad arguments (an axis out of range, 0-d or
1-d examples where an op needs more, mismatched shapes) raise under vmap the exception type they raise
on one example, and arguments eager accepts give what a loop over the examples gives. A batch rule
sees the batched rank, so it must check per example (matmul of 0-d examples is an error, not a
(2, 1, 1) result) and report per example (NumPy's AxisError, not a rule's ValueError)."""

import warnings

import optree
import pytest
from helpers import assert_close, raises_cleanly

import polyad as pa
from polyad.core import dispatch
from polyad.core.avals import is_floating
from polyad.testing.op_table import OP_TABLE, Sampler

BATCH = 2  # the 1-d variant's length equals it, so a rule mistaking the batch axis for a data axis shows


def _is_array(a):
    return dispatch.backend_of_array(a) is not None


def _xp():
    return dispatch.default_backend().xp


def _fill(a, shape):
    """An array of ``shape`` with the dtype of ``a`` and distinct values."""
    xp = _xp()
    n = 1
    for s in shape:
        n *= s
    vals = [0.25 + 0.5 * i for i in range(n)]
    if not is_floating(a):
        vals = [i % 2 == 0 for i in range(n)] if a.dtype == xp.bool else list(range(n))
    return xp.reshape(xp.asarray(vals, dtype=a.dtype), shape)


def _variants(sample):
    """(name, args, kwargs) of bad (or odd) calls made from an op table sample."""
    args, kwargs = sample.args, sample.kwargs
    arrays = [i for i, a in enumerate(args) if _is_array(a)]
    if not arrays:
        return []
    out = []
    axis = kwargs.get("axis")
    ndim = len(args[arrays[0]].shape)
    if isinstance(axis, int) and not isinstance(axis, bool):
        out.append(("axis out of range", args, {**kwargs, "axis": ndim + 3}))
        out.append(("negative axis out of range", args, {**kwargs, "axis": -ndim - 4}))
    elif isinstance(axis, tuple) and axis:
        out.append(("axis tuple out of range", args, {**kwargs, "axis": (*axis[:-1], ndim + 3)}))
    for name, shape in (("0-d examples", ()), ("1-d examples", (BATCH,))):
        new = tuple(_fill(a, shape) if i in arrays else a for i, a in enumerate(args))
        out.append((name, new, kwargs))
    if len(arrays) > 1:
        last = arrays[-1]
        shape = tuple(args[last].shape)
        if shape:
            bad = _fill(args[last], shape[:-1] + (shape[-1] + 1,))
            new = tuple(bad if i == last else a for i, a in enumerate(args))
            out.append(("mismatched shapes", new, kwargs))
    return out


def _cases():
    cases = []
    for row in OP_TABLE:
        samples = row.samples(Sampler())
        if not samples:
            continue
        # the first sample, and the first one with an axis argument
        chosen = [samples[0]] + [s for s in samples[1:] if "axis" in s.kwargs][:1]
        for k, sample in enumerate(chosen):
            for name, args, kwargs in _variants(sample):
                cases.append(pytest.param(row, args, kwargs, id=f"{row.name}-{k}-{name}"))
    return cases


def _stacked(a):
    return _xp().stack([a] * BATCH)


@pytest.mark.parametrize("row,args,kwargs", _cases())
def test_vmap_raises_what_eager_raises(row, args, kwargs):
    f = row.function()
    mapped = [i for i, a in enumerate(args) if _is_array(a)]
    batched = tuple(_stacked(a) if i in mapped else a for i, a in enumerate(args))
    in_dims = tuple(0 if i in mapped else None for i in range(len(args)))

    def call(*a):
        return f(*a, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = call(*args)
        except Exception as eager:
            with pytest.raises(Exception) as info:
                pa.vmap(call, in_dims=in_dims)(*batched)
            assert type(info.value) is type(eager), (
                f"eager raised {type(eager).__name__}: {eager}\nvmap raised "
                f"{type(info.value).__name__}: {info.value}"
            )
            return
        if row.skip_reason("vmap"):
            pytest.xfail(row.skip_reason("vmap"))
        got = pa.vmap(call, in_dims=in_dims)(*batched)
    expected = optree.tree_map(_stacked, expected)
    if row.name.startswith("empty"):  # undefined values: shape and dtype only
        got, expected = pa.eval_shape(lambda: got), pa.eval_shape(lambda: expected)
        assert (got.shape, got.dtype) == (expected.shape, expected.dtype)
        return
    if isinstance(expected, tuple):
        expected, got = tuple(expected), tuple(got)
    assert_close(got, expected)


def _eager_error(f, *args):
    try:
        f(*args)
    except Exception as exc:
        return exc
    raise AssertionError("eager did not raise")


def test_matmul_of_0d_examples_raises_as_eager():
    """matmul of 0-d arrays is an error eagerly; under vmap too, not a (2, 1, 1) result."""
    xp = _xp()
    eager = _eager_error(pa.xp.matmul, xp.zeros(()), xp.zeros(()))
    with raises_cleanly(type(eager)):
        pa.vmap(pa.xp.matmul)(xp.zeros(2), xp.zeros(2))
    with raises_cleanly(type(eager)):
        pa.vmap(pa.xp.matmul, in_dims=(0, None))(xp.zeros(2), xp.zeros(()))


def test_axis_errors_speak_per_example():
    """An out-of-range axis under vmap raises eager's exception (NumPy's AxisError, not a rule's
    ValueError) with eager's message, which names the per-example rank, also under grad."""
    xp = _xp()
    for f in (
        lambda x: pa.xp.expand_dims(x, axis=5),
        lambda x: pa.xp.sum(x, axis=3),
        lambda x: pa.xp.moveaxis(x, 0, 4),
    ):
        eager = _eager_error(f, xp.zeros(3))
        with raises_cleanly(type(eager)) as info:
            pa.vmap(f)(xp.zeros((2, 3)))
        assert str(info.value) == str(eager)
        with raises_cleanly(type(eager)):
            pa.vmap(pa.grad(lambda x, f=f: pa.xp.sum(f(x))))(xp.zeros((2, 3)))


def test_a_failing_example_later_in_the_batch_keeps_the_rule_error():
    """The first example is fine, the second is singular: the backend's error on the batch stands."""
    xp = _xp()
    batch = xp.asarray([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 2.0], [2.0, 4.0]]])
    eager = _eager_error(pa.xp.linalg.inv, batch[1, ...])
    with raises_cleanly(type(eager)):
        pa.vmap(pa.xp.linalg.inv)(batch)

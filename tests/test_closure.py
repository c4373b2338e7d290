"""The namespace is closed under every transform: inside grad/vjp, jvp and vmap, every namespace function,
operator and method that receives a transform's tensor returns tensors of that transform (comparisons,
predicates, rounding, integer results and creations included), with the eager values; and
``array_namespace`` of any mix of polyad tensors is ``polyad.xp``.

The op table runs through the checking namespaces of ``polyad.testing.under_transform`` (the same ones the
official conformance suite runs against, ``make conformance``); the classes of results that used to leave
the transform are tested one by one below, against eager values and finite differences.
"""

import array_api_compat
import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import core
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.testing import check_grads
from polyad.testing.op_table import OP_TABLE, Sampler
from polyad.testing.under_transform import ClosureError, DerivativeRefused, namespace, run_under
from polyad.transforms.batching import BatchedTensor
from polyad.transforms.forward import DualTensor
from polyad.transforms.reverse import ReverseTensor

TRANSFORMS = ("vmap", "jvp", "vjp")
BX = dispatch.default_backend().xp


def arr(values):
    return BX.asarray(values, dtype=BX.float64)


def _row_cases():
    cases = []
    sampler = Sampler()
    for row in OP_TABLE:
        for i, sample in enumerate(row.samples(sampler)):
            for mode in TRANSFORMS:
                cases.append(pytest.param(row, i, mode, id=f"{row.name}-{sample.name or i}-{mode}"))
    return cases


@pytest.mark.filterwarnings("ignore::polyad.testing.under_transform.DerivativeRefused")
@pytest.mark.parametrize("row,i,mode", _row_cases())
def test_op_table_is_closed_under_transforms(row, i, mode):
    """Every op-table sample, called inside ``mode``: tensors of the transform, eager shapes, dtypes and
    values (the checks of ``run_under``)."""
    reason = row.skip_reason("closure")
    if reason:
        pytest.xfail(reason)
    sample = row.samples(Sampler())[i]
    run_under(mode, row.function(), sample.args, sample.kwargs, name=row.name)


# ------------------------------------------------------------------------------ operators and methods


def _operator_cases():
    s = Sampler(seed=3)
    x, y = s.float(3, 4), s.float(4)
    i, b = s.int(3, 4, low=-3, high=4), s.bool(3, 4)
    idx = s.int(2, low=0, high=3)
    cases = {
        "x > y": (lambda x, y: x > y, x, y),
        "x == 0": (lambda x: x == 0.5, x),
        "i != 2": (lambda i: i != 2, i),
        "x <= 1 (int)": (lambda i: i <= 1, i),
        "x // y": (lambda x, y: x // y, x, y),
        "x % y": (lambda x, y: x % y, x, y),
        "-x, abs, +": (lambda x: (-x, abs(x), +x), x),
        "~b, b & b, b | b, b ^ b": (lambda b: (~b, b & b, b | b, b ^ b), b),
        "i << 1, i >> 1, ~i": (lambda i: (i << 1, i >> 1, ~i), i),
        "x @ y": (lambda x, y: x @ y, x, y),
        "x ** 2, |y| ** x": (lambda x, y: (x**2, abs(y) ** x), x, y),
        "x[1:, ::2]": (lambda x: x[1:, ::2], x),
        "x[b]": (lambda x, b: x[b], x, b),
        "y[idx]": (lambda y, idx: y[idx], y, idx),
        "x[0, None, ...]": (lambda x: x[0, None, ...], x),
        "x.mT, x.T": (lambda x: (x.mT, x.T), x),
        "x.to_device": (lambda x: x.to_device(x.device), x),
        "x += y": (_iadd, x, y),
        "i *= 2": (_imul_int, i),
        "x[1:, ...] = y": (_setitem, x, y),
        "x[b] = 0": (_setitem_mask, x, b),
        "v = x[1:]; v += y (a view)": (_view_iadd, x, y),
        "x.mT[..., 0, :] = y[:3]; row of x read after": (_view_setitem, x, y),
        "reshape(x, -1)[:5] *= 2": (_flat_view_imul, x),
    }
    return [pytest.param(fn, args, mode, id=f"{name}-{mode}") for name, (fn, *args) in cases.items()
            for mode in TRANSFORMS]  # fmt: skip


def _iadd(x, y):
    x += y
    return x


def _imul_int(i):
    i *= 2
    return i


def _setitem(x, y):
    x[1:, ...] = y
    return x


def _view_iadd(x, y):
    v = x[1:, ...]
    v += y  # reaches x, as through NumPy's view
    return x


def _view_setitem(x, y):
    row = x[0, ...]
    x.mT[..., 0, :] = y[:3]  # writes x's first column: the row view sees its first element change
    return x, row


def _flat_view_imul(x):
    pxp.reshape(x, (-1,))[:5] *= 2.0
    return x


def _setitem_mask(x, b):
    x[b] = 0.0
    return x


@pytest.mark.parametrize("fn,args,mode", _operator_cases())
def test_operators_and_methods_are_closed(fn, args, mode):
    run_under(mode, fn, args, eager_lift=pa.Tensor)


def test_a_leak_is_reported():
    """The check fails loudly on a result that leaves the transform (here: a function that returns a
    backend array made from the traced value's primal)."""

    def leaks(x):
        return x._value * 2.0 if isinstance(x, pa.Tensor) and x._interp is not None else x * 2.0

    with pytest.raises(ClosureError, match="not a polyad tensor of the transform"):
        run_under("jvp", leaks, (arr([1.0, 2.0]),), name="leaks")


def test_a_refused_derivative_is_reported_and_closure_still_checked():
    """svd(full_matrices=True) of a non-square matrix has no derivative: jvp refuses it loudly; the check
    says so and checks the call again with constants of the level."""
    a = arr([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    with pytest.warns(DerivativeRefused, match="full_matrices"):
        run_under("jvp", pxp.linalg.svd, (a,), name="svd")


def test_checking_namespace_hands_out_checked_arrays():
    xp = namespace("vjp")
    x = xp.asarray(arr([1.0, -2.0, 3.0]))
    m = x > 0
    assert m.__array_namespace__() is xp
    assert bool(xp.all(xp.where(m, x, -x) == xp.abs(x)))
    assert int(xp.argmax(x)) == 2


# ------------------------------------------------------------------------------ each class, per transform


def _grad_level_outputs(f, *args):
    """``f``'s outputs as seen inside grad (through vjp): (type, has a tape entry) of each, and values."""
    seen = []

    def g(*a):
        out = f(*a)
        outs = out if isinstance(out, tuple | list) else (out,)
        seen.extend(outs)
        return pxp.sum(a[0]) * 0.0

    pa.grad(g)(*args)
    return seen


def _inside(transform, f, x):
    """The outputs of ``f(x)`` inside ``transform`` ("grad", "jvp", "vmap"), as a list, with the level."""
    seen = []

    def body(x):
        out = f(x)
        seen.append((core.active_interpreters()[-1], out if isinstance(out, tuple | list) else (out,)))
        return pxp.sum(x) if transform == "grad" else x

    if transform == "grad":
        pa.grad(body)(x)
    elif transform == "jvp":
        pa.jvp(body, (x,), (pxp.ones_like(x),))
    else:
        pa.vmap(body)(x)
    return seen[0]


_TENSOR_OF = {"grad": ReverseTensor, "jvp": DualTensor, "vmap": BatchedTensor}

CLASSES = {
    "comparisons": lambda x: (x > 0, pxp.equal(x, 0.5), pxp.less_equal(x, x), x != 1),
    "predicates": lambda x: (pxp.isnan(x), pxp.isinf(x), pxp.isfinite(x), pxp.signbit(x)),
    "rounding": lambda x: (
        pxp.floor(x),
        pxp.ceil(x),
        pxp.round(x),
        pxp.trunc(x),
        pxp.sign(x),
        pxp.floor_divide(x, 0.3),
        pxp.nextafter(x, 2.0),
    ),  # fmt: skip
    "*_like": lambda x: (
        pxp.zeros_like(x),
        pxp.ones_like(x),
        pxp.full_like(x, 2.0),
        pxp.empty_like(x, dtype=pxp.bool)[:0, ...],
        pxp.zeros_like(x, dtype=pxp.int64),
    ),  # fmt: skip
    "integer results": lambda x: (
        pxp.argmax(x),
        pxp.argmin(x, axis=0),
        pxp.argsort(x),
        pxp.searchsorted(pxp.sort(x[0, :]), x),
        pxp.count_nonzero(x > 0),
        *pxp.nonzero(x > 0),
        pxp.unique_values(pxp.round(x)),
    ),  # fmt: skip
    "casts": lambda x: (pxp.astype(x, pxp.bool), pxp.astype(x, pxp.int64), pxp.asarray(x, dtype=pxp.int32)),
}


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
@pytest.mark.parametrize("name", list(CLASSES))
def test_results_without_derivative_stay_in_the_transform(name, transform):
    f = CLASSES[name]
    x = arr([[0.3, -1.2, 2.5], [-0.7, 1.9, 0.0]])
    if transform == "vmap":  # two examples with results of the same lengths (nonzero, unique_values)
        x0 = x
        x = pxp.stack([x0, pxp.flip(x0, axis=1)])
    level, outs = _inside(transform, f, x)
    for k, o in enumerate(outs):
        assert isinstance(o, _TENSOR_OF[transform]) and o._interp is level, (name, k, type(o))
    # values equal the eager call's (vmap: per example, against a loop)
    if transform == "vmap":
        got = pa.vmap(lambda v: list(f(v)))(x)
        for k, g in enumerate(got):
            for j, xj in enumerate((x0, pxp.flip(x0, axis=1))):
                assert_close(to_numpy(g)[j], to_numpy(f(xj)[k]))
    else:
        for o, e in zip(outs, f(x)):
            assert_close(o._value, e)


def test_results_without_derivative_carry_none():
    """No tape entry under grad, a symbolic-zero tangent under jvp; ops on constants only add nothing."""
    x = arr([0.3, -1.2, 2.5])
    tape_sizes = []

    def f(x):
        level = core.active_interpreters()[-1]
        m = x > 0
        assert isinstance(m, ReverseTensor) and m._aux is None
        before = len(level.tape)
        z = pxp.zeros_like(x)
        c = pxp.where(m, z + 1.0, pxp.sin(z))  # only constants of the level: nothing recorded
        assert isinstance(c, ReverseTensor) and c._aux is None
        tape_sizes.append(len(level.tape) - before)
        return pxp.sum(x * c)

    assert_close(pa.grad(f)(x), to_numpy(x > 0).astype(float))
    assert tape_sizes == [0]

    def h(x):
        s = pxp.sign(x)
        assert isinstance(s, DualTensor) and s._aux is None
        return s * x

    _, t = pa.jvp(h, (x,), (arr([1.0, 1.0, 1.0]),))
    assert_close(t, np.sign(to_numpy(x)))


def test_slogdet_sign_is_a_tensor_of_the_transform():
    a = arr([[2.0, 1.0], [0.5, -3.0]])
    for transform in ("grad", "jvp"):
        level, (sign, logabs) = _inside(transform, lambda a: tuple(pxp.linalg.slogdet(a)), a)
        assert isinstance(sign, _TENSOR_OF[transform]) and sign._interp is level
        assert float(sign._value) == -1.0
    _, t = pa.jvp(lambda a: pxp.linalg.slogdet(a)[0], (a,), (pxp.ones_like(a),))
    assert_close(t, np.zeros(()))


def test_astype_bool_agrees_between_grad_and_jvp():
    """``astype(x, bool)`` is a tensor of the transform without a derivative in both modes, and a float
    cast of it multiplies like a constant."""
    x = arr([0.0, 1.5, -2.0])

    def f(x):
        mask = pxp.astype(x, pxp.bool)
        return pxp.sum(x**2 * pxp.astype(mask, x.dtype)), mask

    for transform in ("grad", "jvp"):
        level, (mask,) = _inside(transform, lambda x: f(x)[1], x)
        assert isinstance(mask, _TENSOR_OF[transform]) and mask._interp is level
        assert_close(mask._value, to_numpy(x).astype(bool))
    expected = 2 * to_numpy(x) * (to_numpy(x) != 0)
    assert_close(pa.grad(lambda x: f(x)[0])(x), expected)
    _, t = pa.jvp(lambda x: f(x)[0], (x,), (pxp.ones_like(x),))
    assert_close(t, np.sum(expected))
    check_grads(lambda x: f(x)[0], (x + 0.1,), order=2)


def test_broadcast_arrays_and_meshgrid_members_are_batched():
    """Members made from an unbatched input are tensors of the vmap level too (broadcast along it)."""
    x = arr([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c, v = arr([10.0, 20.0, 30.0]), arr([7.0])

    def f(row):
        level = core.active_interpreters()[-1]
        outs = [*pxp.broadcast_arrays(row[:, None], c), *pxp.meshgrid(row, v, indexing="ij")]
        assert all(isinstance(o, BatchedTensor) and o._interp is level for o in outs)
        return outs

    got = pa.vmap(f)(x)
    for j in range(3):
        r = x[j, :]
        expected = [*np.broadcast_arrays(to_numpy(r)[:, None], to_numpy(c)),
                    *np.meshgrid(to_numpy(r), to_numpy(v), indexing="ij")]  # fmt: skip
        for g, e in zip(got, expected):
            assert_close(to_numpy(g)[j], e)

    # differentiable in each member, constants or not
    def product(a, b):
        p, q = pxp.broadcast_arrays(a[:, None], b)
        return pxp.sum(p * q * q)

    check_grads(product, (arr([1.0, 2.0]), arr([0.5, -1.0, 2.0])), order=2)
    check_grads(lambda a, b: [g * 2.0 for g in pxp.meshgrid(a, b)], (arr([1.0, 2.0]), arr([0.5, -1.0, 2.0])))


def test_write_into_zeros_like_differentiates():
    """``y = zeros_like(x); y[1:] = sin(x[:-1])`` under grad and jvp, against finite differences."""

    def f(x):
        y = pxp.zeros_like(x)
        y[1:] = pxp.sin(x[:-1])
        y[0] = x[-1] ** 2
        return pxp.sum(y * x)

    x = arr([0.3, -1.2, 2.5, 0.7])
    check_grads(f, (x,), order=2)
    xs = to_numpy(x)
    expected = np.zeros(4)
    expected[:-1] += np.cos(xs[:-1]) * xs[1:]
    expected[1:] += np.sin(xs[:-1])
    expected[-1] += 2 * xs[-1] * xs[0]
    expected[0] += xs[-1] ** 2
    assert_close(pa.grad(f)(x), expected)
    # and under vmap, the written array becomes batched
    xb = pxp.stack([x, 2.0 * x])
    got = pa.vmap(f)(xb)
    assert_close(got, np.array([float(f(x)), float(f(2.0 * x))]))


def test_mask_from_a_comparison_goes_to_where_under_every_transform():
    def f(x):
        return pxp.sum(pxp.where(x > 0, pxp.sin(x), x**2))

    x = arr([0.3, -1.2, 2.5])
    check_grads(f, (x,), order=2)
    xs = to_numpy(x)
    assert_close(pa.grad(f)(x), np.where(xs > 0, np.cos(xs), 2 * xs))
    assert_close(pa.vmap(pa.grad(f))(pxp.stack([x, -x])), np.stack([np.where(v > 0, np.cos(v), 2 * v)
                                                                   for v in (xs, -xs)]))  # fmt: skip


def test_data_dependent_shapes_under_vmap():
    """nonzero and unique_* are stacked where every example gives the same lengths, else refused."""
    x = arr([[0.5, 0.0, 2.0], [0.0, 3.0, 1.0]])
    got = pa.vmap(lambda v: pxp.nonzero(v))(x)
    assert_close(got[0], np.array([[0, 2], [1, 2]]).astype(to_numpy(got[0]).dtype))
    vals = pa.vmap(pxp.unique_values)(x)
    assert_close(vals, np.stack([np.unique(v) for v in to_numpy(x)]))
    with pytest.raises(pa.ConcretizationError, match="differ per batch element"):
        pa.vmap(pxp.nonzero)(arr([[0.5, 0.0], [1.0, 3.0]]))
    assert core.current_level() == 0


def test_transforms_return_backend_arrays():
    """Outputs without a derivative leave the transform as backend arrays, not tensors."""
    x = arr([0.3, -1.2])
    kind = type(x)
    out, _ = pa.vjp(lambda x: (pxp.sin(x), x > 0), x)
    assert type(out[1]) is kind
    out, t = pa.jvp(lambda x: (x, pxp.argmax(x)), (x,), (pxp.ones_like(x),))
    assert not isinstance(out[1], pa.Tensor) and not isinstance(t[1], pa.Tensor)
    assert_close(t[1], np.zeros((), dtype=to_numpy(out[1]).dtype))
    g, aux = pa.grad(lambda x: (pxp.sum(x), pxp.isnan(x)), has_aux=True)(x)
    assert type(aux) is kind
    assert type(pa.vmap(lambda x: x > 0)(x)) is kind


# ------------------------------------------------------------------------------ array_namespace


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_array_namespace_of_any_mix_of_polyad_tensors(transform):
    x = arr([1.0, 2.0])
    seen = []

    def body(x):
        fresh = pxp.zeros(2)
        mask = x > 0
        assert isinstance(fresh, core.FreshTensor)
        seen.append(array_api_compat.array_namespace(x, mask, fresh, 1.0))
        seen.append(pa.array_namespace(x, mask, fresh, 2))
        return pxp.sum(x) if transform == "grad" else x

    if transform == "grad":
        pa.grad(body)(x)
    elif transform == "jvp":
        pa.jvp(body, (x,), (x,))
    else:
        pa.vmap(body)(pxp.stack([x, x]))
    assert len(seen) == 2 and all(ns is pxp for ns in seen), seen


def test_array_namespace_of_nested_and_abstract_arrays():
    x = arr([1.0, 2.0])
    # nested: tensors of two levels at once
    seen = []

    def outer(x):
        def inner(y):
            seen.append(array_api_compat.array_namespace(x, y, y > 0))
            return pxp.sum(x * y)

        return pa.grad(inner)(x)

    pa.vmap(outer)(pxp.stack([x, x]))
    assert seen == [pxp]
    shape_dtype = pa.ShapeDtype((2,), pxp.float64)
    assert array_api_compat.array_namespace(shape_dtype, pa.Tensor(x)) is pxp
    assert pa.array_namespace(shape_dtype, 3.0) is pxp


def test_array_namespace_of_fake_arrays():
    """A custom op's fake function receives abstract arrays whose namespace is ``polyad.xp``; they mix
    with ShapeDtypes and scalars, and the namespace's functions on them compute shapes only."""
    seen = []

    @pa.custom_op("closure_test::scale_add")
    def scale_add(x, y):
        return x * 2.0 + y

    def fake(x, y):
        xp = array_api_compat.array_namespace(x, y, 1.0)
        seen.append((xp, pa.array_namespace(x, y, pa.ShapeDtype((1,), pxp.float64))))
        return xp.empty_like(xp.broadcast_arrays(x, y)[0])

    scale_add.register_fake(fake)
    out = pa.eval_shape(scale_add, np.ones((3, 1)), np.ones(4))
    assert (out.shape, out.dtype) == ((3, 4), np.dtype("float64"))
    assert seen == [(pxp, pxp)]


def test_arrays_computed_from_fresh_arrays_stay_fresh():
    """What is computed from an array made inside a transform is again such an array (a FreshTensor): it
    mixes with the transform's tensors in one namespace and can be written into; outside, plain arrays."""
    x = arr([1.0, 2.0, 4.0])
    kind = type(x)

    def f(x):
        n = pxp.asarray(3.0)
        cond = 0 == n  # a Python scalar against a fresh array (SciPy's apply_where(ddof == n, ...))
        assert isinstance(cond, core.FreshTensor)
        assert array_api_compat.array_namespace(cond, x) is pxp
        scale = pxp.ones(3) * 2.0
        scale[0] = x[1]  # becomes a tensor of the transform
        return pxp.sum(pxp.where(cond, 0.0, x * scale / n))

    assert_close(pa.grad(f)(x), np.array([2.0, 2.0 + 1.0, 2.0]) / 3.0)  # d/dx of (x0 x1 + 2 x1 + 2 x2) / 3
    out = pa.vmap(lambda v: pxp.ones(3) * 2.0 + 0 * v)(pxp.stack([x, x]))
    assert type(out) is kind
    assert type(pxp.asarray(3.0) == 0) is not core.FreshTensor  # no transform active: a plain array


def test_array_namespace_still_rejects_foreign_objects():
    with pytest.raises(TypeError, match="list is not an array of a polyad backend"):
        pa.array_namespace(arr([1.0]), [1.0])


def test_checks_run_on_the_backend_under_test():
    assert dispatch.backend_of_array(arr([1.0])) is dispatch.default_backend()

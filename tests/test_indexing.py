"""Indexing on tensors: ``x[key]`` (basic, integer-array and boolean keys), the functionalised
``x[key] = v`` and in-place operators, under grad, jvp and vmap, against NumPy, finite differences and
per-example loops. array_api_strict accepts only the standard's indexing subset (integer arrays only
with ints over every axis, a boolean mask only as the sole index); cases outside it are skipped there."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad.core import dispatch
from polyad.ops.indexing import getitem, index_update, indexed_shape, split_key
from polyad.testing import check_grads, check_vmap

STRICT = pa.get_backend() == "array_api_strict"
STRICT_REASON = "array_api_strict rejects this key (outside the standard's indexing subset)"


def bxp():
    return dispatch.default_backend().xp


def arr(a):
    """A backend array from NumPy data."""
    return bxp().asarray(np.asarray(a))


def rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).uniform(-1, 1, shape)


I = np.array  # noqa: E741  (keys read best short)

# (name, x shape, key built from NumPy index arrays, accepted by array_api_strict)
KEYS = [
    ("int", (4, 3), (1, Ellipsis), True),
    ("negative int", (4, 3), (-1, Ellipsis), True),
    ("slices", (4, 5), (slice(1, 3), slice(None, None, 2)), True),
    ("negative step", (4, 5), (slice(None, None, -1), slice(4, 0, -2)), True),
    ("None and ellipsis", (2, 3, 4), (None, Ellipsis, 1), True),
    ("empty slice", (4, 3), (slice(2, 2), Ellipsis), True),
    ("array repeats", (5,), (I([0, 2, 2, 4, 2]),), True),
    ("arrays over all axes", (4, 3), (I([0, 3, 3]), I([1, 1, 2])), True),
    ("array and int", (4, 3, 2), (I([[0, 1], [3, 3]]), 2, I([1, 0])), True),
    ("broadcast arrays", (4, 3), (I([[0], [2]]), I([0, 1, 1])), True),
    ("array then slice", (4, 3), (I([0, 3, 3]), slice(None)), False),
    ("slice then array", (4, 3, 2), (slice(None), I([2, 0, 0, 1])), False),
    ("non-adjacent arrays", (4, 3, 2), (I([0, 1]), slice(None), I([1, 1])), False),
    ("int makes arrays non-adjacent", (4, 3, 2), (I([0, 3]), slice(None), 1), False),
    ("None breaks adjacency", (4, 3, 2), (slice(None), I([0, 2]), None, I([1, 0])), False),
    ("array after ellipsis", (2, 3, 4), (Ellipsis, I([3, 0])), False),
    ("negative index array", (4, 3), (I([-1, 0, -4]), slice(1, None)), False),
    (
        "boolean mask",
        (3, 4),
        (I([[True, False, True, True], [False] * 4, [True, True, False, False]]),),
        True,
    ),
    ("leading boolean mask", (3, 4), (I([True, False, True]),), True),
    ("boolean mask and slice", (3, 4), (slice(None), I([True, False, True, True])), False),
]


def _key(spec):
    return tuple(arr(k) if isinstance(k, np.ndarray) else k for k in spec)


def _case(spec_strict):
    if STRICT and not spec_strict:
        pytest.skip(STRICT_REASON)


@pytest.mark.parametrize("name,shape,spec,strict_ok", KEYS, ids=[k[0] for k in KEYS])
def test_getitem_value_and_shape(name, shape, spec, strict_ok):
    _case(strict_ok)
    x = rand(*shape)
    expected = x[spec]
    got = pa.Tensor(arr(x))[_key(spec)]
    assert_close(got, expected)
    # the shape rule (abstract evaluation), booleans aside (their length depends on the data)
    if not any(isinstance(k, np.ndarray) and k.dtype == bool for k in spec):
        structure, arrays = split_key(spec)
        assert indexed_shape(shape, structure, arrays) == expected.shape
        aval = pa.eval_shape(lambda t: t[_key(spec)], arr(x))
        assert aval.shape == expected.shape


def test_indexed_shape_ints_count_as_advanced():
    # NumPy: with an array present, ints are advanced indices, so they break or keep adjacency
    x = np.zeros((2, 3, 4, 5))
    for spec in [
        (0, slice(None), I([1, 2])),
        (slice(None), 0, I([1, 2, 0])),
        (I([1, 0]), slice(None), 0),
        (slice(None), I([1, 0]), 0, slice(None)),
        (Ellipsis, 2, I([[1], [0]])),
        (1, None, I([0, 1])),
    ]:
        structure, arrays = split_key(spec)
        assert indexed_shape(x.shape, structure, arrays) == x[spec].shape, spec


@pytest.mark.parametrize("name,shape,spec,strict_ok", KEYS, ids=[k[0] for k in KEYS])
def test_getitem_grads(name, shape, spec, strict_ok):
    _case(strict_ok)
    key = _key(spec)
    check_grads(lambda x: x[key], (arr(rand(*shape)),), order=2)


def test_getitem_vjp_accumulates_repeated_indices():
    x = arr(rand(5))
    idx = arr(I([0, 2, 2, 4, 2]))
    g = pa.grad(lambda x: pa.xp.sum(x[idx] * x[idx]))(x)
    xn = to_numpy(x)
    assert_close(g, 2 * xn * np.array([1, 0, 3, 0, 1]))
    # two axes, repeated pairs
    x2 = arr(rand(3, 2))
    key = (arr(I([0, 0, 2])), arr(I([1, 1, 0])))
    g2 = pa.grad(lambda x: pa.xp.sum(x[key]))(x2)
    assert_close(g2, np.array([[0.0, 2.0], [0.0, 0.0], [1.0, 0.0]]))


# ------------------------------------------------------------------------------ vmap of getitem

VMAP_KEYS = [k for k in KEYS if not any(isinstance(a, np.ndarray) and a.dtype == bool for a in k[2])]


@pytest.mark.parametrize("name,shape,spec,strict_ok", VMAP_KEYS, ids=[k[0] for k in VMAP_KEYS])
def test_vmap_getitem_batched_x(name, shape, spec, strict_ok):
    _case(strict_ok)
    key = _key(spec)
    xb = arr(rand(3, *shape))
    check_vmap(lambda x: x[key], (xb,), (0,))
    check_vmap(lambda x: x[key], (bxp().moveaxis(xb, 0, -1),), (-1,), out_dims=-1)


def _batched_index_cases():
    """(name, x shape, spec, position of the index array to batch, strict_ok)."""
    out = []
    for name, shape, spec, ok in VMAP_KEYS:
        for pos, k in enumerate(spec):
            if isinstance(k, np.ndarray):
                out.append((f"{name}-array{pos}", shape, spec, pos, ok))
    return out


BATCHED_INDEX = _batched_index_cases()


@pytest.mark.parametrize("name,shape,spec,pos,strict_ok", BATCHED_INDEX, ids=[c[0] for c in BATCHED_INDEX])
def test_vmap_getitem_batched_indices(name, shape, spec, pos, strict_ok):
    """Batched index arrays batch by rule (an arange over the batch), with or without a batched x."""
    _case(strict_ok)
    base = spec[pos]
    axis_len = min(shape)  # valid along any axis
    rng = np.random.default_rng(pos)
    ib = np.stack(
        [base, rng.integers(-axis_len, axis_len, base.shape), rng.integers(0, axis_len, base.shape)]
    )
    if STRICT:
        ib = ib % axis_len  # negative indices are outside the standard

    def f(x, i):
        k = list(_key(spec))
        k[pos] = i
        return _get(x, tuple(k))

    x = arr(rand(*shape))
    with _no_loop():
        check_vmap(f, (x, arr(ib)), (None, 0))
        check_vmap(f, (arr(rand(3, *shape)), arr(ib)), (0, 0))
        check_vmap(f, (bxp().moveaxis(arr(rand(3, *shape)), 0, 1), bxp().moveaxis(arr(ib), 0, -1)), (1, -1),
                   out_dims=-1)  # fmt: skip
        # gradients of a batched-index gather: per-example scatter-adds
        g = pa.vmap(pa.grad(lambda x, i: pa.xp.sum(f(x, i) ** 2)), in_dims=(None, 0))(x, arr(ib))
        loss = pa.grad(lambda x, i: pa.xp.sum(f(x, i) ** 2))
        for b in range(3):
            assert_close(g[b, ...], loss(x, arr(ib[b])))


def _t(x):
    return x if isinstance(x, pa.Tensor) else pa.Tensor(x)


def _get(x, key):
    """``x[key]``; a raw backend array cannot take a tensor key, so it goes through the functional form."""
    return x[key] if isinstance(x, pa.Tensor) else getitem(x, key)


def _set(y, key, v):
    """``y[key] = v`` on a tensor; the functional form on a raw array (whose ``__setitem__`` is NumPy's)."""
    if isinstance(y, pa.Tensor):
        y[key] = v
        return y
    return index_update(y, key, v)


def _raw(y):
    """A level-0 tensor's backend array (what the test helpers compare); tracers stay as they are."""
    return y.concrete() if isinstance(y, pa.Tensor) and y.level == 0 else y


class _no_loop:
    """Asserts that no op falls back to vmap's per-example loop inside the block."""

    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings(record=True)
        self.log = self._w.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._w.__exit__(*exc)
        loops = [str(w.message) for w in self.log if "loop" in str(w.message)]
        assert not loops, loops


def test_vmap_boolean_mask():
    if STRICT:
        # a lone mask with x batched is fine on strict: the batch axis moves last, the key stays lone
        pass
    mask = I([True, False, True])
    xb = arr(rand(4, 3, 2))
    with _no_loop():
        check_vmap(lambda x: x[arr(mask)], (xb,), (0,))
        check_vmap(lambda x: pa.xp.sum(x[arr(mask)] ** 2), (xb,), (0,))


# ------------------------------------------------------------------------------ functional setitem

UPDATE_KEYS = [
    ("int", (4, 3), (1, Ellipsis), (3,), True),
    ("slices, broadcast value", (4, 5), (slice(1, 3), slice(None, None, 2)), (3,), True),
    ("negative step", (4, 5), (slice(None, None, -1), 2), (4,), True),
    ("arrays", (4, 3), (I([0, 3]), I([1, 2])), (2,), True),
    ("array and int", (4, 3, 2), (I([[0, 1], [3, 2]]), 2, I([1, 0])), (2, 2), True),
    ("array then slice", (4, 3), (I([0, 3]), slice(None)), (2, 3), False),
    ("slice then array", (4, 3, 2), (slice(None), I([2, 0])), (2, 2), False),
    ("non-adjacent", (4, 3, 2), (I([0, 1]), slice(None), I([1, 1])), (3,), False),
    (
        "boolean mask",
        (3, 4),
        (I([[True, False, True, True], [False] * 4, [True, True, False, False]]),),
        (),
        True,
    ),
]


@pytest.mark.parametrize("name,shape,spec,vshape,strict_ok", UPDATE_KEYS, ids=[k[0] for k in UPDATE_KEYS])
def test_setitem_grads_flow_to_old_x_and_value(name, shape, spec, vshape, strict_ok):
    _case(strict_ok)
    key = _key(spec)

    def f(x, v):
        y = _set(x * 1.0, key, v * 2.0)
        return y * x  # the old x matters outside the written region; the new values inside

    x, v = arr(rand(*shape)), arr(rand(*vshape, seed=3))
    xn, vn = rand(*shape), rand(*vshape, seed=3)
    yn = xn.copy()
    yn[spec] = vn * 2.0
    assert_close(f(x, v), yn * xn)
    check_grads(f, (x, v), order=2)
    # exact gradient w.r.t. v: d sum(y * x)/dv = 2 * sum over the written positions of x
    gv = pa.grad(lambda v: pa.xp.sum(f(x, v)))(v)
    written = np.zeros(shape)
    written[spec] = 1.0
    expected = np.broadcast_to(2.0 * xn[spec], np.broadcast_shapes(xn[spec].shape, vn.shape))
    expected = expected.reshape((-1,) + vn.shape).sum(0) if vn.shape != expected.shape else expected
    assert_close(gv, expected)


@pytest.mark.parametrize("name,shape,spec,vshape,strict_ok", UPDATE_KEYS, ids=[k[0] for k in UPDATE_KEYS])
def test_setitem_vmap(name, shape, spec, vshape, strict_ok):
    _case(strict_ok)
    key = _key(spec)

    def f(x, v):
        return _set(x * 1.0, key, v)

    xb, vb = arr(rand(3, *shape)), arr(rand(3, *vshape, seed=5))
    x, v = arr(rand(*shape)), arr(rand(*vshape, seed=5))
    with _no_loop():
        check_vmap(f, (xb, vb), (0, 0))
        check_vmap(f, (xb, v), (0, None))
        check_vmap(f, (x, vb), (None, 0))
        if vshape:
            check_vmap(f, (bxp().moveaxis(xb, 0, -1), bxp().moveaxis(vb, 0, -1)), (-1, -1), out_dims=1)
        # jvp of a write inside vmap: tangents of old x outside, of v inside
        tx, tv = arr(rand(*shape, seed=7)), arr(rand(*vshape, seed=8))
        _, t = pa.vmap(lambda x, v: pa.jvp(f, (x, v), (tx, tv)), in_dims=(0, 0))(xb, vb)
        _, t0 = pa.jvp(f, (x, v), (tx, tv))
        assert_close(t[0, ...], t0)


def test_setitem_batched_index_array():
    if STRICT:
        pytest.skip("array_api_strict has no integer-array assignment (outside the standard)")

    def f(x, i, v):
        return _set(x * 1.0, (i,), v)

    x = arr(rand(5, 2))
    ib = arr(I([[0, 3], [4, 1], [2, 2]]))
    vb = arr(rand(3, 2, 2, seed=2))
    with _no_loop():
        check_vmap(f, (x, ib, vb), (None, 0, 0))
        check_vmap(f, (arr(rand(3, 5, 2)), ib, arr(rand(2, seed=4))), (0, 0, None))


def test_setitem_does_not_mutate_callers_array():
    x = arr(rand(4))
    before = to_numpy(x).copy()

    def f(x):
        x[1] = x[0] * 3.0
        x[arr(I([2, 3]))] = 0.0 if STRICT else x[arr(I([0, 0]))]
        return pa.xp.sum(x * x)

    pa.grad(f)(x)
    pa.jvp(f, (x,), (arr(rand(4, seed=1)),))
    pa.vmap(f)(arr(rand(2, 4)))
    t = pa.Tensor(x)
    t[0] = 5.0
    assert_close(x, before)
    assert float(t[0]) == 5.0
    # gradient: f = sum(y^2), y = [x0, 3 x0, x0, x0] (numpy) or [x0, 3 x0, 0, 0] (strict)
    g = pa.grad(f)(x)
    x0 = before[0]
    expected = np.array([2 * x0 * (1 + 9 + (0 if STRICT else 2)), 0.0, 0.0, 0.0])
    assert_close(g, expected)


def test_inplace_operators():
    """``z = x; z += y`` rebinds the tensor object itself (NumPy's aliasing), out of place underneath."""
    x, y = arr(rand(3)), arr(rand(3, seed=1))
    before = to_numpy(x).copy()

    def f(x, y):
        z = x
        z += y  # z is x: both now hold x + y
        z *= x  # (x + y)^2
        z -= 1.0
        z /= 2.0
        return z

    xn, yn = before.copy(), to_numpy(y)
    assert_close(_raw(f(pa.Tensor(x), y)), f(xn.copy(), yn))
    assert_close(x, before)
    gx, gy = pa.grad(lambda x, y: pa.xp.sum(f(x, y)), argnums=(0, 1))(x, y)
    assert_close(gx, xn + yn)
    assert_close(gy, xn + yn)
    assert_close(x, before)

    def g(x, y):  # no aliasing: finite differences call it on raw arrays, where += is NumPy's own
        z = x * 1.0
        z += y
        z *= x
        z **= 2.0
        return z

    check_grads(g, (x, y), order=2)
    check_vmap(g, (arr(rand(2, 3)), arr(rand(2, 3, seed=4))), (0, 0))
    check_vmap(g, (arr(rand(2, 3)), y), (0, None))


def test_take_along_axis_vmap_of_grad():
    x = arr(rand(3, 4))
    ib = arr(I([[[0, 1], [2, 2], [3, 0]], [[1, 1], [0, 0], [3, 3]]]))
    g = pa.vmap(pa.grad(lambda x, i: pa.xp.sum(pa.xp.take_along_axis(x, i, axis=1) ** 2)), in_dims=(None, 0))(
        x, ib
    )
    xn = to_numpy(x)
    for b in range(2):
        idx = to_numpy(ib)[b]
        ref = np.zeros_like(xn)
        np.add.at(ref, (np.arange(3)[:, None], idx), 2 * np.take_along_axis(xn, idx, axis=1))
        assert_close(g[b, ...], ref)

"""The 2025.12 revision of the Array API standard in polyad's namespace (``linalg.eig``/``eigvals``:
tests/test_eig.py): ``broadcast_shapes`` (unknown sizes included), ``isin`` against NumPy's, under
transforms and by both of its batching paths, the revision's changes to existing functions, and the
version polyad reports."""

import numpy as np
import pytest
from helpers import to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.ops import sets


def _b(a):
    return dispatch.default_backend().xp.asarray(np.asarray(a))


# ------------------------------------------------------------------------------ broadcast_shapes


def test_broadcast_shapes_matches_numpy():
    rng = np.random.default_rng(0)
    for _ in range(200):
        ndim = rng.integers(0, 4)
        base = tuple(int(d) for d in rng.integers(0, 4, ndim))
        shapes = []
        for _ in range(rng.integers(1, 4)):  # each a suffix of base with some sizes made 1
            k = rng.integers(0, ndim + 1)
            shapes.append(tuple(1 if rng.random() < 0.3 else d for d in base[ndim - k :]))
        assert pxp.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes), shapes
    assert pxp.broadcast_shapes() == ()


@pytest.mark.parametrize(
    "shapes,expected",
    [
        (((None, 1), (5,)), (None, 5)),
        (((None,), (1,)), (None,)),
        (((None, 3), (2, 1)), (2, 3)),
        (((None,), (None,)), (None,)),
        (((4, None), (3, 1, 1)), (3, 4, None)),
    ],
)
def test_broadcast_shapes_propagates_unknown_sizes(shapes, expected):
    assert pxp.broadcast_shapes(*shapes) == expected


@pytest.mark.parametrize(
    "shapes,error,words",
    [
        (((2,), (3,)), ValueError, "cannot be broadcast together"),
        (((2, 5), (None, 3)), ValueError, "cannot be broadcast together"),
        ((3,), TypeError, "must be a tuple of ints"),
        (((1.5,),), TypeError, "must hold ints >= 0"),
        (((-1,),), TypeError, "must hold ints >= 0"),
        (((True,),), TypeError, "must hold ints >= 0"),
    ],
)
def test_broadcast_shapes_errors(shapes, error, words):
    with pytest.raises(error, match=words):
        pxp.broadcast_shapes(*shapes)


# ------------------------------------------------------------------------------ isin


def _ints(rng, *shape):
    return rng.integers(0, 6, shape)


def test_isin_matches_numpy():
    rng = np.random.default_rng(1)
    for shape1, shape2 in [((3, 4), (5,)), ((7,), (2, 3)), ((), (4,)), ((2, 0), (3,)), ((4,), (0,))]:
        x1, x2 = _ints(rng, *shape1), _ints(rng, *shape2)
        for invert in (False, True):
            got = pxp.isin(_b(x1), _b(x2), invert=invert)
            np.testing.assert_array_equal(to_numpy(got), np.isin(x1, x2, invert=invert))
            assert to_numpy(got).dtype == np.bool_


def test_isin_python_scalars():
    x = np.array([1, 4, 2])
    np.testing.assert_array_equal(to_numpy(pxp.isin(4, _b(x))), np.asarray(True))
    assert to_numpy(pxp.isin(5, _b(x))).shape == ()
    np.testing.assert_array_equal(to_numpy(pxp.isin(_b(x), 2, invert=True)), [True, True, False])
    with pytest.raises(TypeError, match="at least one of x1 and x2 must be an array"):
        pxp.isin(1, 2)
    with pytest.raises(TypeError, match="invert must be a bool"):
        pxp.isin(_b(x), _b(x), invert=1)
    with pytest.raises(TypeError, match="arrays or Python ints"):
        pxp.isin(_b(x), "ab")


def test_isin_generic_kernel():
    """The comparison kernel for a library without ``isin`` equals NumPy's."""

    class WithoutIsin:
        def __init__(self, xp):
            self._xp = xp

        def __getattr__(self, name):
            if name == "isin":
                raise AttributeError(name)
            return getattr(self._xp, name)

    ns = WithoutIsin(dispatch.default_backend().xp)
    rng = np.random.default_rng(2)
    x1, x2 = _ints(rng, 3, 4), _ints(rng, 2, 3)
    for invert in (False, True):
        got = sets._isin_kernel(ns, _b(x1), _b(x2), invert=invert)
        np.testing.assert_array_equal(to_numpy(got), np.isin(x1, x2, invert=invert))


@pytest.mark.parametrize("dims", [(0, None), (None, 0), (0, 0), (1, 0), (None, 1)])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_vmap_matches_a_loop(dims, invert):
    """An unbatched x2 is one set (the op on the batched x1); a batched x2 is a set per example."""
    rng = np.random.default_rng(3)
    x1 = _ints(rng, 3, 4) if dims[0] == 1 else _ints(rng, 4, 3)
    x2 = _ints(rng, 2, 4) if dims[1] == 1 else _ints(rng, 4, 2)
    got = pa.vmap(lambda a, b: pxp.isin(a, b, invert=invert), in_dims=dims)(_b(x1), _b(x2))
    loop = []
    for k in range(4):
        a = x1 if dims[0] is None else np.take(x1, k, axis=dims[0])
        b = x2 if dims[1] is None else np.take(x2, k, axis=dims[1])
        loop.append(np.isin(a, b, invert=invert))
    np.testing.assert_array_equal(to_numpy(got), np.stack(loop))


def test_isin_is_a_mask_under_transforms():
    """No derivative flows through isin; it masks a differentiable computation."""
    labels, keep = np.array([0, 3, 1, 3, 2]), np.array([3, 2])
    x = np.linspace(0.5, 2.5, 5)

    def loss(v):
        return pxp.sum(pxp.where(pxp.isin(_b(labels), _b(keep)), v**2, 0.0))

    np.testing.assert_allclose(to_numpy(pa.grad(loss)(_b(x))), np.where(np.isin(labels, keep), 2 * x, 0.0))
    # the integer part of a traced value, tested: a boolean tensor inside jvp, its tangent None -> zeros
    out, tangent = pa.jvp(lambda v: pxp.isin(pxp.astype(v, pxp.int64), _b(keep)), (_b(x),), (_b(np.ones(5)),))
    np.testing.assert_array_equal(to_numpy(out), np.isin(x.astype(np.int64), keep))
    assert not np.any(to_numpy(tangent))
    np.testing.assert_array_equal(to_numpy(pa.jit(pxp.isin)(_b(labels), _b(keep))), np.isin(labels, keep))


# ------------------------------------------------------------------------------ the revision's other changes


def test_reported_version_and_namespace_requests():
    assert pxp.__array_api_version__ == "2025.12"
    array_api_compat = pytest.importorskip("array_api_compat")
    t = pa.Tensor(_b(np.ones(2)))
    assert array_api_compat.array_namespace(t, api_version="2025.12") is pxp
    with pytest.raises(ValueError, match="2026.12"):
        t.__array_namespace__(api_version="2026.12")


def test_tuples_where_the_revision_says_tuples():
    a, b = _b(np.ones(3)), _b(np.ones((2, 1)))
    assert isinstance(pxp.broadcast_arrays(a, b), tuple)
    assert isinstance(pxp.meshgrid(a, a), tuple)
    assert isinstance(pxp.__array_namespace_info__().devices(), tuple)
    seen = []
    pa.grad(lambda v: (seen.append(type(pxp.meshgrid(v, v))), pxp.sum(v))[1])(a)
    assert seen == [tuple]


def test_revision_updates_to_existing_functions():
    """expand_dims takes a tuple of axes, permute_dims negative axes, searchsorted a Python scalar."""
    x = _b(np.arange(6.0).reshape(2, 3))
    assert tuple(pxp.expand_dims(x, axis=(0, 3)).shape) == (1, 2, 3, 1)
    np.testing.assert_array_equal(to_numpy(pxp.permute_dims(x, (-1, -2))), np.arange(6.0).reshape(2, 3).T)
    assert int(pxp.searchsorted(_b(np.arange(5.0)), 2.5)) == 3

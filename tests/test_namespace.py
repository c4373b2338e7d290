"""polyad.xp as an Array API namespace: the Tensor's metadata and Python operators (reflected forms with
raw arrays and Python scalars), conversions to Python scalars, ``__array_namespace__``, the fast path
(raw arrays in, raw arrays out), mixing libraries, the inspection namespace, and the creation and dtype
behaviour the op table cannot express (devices and libraries of created arrays, undefined ``empty``
values, ``to_device``, ``finfo``/``iinfo`` objects)."""

import math
import operator

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch


@pytest.fixture
def bxp():
    """The default backend's own namespace (raw arrays and references)."""
    return dispatch.default_backend().xp


def _arr(bxp, values, dtype=None):
    return bxp.asarray(values, dtype=dtype if dtype is not None else bxp.float64)


def _other_backend():
    """A loaded backend other than the default (numpy <-> array_api_strict), or skip."""
    default = dispatch.default_backend().name
    other = "array_api_strict" if default != "array_api_strict" else "numpy"
    if other not in dispatch.usable_backends():
        pytest.skip(f"{other} is not installed")
    return dispatch.load_backend(other)


# ------------------------------------------------------------------------------ Tensor metadata


def test_tensor_metadata(bxp):
    raw = bxp.reshape(bxp.arange(6, dtype=bxp.float32), (2, 3))
    t = pa.Tensor(raw)
    assert t.shape == (2, 3) and isinstance(t.shape, tuple)
    assert t.dtype == bxp.float32
    assert t.device == raw.device
    assert t.ndim == 2 and t.size == 6 and len(t) == 2
    assert t.mT.shape == (3, 2) and t.T.shape == (3, 2)
    assert_close(t.mT, bxp.matrix_transpose(raw))
    # .T as NumPy's: the axes reversed for any ndim (the standard defines only 2-D), a 1-D tensor itself
    cube = bxp.reshape(bxp.arange(24, dtype=bxp.float64), (2, 3, 4))
    assert_close(pa.Tensor(cube).T, bxp.permute_dims(cube, (2, 1, 0)))
    vector = pa.Tensor(bxp.arange(3, dtype=bxp.float64))
    assert vector.T is vector
    zero_d = pa.Tensor(bxp.asarray(1.0))
    assert zero_d.shape == () and zero_d.ndim == 0 and zero_d.size == 1
    with pytest.raises(TypeError):
        len(zero_d)
    assert pa.Tensor(bxp.ones((0, 4))).size == 0


# ------------------------------------------------------------------------------ operators

ARITH = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
BITWISE = ["and_", "or_", "xor", "lshift", "rshift"]


def _float_pair(bxp):
    return _arr(bxp, [[0.5, 1.5, 2.0], [1.25, 0.75, 3.0]]), _arr(bxp, [1.5, 0.5, 2.0])


def _int_pair(bxp):
    a = bxp.asarray([[1, 6, 3], [4, 5, 7]], dtype=bxp.int64)
    b = bxp.asarray([1, 2, 3], dtype=bxp.int64)
    return a, b


def _check_forms(bxp, name, a, b, scalar):
    op = getattr(operator, name)
    expected = op(a, b)
    ta, tb = pa.Tensor(a), pa.Tensor(b)
    for got in (op(ta, tb), op(ta, b), op(a, tb)):
        assert isinstance(got, pa.Tensor), (name, type(got))
        assert_close(got, expected)
    for got, want in ((op(ta, scalar), op(a, scalar)), (op(scalar, ta), op(scalar, a))):
        assert isinstance(got, pa.Tensor), (name, type(got))
        assert_close(got, want)


@pytest.mark.parametrize("name", ARITH + COMPARE)
def test_arithmetic_and_comparison_operators(bxp, name):
    a, b = _float_pair(bxp)
    _check_forms(bxp, name, a, b, 2.0)


@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_operators(bxp, name):
    a, b = _int_pair(bxp)
    _check_forms(bxp, name, a, b, 1)


def test_bool_operators(bxp):
    a = bxp.asarray([True, False, True])
    b = bxp.asarray([True, True, False])
    for name in ("and_", "or_", "xor"):
        _check_forms(bxp, name, a, b, True)
    assert_close(~pa.Tensor(a), ~a)


def test_matmul_both_orders(bxp):
    w = _arr(bxp, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    x = _arr(bxp, [0.5, -1.0])
    m = _arr(bxp, [[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]])
    got = w @ pa.Tensor(x)  # raw array on the left defers to the tensor's __rmatmul__
    assert isinstance(got, pa.Tensor)
    assert_close(got, w @ x)
    assert_close(pa.Tensor(w) @ x, w @ x)
    assert_close(m @ pa.Tensor(w), m @ w)


def test_reflected_scalar_forms_with_derivatives(bxp):
    # ``2.0 - x`` and ``x * W`` inside grad: the reflected operators reach the ops
    w = _arr(bxp, [1.0, 2.0, 3.0])
    x0 = _arr(bxp, [0.1, 0.2, 0.3])
    g = pa.grad(lambda x: pxp.sum((2.0 - x) * w + w * x**2 / 2.0 + 1.0 / (x + 1.0)))(x0)
    expected = -w + w * x0 - 1.0 / (x0 + 1.0) ** 2
    assert_close(g, expected)


def test_unary_operators(bxp):
    a, _ = _float_pair(bxp)
    t = pa.Tensor(a)
    assert_close(-t, -a)
    assert_close(+t, +a)
    assert_close(abs(pa.Tensor(-a)), a)
    i, _ = _int_pair(bxp)
    assert_close(~pa.Tensor(i), ~i)


@pytest.mark.parametrize("name", ["iadd", "isub", "imul", "itruediv", "ipow"])
def test_inplace_operators_rebind_the_tensor(bxp, name):
    a, b = _float_pair(bxp)
    t = pa.Tensor(a)
    same = t
    t = getattr(operator, name)(t, b)
    assert t is same  # updated in place (functionalised)
    assert_close(t, getattr(operator, name[1:])(a, b))


def test_numpy_arrays_defer_to_tensors_without_object_arrays():
    a = np.arange(3.0)
    t = pa.Tensor(np.ones(3))
    for got in (a + t, a * t, a - t, a @ t, a < t, a == t, 2.0 - t):
        assert isinstance(got, pa.Tensor), type(got)
        assert to_numpy(got).dtype != object


# ------------------------------------------------------------------------------ Python scalars


def test_python_scalar_conversions(bxp):
    assert float(pa.Tensor(bxp.asarray(2.5))) == 2.5
    assert int(pa.Tensor(bxp.asarray(7))) == 7
    assert bool(pa.Tensor(bxp.asarray(True))) is True
    assert bool(pa.Tensor(bxp.asarray(0.0))) is False
    assert complex(pa.Tensor(bxp.asarray(1.0 + 2.0j))) == 1.0 + 2.0j
    assert [10, 20, 30][pa.Tensor(bxp.asarray(2))] == 30  # __index__
    assert operator.index(pa.Tensor(bxp.asarray(1))) == 1


def test_python_scalars_inside_transforms(bxp):
    x0 = bxp.asarray(0.5)
    # grad: the value is concrete, so Python control flow on it works
    assert float(pa.grad(lambda x: x**2 if float(x) > 0 else -x)(x0)) == 1.0
    # vmap: a batched tensor has no single value
    with pytest.raises(pa.ConcretizationError):
        pa.vmap(lambda x: float(x))(bxp.asarray([1.0, 2.0]))
    with pytest.raises(pa.ConcretizationError):
        pa.eval_shape(lambda x: bool(x), x0)


# ------------------------------------------------------------------------------ namespaces


def test_array_namespace_dunder(bxp):
    t = pa.Tensor(bxp.ones(2))
    assert t.__array_namespace__() is pxp
    assert t.__array_namespace__(api_version="2025.12") is pxp
    assert t.__array_namespace__(api_version="2024.12") is pxp
    assert t.__array_namespace__(api_version="2023.12") is pxp
    with pytest.raises(ValueError, match="2099.12"):
        t.__array_namespace__(api_version="2099.12")
    assert pxp.__array_api_version__ == "2025.12"


def test_array_api_compat_finds_polyad():
    array_api_compat = pytest.importorskip("array_api_compat")
    t = pa.Tensor(dispatch.default_backend().xp.ones(2))
    assert array_api_compat.array_namespace(t) is pxp
    assert array_api_compat.array_namespace(t, t) is pxp
    # inside a transform the tracers answer the same
    seen = []
    pa.grad(lambda x: (seen.append(array_api_compat.array_namespace(x)), pxp.sum(x))[1])(
        dispatch.default_backend().xp.ones(2)
    )
    assert seen == [pxp]


def test_pa_array_namespace_on_mixes(bxp):
    raw = bxp.ones(2)
    t = pa.Tensor(raw)
    assert pa.array_namespace(raw) is pxp
    assert pa.array_namespace(t, raw, 1.0, None) is pxp
    with pytest.raises(TypeError, match="str"):
        pa.array_namespace(raw, "not an array")
    other = _other_backend()
    with pytest.raises(TypeError) as info:
        pa.array_namespace(raw, other.xp.ones(2))
    assert dispatch.default_backend().name in str(info.value) and other.name in str(info.value)


def test_fast_path_returns_raw_arrays(bxp):
    raw = _arr(bxp, [0.1, 0.2, 0.3])
    kind = type(raw)
    for out in (pxp.sin(raw), pxp.add(raw, 1.0), pxp.sum(raw), pxp.zeros_like(raw),
                pxp.tril(bxp.ones((2, 2))), pxp.astype(raw, bxp.float32), pxp.asarray(raw),
                pxp.exp(raw) * 2.0):  # fmt: skip
        assert not isinstance(out, pa.Tensor)
        assert isinstance(out, dispatch.default_backend().array_types), type(out)
    assert type(pxp.multiply(raw, raw)) is kind
    assert_close(pxp.sin(raw), bxp.sin(raw))


def test_tensors_in_tensors_out(bxp):
    t = pa.Tensor(_arr(bxp, [0.1, 0.2]))
    for out in (pxp.sin(t), pxp.add(t, 1.0), pxp.zeros_like(t), pxp.astype(t, bxp.float32)):
        assert isinstance(out, pa.Tensor)


def test_mixing_libraries_is_a_clear_type_error(bxp):
    other = _other_backend()
    mine = bxp.ones(3)
    theirs = other.xp.ones(3)
    for call in (lambda: pxp.add(mine, theirs), lambda: pxp.add(theirs, mine),
                 lambda: pxp.stack([mine, theirs]), lambda: pa.Tensor(mine) + theirs):  # fmt: skip
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert dispatch.default_backend().name in msg and other.name in msg, msg


def test_namespace_info(bxp):
    info = pxp.__array_namespace_info__()
    caps = info.capabilities()
    assert isinstance(caps, dict) and "boolean indexing" in caps and "data-dependent shapes" in caps
    devices = info.devices()
    assert isinstance(devices, tuple) and info.default_device() in devices  # a tuple since 2025.12
    defaults = info.default_dtypes()
    assert defaults["real floating"] == bxp.float64
    assert defaults["integral"] == bxp.int64
    assert defaults["complex floating"] == bxp.complex128
    assert defaults["indexing"] == bxp.int64
    floats = info.dtypes(kind="real floating")
    assert set(floats) == {"float32", "float64"} and floats["float32"] == bxp.float32
    assert len(info.dtypes()) == 13
    assert set(info.dtypes(kind="integral")) == {f"{u}int{b}" for u in ("", "u") for b in (8, 16, 32, 64)}


def test_constants_and_dtypes(bxp):
    assert pxp.e == math.e and pxp.pi == math.pi and pxp.newaxis is None
    assert math.isinf(pxp.inf) and math.isnan(pxp.nan)
    assert isinstance(pxp.pi, float)
    for name in ("bool", "int8", "uint64", "float32", "float64", "complex64", "complex128"):
        assert getattr(pxp, name) == getattr(bxp, name)
    assert pxp.zeros(2).dtype == pxp.float64


# ------------------------------------------------------------------------------ creation


def test_created_arrays_follow_default_backend_and_device(bxp):
    backend = dispatch.default_backend()
    device = backend.xp.__array_namespace_info__().default_device()
    for out in (pxp.zeros(2), pxp.ones((1, 2)), pxp.full(2, 3.0), pxp.arange(3), pxp.eye(2),
                pxp.linspace(0.0, 1.0, 3), pxp.empty(2), pxp.asarray([1.0, 2.0])):  # fmt: skip
        assert isinstance(out, backend.array_types)
        assert out.device == device


def test_creation_on_another_librarys_device(bxp):
    other = _other_backend()
    dev = other.xp.__array_namespace_info__().default_device()
    for out in (pxp.zeros(2, device=dev), pxp.full((2,), 1.5, device=dev), pxp.arange(3, device=dev),
                pxp.asarray([1.0], device=dev), pxp.zeros_like(bxp.ones(2), device=dev),
                pxp.full_like(bxp.ones(2), 2.0, device=dev),
                pxp.empty_like(bxp.ones(2), device=dev)):  # fmt: skip
        assert isinstance(out, other.array_types), type(out)
    assert pxp.zeros_like(bxp.ones(2), device=dev).dtype == other.xp.float64
    # *_like follows its argument's library when no device is given
    theirs = other.xp.ones((2, 3), dtype=other.xp.float32)
    for out in (pxp.zeros_like(theirs), pxp.ones_like(theirs), pxp.empty_like(theirs),
                pxp.full_like(theirs, 4.0), pxp.asarray(theirs), pxp.from_dlpack(theirs)):  # fmt: skip
        assert isinstance(out, other.array_types)
        assert out.shape == (2, 3) and out.dtype == other.xp.float32


def test_empty_shapes_and_dtypes(bxp):
    # values are undefined: shape, dtype and library are what can be checked
    for shape, dtype in (((2, 3), None), (4, bxp.int32), ((), bxp.bool), ((1, 2, 2), bxp.complex64)):
        out = pxp.empty(shape, dtype=dtype)
        assert tuple(out.shape) == ((shape,) if isinstance(shape, int) else shape)
        assert out.dtype == (dtype if dtype is not None else bxp.float64)
    x = bxp.ones((3, 2), dtype=bxp.float32)
    out = pxp.empty_like(x)
    assert out.shape == (3, 2) and out.dtype == bxp.float32
    assert pxp.empty_like(x, dtype=bxp.int16).dtype == bxp.int16
    t = pxp.empty_like(pa.Tensor(x))
    assert isinstance(t, pa.Tensor) and t.shape == (3, 2)


def test_creation_abstract_eval_defaults(bxp):
    from polyad.core import OPS

    xp = dispatch.default_backend().xp
    cases = [("zeros", ((2, 3),), {}, (2, 3), bxp.float64), ("arange", (5, None, 1), {}, (5,), bxp.int64),
             ("arange", (0.0, 1.0, 0.5), {}, (2,), bxp.float64), ("full", ((2,), True), {}, (2,), bxp.bool),
             ("full", (3, 1j), {}, (3,), bxp.complex128), ("linspace", (0, 1, 4), {}, (4,), bxp.float64),
             ("eye", (2, 3), {"k": 1}, (2, 3), bxp.float64),
             ("ones", ((1,),), {"dtype": bxp.int8}, (1,), bxp.int8)]  # fmt: skip
    for name, args, kw, shape, dtype in cases:
        aval = OPS[name].rules["abstract_eval"](xp, *args, **kw)
        real = getattr(pxp, name)(*args, **kw) if name != "arange" else pxp.arange(*args, **kw)
        assert aval.shape == shape == tuple(real.shape), name
        assert aval.dtype == dtype == real.dtype, name


def test_creation_inside_transforms(bxp):
    x0 = _arr(bxp, [0.5, 1.5, 2.5])

    def f(x):
        z = pxp.zeros_like(x) + pxp.ones(3) * x  # created arrays are constants
        w = pxp.full_like(x, pxp.sum(x))  # a tensor fill value: differentiable
        return pxp.sum(z * w)

    g = pa.grad(f)(x0)
    s = float(bxp.sum(x0))
    assert_close(g, s + bxp.sum(x0) * bxp.ones(3))
    shapes = pa.eval_shape(lambda x: pxp.zeros_like(x, dtype=bxp.int32) + pxp.arange(3, dtype=bxp.int32), x0)
    assert shapes.shape == (3,) and shapes.dtype == bxp.int32
    out = pa.vmap(lambda x: pxp.ones_like(x) * pxp.sum(x))(bxp.reshape(bxp.arange(6.0), (2, 3)))
    assert_close(out, bxp.asarray([[3.0] * 3, [12.0] * 3]))


def test_asarray_of_tensors(bxp):
    x0 = _arr(bxp, [1.0, 2.0])
    # a list of traced scalars stacks differentiably
    g = pa.grad(lambda x: pxp.sum(pxp.asarray([x[0] * x[1], x[0] ** 2, 3.0 * x[1]]) ** 2))(x0)
    a, b = 1.0, 2.0
    assert_close(g, bxp.asarray([2 * a * b * b + 4 * a**3, 2 * a * a * b + 18 * b]))
    t = pa.Tensor(x0)
    assert pxp.asarray(t) is t
    c = pxp.asarray(t, copy=True)
    assert c is not t
    c[0] = 10.0  # the copy is independent of the original
    assert float(t[0]) == 1.0 and float(c[0]) == 10.0
    assert pxp.asarray(t, dtype=bxp.float32).dtype == bxp.float32
    with pytest.raises(ValueError):
        pxp.asarray(t, dtype=bxp.float32, copy=False)
    assert_close(pa.grad(lambda x: pxp.sum(pxp.asarray(x, copy=True) ** 2))(x0), 2 * x0)


def test_to_device(bxp):
    x0 = _arr(bxp, [1.0, 2.0, 3.0])
    dev = x0.device
    t = pa.Tensor(x0)
    assert t.to_device(dev) is t  # already there
    other = _other_backend()
    odev = other.xp.__array_namespace_info__().default_device()
    moved = t.to_device(odev)
    assert isinstance(moved.concrete(), other.array_types)
    assert_close(moved, x0)
    # differentiable: the cotangent comes back to the input's library
    out = pa.grad(lambda x: pxp.sum(x.to_device(odev) ** 2))(x0)
    assert isinstance(out, dispatch.default_backend().array_types)
    assert_close(out, 2 * x0)
    # jvp and vmap
    _, tangent = pa.jvp(lambda x: x.to_device(odev) * 3.0, (x0,), (bxp.ones(3),))
    assert isinstance(to_numpy(tangent), np.ndarray) and np.allclose(to_numpy(tangent), 3.0)
    batched = pa.vmap(lambda x: x.to_device(odev))(bxp.reshape(bxp.arange(6.0), (2, 3)))
    assert isinstance(batched, other.array_types) and batched.shape == (2, 3)
    assert pa.eval_shape(lambda x: x.to_device(odev), x0).dtype == other.xp.float64


def test_from_dlpack(bxp):
    x0 = _arr(bxp, [1.0, 2.0])
    out = pxp.from_dlpack(x0)
    assert isinstance(out, dispatch.default_backend().array_types)
    assert_close(out, x0)
    assert_close(pa.grad(lambda x: pxp.sum(pxp.from_dlpack(x) ** 3))(x0), 3 * x0**2)


# ------------------------------------------------------------------------------ data types


def test_finfo_iinfo_objects(bxp):
    f = pxp.finfo(bxp.complex64)
    assert f.dtype == bxp.float32  # the real dtype described
    assert isinstance(f.eps, float) and isinstance(f.max, float) and isinstance(f.bits, int)
    assert f.bits == 32 and f.eps == 2.0**-23 and f.smallest_normal == 2.0**-126 and f.min == -f.max
    assert pxp.finfo(bxp.ones(2)).dtype == bxp.float64
    assert pxp.finfo(pa.Tensor(bxp.ones(2, dtype=bxp.float32))).bits == 32
    i = pxp.iinfo(bxp.uint8)
    assert (i.bits, i.min, i.max, i.dtype) == (8, 0, 255, bxp.uint8)
    assert isinstance(i.max, int)
    with pytest.raises((TypeError, ValueError)):
        pxp.finfo(bxp.int32)


def test_dtype_queries_accept_tensors_and_other_libraries(bxp):
    t = pa.Tensor(bxp.ones(2, dtype=bxp.float32))
    assert pxp.result_type(t, bxp.float64) == bxp.float64
    assert pxp.result_type(t, 1.0) == bxp.float32
    assert pxp.can_cast(t, bxp.float64) and not pxp.can_cast(bxp.float64, bxp.float32)
    assert pxp.isdtype(t.dtype, "real floating")
    other = _other_backend()
    # dtypes of a library other than the default are answered by that library
    assert pxp.isdtype(other.xp.int16, "signed integer")
    assert pxp.result_type(other.xp.float32, other.xp.float64) == other.xp.float64
    assert pxp.finfo(other.xp.float32).dtype == other.xp.float32
    assert pxp.result_type(other.xp.ones(2, dtype=other.xp.int8), 3) == other.xp.int8


def test_astype_derivatives(bxp):
    x0 = _arr(bxp, [0.5, -1.0])
    # real -> complex -> real: the cotangent of the real input is the real part
    g = pa.grad(lambda x: pxp.sum(pxp.real(pxp.astype(x, bxp.complex128) * (1.0 + 2.0j)) ** 2))(x0)
    assert_close(g, 2 * x0)
    # into integers: no derivative flows
    g = pa.grad(lambda x: pxp.sum(x) + pxp.sum(pxp.astype(pxp.astype(x * 4.0, bxp.int64), bxp.float64)))(x0)
    assert_close(g, bxp.ones(2))
    out = pa.vmap(lambda x: pxp.astype(x, bxp.float32), in_dims=1)(bxp.ones((2, 3)))
    assert out.shape == (3, 2) and out.dtype == bxp.float32

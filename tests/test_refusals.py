"""Refusals that name the habit and the fix (issue 31), and what polyad accepts instead of refusing.

- ``np.asarray()`` of a transform's value is reached from three NumPy habits, each told its own fix: a
  store into a NumPy buffer, ``np.array([a, b])``, a SciPy function (``polyad/core/refusals.py``).
- A Python float where an array is expected is a 0-d float64 array (as JAX accepts it).
- An in-place write of a transform's value into a closed-over ``pa.Tensor`` is refused and leaves it
  unchanged (as torch.func does).
- Weak floats under ``pa.jit``: ``divmod`` traced; ``round``, ``math.trunc``, ``is_integer`` a
  ConcretizationError naming the value and the fix. ``bytes()`` of a traced tensor is polyad's refusal.

References: analytic derivatives and eager runs of the same function.
"""

import gc
import math
import sys

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad.backends.numpy.compiler import fusion
from polyad.core import ConcretizationError, dispatch

xp = pa.xp
BX = dispatch.default_backend().xp


def arr(values):
    return BX.asarray(values, dtype=BX.float64)


def _message(info):
    """The refusal's text: NumPy replaces an error raised while it stores into an array (a tensor is a
    sequence to it) by "setting an array element with a sequence", with polyad's refusal as the cause."""
    e = info.value
    if isinstance(e, ValueError) and "sequence" in str(e) and e.__cause__ is not None:
        return str(e.__cause__)
    return str(e)


BUFFER_FIX = ("NumPy array", "pa.xp.zeros_like(x)", "pa.xp.asarray(u0, copy=True)", "pa.xp.stack")


# ------------------------------------------------------------------------------ a store into a NumPy buffer


def _slice_into_buffer(x):
    buf = np.zeros(3)
    buf[0:2] = x[:2] * 2.0
    return xp.sum(xp.asarray(buf))


def _element_into_buffer(x):
    buf = np.zeros(3)
    buf[0] = x[0] * 2.0
    return xp.sum(xp.asarray(buf))


@pytest.mark.parametrize("body", [_slice_into_buffer, _element_into_buffer], ids=["slice", "element"])
@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap", "jit"])
def test_a_store_into_a_numpy_buffer_names_the_buffer_and_its_fix(body, transform):
    x = arr([1.0, 2.0, 3.0])
    run = {
        "grad": lambda: pa.grad(body)(x),
        "jvp": lambda: pa.jvp(body, (x,), (arr([1.0, 0.0, 0.0]),)),
        "vmap": lambda: pa.vmap(body)(arr([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])),
        "jit": lambda: pa.jit(body)(x),
    }[transform]
    with pytest.raises((TypeError, ValueError)) as info:
        run()
    text = _message(info)
    assert all(s in text for s in BUFFER_FIX), text
    assert "store" in text


def test_the_buffer_fix_the_message_names_gives_the_derivative():
    # the message's fix, followed: a buffer made by polyad; d/dx0 of 2 x0 + 2 x1 is 2
    u0 = arr([1.0, 1.0, 1.0])

    def f(x):
        buf = xp.asarray(u0, copy=True)
        buf[0:2] = x[:2] * 2.0
        return xp.sum(buf)

    assert_close(pa.grad(f)(arr([1.0, 2.0, 3.0])), np.array([2.0, 2.0, 0.0]))
    assert_close(f(pa.Tensor(arr([1.0, 2.0, 3.0]))), np.array(7.0))
    assert_close(u0, np.ones(3))  # copy=True: the user's array is not written


def test_the_suggested_copy_is_needed_asarray_alone_shares_memory():
    # why the message says copy=True: without it a call outside grad writes into the user's array
    u0 = np.ones(3)
    u = xp.asarray(u0)
    u[0] = 5.0
    assert u0[0] == 5.0


# ------------------------------------------------------------------------------ np.array of traced values


@pytest.mark.parametrize("transform", ["grad", "vmap", "jit"])
def test_np_array_of_traced_scalars_names_stack(transform):
    def f(x):
        return xp.sum(np.array([x[0], x[1]]))

    x = arr([1.0, 2.0])
    with pytest.raises(TypeError) as info:
        {"grad": pa.grad, "jit": pa.jit}.get(transform, pa.vmap)(f)(
            arr([[1.0, 2.0], [3.0, 4.0]]) if transform == "vmap" else x
        )
    text = str(info.value)
    assert "np.array([a, b])" in text and "pa.xp.stack([a, b])" in text and "pa.xp.asarray([a, b])" in text
    # the fix, followed, gives the derivative: d/dx sum(3 [x0, x1]) = [3, 3]
    assert_close(pa.grad(lambda x: xp.sum(3.0 * xp.stack([x[0], x[1]])))(x), np.array([3.0, 3.0]))


# ------------------------------------------------------------------------------ a SciPy function


def test_a_scipy_function_is_named_with_polyads_own():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    x = arr([1.0, 2.0])
    with pytest.raises(TypeError) as info:
        pa.grad(lambda b: xp.sum(scipy_linalg.solve(np.eye(2) * 2.0, b)))(x)  # SciPy converts b first
    text = str(info.value)
    assert "scipy.linalg.solve" in text and "pa.xp.linalg.solve" in text and "pa.custom_vjp" in text
    got = pa.grad(lambda b: xp.sum(xp.linalg.solve(arr(np.eye(2) * 2.0), b)))(x)
    assert_close(got, np.array([0.5, 0.5]))


def test_a_scipy_function_polyad_lacks_names_custom_vjp():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    with pytest.raises(TypeError) as info:
        pa.grad(lambda a: xp.sum(scipy_linalg.expm(xp.reshape(a, (2, 2)))))(arr([0.0, 1.0, 0.0, 0.0]))
    text = str(info.value)
    assert "scipy.linalg.expm" in text and "pa.custom_vjp" in text and "polyad.linalg" in text


# ------------------------------------------------------------------------------ a Python float argument


def _cube(x):
    return x**3 + 2.0 * x


def test_a_python_float_is_differentiated_as_a_0d_float64_array():
    x = 0.8
    d1, d2 = 3 * x**2 + 2.0, 6 * x  # analytic first and second derivatives
    results = {
        "grad": (pa.grad(_cube)(x), d1),
        "jacfwd": (pa.jacfwd(_cube)(x), d1),
        "jacrev": (pa.jacrev(_cube)(x), d1),
        "hessian": (pa.hessian(_cube)(x), d2),
        "vjp": (pa.vjp(_cube, x)[1](1.0)[0], d1),
        "jvp": (pa.jvp(_cube, (x,), (1.0,))[1], d1),
        "linearize": (pa.linearize(_cube, x)[1](1.0), d1),
    }
    for name, (got, want) in results.items():
        assert tuple(got.shape) == (), name
        assert to_numpy(got).dtype == np.float64, name
        np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12, err_msg=name)
    assert_close(pa.jvp(_cube, (x,), (1.0,))[0], np.array(_cube(x)))


def test_a_float_among_arguments_and_a_copy_written():
    def loss(a, u0):
        u = u0.copy()  # a copy of the traced value, written into
        u[0] = a * u[1]
        return xp.sum(u * u)

    u0 = arr([1.0, 2.0, 3.0])
    # loss = (a u1)^2 + u1^2 + u2^2: d/da = 2 a u1^2, d/du0 = [0, 2 a^2 u1 + 2 u1, 2 u2]
    ga, gu = pa.grad(loss, argnums=(0, 1))(0.8, u0)
    np.testing.assert_allclose(to_numpy(ga), 2 * 0.8 * 4.0, rtol=1e-12)
    assert_close(gu, np.array([0.0, 2 * 0.64 * 2.0 + 4.0, 6.0]))
    assert_close(u0, np.array([1.0, 2.0, 3.0]))  # the argument is not written


def test_a_numpy_copy_written_with_a_float_argument_names_the_buffer_fix():
    u0 = np.array([1.0, 2.0, 3.0])

    def loss(a):
        u = u0.copy()  # a NumPy buffer: it cannot hold a's derivative
        u[0] = a * 2.0
        return xp.sum(xp.asarray(u))

    with pytest.raises(ValueError) as info:
        pa.grad(loss)(0.8)
    assert all(s in _message(info) for s in BUFFER_FIX)
    np.testing.assert_array_equal(u0, [1.0, 2.0, 3.0])


def test_an_int_argument_names_the_fix():
    with pytest.raises(
        TypeError, match=r"write 2\.0 \(a float\) or pa\.xp\.asarray\(2, dtype=pa\.xp\.float64\)"
    ):
        pa.grad(_cube)(2)


# ------------------------------------------------------------------------------ a closed-over tensor written


@pytest.mark.parametrize("transform", ["grad", "vmap", "jit", "jvp"])
def test_a_write_into_a_closed_over_tensor_is_refused_and_leaves_it_unchanged(transform):
    state = pa.Tensor(arr([1.0, 1.0, 1.0]))

    def f(x):
        state[0] = x[0]
        return xp.sum(state * x)

    x = arr([2.0, 3.0, 4.0])
    run = {
        "grad": lambda: pa.grad(f)(x),
        "vmap": lambda: pa.vmap(f)(arr([[2.0, 3.0, 4.0]])),
        "jit": lambda: pa.jit(f)(x),
        "jvp": lambda: pa.jvp(f, (x,), (x,)),
    }[transform]
    with pytest.raises(RuntimeError) as info:
        run()
    text = str(info.value)
    assert "closed over" in text and "left unchanged" in text and "pa.xp.asarray(x, copy=True)" in text
    # the tensor is usable and holds what it held
    assert_close(state + 1.0, np.array([2.0, 2.0, 2.0]))
    state += 1.0  # and still writable outside
    assert_close(state, np.array([2.0, 2.0, 2.0]))


def test_a_write_into_an_array_made_inside_is_still_allowed():
    def f(x):
        y = xp.zeros_like(x)
        y[0] = x[0] ** 2
        return xp.sum(y)

    assert_close(pa.grad(f)(arr([3.0, 1.0])), np.array([6.0, 0.0]))


# ------------------------------------------------------------------------------ weak floats under pa.jit


def test_divmod_of_a_weak_float_is_traced():
    def f(x, d):
        q, r = divmod(d, 0.3)
        return x * q + r

    x = arr([1.0, 2.0])
    jitted = pa.jit(f)
    for d in (0.5, 1.0, 2.0):  # one trace, every value right
        q, r = divmod(d, 0.3)
        assert_close(jitted(x, d), to_numpy(x) * q + r)


@pytest.mark.parametrize(
    ("use", "name", "fix"),
    [
        (lambda d: round(d), "round()", "pa.xp.round(x)"),
        (lambda d: round(d, 2), "round()", "pa.xp.round(x * 10**2) / 10**2"),
        (lambda d: math.trunc(d), "math.trunc()", "pa.xp.trunc(x)"),
        (lambda d: d.is_integer(), "is_integer()", "pa.xp.trunc(x) == x"),
    ],
    ids=["round", "round-ndigits", "trunc", "is_integer"],
)
def test_a_weak_float_asked_for_a_python_value_names_it_and_the_fix(use, name, fix):
    with pytest.raises(ConcretizationError) as info:
        pa.jit(lambda x, d: x * use(d))(arr([1.0]), 0.5)
    text = str(info.value)
    assert name in text and "argument 1" in text and "static_argnums" in text and fix in text


# ------------------------------------------------------------------------------ bytes, memoryview


def test_bytes_of_a_traced_tensor_is_polyads_refusal():
    with pytest.raises(TypeError, match=r"bytes\(\) of a ReverseTensor .* is refused"):
        pa.grad(lambda x: bytes(x) and xp.sum(x))(arr([1.0, 2.0]))
    plain = np.array([1.0, 2.0])
    if dispatch.default_backend().name == "numpy":
        assert bytes(pa.Tensor(plain)) == plain.tobytes()  # a plain tensor's bytes are its array's


@pytest.mark.skipif(sys.version_info < (3, 12), reason="memoryview() consults __buffer__ from 3.12 (PEP 688)")
def test_memoryview_of_a_traced_tensor_is_polyads_refusal():
    with pytest.raises(TypeError, match=r"memoryview\(\) \(the buffer protocol\) of a ReverseTensor"):
        pa.grad(lambda x: memoryview(x) and xp.sum(x))(arr([1.0, 2.0]))


# -------------------------------------------------------------------------- a NumPy row written under vmap


def test_a_numpy_rows_element_written_under_vmap_names_the_fix():
    table = np.zeros((2, 3))

    def f(x):
        v = table[0]
        v[1] = x[0]
        return xp.sum(xp.asarray(v))

    with pytest.raises((ValueError, ConcretizationError)) as info:
        pa.vmap(f)(arr([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    text = _message(info)
    assert "BatchedTensor" in text and all(s in text for s in BUFFER_FIX), text
    np.testing.assert_array_equal(table, np.zeros((2, 3)))


# -------------------------------------------------------------------------- pa.jit's loops per static value


def test_jit_with_a_new_static_value_each_call_shares_one_loop_and_clear_cache_lets_it_go(monkeypatch):
    # each static value used to be baked into a fresh Numba loop, held for ever (+150 MiB over 120 values)
    pytest.importorskip("numba")
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")  # the loop itself runs (and is compiled) at once

    def f(x, c):
        return xp.sin(x) * c + xp.exp(x) * (c * 2.0) + x**3

    jitted = pa.jit(f, static_argnums=1)
    x = np.linspace(0.0, 1.0, 64)  # NumPy on every lane: the fused loops run on NumPy arrays
    gc.collect()
    before = fusion.loops_held()
    for i in range(12):
        c = 0.1 * i + 0.05
        want = np.sin(x) * c + np.exp(x) * (2 * c) + x**3
        np.testing.assert_allclose(jitted(x, c), want, rtol=1e-13)  # each constant reaches its loop
    new = fusion.loops_held() - before
    assert 1 <= len(new) <= 2, len(new)  # one loop for every value (not one per value)
    jitted.clear_cache()
    gc.collect()
    assert not new & fusion.loops_held()


def test_literals_as_loop_arguments_keep_their_dtype(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setenv("POLYAD_FUSION_COMPILE", "wait")
    x = np.linspace(0.0, 1.0, 64, dtype=np.float32)
    for c in (0.1, 1.0 / 3.0):
        got = pa.jit(lambda x, c: x * c + 0.7, static_argnums=1)(x, c)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, x * np.float32(c) + np.float32(0.7))  # the literal as float32

"""Views and repeated indices behave as in NumPy under every transform.

Each program below writes through a view (``v = r[1:3]; v += ...``, ``u.T[0, :] = 0``,
``xp.reshape(u, (-1,))[:5] = 0``...) or reads a view after its base was written. The reference is the
backend library itself running the program on its own arrays, whose views alias (NumPy and
array_api_strict): values under grad, jvp, vmap, pa.jit and on plain tensors must equal it, and
derivatives its finite differences (``check_grads``, to second order). Repeated integer indices follow
NumPy's buffered semantics: one add per ``u[idx] += v`` statement, the last write wins in ``u[idx] = v``,
in both modes alike.
"""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import xp as pxp
from polyad.core import dispatch
from polyad.testing import check_grads

BX = dispatch.default_backend().xp


def arr(values):
    return BX.asarray(np.asarray(values, dtype=np.float64))


# ------------------------------------------------------------------------------ programs (xp: any namespace)


def minimal(xp, a):  # the issue's case: grad at [1.5, 2.5, 3.5] is [723, 35, 37]
    r = a * 1.0
    v = r[1:3]
    v += 10 * a[0]
    return xp.sum(r * r)


def heat(xp, u0):  # a heat solver's interior update written through a view
    u = u0 * 1.0
    for _ in range(3):
        lap = u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]
        interior = u[1:-1, 1:-1]
        interior += 0.1 * lap * u[1:-1, 1:-1]
    return xp.sum(u * u)


def transpose_write(xp, u0):
    u = u0 * 1.0
    u.T[0, :] = 0.0
    return u * u0


def reshape_write(xp, u0):
    u = u0 * 1.0
    xp.reshape(u, (-1,))[:5] = 0.0
    return u * u0


def row_after_parent(xp, u0):  # a view read after its base was written sees the write
    u = u0 * 1.0
    row = u[0, :]
    u[:, 1] = u0[:, 2] ** 2
    return row * 3.0


def view_of_view(xp, a):
    r = a * 1.0
    v = r[1:]
    w = v[::2]
    w *= a[0]
    return r


def reshape_copy(xp, u0):  # reshaping a transposed view copies (as NumPy must): the base is untouched
    u = u0 * 1.0
    f = xp.reshape(u.T, (-1,))
    f[0] = 100.0 * u0[0, 0]
    return u * 2.0, f


def expand_flip(xp, a):
    r = a * 1.0
    e = xp.expand_dims(r, axis=0)
    e[0, 1] = a[0] ** 2
    f = xp.flip(r)
    f[0] = a[1] * a[2]
    return r


def fresh_base(xp, a):  # a view of an array made inside the function (scipy.signal.oaconvolve's pattern)
    ret = xp.zeros(5, dtype=a.dtype)
    part = ret[1:4]
    part += a[:3] ** 2
    tail = ret[3:]
    tail *= a[0]
    return ret


def base_write_seen(xp, a):
    r = a * 1.0
    v = r[1:3]
    r *= a[0]
    return v * 1.0


def slice_iadd(xp, a):  # Python's get, add, set: the set stores back the view it wrote through
    r = a * 1.0
    r[1:3] += a[:2]
    r[::2] *= 2.0
    return r


def element_copy(xp, u0):  # an int per axis is a scalar copy in NumPy; with an Ellipsis a 0-d view
    u = u0 * 1.0
    s = u[0, 1]
    s += 1.0
    t = u[0, 1, ...]
    t += u0[1, 1]
    return u


def permute_moveaxis_squeeze(xp, b):
    r = b * 1.0
    p = xp.permute_dims(r, (2, 0, 1))
    p[1, :, 0] = b[:, 0, 1] * 3.0
    s = xp.moveaxis(r, 0, -1)
    s[..., 0] += 1.0
    q = xp.squeeze(r[:, :1, :], axis=1)
    q -= b[:, 1, :]
    return r


def unstack_mt(xp, b):
    r = b * 1.0
    m = r.mT
    m[..., 0, :] = m[..., 1, :] * 2.0
    a0, a1, _ = xp.unstack(r[0, ...], axis=1)
    a1 += a0 * a0
    return r


def reshape_chain(xp, u0):
    u = u0 * 1.0
    f = xp.reshape(u[1:, :], (-1,))
    g = xp.reshape(f, (2, -1))
    g[1, :2] = 0.0
    return u


PROGRAMS = {
    "minimal": (minimal, (3,)),
    "heat": (heat, (5, 6)),
    "transpose_write": (transpose_write, (3, 4)),
    "reshape_write": (reshape_write, (3, 4)),
    "row_after_parent": (row_after_parent, (3, 4)),
    "view_of_view": (view_of_view, (6,)),
    "reshape_copy": (reshape_copy, (3, 4)),
    "expand_flip": (expand_flip, (4,)),
    "fresh_base": (fresh_base, (4,)),
    "base_write_seen": (base_write_seen, (4,)),
    "slice_iadd": (slice_iadd, (5,)),
    "element_copy": (element_copy, (3, 4)),
    "permute_moveaxis_squeeze": (permute_moveaxis_squeeze, (2, 3, 4)),
    "unstack_mt": (unstack_mt, (2, 3, 3)),
    "reshape_chain": (reshape_chain, (3, 4)),
}


def _sample(shape, seed):
    rng = np.random.default_rng(seed)
    return arr(rng.uniform(0.2, 1.0, shape))


def _leaves(out):
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_view_program_values_under_every_transform_equal_the_library(name):
    prog, shape = PROGRAMS[name]
    a = _sample(shape, 1)

    def reference(x):
        # the library's own views; an element indexed by an int per axis is NumPy's scalar copy on every
        # backend (CuPy's is a 0-d view), so that program's reference is NumPy's
        return [
            to_numpy(e) for e in _leaves(prog(np, to_numpy(x)) if name == "element_copy" else prog(BX, x))
        ]

    expected = reference(a)

    def f(x):
        return prog(pxp, x)

    out, tangent = pa.jvp(f, (a,), (pxp.ones_like(a),))
    for o, e in zip(_leaves(out), expected):
        assert_close(o, e)
    for o, e in zip(_leaves(pa.jit(f)(a)), expected):
        assert_close(o, e)
    if name != "fresh_base":  # (outside transforms xp.zeros is the library's array, which refuses a tensor)
        for o, e in zip(_leaves(prog(pxp, pa.Tensor(a))), expected):
            assert_close(to_numpy(o), e)  # plain tensors: polyad's eager mode
    b = _sample(shape, 2)
    batched = _leaves(pa.vmap(f)(BX.stack([a, b])))
    for k, x in enumerate((a, b)):
        for o, e in zip(batched, reference(x)):  # per example, the same reference as above
            assert_close(to_numpy(o)[k], e)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_view_program_derivatives_equal_finite_differences(name):
    prog, shape = PROGRAMS[name]
    check_grads(lambda x: prog(pxp, x), (_sample(shape, 3),), order=2)


def test_the_issues_minimal_case():
    a = arr([1.5, 2.5, 3.5])
    assert_close(pa.grad(lambda x: minimal(pxp, x))(a), np.array([723.0, 35.0, 37.0]))
    assert_close(pa.jit(pa.grad(lambda x: minimal(pxp, x)))(a), np.array([723.0, 35.0, 37.0]))


def test_heat_solver_gradient_under_jit_and_vmap():
    u0 = _sample((5, 6), 4)
    g = pa.grad(lambda u: heat(pxp, u))(u0)
    check_grads(lambda u: heat(pxp, u), (u0,), order=1, modes=("rev",))
    assert_close(pa.jit(pa.grad(lambda u: heat(pxp, u)))(u0), to_numpy(g))
    per = pa.vmap(pa.grad(lambda u: heat(pxp, u)))(BX.stack([u0, u0 * 0.5]))
    assert_close(to_numpy(per)[0], to_numpy(g))
    assert_close(to_numpy(per)[1], to_numpy(pa.grad(lambda u: heat(pxp, u))(u0 * 0.5)))


def test_code_that_never_writes_through_a_view_records_nothing_more():
    """Taking views costs no op: the tape of a program that only reads slices is what it was."""
    sizes = []

    def f(x):
        level = pa.core.active_interpreters()[-1]
        y = x[1:] * x[:-1] + pxp.reshape(x, (2, 2)).T[0, :] @ pxp.ones(2)
        sizes.append([entry[0].name for entry in level.tape])
        return pxp.sum(y)

    pa.grad(f)(arr([1.0, 2.0, 3.0, 4.0]))
    assert sizes == [
        ["getitem", "getitem", "multiply", "reshape", "permute_dims", "getitem", "matmul", "add"]
    ]


def test_writes_numpy_refuses_are_refused_before_anything_changes():
    def grows(x):
        r = x * 1.0
        v = r[:2]
        v += pxp.ones((3, 2))  # NumPy: non-broadcastable output operand
        return r

    with pytest.raises(ValueError, match="cannot change the shape"):
        pa.grad(lambda x: pxp.sum(grows(x)))(arr([1.0, 2.0, 3.0]))

    def to_int(x):
        k = pxp.astype(x, pxp.int64)
        v = k[:2]
        v += x[:2]  # NumPy: cannot cast float64 to int64 with casting rule 'same_kind'
        return k

    with pytest.raises(TypeError, match="same_kind|type promoted"):  # (array_api_strict refuses sooner)
        pa.jvp(to_int, (arr([1.0, 2.0, 3.0]),), (arr([1.0, 1.0, 1.0]),))

    def keeps_dtype(x):  # a wider result stored in a float32 base is cast, as NumPy casts it
        r = pxp.astype(x, pxp.float32)
        v = r[1:]
        v += x[1:]
        return r

    out = pa.jvp(keeps_dtype, (arr([1.0, 2.0, 3.0]),), (arr([1.0, 1.0, 1.0]),))[0]
    assert to_numpy(out).dtype == np.float32 and np.allclose(to_numpy(out), [1.0, 4.0, 6.0])

    def no_copy(x):
        return pxp.reshape(x.T, (-1,), copy=False)

    with pytest.raises(ValueError, match="without a copy"):
        pa.grad(lambda x: pxp.sum(no_copy(x * 1.0)))(arr([[1.0, 2.0], [3.0, 4.0]]))


# ------------------------------------------------------------------------------ repeated integer indices


def _indices(values):
    return BX.asarray(np.asarray(values, dtype=np.int64))


def _tensor(u):
    """``u`` as a polyad tensor: inside a transform it is one; eagerly (finite differences) a plain one, so
    that the write is polyad's on every backend (array_api_strict has no integer-array assignment)."""
    return u if isinstance(u, pa.Tensor) else pa.Tensor(u)


def _out(u):
    return u.concrete() if type(u) is pa.Tensor else u  # eagerly: the backend array


def _written(x, v):
    u = _tensor(pxp.zeros(3, dtype=x.dtype) + x)
    u[_indices([0, 0])] += v
    return _out(u)


def _overwritten(x, v):
    u = _tensor(pxp.zeros(3, dtype=x.dtype) + x)
    u[_indices([2, 0, 2])] = pxp.stack([v, 2.0 * v, 3.0 * v])
    return _out(u)


def test_repeated_indices_add_once_and_the_last_write_wins_in_both_modes():
    x, v = arr([1.0, 2.0, 3.0]), arr(0.5)
    # u[[0, 0]] += v adds v once (NumPy buffers the statement): d u0 / d v = 1, d u0 / d x0 = 1
    assert_close(pa.jacrev(_written, argnums=1)(x, v), np.array([1.0, 0.0, 0.0]))
    assert_close(pa.jacfwd(_written, argnums=1)(x, v), np.array([1.0, 0.0, 0.0]))
    assert_close(pa.jacrev(_written)(x, v), np.eye(3))
    assert_close(pa.jacfwd(_written)(x, v), np.eye(3))
    # u[[2, 0, 2]] = (v, 2v, 3v): u = (2v, x1, 3v), the last write to position 2 wins
    assert_close(pa.jvp(_overwritten, (x, v), (pxp.zeros(3), arr(1.0)))[0], np.array([1.0, 2.0, 1.5]))
    assert_close(pa.jacrev(_overwritten, argnums=1)(x, v), np.array([2.0, 0.0, 3.0]))
    assert_close(pa.jacfwd(_overwritten, argnums=1)(x, v), np.array([2.0, 0.0, 3.0]))
    assert_close(pa.jacrev(_overwritten)(x, v), np.diag([0.0, 1.0, 0.0]))
    check_grads(_overwritten, (x, v), order=2)
    check_grads(_written, (x, v), order=2)


def test_repeated_indices_under_vmap_and_jit():
    v = arr([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    idx = _indices([[0, 0, 1], [2, 2, 2]])

    def put(v, i):
        u = pxp.zeros(3, dtype=v.dtype)
        u[i] = v
        return pxp.sum(u * arr([1.0, 10.0, 100.0]))

    # example 0: u = (2, 3, 0); example 1: u = (0, 0, 6)
    assert_close(pa.vmap(put)(v, idx), np.array([32.0, 600.0]))
    assert_close(pa.vmap(pa.grad(put))(v, idx), np.array([[0.0, 1.0, 10.0], [0.0, 0.0, 100.0]]))
    assert_close(pa.jit(pa.grad(put))(v[0, :], idx[0, :]), np.array([0.0, 1.0, 10.0]))
    # several index arrays: (0, 1) named twice
    rows, cols = _indices([0, 1, 0]), _indices([1, 2, 1])

    def put2(w):
        u = pxp.zeros((2, 3), dtype=w.dtype)
        u[rows, cols] = w
        return u

    assert_close(to_numpy(pa.jacrev(put2)(arr([1.0, 2.0, 3.0])))[0, 1], np.array([0.0, 0.0, 1.0]))
    assert_close(to_numpy(pa.jacfwd(put2)(arr([1.0, 2.0, 3.0])))[0, 1], np.array([0.0, 0.0, 1.0]))


def test_repeated_indices_on_cuda_arrays_take_the_last_write(fake_cuda, monkeypatch):
    # CuPy's assignment does not promise which repeated write wins (an H100 run: not the last), so CUDA
    # arrays take a kernel that keeps each position's last write before assigning; float32 NumPy arrays
    # stand in for CUDA arrays here (fake_cuda), NumPy's own assignment is the reference
    from polyad.ops.indexing import index_update_op

    calls = []
    kernel = index_update_op.kernels["cuda"]
    monkeypatch.setitem(index_update_op.kernels, "cuda", lambda *a, **k: calls.append(1) or kernel(*a, **k))
    rng = np.random.default_rng(3)
    u0 = rng.uniform(size=(4, 5)).astype(np.float32)
    w = rng.uniform(size=(4, 3)).astype(np.float32)
    cases = [
        (np.array([2, 0, 2]), rng.uniform(size=(3, 5)).astype(np.float32)),  # row 2 written twice
        ((np.array([0, 1, 0]), np.array([1, 2, 1])), np.arange(3, dtype=np.float32)),  # (0, 1) twice
        ((slice(None), np.array([4, 0, 4])), w),
        ((np.array([[1, 1], [3, 1]]), slice(1, 3)), np.float32(-1.0)),
    ]
    for key, v in cases:
        expected = u0.copy()
        expected[key] = v
        got = pa.Tensor(u0.copy())
        got[key] = v
        assert_close(to_numpy(got), expected)
    assert len(calls) == len(cases)

"""Op table rows: writes through views (``polyad.ops.views``), each a program of namespace calls.

Every check of the table runs them: values against the backend library running the same program on its
own arrays, whose views alias (NumPy, array_api_strict; Dask's arrays have no views, so its results
differ by design), abstract evaluation, VJP and JVP against finite differences to second order, vmap
against a loop, and the closure and jit checks.
"""

from polyad.testing.op_table import OpInfo, Sample, on_backend


def slice_iadd(xp, a, c):
    r = xp.asarray(a, copy=True)
    v = r[1:3]
    v += c  # reaches r, as NumPy's view does
    return r * r  # (the copy of an argument left unbatched by vmap is an array made inside: a view base)


def interior_update(xp, u, s):
    u = xp.asarray(u, copy=True)
    interior = u[1:-1, 1:-1]
    interior += s * (u[2:, 1:-1] + u[:-2, 1:-1] - 2.0 * u[1:-1, 1:-1])
    return u


def transpose_row_write(xp, u, v):
    u = xp.asarray(u, copy=True)
    u.mT[..., 0, :] = v  # (.T in tests/test_views.py: the standard defines it for 2-D arrays only)
    return u


def flat_write(xp, u, v):
    u = xp.asarray(u, copy=True)
    xp.reshape(u, (-1,))[:5] = v
    return u


def row_after_base_write(xp, u, v):
    u = xp.asarray(u, copy=True)
    row = u[0, :]
    u[:, 1] = v
    return row, u


def fresh_part_iadd(xp, a, c):
    ret = xp.zeros((a.shape[0] + 2,), dtype=a.dtype)
    part = ret[: a.shape[0]]
    part += a
    tail = ret[2:]
    tail += c * a
    return ret


def view_chain(xp, b, c):
    r = xp.asarray(b, copy=True)
    p = xp.permute_dims(r, (2, 0, 1))[1:, ...]
    q = xp.reshape(xp.expand_dims(xp.flip(r, axis=0), axis=0), (-1,))
    p *= c
    q[::3] += c
    return r


def samples_2(left, right):
    def samples(s):
        return [Sample((s.float(*left), s.float(*right)))]

    return samples


_NO_VIEWS = on_backend(
    "dask", "Dask's arrays have no views: a write to a slice does not reach its base, as NumPy's do"
)

ROWS = [
    OpInfo("views.slice_iadd", samples_2((4,), ()), program=slice_iadd, backend_failures=_NO_VIEWS),
    OpInfo("views.interior_update", samples_2((4, 5), ()), program=interior_update,
           backend_failures=_NO_VIEWS),
    OpInfo("views.transpose_row_write", samples_2((3, 4), (3,)), program=transpose_row_write,
           backend_failures=_NO_VIEWS),
    OpInfo("views.flat_write", samples_2((3, 4), (5,)), program=flat_write, backend_failures=_NO_VIEWS),
    OpInfo("views.row_after_base_write", samples_2((3, 4), (3,)), program=row_after_base_write,
           backend_failures=_NO_VIEWS),
    OpInfo("views.fresh_part_iadd", samples_2((4,), ()), program=fresh_part_iadd, backend_failures=_NO_VIEWS),
    OpInfo("views.view_chain", samples_2((2, 3, 4), ()), program=view_chain, backend_failures=_NO_VIEWS),
]  # fmt: skip

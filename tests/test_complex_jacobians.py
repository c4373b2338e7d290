"""Complex Jacobians: ``holomorphic=True`` against the analytic complex derivative, ``complex_layout="real"``
against central finite differences of the realified map, ``"wirtinger"`` against (df/dx -+ i df/dy) / 2
from those differences, on non-holomorphic functions (z conj(z), |z|, Re z Im z) and holomorphic ones
(exp, z^2, where df/dz̄ = 0); Hessians, pytrees, has_aux, chunks, vmap and the errors."""

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import polyad as pa
from polyad import core
from polyad import xp as pxp
from polyad.core import dispatch

Z = np.array([1.0 + 2.0j, -0.5 + 0.3j, 0.2 - 1.1j])


@pytest.fixture
def C():
    xp = dispatch.default_backend().xp
    return lambda z, dtype="complex128": xp.asarray(np.asarray(z), dtype=getattr(xp, dtype))


def _realify(w):
    w = np.asarray(w)
    return np.stack([w.real, w.imag], axis=-1) if np.iscomplexobj(w) else w


def fd_real_layout(f_np, z, eps=1e-6):
    """Central differences of the realified map u -> realify(f(u[..., 0] + i u[..., 1])) at z."""
    u = _realify(z)
    out = _realify(f_np(z))
    jac = np.zeros(out.shape + u.shape)
    for idx in np.ndindex(u.shape):
        du = np.zeros_like(u)
        du[idx] = eps
        plus, minus = u + du, u - du
        jac[(...,) + idx] = (
            _realify(f_np(plus[..., 0] + 1j * plus[..., 1]))
            - _realify(f_np(minus[..., 0] + 1j * minus[..., 1]))
        ) / (2 * eps)
    return jac


def fd_wirtinger(f_np, z):
    """(df/dz, df/dz̄) from the finite-difference real layout."""
    jac = fd_real_layout(f_np, z)
    dx, dy = jac[..., 0], jac[..., 1]
    if np.iscomplexobj(f_np(z)):
        k = dx.ndim - z.ndim - 1  # the output's (re, im) axis
        dx = np.take(dx, 0, axis=k) + 1j * np.take(dx, 1, axis=k)
        dy = np.take(dy, 0, axis=k) + 1j * np.take(dy, 1, axis=k)
    return (dx - 1j * dy) / 2, (dx + 1j * dy) / 2


# (name, polyad function, NumPy function, holomorphic derivative or None); non-holomorphic ones first
FUNCTIONS = [
    ("z_conj_z", lambda z: z * pxp.conj(z), lambda z: z * np.conj(z), None),
    ("abs", lambda z: pxp.abs(z), np.abs, None),
    ("re_times_im", lambda z: pxp.real(z) * pxp.imag(z), lambda z: z.real * z.imag, None),
    ("mixing", lambda z: z[0] * pxp.conj(z) + pxp.sin(z), lambda z: z[0] * np.conj(z) + np.sin(z), None),
    ("exp", pxp.exp, np.exp, lambda z: np.diag(np.exp(z))),
    ("square", lambda z: z**2, lambda z: z**2, lambda z: np.diag(2 * z)),
    (
        "coupled",
        lambda z: z * z[1],
        lambda z: z * z[1],
        lambda z: np.diag(np.full(3, z[1])) + np.outer(z, np.eye(3)[1]),
    ),
]


@pytest.mark.parametrize("jac", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("name", [f[0] for f in FUNCTIONS])
def test_layouts_against_finite_differences(C, jac, name):
    _, f, f_np, holo = next(row for row in FUNCTIONS if row[0] == name)
    transform = getattr(pa, jac)
    z = C(Z)
    real = transform(f, complex_layout="real")(z)
    assert_close(real, fd_real_layout(f_np, Z), rtol=1e-6, atol=1e-7)
    dz, dzbar = transform(f, complex_layout="wirtinger")(z)
    ref_dz, ref_dzbar = fd_wirtinger(f_np, Z)
    assert_close(dz, ref_dz, rtol=1e-6, atol=1e-7)
    assert_close(dzbar, ref_dzbar, rtol=1e-6, atol=1e-7)
    if holo is not None:
        assert_close(transform(f, holomorphic=True)(z), holo(Z), rtol=1e-12, atol=1e-14)
        assert_close(dz, holo(Z), rtol=1e-6, atol=1e-7)
        assert np.abs(to_numpy(dzbar)).max() < 1e-12  # Cauchy-Riemann: df/dz̄ = 0
    if not np.iscomplexobj(f_np(Z)):  # a real function: df/dz̄ = conj(df/dz)
        assert_close(dzbar, np.conj(to_numpy(dz)), rtol=1e-12, atol=1e-14)


def test_layout_shapes_dtypes_and_mixed_pytrees(C):
    xp = dispatch.default_backend().xp
    z, x = C(Z[:2]), xp.asarray(np.array([0.3, -0.7, 1.2]), dtype=xp.float64)

    def f(p):  # a complex and a real input, a complex and a real output
        return {"c": p["z"] * pxp.sum(p["x"]), "r": pxp.sum(pxp.abs(p["z"]) ** 2) * p["x"]}

    for transform in (pa.jacrev, pa.jacfwd):
        jac = transform(f, complex_layout="real")({"z": z, "x": x})
        assert tuple(jac["c"]["z"].shape) == (2, 2, 2, 2) and tuple(jac["c"]["x"].shape) == (2, 2, 3)
        assert tuple(jac["r"]["z"].shape) == (3, 2, 2) and tuple(jac["r"]["x"].shape) == (3, 3)
        assert jac["c"]["z"].dtype == xp.float64
        # d Re(z_k sum x) / d x_j = Re z_k; d (sum |z|^2 x_i) / d Re z_k = 2 Re z_k x_i
        assert_close(jac["c"]["x"][:, 0, :], np.tile(Z[:2].real[:, None], (1, 3)), rtol=1e-12)
        assert_close(jac["r"]["z"][..., 0], 2 * np.outer(to_numpy(x), Z[:2].real), rtol=1e-12)


def test_single_precision_keeps_its_precision(C):
    xp = dispatch.default_backend().xp
    z = C(Z, "complex64")
    assert pa.jacrev(lambda v: v * pxp.conj(v), complex_layout="real")(z).dtype == xp.float32
    dz, dzbar = pa.jacfwd(lambda v: v * pxp.conj(v), complex_layout="wirtinger")(z)
    assert dz.dtype == xp.complex64 and dzbar.dtype == xp.complex64
    assert_close(dzbar, np.diag(Z).astype(np.complex64), rtol=1e-5)


def test_has_aux_argnums_and_chunks(C):
    z, w = C(Z), C(Z[::-1])

    def f(a, b):
        return a * pxp.conj(b), {"n": pxp.sum(pxp.abs(a))}

    for transform in (pa.jacrev, pa.jacfwd):
        (dz_a, dz_b), (dzbar_a, dzbar_b) = transform(
            f, argnums=(0, 1), has_aux=True, complex_layout="wirtinger"
        )(z, w)[0]
        assert_close(dz_a, np.diag(np.conj(Z[::-1])), atol=1e-14)  # d(a conj b)/da = conj b
        assert_close(dzbar_b, np.diag(Z), atol=1e-14)  # d(a conj b)/d conj(b) = a
        assert np.abs(to_numpy(dz_b)).max() == 0 and np.abs(to_numpy(dzbar_a)).max() == 0
        _, aux = transform(f, has_aux=True, complex_layout="real")(z, w)
        assert_close(aux["n"], np.abs(Z).sum())
        for chunk in (1, 2, "auto"):
            assert_close(
                transform(lambda v: pxp.abs(v) * v, complex_layout="real", chunk_size=chunk)(z),
                fd_real_layout(lambda v: np.abs(v) * v, Z),
                rtol=1e-6,
                atol=1e-7,
            )


def test_hessians(C):
    z = C(Z)
    # |z|^2 summed: d2/dz dz = 0, d2/dz̄ dz = identity (the complex Hessian of a real quadratic)
    (zz, zbar_z), (z_zbar, zbar_zbar) = pa.hessian(
        lambda v: pxp.sum(pxp.abs(v) ** 2), complex_layout="wirtinger"
    )(z)
    assert_close(zbar_z, np.eye(3, dtype=complex), atol=1e-14)
    assert_close(z_zbar, np.eye(3, dtype=complex), atol=1e-14)
    assert np.abs(to_numpy(zz)).max() < 1e-14 and np.abs(to_numpy(zbar_zbar)).max() < 1e-14
    # the real layout: the Hessian of the realified map, (3, 2, 3, 2); |z|^2 gives 2 I
    real = pa.hessian(lambda v: pxp.sum(pxp.abs(v) ** 2), complex_layout="real")(z)
    assert_close(real, 2 * np.eye(6).reshape(3, 2, 3, 2), atol=1e-14)
    # holomorphic: the second complex derivative of sum(z^3) is diag(6 z)
    assert_close(pa.hessian(lambda v: pxp.sum(v**3), holomorphic=True)(z), np.diag(6 * Z), rtol=1e-12)
    # sum |z|^3 against finite differences of its real-layout gradient, (3 x |z|, 3 y |z|)
    grad_np = lambda v: 3 * v * np.abs(v)  # noqa: E731  (as x + iy)
    h = to_numpy(pa.hessian(lambda v: pxp.sum(pxp.abs(v) ** 3), complex_layout="real")(z))
    eps = 1e-5
    for k in range(3):
        for part, step in ((0, eps), (1, 1j * eps)):
            e = np.zeros(3, complex)
            e[k] = step
            col = (grad_np(Z + e) - grad_np(Z - e)) / (2 * eps)
            assert_close(h[:, 0, k, part], col.real, rtol=1e-4, atol=1e-5)
            assert_close(h[:, 1, k, part], col.imag, rtol=1e-4, atol=1e-5)


def test_vmap_and_grad_of_complex_layouts(C):
    zs = C(np.stack([Z, Z * 2, Z * -1j]))
    f = lambda v: v * pxp.conj(v) + pxp.exp(v)  # noqa: E731
    batched = pa.vmap(pa.jacfwd(f, complex_layout="wirtinger"))(zs)
    for i in range(3):
        dz, dzbar = pa.jacrev(f, complex_layout="wirtinger")(zs[i, ...])
        assert_close(batched[0][i, ...], dz, rtol=1e-12)
        assert_close(batched[1][i, ...], dzbar, rtol=1e-12)
    # differentiating the real layout again: d/dz of sum(df/dz̄) for f = z conj(z) + exp z, df/dz̄ = z
    g = pa.grad(lambda v: pxp.sum(pxp.real(pa.jacrev(f, complex_layout="wirtinger")(v)[1])))(C(Z))
    assert_close(
        g, np.ones(3, dtype=complex), atol=1e-12
    )  # PyTorch's convention: dL/dx + i dL/dy of sum(Re z) is 1


def test_errors(C):
    xp = dispatch.default_backend().xp
    z, x = C(Z), xp.asarray(np.array([1.0, 2.0]), dtype=xp.float64)
    for transform in (pa.jacrev, pa.jacfwd, pa.hessian):
        with pytest.raises(TypeError, match="holomorphic=True .* complex_layout"):
            transform(lambda v: pxp.sum(v * v))(z)
        with pytest.raises(ValueError, match="complex_layout must be None, 'real' or 'wirtinger'"):
            transform(pxp.sin, complex_layout="polar")
        with pytest.raises(ValueError, match="give one"):
            transform(pxp.sin, holomorphic=True, complex_layout="real")
        with pytest.raises(TypeError, match="holomorphic must be True or False"):
            transform(pxp.sin, holomorphic="yes")
        assert core.current_level() == 0
    for transform in (pa.jacrev, pa.jacfwd):
        with pytest.raises(TypeError, match=r"argument 0 has dtype float64; the complex Jacobian"):
            transform(lambda v: v * 1j, holomorphic=True)(x)
        with pytest.raises(TypeError, match=r"output has dtype float64"):
            transform(pxp.abs, holomorphic=True)(z)
        with pytest.raises(TypeError, match=r"wirtinger.*argument 0 is real"):
            transform(lambda v: v * 1j, complex_layout="wirtinger")(x)
        # a real input with complex outputs: the real layout takes it
        assert tuple(transform(lambda v: v * (1 + 2j), complex_layout="real")(x).shape) == (2, 2, 2)
        assert core.current_level() == 0

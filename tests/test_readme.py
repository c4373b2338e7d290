"""The README's examples run (on NumPy; the CUDA kernel of the custom-op example needs a GPU, so that
example runs with its CuPy parts taken out and the NumPy kernel in their place)."""

import pathlib
import re

import numpy as np
import pytest

import polyad as pa

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def block(marker):
    """The one README example containing ``marker``."""
    (found,) = [b for b in BLOCKS if marker in b]
    return found


pytestmark = pytest.mark.skipif(pa.get_backend() != "numpy", reason="the README's examples use NumPy arrays")


def test_first_examples_run():
    scope = {}
    exec(BLOCKS[0], scope)
    x, w = scope["x"], scope["w"]
    assert scope["g"].shape == w.shape and scope["per_example"].shape == x.shape
    assert scope["J"].shape == (x.shape[0], w.shape[0]) and scope["H"].shape == (3, 3)
    np.testing.assert_allclose(scope["tangent"], np.cos(w))


def test_custom_op_example_runs_on_the_cpu():
    code = block("mylib::softclip").replace("import cupy, numpy as np", "import numpy as np")
    code = re.sub(r"_softclip_cuda = cupy\.ElementwiseKernel\(.*?\)\n", "", code, flags=re.S)
    code = re.sub(r'@softclip\.register_kernel\("cuda"\).*?\n\n', "", code, flags=re.S)
    code = code.replace("cupy.linspace(", "np.linspace(").replace("mylib::softclip", "readme::softclip")
    assert "cupy." not in code  # every CUDA-only line is gone
    scope = {}
    exec(code, scope)
    x = scope["x"]
    np.testing.assert_allclose(scope["g"], 1 - np.tanh(x / 2.0) ** 2, rtol=1e-12)
    np.testing.assert_allclose(scope["H"], np.diag(-2 * np.tanh(x) * (1 - np.tanh(x) ** 2)), atol=1e-12)


def test_special_functions_example_runs():
    scope = {}
    exec(block("special.log_ndtr"), scope)
    x, y = scope["x"], scope["y"]
    # at theta = 0, d/dz log ndtr(+-z) = +-2 pdf(0): the gradient is 2 pdf(0) sum((2y - 1) x)
    expected = 2 / np.sqrt(2 * np.pi) * ((2 * y - 1)[:, None] * x).sum(axis=0)
    np.testing.assert_allclose(scope["g"], expected, rtol=1e-12)
    assert scope["H"].shape == (3, 3)
    np.testing.assert_allclose(scope["H"], scope["H"].T, rtol=1e-12)


def test_sparse_jacobian_example_runs():
    pytest.importorskip("scipy")
    scope = {}
    exec(block("pa.sparse_jacfwd(residual"), scope)
    u, jac, residual = scope["u"], scope["jac"], scope["residual"]
    assert jac.n_colors == 3 and scope["pattern"].nnz == 3 * u.shape[0] - 2
    assert np.max(np.abs(residual(u))) < 1e-6  # Newton converged
    h = 1.0 / (u.shape[0] + 1)
    J = jac(u)  # the analytic Jacobian: tridiag(-1, 2, -1) / h^2 - diag(exp(u))
    np.testing.assert_allclose(J.diagonal(), 2 / h**2 - np.exp(u), rtol=1e-12)
    np.testing.assert_allclose(J.diagonal(1), -1 / h**2, rtol=1e-12)
    H, v = scope["H"].toarray(), u[:1000]
    np.testing.assert_allclose(H, np.diag(np.r_[2, np.full(998, 4), 2] + np.exp(v)) - 2 * np.eye(1000, k=1)
                               - 2 * np.eye(1000, k=-1), rtol=1e-12)  # fmt: skip


def test_complex_jacobians_example_runs():
    scope = {}
    exec(block('complex_layout="wirtinger"'), scope)
    z = scope["z"]
    np.testing.assert_allclose(scope["dz"], np.diag(np.conj(z)), atol=1e-15)
    np.testing.assert_allclose(scope["dzbar"], np.diag(z), atol=1e-15)
    # d|z| / d(x, y) = (x, y) / |z|
    np.testing.assert_allclose(
        scope["J"][[0, 1], [0, 1], :], np.stack([z.real, z.imag], -1) / np.abs(z)[:, None]
    )
    np.testing.assert_allclose(scope["dexp"], np.diag(np.exp(z)), rtol=1e-15)


def test_cluster_example_runs():
    pytest.importorskip("distributed")
    scope = {"__name__": "readme_cluster_example"}
    exec(block("LocalCluster"), scope)
    x, W = scope["x"], scope["W"]
    h = np.tanh(W @ x)
    expected = ((1 - np.tanh(W @ h) ** 2)[:, None] * W * (1 - h**2)[None, :]) @ W
    np.testing.assert_allclose(scope["J"], expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(scope["J2"], expected, rtol=1e-12, atol=1e-14)
    assert scope["lazy"].chunks[0] == (100, 100)
    np.testing.assert_allclose(scope["G"], np.tile(expected.sum(axis=0), (8, 1)), rtol=1e-12)


def test_jit_example_runs():
    scope = {}
    exec(block("pa.jit(pa.grad(loss)"), scope)
    w, x, loss = scope["w"], scope["x"], scope["loss"]

    # the gradient at w + 0.1, against central differences of the same loss written in NumPy
    def numpy_loss(w_):
        h = np.tanh(np.tanh(x @ w_) @ w_)
        return np.sum(np.where(h > 0, h, 0.1 * h))

    w1, eps = w + 0.1, 1e-6
    fd = np.zeros_like(w1)
    for i in np.ndindex(*w1.shape):
        e = np.zeros_like(w1)
        e[i] = eps
        fd[i] = (numpy_loss(w1 + e) - numpy_loss(w1 - e)) / (2 * eps)
    np.testing.assert_allclose(scope["g"], fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(scope["per_row"], [loss(w, r, order=1) for r in x], rtol=1e-12)
    assert scope["step"].cache_info().size == 1

"""The README's examples run (on NumPy; the CUDA kernel of the custom-op example needs a GPU, so that
example runs with its CuPy parts taken out and the NumPy kernel in their place; the GPU example of the
install section runs with NumPy in place of CuPy, and as written where a GPU is present)."""

import os
import pathlib
import re
import subprocess
import sys

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


def test_gpu_example_runs_with_numpy_in_place_of_cupy():
    code = block("cupy.linspace(0.0, 1.0, 1000)")
    code = code.replace("import cupy, polyad as pa", "import numpy as np, polyad as pa").replace(
        "cupy.", "np."
    )
    assert "cupy" not in code.replace("cupy.ndarray", "")  # only the comment names CuPy now
    scope = {}
    exec(code, scope)
    x, J = scope["x"], scope["J"]
    # d/dx_j sin(x_i) sum(x^2) = cos(x_i) sum(x^2) [i == j] + 2 sin(x_i) x_j
    expected = np.diag(np.cos(x) * np.sum(x**2)) + 2 * np.outer(np.sin(x), x)
    assert type(J) is np.ndarray
    np.testing.assert_allclose(J, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.cuda
def test_gpu_example_runs_on_cupy():
    scope = {}
    exec(block("cupy.linspace(0.0, 1.0, 1000)"), scope)
    cupy = scope["cupy"]
    x, J = scope["x"], scope["J"]
    assert type(J) is cupy.ndarray and J.shape == (1000, 1000)
    expected = cupy.diag(cupy.cos(x) * cupy.sum(x**2)) + 2 * cupy.outer(cupy.sin(x), x)
    assert float(cupy.abs(J - expected).max()) < 1e-10


def test_first_examples_run():
    scope = {}
    exec(block("per_example = pa.vmap(pa.grad(loss)"), scope)
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


def test_scipy_and_sklearn_example_runs(tmp_path):
    """The example runs where SciPy was imported with SCIPY_ARRAY_API=1 (a subprocess: this process's
    SciPy was not); its results are checked here against finite differences, analytic formulas and loops
    of the libraries' own NumPy results."""
    scipy_stats = pytest.importorskip("scipy.stats")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    out = tmp_path / "results.npz"
    names = ["x", "y_true", "X", "T", "d_variation", "d_kl", "per_row_entropy", "d_mse", "scaled", "d_scaled"]
    code = block("mean_squared_error")
    code += "\nimport numpy\nnumpy.savez({!r}, {})\n".format(str(out), ", ".join(f"{n}={n}" for n in names))
    code += "numpy.save({!r}, scaled_batch)\n".format(str(tmp_path / "batch.npy"))
    env = dict(os.environ, SCIPY_ARRAY_API="1", POLYAD_BACKEND="numpy")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=README.parent)
    r = np.load(out)
    x, eps = r["x"], 1e-6
    fd = [
        (scipy_stats.variation(x + eps * e) - scipy_stats.variation(x - eps * e)) / (2 * eps)
        for e in np.eye(6)
    ]
    np.testing.assert_allclose(r["d_variation"], fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(r["d_kl"], -x / x[::-1], rtol=1e-12)  # d/dq x log(x/q) = -x/q
    np.testing.assert_allclose(r["d_mse"], 2 * (x - r["y_true"]) / 6, rtol=1e-12)
    rows = np.random.default_rng(0)  # the example's draws, replayed: x, then the entropy rows
    rows.uniform(0.5, 2.0, 6)
    p = rows.uniform(0.1, 1.0, (4, 6))
    np.testing.assert_allclose(r["per_row_entropy"], [scipy_stats.entropy(q) for q in p], rtol=1e-12)
    X, T = r["X"], r["T"]

    def scale(a):
        return preprocessing.StandardScaler().fit_transform(a)

    np.testing.assert_allclose(r["scaled"], scale(X), rtol=1e-12)
    np.testing.assert_allclose(
        r["d_scaled"], (scale(X + eps * T) - scale(X - eps * T)) / (2 * eps), rtol=1e-5, atol=1e-8
    )
    batch = np.load(tmp_path / "batch.npy")
    rows.standard_normal((8, 3)), rows.standard_normal((8, 3))
    inputs = rows.standard_normal((5, 8, 3))
    np.testing.assert_allclose(batch, np.stack([scale(a) for a in inputs]), rtol=1e-12, atol=1e-12)


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


def test_structured_solves_example_runs():
    scope = {}
    exec(block("neg_log_marginal_likelihood"), scope)
    f, theta, x, y = (scope[k] for k in ("neg_log_marginal_likelihood", "theta", "x", "y"))
    h = 1e-6  # central differences of the value, then of the gradient
    for i in range(3):
        e = np.eye(3)[i] * h
        fd = (float(f(theta + e, x, y)) - float(f(theta - e, x, y))) / (2 * h)
        np.testing.assert_allclose(scope["g"][i], fd, rtol=1e-6, atol=1e-8)
        fd_row = (pa.grad(f)(theta + e, x, y) - pa.grad(f)(theta - e, x, y)) / (2 * h)
        np.testing.assert_allclose(scope["H"][i], fd_row, rtol=1e-5, atol=1e-6)


def test_scipy_fft_backend_example_runs():
    import scipy.fft

    scope = {}
    exec(block("pa.use_scipy_fft_backend()"), scope)
    x = scope["x"]
    # roughness(u) = |K D u|^2 with D the orthonormal DCT and K = diag(k): the gradient is 2 D^T K^2 D x
    k2 = np.arange(64.0) ** 2
    expected = 2 * scipy.fft.idct(k2 * scipy.fft.dct(x, norm="ortho"), norm="ortho")
    np.testing.assert_allclose(scope["g"], expected, rtol=1e-10, atol=1e-10)
    rows = np.eye(64)[:4]
    np.testing.assert_allclose(
        scope["per_row"], 2 * scipy.fft.idct(k2 * scipy.fft.dct(rows, norm="ortho"), norm="ortho"), atol=1e-10
    )
    assert type(scope["spectrum"]) is np.ndarray
    np.testing.assert_array_equal(scope["spectrum"], scipy.fft.dct(x))


def test_loops_example_matches_the_unrolled_loop_and_the_closed_form():
    scope = {}
    exec(block("def simulate"), scope)
    k, u0 = 0.5, np.linspace(0.1, 1.0, 50)
    h = 1e-6

    def unrolled(k):  # the same Euler steps in NumPy, for central differences in k
        u = u0.copy()
        for _ in range(10_000):
            u = u - 1e-3 * k * u**3
        return u.sum()

    np.testing.assert_allclose(scope["dk"], (unrolled(k + h) - unrolled(k - h)) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(scope["slopes"], 1 / (2 * np.sqrt([2.0, 9.0, 100.0])), rtol=1e-10)
    np.testing.assert_allclose(scope["clipped"], [-1.0, np.sin(1.0)])


def test_numpy_code_example_runs():
    scope = {}
    exec(block("def energy(u, kappa)"), scope)
    energy, u = scope["energy"], scope["u"]
    eps = 1e-6
    fd = np.array([(energy(u + eps * e, 2.0) - energy(u - eps * e, 2.0)) / (2 * eps) for e in np.eye(6)])
    np.testing.assert_allclose(scope["g"], fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(scope["H"], scope["H"].T, atol=1e-12)
    assert scope["batch"].shape == (4,)


def test_differential_equations_example():
    """The gradient against central differences, the sensitivities' shape and the vmap against a loop."""
    scope = {}
    exec(block("def lotka_volterra(t, y, p)"), scope)
    loss, solution = scope["loss"], scope["solution"]
    p = np.array([1.1, 0.1, 1.4, 0.08])
    eps = 1e-6
    fd = [(float(loss(p + eps * e)) - float(loss(p - eps * e))) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(scope["g"], fd, rtol=1e-5)
    assert scope["S"].shape == (2, 21, 4)
    np.testing.assert_allclose(scope["S"][:, 0, :], 0.0, atol=1e-12)  # y(0) = y0 whatever p
    p_true = np.array([1.0, 0.1, 1.5, 0.075])
    looped = [solution(p_true, y0)[:, -1] for y0 in scope["y0s"]]
    np.testing.assert_allclose(scope["finals"], looped, rtol=1e-12)


def test_solvers_example_matches_closed_forms():
    pytest.importorskip("scipy")
    scope = {}
    exec(block("optimize.root_scalar"), scope)
    np.testing.assert_allclose([scope["dx_da"], scope["dx_db"]], [-0.25, 0.25], atol=1e-10)
    np.testing.assert_allclose(scope["d2x_db2"], -0.09375, atol=1e-10)
    X, w = scope["X"], scope["ridge"](np.float64(0.5))
    closed = -np.linalg.solve(X.T @ X + 0.5 * np.eye(3), w)
    np.testing.assert_allclose(scope["dw_dlam"], closed, rtol=1e-6)

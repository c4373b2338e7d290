"""du*/dλ of the 2-D Bratu problem on a 128 x 128 grid, through ``pa.custom_root``.

The Bratu problem ``-Δu = λ exp(u)`` on the unit square with ``u = 0`` on the boundary, discretised with the
5-point Laplacian on 128 x 128 interior points (16,384 unknowns). Newton's method solves it with the
Jacobian from ``pa.sparse_jacfwd`` (a 5-point stencil: a handful of colours, one JVP each) and SciPy's
``spsolve``. Wrapped in ``pa.custom_root``, the solution is differentiable in λ by the implicit function
theorem: ``du*/dλ = -(dF/du)^{-1} dF/dλ``, one more sparse solve (``tangent_solve``: ``sparse_jacfwd`` of
the linearised residual, then ``polyad.sparse.linalg.spsolve``), whatever Newton did.

Checks: ``du*/dλ`` by ``pa.jacfwd`` and by ``pa.grad`` of a functional against central differences of
converged Newton solutions (to 1e-6, relative), and the residual of the converged solution.
"""

import time

import numpy as np
from _gallery import output_dir, pyplot, save
from scipy.sparse.linalg import spsolve as scipy_spsolve

import polyad as pa
from polyad import xp
from polyad.sparse import linalg as splinalg

N = 128
H = 1.0 / (N + 1)


def residual(u, lam):
    """F(u, λ) = -Δu - λ exp(u), on the flat interior values (zero boundary)."""
    grid = xp.reshape(u, (N, N))
    padded = xp.zeros((N + 2, N + 2), dtype=u.dtype)
    padded[1:-1, 1:-1] = grid
    lap = padded[2:, 1:-1] + padded[:-2, 1:-1] + padded[1:-1, 2:] + padded[1:-1, :-2] - 4.0 * grid
    return xp.reshape(-lap / H**2 - lam * xp.exp(grid), (N * N,))


def newton(f, u, tol=1e-10):
    """Newton's method on plain arrays: sparse Jacobian by pa.sparse_jacfwd, solved by SciPy."""
    for _ in range(30):
        r = np.asarray(f(u))
        if np.max(np.abs(r)) < tol:
            return u
        u = u - scipy_spsolve(pa.sparse_jacfwd(f)(u).tocsc(), r)
    raise RuntimeError("Newton did not converge")


def tangent_solve(g, y):
    """Solve g(x) = y for the linearised residual g: its sparse Jacobian, then spsolve."""
    return splinalg.spsolve(pa.sparse_jacfwd(g)(y), y)


def solution(lam):
    return pa.custom_root(lambda u: residual(u, lam), np.zeros(N * N), newton, tangent_solve)


def main():
    folder = output_dir(__doc__.splitlines()[0])
    lam = np.float64(5.0)
    t = time.perf_counter()
    u = solution(lam)
    t_solve = time.perf_counter() - t
    t = time.perf_counter()
    du = pa.jacfwd(solution)(lam)
    t_jvp = time.perf_counter() - t
    t = time.perf_counter()
    dmean = pa.grad(lambda lam: xp.mean(solution(lam)))(lam)
    t_grad = time.perf_counter() - t
    print(f"solve {t_solve:.2f} s, du*/dλ by jacfwd {t_jvp:.2f} s, d mean(u*)/dλ by grad {t_grad:.2f} s")

    assert np.max(np.abs(residual(u, lam))) < 1e-8
    step = 1e-4  # central differences of converged Newton solutions
    fd = (newton(lambda v: residual(v, lam + step), u) - newton(lambda v: residual(v, lam - step), u)) / (
        2 * step
    )
    error = np.max(np.abs(du - fd)) / np.max(np.abs(fd))
    print(f"max |du*/dλ - central difference| / max |du*/dλ| = {error:.1e}")
    assert error < 1e-6, error
    assert abs(float(dmean) - fd.mean()) < 1e-6 * abs(fd.mean()), (float(dmean), fd.mean())

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, field, title in ((left, u, f"u*, λ = {lam:g}"), (right, du, "du*/dλ (implicit)")):
        image = ax.imshow(np.reshape(field, (N, N)), origin="lower", extent=(0, 1, 0, 1), cmap="viridis")
        ax.set(title=title, xlabel="x", ylabel="y")
        fig.colorbar(image, ax=ax, shrink=0.8)
    save(fig, folder, "bratu_implicit.png")


if __name__ == "__main__":
    main()

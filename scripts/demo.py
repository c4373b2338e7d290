"""polyad demo: Newton's method on the 2-D Bratu problem, with Jacobians from polyad's transforms.

The Bratu problem  -Δu = λ exp(u)  on the unit square, u = 0 on the boundary, discretised with the
5-point Laplacian on an n x n interior grid, is a classic nonlinear PDE (combustion, Chandrasekhar's
model of star cores): it has solutions for λ below about 6.81. Newton's method needs the Jacobian of the
discrete residual F(u) = A u - h² λ exp(u); polyad computes it from the residual code alone, written once
against the Array API:
- ``pa.jacfwd`` (forward mode, vmap over the input basis) drives the Newton iteration;
- ``pa.jacrev`` (reverse mode, vmap over the output basis) and a Python loop of ``pa.vjp`` calls are timed
  against it, and the Jacobian is checked against the analytic one, A - h² λ diag(exp(u));
- ``pa.sparse_jacfwd`` gets the same Jacobian from 5 JVPs: ``pa.jacobian_sparsity`` finds the five-point
  pattern, whose columns take 5 colours (columns of one colour share no row); timed against ``pa.jacfwd``;
- then the grid grows to 128 x 128 (16384 unknowns, where a dense Jacobian has 268 million entries), and
  Newton solves with the backend's direct sparse solve on the sparse Jacobian, its pattern found once: the
  ``sparse`` field of the backend contract, SciPy's ``spsolve`` for NumPy, cupyx's on the GPU for CuPy
  (the Jacobian is made on the GPU and never leaves it). array_api_strict has no sparse matrices: its
  sparse Jacobians are CSR arrays of its own (``ArrayCSR``), solved by SciPy on a host copy.

Run with ``make demo`` (default backend) or ``POLYAD_BACKEND=array_api_strict python scripts/demo.py``.
The sparse part needs SciPy (``pip install polyad[scipy]``; ``make demo`` installs it). The demo also draws
the solution and the residual per Newton iteration into a PNG (``--figure PATH``; default
``<temp dir>/polyad-demo/bratu_demo.png``, ``make demo`` writes ``build/demo/bratu_demo.png``): that needs
matplotlib (``pip install polyad[plot]``), and without it the demo says so and draws nothing.
"""

import argparse
import os
import tempfile
import time

import polyad as pa
from polyad import xp
from polyad.core import dispatch


def laplacian(u, n):
    """The 5-point negative Laplacian (times h²) of the interior values ``u`` (flattened n x n)."""
    grid = xp.reshape(u, (n, n))
    zrow = xp.zeros((1, n), dtype=u.dtype)
    zcol = xp.zeros((n + 2, 1), dtype=u.dtype)
    padded = xp.concat([zcol, xp.concat([zrow, grid, zrow], axis=0), zcol], axis=1)
    centre = padded[1:-1, 1:-1]
    neighbours = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    return xp.reshape(4.0 * centre - neighbours, (n * n,))


def residual(u, lam, n):
    """F(u) = A u - h² λ exp(u): zero at a solution of the discrete Bratu problem."""
    h = 1.0 / (n + 1)
    return laplacian(u, n) - (h * h * lam) * xp.exp(u)


def analytic_jacobian(u, lam, n):
    """A - h² λ diag(exp(u)), built by hand: the reference the transforms are checked against."""
    h = 1.0 / (n + 1)
    size = n * n
    eye = xp.eye(size, dtype=u.dtype)
    columns = [laplacian(eye[:, j], n) for j in range(size)]
    a = xp.stack(columns, axis=1)
    return a - (h * h * lam) * (eye * xp.exp(u)[None, :])


def jacobian_by_vjp_loop(f, u):
    """The Jacobian row by row, one ``pa.vjp`` call per row: what a loop of VJPs costs."""
    out, vjp_fn = pa.vjp(f, u)
    eye = xp.eye(out.shape[0], dtype=u.dtype)
    return xp.stack([vjp_fn(eye[i, :])[0] for i in range(out.shape[0])])


def sparse_analytic_jacobian(u, lam, n):
    """A - h² λ diag(exp(u)) as a SciPy sparse matrix: A = kron(I, T) + kron(T, I), T = tridiag(-1, 2, -1)."""
    import numpy as np
    import scipy.sparse as sp

    h = 1.0 / (n + 1)
    t = sp.diags([-np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    a = sp.kron(sp.identity(n), t) + sp.kron(t, sp.identity(n))
    return (a - sp.diags(h * h * lam * np.exp(host(u)))).tocsr()


def host(x):
    """A NumPy copy of a backend array (SciPy computes on NumPy arrays)."""
    return dispatch.backend_of_array(x).to_numpy(x)


def timed(fn, repeat=3):
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="interior grid points per side (default 16)")
    parser.add_argument("--lam", type=float, default=6.0, help="Bratu parameter λ (default 6.0, < 6.81)")
    parser.add_argument("--tol", type=float, default=1e-10, help="Newton tolerance on ||F||_inf")
    parser.add_argument("--sparse-n", type=int, default=128,
                        help="grid side of the sparse Newton run (default 128; 0: skip it)")  # fmt: skip
    default_figure = os.path.join(tempfile.gettempdir(), "polyad-demo", "bratu_demo.png")
    parser.add_argument("--figure", default=default_figure,
                        help="where to write the PNG of the solution and the convergence")  # fmt: skip
    args = parser.parse_args()
    n, lam = args.n, args.lam

    print(f"polyad {pa.__version__} demo: 2-D Bratu problem -Δu = λ exp(u), λ = {lam}, {n}x{n} grid")
    u = xp.zeros(n * n, dtype=xp.float64)
    print(f"backend: {pa.get_backend()}  device: {u.device}  unknowns: {n * n}")

    def f(v):
        return residual(v, lam, n)

    jac = pa.jacfwd(f)
    start = time.perf_counter()
    print("Newton iterations (Jacobian by pa.jacfwd: vmap of jvp over the input basis):")
    converged = False
    dense_norms = []
    for it in range(1, 30):
        r = f(u)
        norm = float(xp.max(xp.abs(r)))
        dense_norms.append(norm)
        print(f"  iter {it - 1:2d}  ||F(u)||_inf = {norm:.3e}")
        if norm < args.tol:
            converged = True
            break
        u = u - xp.linalg.solve(jac(u), r)
    elapsed = time.perf_counter() - start
    status = "converged" if converged else "did NOT converge"
    print(f"Newton {status} in {it - 1} iterations, {elapsed * 1e3:.1f} ms; max u = {float(xp.max(u)):.6f}")

    # The Jacobian at the solution, three ways, against the hand-built one.
    reference = analytic_jacobian(u, lam, n)
    j_fwd, t_fwd = timed(lambda: pa.jacfwd(f)(u))
    j_rev, t_rev = timed(lambda: pa.jacrev(f)(u))
    j_loop, t_loop = timed(lambda: jacobian_by_vjp_loop(f, u), repeat=1)
    print(f"Jacobian {n * n}x{n * n} at the solution (best of 3):")
    for name, j, t in (("pa.jacfwd (vmap of jvp)", j_fwd, t_fwd), ("pa.jacrev (vmap of vjp)", j_rev, t_rev),
                       ("loop of pa.vjp calls", j_loop, t_loop)):  # fmt: skip
        err = float(xp.max(xp.abs(j - reference)))
        print(f"  {name:26s} {t * 1e3:9.2f} ms   max |J - J_analytic| = {err:.1e}")
    print(f"  vmap speed-up over the vjp loop: jacrev {t_loop / t_rev:.1f}x, jacfwd {t_loop / t_fwd:.1f}x")
    if not converged:
        raise SystemExit(1)
    runs = [(n, u, dense_norms, "pa.jacfwd")]
    if args.sparse_n:
        runs += sparse_part(f, u, n, lam, args.sparse_n, args.tol, t_fwd)
    draw(runs, lam, args.figure)


def draw(runs, lam, path):
    """The solution of the largest grid and the residual per Newton iteration of each run, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no figure: it needs matplotlib, which is not installed: pip install 'polyad[plot]', then run "
              "the demo again)")  # fmt: skip
        return
    n, u = runs[-1][0], runs[-1][1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.2), gridspec_kw={"wspace": 0.4})
    image = left.imshow(host(xp.reshape(u, (n, n))), origin="lower", extent=(0, 1, 0, 1), cmap="viridis")
    fig.colorbar(image, ax=left, label="u")
    left.set(xlabel="x", ylabel="y", title=f"u, λ = {lam}, {n}x{n} grid")
    for k, (m, _, norms, how) in enumerate(runs):
        right.semilogy(range(len(norms)), norms, "o-", color=f"C{k}", label=f"{m}x{m}, Jacobian by {how}")
    right.set(xlabel="Newton iteration", ylabel="max |F(u)|  (F = A u - h²λ exp(u))",
              title="Residual per Newton iteration")  # fmt: skip
    right.grid(True, which="both", alpha=0.3)
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8)  # below: never on a curve
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"figure: {os.path.abspath(path)}")


DENSE_CONTAINER_N = 48  # the largest Newton grid where sparse Jacobians are dense arrays (array_api_strict)


def sparse_part(f_small, u_small, n_small, lam, n, tol, t_dense_small):
    """Sparse Jacobians: against pa.jacfwd on small grids, then Newton on an n x n grid, each step solved
    by the backend's own direct sparse solve (its contract's ``sparse.spsolve``)."""
    try:
        import scipy.sparse  # noqa: F401  (patterns and colourings are SciPy matrices)
    except ImportError:
        print("(sparse part skipped: it needs SciPy, which is not installed: pip install polyad[scipy])")
        return []
    support = dispatch.backend_of_array(u_small).sparse  # SciPy for NumPy, cupyx for CuPy
    if support.container == "dense" and n > DENSE_CONTAINER_N:
        side = f"{DENSE_CONTAINER_N} x {DENSE_CONTAINER_N}"
        print(f"({dispatch.backend_of_array(u_small).name} has no sparse matrices: its sparse Jacobians are "
              f"dense arrays, so the Newton grid is {side}, not {n} x {n})")  # fmt: skip
        n = DENSE_CONTAINER_N
    for m in (n_small, 2 * n_small):  # the grid above, then one with four times the unknowns
        f_m = f_small if m == n_small else (lambda v, m=m: residual(v, lam, m))
        u_m = u_small if m == n_small else xp.linspace(0.0, 0.5, m * m, dtype=xp.float64)
        jac_m = pa.sparse_jacfwd(f_m, sparsity=pa.jacobian_sparsity(f_m)(u_m))
        j_sparse, t_sparse = timed(lambda jac=jac_m, u=u_m: jac(u))
        t_dense = t_dense_small if m == n_small else timed(lambda f=f_m, u=u_m: pa.jacfwd(f)(u))[1]
        on_host = support.to_scipy(j_sparse)  # a host copy, for the check against SciPy's matrix
        err = abs(on_host - sparse_analytic_jacobian(u_m, lam, m)).max()
        k = jac_m.n_colors
        print(f"Jacobian {m * m}x{m * m} by pa.sparse_jacfwd: {k} colours, so {k} JVPs instead of "
              f"pa.jacfwd's {m * m} (best of 3):")  # fmt: skip
        print(f"  {'pa.sparse_jacfwd':26s} {t_sparse * 1e3:9.2f} ms   max |J - J_analytic| = {err:.1e}   "
              f"{t_dense / t_sparse:.1f}x faster than pa.jacfwd ({t_dense * 1e3:.2f} ms)")  # fmt: skip

    def f(v):
        return residual(v, lam, n)

    u = xp.zeros(n * n, dtype=xp.float64)
    print(f"Newton on a {n}x{n} grid ({n * n} unknowns; a dense Jacobian would have {(n * n) ** 2:.2e} "
          "entries):")  # fmt: skip
    start = time.perf_counter()
    pattern = pa.jacobian_sparsity(f)(u)
    t_detect = time.perf_counter() - start
    jac = pa.sparse_jacfwd(f, sparsity=pattern)
    t_color = time.perf_counter() - start - t_detect
    print(f"  pattern by pa.jacobian_sparsity: {pattern.nnz} non-zeros in {t_detect * 1e3:.1f} ms; "
          f"{jac.n_colors} colours (coloured in {t_color * 1e3:.1f} ms)")  # fmt: skip
    t_jac = t_solve = 0.0
    converged = False
    norms = []
    for it in range(1, 30):
        r = f(u)
        norm = float(xp.max(xp.abs(r)))
        norms.append(norm)
        print(f"  iter {it - 1:2d}  ||F(u)||_inf = {norm:.3e}")
        if norm < tol:
            converged = True
            break
        t0 = time.perf_counter()
        J = jac(u)
        t1 = time.perf_counter()
        du = support.spsolve(J, r)  # on the device for CuPy (cupyx), SciPy's SuperLU for NumPy
        t_jac, t_solve = t_jac + t1 - t0, t_solve + time.perf_counter() - t1
        u = u - du
    elapsed = time.perf_counter() - start
    status = "converged" if converged else "did NOT converge"
    print(f"Sparse Newton {status} in {it - 1} iterations, {elapsed * 1e3:.0f} ms (Jacobians "
          f"{t_jac * 1e3:.0f} ms, spsolve {t_solve * 1e3:.0f} ms); "
          f"max u = {float(xp.max(u)):.6f}")  # fmt: skip
    err = abs(support.to_scipy(jac(u)) - sparse_analytic_jacobian(u, lam, n)).max()
    print(f"  sparse Jacobian at the solution: max |J - J_analytic| = {err:.1e}")
    if not converged:
        raise SystemExit(1)
    return [(n, u, norms, "pa.sparse_jacfwd")]


if __name__ == "__main__":
    main()

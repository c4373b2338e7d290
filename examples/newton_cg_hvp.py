"""Newton-CG on a 20,000-variable problem with Hessian-vector products, never forming the Hessian.

``scipy.optimize.minimize(method="Newton-CG")`` needs only products ``H v``. Forward over reverse,
``pa.jvp(pa.grad(f), (x,), (v,))``, gives one for about the cost of two gradients, whatever the size: the
Hessian of this problem would take 3.2 GB as a dense float64 array (80 GB at N = 100,000).

The objective is the extended Rosenbrock function (its minimum is all ones) plus a coupling term.
Checks: a Hessian-vector product against SciPy's closed-form ``rosen_hess_prod`` and the optimum against
the known minimiser.
"""

import time

import numpy as np
from _gallery import output_dir, pyplot, save
from scipy.optimize import minimize, rosen, rosen_hess_prod

import polyad as pa
from polyad import xp

N = 20_000


def rosenbrock(x):
    return xp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


gradient = pa.grad(rosenbrock)


def hessian_vector_product(x, v):
    return pa.jvp(gradient, (x,), (v,))[1]  # forward-over-reverse: one pass, no matrix


def main():
    folder = output_dir(__doc__.splitlines()[0])
    rng = np.random.default_rng(2)
    x0 = 1.0 + 0.3 * rng.standard_normal(N)
    v = rng.standard_normal(N)
    assert np.isclose(float(rosenbrock(x0)), rosen(x0), rtol=1e-12)
    hv = hessian_vector_product(x0, v)
    reference = rosen_hess_prod(x0, v)
    assert np.allclose(hv, reference, rtol=1e-10, atol=1e-8), np.max(np.abs(hv - reference))

    trace = [float(rosenbrock(x0))]
    hvps = 0

    def hessp(x, p):
        nonlocal hvps
        hvps += 1
        return hessian_vector_product(x, p)

    start = time.perf_counter()
    result = minimize(rosenbrock, x0, jac=gradient, hessp=hessp, method="Newton-CG",
                      callback=lambda xk: trace.append(float(rosenbrock(xk))),
                      options={"xtol": 1e-10})  # fmt: skip
    elapsed = time.perf_counter() - start
    error = np.max(np.abs(result.x - 1.0))
    print(f"Newton-CG, n = {N}: {result.nit} iterations, {hvps} Hessian-vector products, "
          f"{elapsed:.2f} s; max |x - 1| = {error:.1e}, f = {result.fun:.2e}")  # fmt: skip
    assert error < 1e-5, error

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.semilogy(range(len(trace)), np.array(trace) + 1e-30, "o-")
    ax.set(xlabel="Newton-CG iteration", ylabel="f(x)",
           title=f"Rosenbrock, n = {N:,}: {hvps} products H·v by pa.jvp(pa.grad(f))")  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    save(fig, folder, "newton_cg_hvp.png")


if __name__ == "__main__":
    main()

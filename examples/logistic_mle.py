"""Maximum-likelihood logistic regression with ``scipy.optimize.minimize(method="trust-exact")``, the
gradient from ``pa.grad`` and the Hessian from ``pa.hessian``.

The negative log-likelihood is written once, with the Array API; SciPy's trust-region method needs its
gradient and Hessian, and polyad gives both from that code. The inverse Hessian at the optimum is the
covariance of the estimate (standard errors).

Checks: the gradient and Hessian against the closed forms ``X^T (p - y)`` and ``X^T diag(p (1 - p)) X``,
the optimum's gradient is zero, and the fit agrees with SciPy's BFGS given the closed-form gradient.
"""

import numpy as np
from _gallery import output_dir, pyplot, save
from scipy.optimize import minimize

import polyad as pa
from polyad import xp

rng = np.random.default_rng(0)
N, TRUE_THETA = 800, np.array([0.5, -1.0, 2.0, 0.0, 0.8])
X = np.column_stack([np.ones(N), rng.standard_normal((N, TRUE_THETA.size - 1))])
Y = (rng.random(N) < 1 / (1 + np.exp(-X @ TRUE_THETA))) * 1.0


def nll(theta):
    z = X @ theta
    return xp.sum(xp.logaddexp(0.0, z) - Y * z)  # -log-likelihood, stable for large |z|


def main():
    folder = output_dir(__doc__.splitlines()[0])
    trace = []
    result = minimize(nll, np.zeros(TRUE_THETA.size), jac=pa.grad(nll), hess=pa.hessian(nll),
                      method="trust-exact", callback=lambda xk: trace.append(float(nll(xk))))  # fmt: skip
    theta = result.x
    print(f"trust-exact: {result.nit} iterations, {result.nfev} nll, {result.njev} gradient, "
          f"{result.nhev} Hessian evaluations; nll = {result.fun:.6f}")  # fmt: skip
    assert result.success, result.message

    p = 1 / (1 + np.exp(-X @ theta))
    assert np.allclose(pa.grad(nll)(theta), X.T @ (p - Y), atol=1e-9)
    H = pa.hessian(nll)(theta)
    assert np.allclose(H, X.T @ (X * (p * (1 - p))[:, None]), rtol=1e-12)
    assert np.max(np.abs(X.T @ (p - Y))) < 1e-6, "not a stationary point"
    by_formula = minimize(nll, np.zeros(TRUE_THETA.size), method="BFGS", options={"gtol": 1e-8},
                          jac=lambda t: X.T @ (1 / (1 + np.exp(-X @ t)) - Y))  # fmt: skip
    assert np.allclose(theta, by_formula.x, atol=1e-5), (theta, by_formula.x)
    stderr = np.sqrt(np.diag(np.linalg.inv(H)))
    for k in range(theta.size):
        print(f"  θ{k} = {theta[k]:+.3f} ± {stderr[k]:.3f}   (true {TRUE_THETA[k]:+.1f})")

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    left.semilogy(range(1, len(trace) + 1), np.array(trace) - result.fun + 1e-16, "o-")
    left.set(xlabel="trust-exact iteration", ylabel="nll − nll*", title="Convergence (pa.grad, pa.hessian)")
    left.grid(True, which="both", alpha=0.3)
    k = np.arange(theta.size)
    right.errorbar(k, theta, yerr=1.96 * stderr, fmt="o", capsize=4, label="estimate ± 1.96 s.e.")
    right.plot(k, TRUE_THETA, "x", color="C3", ms=9, label="true θ")
    right.set(xticks=k, xticklabels=[f"θ{i}" for i in k], title="Fit; s.e. from the inverse Hessian")
    right.legend()
    save(fig, folder, "logistic_mle.png")


if __name__ == "__main__":
    main()

"""A hyperparameter gradient through ``scipy.optimize.minimize``: ridge regression's penalty tuned by
gradient descent on the validation loss (``polyad.optimize.minimize``).

The weights ``w*(λ)`` minimise ``|X w - y|² + λ |w|²`` on training data, found by SciPy's
``trust-exact`` (with polyad's gradient and Hessian). ``polyad.optimize`` makes ``w*`` differentiable in
λ at the solution (the implicit function theorem on the gradient's root: one Hessian solve), so the
validation loss ``|X_val w*(λ) - y_val|²`` has an exact derivative in ``log λ``, and gradient descent on it
finds the best penalty.

Checks: ``dw*/dλ = -(XᵀX + λI)^{-1} w*`` (the closed form) to 1e-6 relative at several λ, by ``jacfwd`` and
``jacrev``; the hypergradient against central differences; the tuned λ against a fine grid search.
"""

import numpy as np
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import optimize, xp

RNG = np.random.default_rng(4)
N_TRAIN, N_VAL, D = 30, 200, 20
W_TRUE = RNG.standard_normal(D) * np.linspace(1.0, 0.05, D)
X, X_VAL = RNG.standard_normal((N_TRAIN, D)), RNG.standard_normal((N_VAL, D))
Y = X @ W_TRUE + 1.5 * RNG.standard_normal(N_TRAIN)
Y_VAL = X_VAL @ W_TRUE + 1.5 * RNG.standard_normal(N_VAL)


def weights(lam):
    def loss(w, lam):
        return xp.sum((X @ w - Y) ** 2) + lam * xp.sum(w**2)

    return optimize.minimize(loss, np.zeros(D), args=(lam,), method="trust-exact", tol=1e-12).x


def validation_loss(log_lam):
    w = weights(xp.exp(log_lam))
    return xp.mean((X_VAL @ w - Y_VAL) ** 2)


def main():
    folder = output_dir(__doc__.splitlines()[0])
    for lam in (0.1, 3.0, 40.0):
        lam = np.float64(lam)
        w = np.asarray(weights(lam))
        closed = -np.linalg.solve(X.T @ X + lam * np.eye(D), w)
        for name, jac in (("jacfwd", pa.jacfwd(weights)), ("jacrev", pa.jacrev(weights))):
            error = np.max(np.abs(jac(lam) - closed)) / np.max(np.abs(closed))
            assert error < 1e-6, (name, lam, error)
    print("dw*/dλ matches -(XᵀX + λI)^-1 w* to 1e-6 at λ = 0.1, 3, 40 (jacfwd and jacrev)")

    value_and_grad = pa.value_and_grad(validation_loss)
    log_lam, path = np.float64(np.log(0.1)), []
    for _ in range(30):
        value, g = value_and_grad(log_lam)
        path.append((float(log_lam), float(value), float(g)))
        log_lam = log_lam - 1.0 * g
    step = 1e-5
    fd = (validation_loss(log_lam + step) - validation_loss(log_lam - step)) / (2 * step)
    g = pa.grad(validation_loss)(log_lam)
    assert abs(float(g) - float(fd)) < 1e-6 * max(1.0, abs(float(fd))), (float(g), float(fd))
    grid = np.linspace(np.log(0.01), np.log(1000.0), 121)
    losses = np.array([float(validation_loss(np.float64(v))) for v in grid])
    best = grid[np.argmin(losses)]
    print(f"tuned λ = {np.exp(log_lam):.3g} (grid search: {np.exp(best):.3g}), "
          f"validation loss {float(validation_loss(log_lam)):.4f} (grid: {losses.min():.4f})")  # fmt: skip
    assert float(validation_loss(log_lam)) <= losses.min() + 1e-6

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.plot(np.exp(grid), losses, color="0.6", lw=3, label="validation loss (grid)")
    steps = np.array(path)
    ax.plot(np.exp(steps[:, 0]), steps[:, 1], "o-C1", ms=3, label="gradient descent on log λ")
    ax.set(
        xscale="log", xlabel="λ", ylabel="validation MSE", title="Ridge penalty tuned by its hypergradient"
    )
    ax.legend()
    save(fig, folder, "ridge_hypergradient.png")


if __name__ == "__main__":
    main()

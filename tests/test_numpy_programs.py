"""Five programs a new user writes in plain NumPy (``np.*`` functions and array methods, in-place writes),
run unchanged under ``grad``, ``jvp``, ``vmap`` and ``pa.jit``: a Gaussian process's marginal likelihood,
an explicit heat solver, per-example gradient clipping, Hamiltonian Monte Carlo, and the Jacobian of
gravitational accelerations. Derivatives are checked against central finite differences of the same
program run by NumPy alone, ``vmap`` against a loop, ``pa.jit`` against the eager call."""

import numpy as np
import pytest

import polyad as pa

RNG = np.random.default_rng(7)


# ------------------------------------------------------------------------------ the programs, plain NumPy


def gp_negative_log_likelihood(log_params, X, y):
    """A Gaussian process's negative log marginal likelihood in its log hyperparameters."""
    lengthscale, signal, noise = np.exp(log_params)
    diff = X[:, None, :] - X[None, :, :]
    K = signal * np.exp(-0.5 * np.sum(diff**2, axis=-1) / lengthscale**2) + noise * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return 0.5 * y @ alpha + np.log(np.diag(L)).sum() + 0.5 * len(X) * np.log(2 * np.pi)


def heat_solution(u0, kappa, steps=40):
    """Explicit finite differences of u_t = kappa u_xx on [0, 1], zero at both ends."""
    u = u0.copy()
    dx = 1.0 / (len(u) - 1)
    dt = 0.2 * dx**2
    for _ in range(steps):
        lap = np.zeros_like(u)
        lap[1:-1] = (u[2:] - 2 * u[1:-1] + u[:-2]) / dx**2
        u = u + dt * kappa * lap
        u[0] = 0.0
        u[-1] = 0.0
    return u


def heat_misfit(params, observed):
    u0, kappa = params[:-1], params[-1]
    return np.sum((heat_solution(u0, kappa) - observed) ** 2)


def logistic_loss(w, x, y):
    return np.logaddexp(0.0, -y * x.dot(w))


def clipped_gradient(w, X, Y, clip=0.5):
    """Per-example gradients, each clipped to norm ``clip``, averaged (DP-SGD's step)."""
    per_example = pa.vmap(pa.grad(logistic_loss), in_dims=(None, 0, 0))(w, X, Y)
    norms = np.linalg.norm(per_example, axis=1, keepdims=True)
    return (per_example * np.minimum(1.0, clip / norms)).mean(axis=0)


PRECISION = np.array([[2.0, 0.6, 0.0], [0.6, 1.5, 0.3], [0.0, 0.3, 1.0]])


def potential(q):
    return 0.5 * q @ PRECISION @ q + 0.1 * np.sum(q**4)


def leapfrog(q, p, step, n_steps=8):
    grad_u = pa.grad(potential)
    p = p - 0.5 * step * grad_u(q)
    for i in range(n_steps):
        q = q + step * p
        if i != n_steps - 1:
            p = p - step * grad_u(q)
    p = p - 0.5 * step * grad_u(q)
    return q, p


def hmc_log_acceptance(state, p0):
    """log of HMC's acceptance probability, in the start position and the step size (the last entry)."""
    q0, step = state[:-1], state[-1]
    q, p = leapfrog(q0, p0, step)
    energy0 = potential(q0) + 0.5 * p0.dot(p0)
    energy = potential(q) + 0.5 * np.dot(p, p)
    return np.minimum(0.0, energy0 - energy)


MASSES = np.array([1.0, 0.5, 2.0, 1.5])


def accelerations(flat_positions, softening=0.1):
    """Gravitational accelerations of bodies at ``flat_positions`` (n * 3,), flattened."""
    pos = flat_positions.reshape(-1, 3)
    d = pos[None, :, :] - pos[:, None, :]
    inv_r3 = ((d**2).sum(axis=-1) + softening**2) ** -1.5
    np.fill_diagonal(inv_r3, 0.0)
    return np.einsum("ij,ijk,j->ik", inv_r3, d, MASSES).ravel()


# ------------------------------------------------------------------------------ the checks


def _finite_difference_jvp(f, x, v, eps=1e-6):
    return (np.asarray(f(x + eps * v)) - np.asarray(f(x - eps * v))) / (2 * eps)


def _jacobian_fd(f, x, eps=1e-6):
    return np.stack([_finite_difference_jvp(f, x, e, eps) for e in np.eye(x.size)], axis=-1)


def _check(f, x, batch, rtol=1e-5, atol=1e-7):
    """f under grad (scalar f) or jacrev/jacfwd (vector f), jvp, vmap and pa.jit, against NumPy alone."""
    eager = np.asarray(f(x))
    assert type(f(x)) in (np.ndarray, np.float64)  # outside transforms, plain NumPy runs
    direction = RNG.standard_normal(x.shape)
    value, tangent = pa.jvp(f, (x,), (direction,))
    np.testing.assert_allclose(value, eager, rtol=1e-12)
    np.testing.assert_allclose(tangent, _finite_difference_jvp(f, x, direction), rtol=rtol, atol=atol)
    expected = _jacobian_fd(f, x)
    if eager.ndim == 0:
        np.testing.assert_allclose(pa.grad(f)(x), expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(pa.jacrev(f)(x), expected, rtol=rtol, atol=atol)
        np.testing.assert_allclose(pa.jacfwd(f)(x), expected, rtol=rtol, atol=atol)
    loop = np.stack([np.asarray(f(b)) for b in batch])
    np.testing.assert_allclose(pa.vmap(f)(batch), loop, rtol=1e-10, atol=1e-12)
    jitted = pa.jit(f)
    np.testing.assert_allclose(jitted(x), eager, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jitted(x + 0.01), np.asarray(f(x + 0.01)), rtol=1e-10, atol=1e-12)  # replayed
    derivative = pa.grad(f) if eager.ndim == 0 else pa.jacrev(f)
    np.testing.assert_allclose(pa.jit(derivative)(x), derivative(x), rtol=1e-10, atol=1e-12)


def test_gaussian_process():
    X = RNG.uniform(-1.0, 1.0, (6, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * RNG.standard_normal(6)
    f = lambda log_params: gp_negative_log_likelihood(log_params, X, y)  # noqa: E731
    x = np.log(np.array([0.7, 1.3, 0.05]))
    _check(f, x, x + 0.1 * RNG.standard_normal((3, 3)))
    # vmap over data sets too: one hyperparameter vector, three data sets
    Xs, ys = RNG.uniform(-1, 1, (3, 6, 2)), RNG.standard_normal((3, 6))
    batched = pa.vmap(gp_negative_log_likelihood, in_dims=(None, 0, 0))(x, Xs, ys)
    np.testing.assert_allclose(
        batched, [gp_negative_log_likelihood(x, a, b) for a, b in zip(Xs, ys)], rtol=1e-10
    )


def test_heat_solver():
    grid = np.linspace(0.0, 1.0, 12)
    observed = heat_solution(np.sin(np.pi * grid), 0.8)
    params = np.concatenate([np.sin(np.pi * grid) + 0.05 * RNG.standard_normal(12), [1.1]])
    f = lambda p: heat_misfit(p, observed)  # noqa: E731
    _check(f, params, params + 0.05 * RNG.standard_normal((3, 13)))
    # the solution itself (a vector output): its Jacobian in the diffusivity
    kappa = np.asarray(1.1)
    kappa_jac = pa.jacfwd(lambda k: heat_solution(params[:-1], k))(kappa)
    expected = _finite_difference_jvp(lambda k: heat_solution(params[:-1], k), kappa, 1.0)
    np.testing.assert_allclose(kappa_jac, expected, rtol=1e-5, atol=1e-8)


def test_per_example_gradient_clipping():
    X, Y = RNG.standard_normal((8, 3)), np.sign(RNG.standard_normal(8))
    f = lambda w: clipped_gradient(w, X, Y)  # noqa: E731
    w = RNG.standard_normal(3)
    _check(f, w, w + 0.1 * RNG.standard_normal((3, 3)))
    # the clipping bites: some per-example gradients are longer than the clip norm
    norms = np.linalg.norm(pa.vmap(pa.grad(logistic_loss), in_dims=(None, 0, 0))(w, X, Y), axis=1)
    assert (norms > 0.5).any() and (norms < 0.5).any()


def test_hamiltonian_monte_carlo():
    p0 = RNG.standard_normal(3)
    f = lambda state: hmc_log_acceptance(state, p0)  # noqa: E731
    state = np.array([0.3, -0.8, 0.5, 0.35])
    assert f(state) < 0  # a rejection probability: the energy changed, min() takes the branch with a slope
    _check(f, state, state + 0.02 * RNG.standard_normal((3, 4)), rtol=1e-5, atol=1e-8)
    # chains in parallel: vmap over positions and momenta
    q, p = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    qs, ps = pa.vmap(leapfrog, in_dims=(0, 0, None))(q, p, 0.1)
    for k in range(4):
        qk, pk = leapfrog(q[k], p[k], 0.1)
        np.testing.assert_allclose(qs[k], qk, rtol=1e-12)
        np.testing.assert_allclose(ps[k], pk, rtol=1e-12)


def test_gravity_jacobian():
    positions = RNG.standard_normal(12)
    _check(accelerations, positions, positions + 0.1 * RNG.standard_normal((3, 12)), rtol=1e-5, atol=1e-7)
    # momentum: the mass-weighted accelerations sum to zero, and so does their Jacobian
    J = pa.jacfwd(accelerations)(positions)
    np.testing.assert_allclose(np.einsum("i,ikj->kj", MASSES, J.reshape(4, 3, 12)), 0.0, atol=1e-10)


@pytest.mark.parametrize("program", [gp_negative_log_likelihood, heat_solution, clipped_gradient, potential,
                                     accelerations])  # fmt: skip
def test_programs_are_plain_numpy(program):
    """The programs call NumPy and array methods only: no polyad.xp anywhere in their source."""
    import inspect

    source = inspect.getsource(program)
    assert "xp." not in source and "pa.xp" not in source


def test_the_coming_from_numpy_example_runs():
    """The first example of docs/coming-from-numpy.rst, as printed, with its gradient checked."""
    import pathlib

    page = pathlib.Path(__file__).resolve().parent.parent / "docs" / "coming-from-numpy.rst"
    block = page.read_text().split(".. code-block:: python\n")[1].split("\nOutside")[0]
    namespace = {}
    exec("\n".join(line[3:] for line in block.splitlines()), namespace)  # noqa: S102
    nll, X, y = namespace["nll"], namespace["X"], namespace["y"]
    expected = _jacobian_fd(lambda p: nll(p, X, y), np.zeros(3))
    np.testing.assert_allclose(namespace["g"], expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(namespace["H"], namespace["H"].T, rtol=1e-8)
    assert namespace["per_set"].shape == (5,)

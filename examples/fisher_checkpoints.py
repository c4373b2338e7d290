"""Gradients through a long time-stepping loop in bounded memory, with ``pa.scan`` and checkpoints.

Fisher's equation ``u_t = D u_xx + u (1 - u)`` on (0, 1), ``u = 0`` at both ends, stepped by explicit
Euler on second differences. The loss compares the final state with a target; we want its gradient in
the initial state ``u0`` and in the diffusion coefficient ``D``. Written as a Python loop, reverse mode
records every step and memory grows with the number of steps; written as ``pa.scan``, the
``checkpoints`` argument chooses what the backward pass stores: ``None`` everything, ``"sqrt"`` about
``sqrt(steps)`` states, an int ``s`` at most ``s`` states (the binomial schedule: fewest recomputed steps
for that memory). The gradient is the same in every case.

Checks: the gradients in ``u0`` against a hand-written discrete adjoint (NumPy, every state stored),
the one in ``D`` against central finite differences, the three checkpoint settings against each other,
and the peak memory (``tracemalloc``) of the checkpointed gradients nearly flat in the number of steps.
"""

import tracemalloc

import numpy as np
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import xp

N = 500
DX = 1.0 / (N + 1)
DT = 0.2 * DX * DX  # explicit Euler is stable for D * DT / DX**2 <= 1/2
STEPS = (50, 100, 200, 400, 800)
SETTINGS = {"None (every step)": None, '"sqrt"': "sqrt", "8 (binomial)": 8}


def step(u, D):
    zero = xp.zeros(1, dtype=u.dtype)
    padded = xp.concat([zero, u, zero])
    laplacian = (padded[:-2] - 2 * u + padded[2:]) / DX**2
    return u + DT * (D * laplacian + u * (1 - u))


def loss(u0, D, target, steps, checkpoints):
    u, _ = pa.scan(lambda u, _: (step(u, D), None), u0, None, length=steps, checkpoints=checkpoints)
    return xp.sum((u - target) ** 2)


def adjoint_by_hand(u0, D, target, steps):
    """The discrete adjoint of the Euler scheme, in NumPy: every state stored, then swept backward."""

    def lap(v):
        padded = np.concatenate([[0.0], v, [0.0]])
        return (padded[:-2] - 2 * v + padded[2:]) / DX**2

    states = [u0]
    for _ in range(steps):
        u = states[-1]
        states.append(u + DT * (D * lap(u) + u * (1 - u)))
    lam, grad_D = 2 * (states[-1] - target), 0.0
    for u in reversed(states[:-1]):
        grad_D += DT * lam @ lap(u)
        lam = lam + DT * (D * lap(lam) + (1 - 2 * u) * lam)  # the second difference is symmetric
    return lam, grad_D


def peak_bytes(f, *args):
    tracemalloc.start()
    try:
        f(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main():
    folder = output_dir(__doc__.splitlines()[0])
    x = np.linspace(0, 1, N + 2)[1:-1]
    u0 = np.exp(-100 * (x - 0.3) ** 2)
    target = np.full(N, 0.5)
    D = np.float64(1.0)
    gradient = pa.grad(loss, argnums=(0, 1))

    steps = STEPS[-1]
    lam, grad_D = adjoint_by_hand(u0, D, target, steps)
    for name, checkpoints in SETTINGS.items():
        g_u0, g_D = gradient(u0, D, target, steps, checkpoints)
        assert np.allclose(g_u0, lam, rtol=1e-10, atol=1e-14), f"checkpoints={name}: gradient in u0"
        assert abs(float(g_D) - grad_D) < 1e-10 * abs(grad_D), f"checkpoints={name}: {float(g_D)} {grad_D}"
    h = 1e-5
    fd = (float(loss(u0, D + h, target, steps, None)) - float(loss(u0, D - h, target, steps, None))) / (2 * h)
    print(f"dloss/dD: polyad {float(g_D):.10f}, hand-written adjoint {grad_D:.10f}, "
          f"central differences {fd:.10f}")  # fmt: skip
    assert abs(fd - grad_D) < 1e-6 * abs(grad_D)

    peaks = {name: [] for name in SETTINGS}
    for n in STEPS:
        for name, checkpoints in SETTINGS.items():
            peaks[name].append(peak_bytes(gradient, u0, D, target, n, checkpoints) / 2**20)
        print(f"{n:4d} steps: peak MiB " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in peaks.items()))
    every, binomial = peaks["None (every step)"], peaks["8 (binomial)"]
    assert every[-1] > 8 * every[0], "recording every step should grow with the steps"
    # eight states (4 kB each here) and one step's recording, whatever the length: 800 checkpointed steps
    # need less than a fifth of what 50 recorded steps do (the schedule's bookkeeping grows a little)
    assert binomial[-1] < every[0] / 5, "eight checkpoints should hold memory nearly flat"

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, mib in peaks.items():
        left.loglog(STEPS, mib, "o-", label=f"checkpoints={name}")
    left.set(xlabel="time steps", ylabel="peak memory of the gradient (MiB)", title="Memory of pa.grad(scan)")
    left.set_xticks(STEPS, [str(n) for n in STEPS])
    left.minorticks_off()
    left.legend()
    left.grid(True, which="both", alpha=0.3)
    right.plot(x, u0, color="0.6", label="u0")
    right.plot(x, pa.scan(lambda u, _: (step(u, D), None), u0, None, length=steps)[0], "C0", label="u(T)")
    right.plot(x, lam / np.max(np.abs(lam)), "C1", label="d loss / d u0 (scaled)")
    right.set(xlabel="x", title=f"Fisher's equation, {steps} Euler steps")
    right.legend()
    save(fig, folder, "fisher_checkpoints.png")


if __name__ == "__main__":
    main()

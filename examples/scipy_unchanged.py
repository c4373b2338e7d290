"""SciPy's own functions, unchanged, under ``pa.grad``, ``pa.vmap`` and ``pa.hessian``.

With ``SCIPY_ARRAY_API=1`` set before SciPy is first imported, SciPy computes with the namespace of its
arguments; handed polyad's tensors, ``scipy.special.log_ndtr``, ``scipy.special.logsumexp``,
``scipy.stats.entropy`` and ``scipy.stats.skew`` call ``polyad.xp``, so every transform reaches through
them. This script sets the variable itself, first thing (in your own code: set it in the environment).

Checks: each derivative against central finite differences of the same SciPy function on NumPy arrays.
"""

import os

os.environ["SCIPY_ARRAY_API"] = "1"  # before the first import of SciPy

import sys  # noqa: E402

if "scipy" in sys.modules and not getattr(sys.modules["scipy"], "_array_api_enabled", True):
    raise RuntimeError("SciPy was imported before SCIPY_ARRAY_API=1 was set: run this script on its own")

import numpy as np  # noqa: E402
import scipy.special  # noqa: E402
import scipy.stats  # noqa: E402
from _gallery import output_dir, pyplot, save  # noqa: E402

import polyad as pa  # noqa: E402


def central_difference(f, x, eps=1e-6):
    """The gradient of a scalar function of a vector, one central difference per element."""
    g = np.empty_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def main():
    folder = output_dir(__doc__.splitlines()[0])
    z = np.linspace(-8, 4, 200)
    # d/dz log Φ(z): the inverse Mills ratio, by vmap(grad) through scipy.special.log_ndtr
    mills = pa.vmap(pa.grad(scipy.special.log_ndtr))(z)
    fd = (scipy.special.log_ndtr(z + 1e-6) - scipy.special.log_ndtr(z - 1e-6)) / 2e-6
    assert np.allclose(mills, fd, rtol=1e-6, atol=1e-8), np.max(np.abs(mills - fd))

    rng = np.random.default_rng(3)
    logits, sample = rng.standard_normal(6), rng.standard_normal(30)
    cases = {
        "scipy.special.logsumexp": (scipy.special.logsumexp, logits),
        "scipy.stats.entropy(softmax)": (lambda v: scipy.stats.entropy(scipy.special.softmax(v)), logits),
        "scipy.stats.skew": (scipy.stats.skew, sample),
    }
    errors = {}
    for name, (f, x) in cases.items():
        g = pa.grad(f)(x)
        errors[name] = np.max(np.abs(g - central_difference(lambda v, f=f: float(f(v)), x)))
        print(f"  pa.grad({name}): max |g - finite differences| = {errors[name]:.1e}")
        assert errors[name] < 1e-6, (name, errors[name])
    H = pa.hessian(scipy.special.logsumexp)(logits)
    p = scipy.special.softmax(logits)
    assert np.allclose(H, np.diag(p) - np.outer(p, p), atol=1e-12), "logsumexp's Hessian"
    print("pa.hessian(scipy.special.logsumexp) = diag(p) - p p^T, p = softmax: checked")

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.8), gridspec_kw={"wspace": 0.35})
    left.plot(z, scipy.special.log_ndtr(z), label="scipy.special.log_ndtr(z)")
    left.plot(z, mills, label="vmap(grad(log_ndtr)): φ(z)/Φ(z)")
    left.plot(z[::10], fd[::10], "k.", label="central differences")
    left.set(xlabel="z", title="SciPy, unchanged, under pa.vmap(pa.grad(·))")
    left.legend(fontsize=8, loc="center right")
    left.grid(alpha=0.3)
    names = list(errors)
    bars = right.bar(range(len(names)), [errors[n] for n in names], color="C2")
    right.bar_label(bars, labels=[f"{errors[n]:.0e}" for n in names])
    right.set_xticks(
        range(len(names)), [n.replace("scipy.", "").replace("(", "\n(") for n in names], fontsize=8
    )
    right.set(yscale="log", ylim=(1e-13, 1e-6), ylabel="max |pa.grad − finite differences|",
              title="pa.grad of SciPy functions")  # fmt: skip
    save(fig, folder, "scipy_unchanged.png")


if __name__ == "__main__":
    main()

"""Per-example gradient norms of a small network, by ``pa.vmap(pa.grad(loss))``.

Differential privacy clips each example's gradient; data valuation and outlier detection rank examples by
it. ``pa.grad`` gives the gradient of one example's loss with respect to the parameters (a tuple of
arrays); ``pa.vmap`` over the data gives all of them at once, without a Python loop.

Checks: every per-example gradient against backpropagation written out by hand in NumPy, and their mean
against ``pa.grad`` of the mean loss. The figure shows the norms: mislabelled examples stand out.
"""

import numpy as np
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import xp

rng = np.random.default_rng(1)
N, D, HIDDEN = 256, 4, 16
X = rng.standard_normal((N, D))
Y = np.sin(X @ np.array([1.0, -0.5, 0.3, 0.8]))
FLIPPED = rng.choice(N, 12, replace=False)
Y[FLIPPED] = -3 * Y[FLIPPED]  # corrupted targets
PARAMS = (
    rng.standard_normal((D, HIDDEN)) / 2,
    np.zeros(HIDDEN),
    rng.standard_normal(HIDDEN) / 4,
    np.zeros(()),
)


def predict(params, x):
    w1, b1, w2, b2 = params
    return xp.tanh(x @ w1 + b1) @ w2 + b2


def loss(params, x, y):  # one example: x of shape (D,), y a scalar
    return (predict(params, x) - y) ** 2


def backprop_by_hand(params, x, y):
    w1, b1, w2, b2 = params
    hidden = np.tanh(x @ w1 + b1)
    d_out = 2 * (hidden @ w2 + b2 - y)
    d_pre = d_out * w2 * (1 - hidden**2)
    return np.outer(x, d_pre), d_pre, d_out * hidden, d_out


def main():
    folder = output_dir(__doc__.splitlines()[0])
    per_example = pa.vmap(pa.grad(loss), in_dims=(None, 0, 0))(PARAMS, X, Y)  # a tuple, each (N, ...)
    for i in range(N):
        for got, want in zip(per_example, backprop_by_hand(PARAMS, X[i], Y[i]), strict=True):
            assert np.allclose(got[i], want, rtol=1e-10, atol=1e-12), f"example {i}"
    mean_grad = pa.grad(lambda p: xp.mean(pa.vmap(loss, in_dims=(None, 0, 0))(p, X, Y)))(PARAMS)
    for batch, whole in zip(per_example, mean_grad, strict=True):
        assert np.allclose(np.mean(batch, axis=0), whole, rtol=1e-10, atol=1e-12)
    norms = np.sqrt(sum(np.sum(g.reshape(N, -1) ** 2, axis=1) for g in per_example))
    top = np.argsort(norms)[-12:]
    found = len(set(top) & set(FLIPPED))
    print(f"{N} per-example gradients checked against hand-written backprop; "
          f"{found} of the 12 largest norms are corrupted examples")  # fmt: skip
    assert found >= 8

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    clean = np.setdiff1d(np.arange(N), FLIPPED)
    bins = np.logspace(np.log10(norms.min()), np.log10(norms.max()), 30)
    left.hist([norms[clean], norms[FLIPPED]], bins=bins, stacked=True, color=["C0", "C3"],
              label=["clean", "corrupted target"])  # fmt: skip
    left.set(xscale="log", xlabel="per-example gradient norm", ylabel="examples", title="vmap(grad(loss))")
    left.legend()
    residual = np.abs(predict(PARAMS, X) - Y)
    right.loglog(residual[clean], norms[clean], ".", color="C0", label="clean")
    right.loglog(residual[FLIPPED], norms[FLIPPED], "o", color="C3", label="corrupted")
    right.set(xlabel="|prediction − target|", ylabel="gradient norm", title="Norm against residual")
    right.legend()
    save(fig, folder, "per_example_gradients.png")


if __name__ == "__main__":
    main()

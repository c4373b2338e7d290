"""A custom op with a CuPy kernel and a NumPy kernel, and its derivatives through every transform.

``pa.custom_op`` declares one op; ``register_kernel("cuda")`` gives the kernel CuPy arrays take (an
``ElementwiseKernel``, compiled on first use) and ``register_kernel("cpu")`` the one NumPy arrays take.
``register_autograd`` gives the gradient, written in polyad ops so it differentiates again, and
``register_vmap`` the batching rule (without one, ``vmap`` loops over the examples and warns). The CUDA
kernel is registered only where CuPy is installed; on a machine without a GPU the CPU kernel runs, and
this script says which kernel ran.

Checks: values against ``limit * tanh(x / limit)``; the first derivative (``pa.grad``) and the second
(``pa.grad`` of ``pa.grad``, elementwise by ``pa.vmap``) against closed forms and central differences.
"""

import numpy as np
from _gallery import output_dir, pyplot, save

import polyad as pa
from polyad import xp

calls = {"cpu": 0, "cuda": 0}


@pa.custom_op("gallery::softclip", mutates_args=())
def softclip(x, *, limit=1.0):  # the default kernel, for any other backend
    return limit * xp.tanh(x / limit)


@softclip.register_kernel("cpu")
def _(x, *, limit=1.0):
    calls["cpu"] += 1
    return limit * np.tanh(x / limit)


try:  # the GPU kernel, where CuPy is installed
    import cupy
except ImportError:
    cupy = None
else:
    _kernel = cupy.ElementwiseKernel("T x, T limit", "T y", "y = limit * tanh(x / limit)", "softclip")

    @softclip.register_kernel("cuda")
    def _(x, *, limit=1.0):
        calls["cuda"] += 1
        return _kernel(x, x.dtype.type(limit))


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.limit = inputs[1]


def backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return grad * (1 - (y / ctx.limit) ** 2)


softclip.register_autograd(backward, setup_context=setup_context)
# elementwise: a batch of inputs is one call on the batched array, its batch axis where it was
softclip.register_vmap(lambda info, in_dims, x, limit=1.0: (softclip(x, limit=limit), in_dims[0]))


def main():
    folder = output_dir(__doc__.splitlines()[0])
    limit = 2.0
    x = np.linspace(-6, 6, 241)
    y = softclip(x, limit=limit)
    assert np.allclose(y, limit * np.tanh(x / limit), rtol=1e-14)
    slope = pa.vmap(pa.grad(lambda v: softclip(v, limit=limit)))(x)
    curvature = pa.vmap(pa.grad(pa.grad(lambda v: softclip(v, limit=limit))))(x)
    sech2 = 1 / np.cosh(x / limit) ** 2
    assert np.allclose(slope, sech2, rtol=1e-12)
    assert np.allclose(curvature, -2 / limit * np.tanh(x / limit) * sech2, rtol=1e-10, atol=1e-14)
    eps = 1e-5
    fd = (limit * np.tanh((x + eps) / limit) - limit * np.tanh((x - eps) / limit)) / (2 * eps)
    assert np.allclose(slope, fd, atol=1e-8)
    ran = "cuda" if calls["cuda"] else "cpu"
    print(f"kernel calls: {calls}; the {ran} kernel ran (CuPy {'present' if cupy else 'not installed'})")
    assert calls["cpu"] > 0, "the NumPy kernel never ran on NumPy arrays"

    if cupy is not None:  # on a GPU: the CUDA kernel and its gradient, against the CPU results
        try:
            xg = cupy.asarray(x)
            g_gpu = pa.grad(lambda v: xp.sum(softclip(v, limit=limit)))(xg)
            assert calls["cuda"] > 0 and np.allclose(cupy.asnumpy(g_gpu), slope, rtol=1e-12)
            print("CUDA kernel: gradient matches the CPU kernel's")
        except cupy.cuda.runtime.CUDARuntimeError as error:
            print(f"CuPy is installed but no GPU could run the kernel: {error}")

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.plot(x, y, label=f"softclip(x, limit={limit:g}) [{ran} kernel]")
    ax.plot(x, slope, label="d/dx by pa.grad (custom backward rule)")
    ax.plot(x, curvature, label="d²/dx² by pa.grad(pa.grad(·))")
    ax.plot(x[::12], fd[::12], "k.", label="central differences")
    ax.set(xlabel="x", title="A custom op, one kernel per device, differentiated twice")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, folder, "custom_op_kernels.png")


if __name__ == "__main__":
    main()

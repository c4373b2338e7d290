"""softplus, the example custom op: one generic kernel written against the Array API, plus a device
kernel that a backend declares as data (``KERNELS`` in ``polyad/backends/cupy/kernels.py``: a CUDA
``ElementwiseKernel``), attached by the core when both the backend and the op exist. It shows the
custom-op path end to end: the dispatcher picks the CUDA kernel for CuPy arrays and the generic one
elsewhere, and the transforms use the rules registered below.
"""

import polyad.xp as xp
from polyad.custom.library import custom_op
from polyad.transforms.sparsity import SPARSITY
from polyad.transforms.sparsity_rules import elementwise


@custom_op("polyad::softplus", mutates_args=())
def softplus(x):
    """``log(1 + exp(x))``, computed without overflow: ``max(x, 0) + log1p(exp(-|x|))``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.custom_ops.softplus(np.array([0.0, 50.0]))
        array([ 0.69314718, 50.        ])
    """
    return xp.maximum(x, 0.0) + xp.log1p(xp.exp(-xp.abs(x)))


def _sigmoid(x):
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * _sigmoid(x)  # polyad ops: the backward is differentiable again


softplus.register_autograd(_backward, setup_context=_setup)
softplus.register_jvp(lambda primals, tangents: (softplus(primals[0]), tangents[0] * _sigmoid(primals[0])))
softplus.register_vmap(lambda info, in_dims, x: (softplus(x), in_dims[0]))
softplus.register_fake(lambda x: x.__array_namespace__().empty_like(x))
softplus.register_rule(SPARSITY.name, elementwise)  # each output element depends on its input element

"""polyad: composable function transforms for Array API code on NumPy and CuPy.

The public API, re-exported. See README.md for a tour and ARCHITECTURE.md for how it fits together.
"""

import types
from typing import Any

from polyad import config, random, xp
from polyad.api.eval_shape import eval_shape
from polyad.api.grad import enable_grad, grad, grad_and_value, linearize, no_grad, value_and_grad, vjp
from polyad.api.graphs import call_delegate, make_graph
from polyad.api.jacobians import hessian, jacfwd, jacrev
from polyad.api.jit import jit
from polyad.api.jvp import jvp
from polyad.api.residuals import print_saved_residuals, saved_residuals
from polyad.api.sparse import (
    SparseJacobian,
    sparse_hessian,
    sparse_jacfwd,
    sparse_jacobian,
    sparse_jacrev,
)
from polyad.api.sparsity import hessian_sparsity, jacobian_sparsity
from polyad.api.vmap import vmap
from polyad.control.checkpoint import checkpoint
from polyad.control.conditionals import cond, switch
from polyad.control.loops import fori_loop, map, scan
from polyad.control.while_loop import while_loop
from polyad.core import (
    ConcretizationError,
    DerivativeLostWarning,
    Tensor,
    TracedComplex,
    TracedFloat,
    dispatch,
)
from polyad.core.avals import ShapeDtype
from polyad.core.dispatch import DEVICE_PRIORITY, backend, get_backend, register_device_type, set_backend
from polyad.custom import library
from polyad.custom import ops as custom_ops
from polyad.custom.derivatives import CustomDerivativeError, custom_jvp, custom_vjp
from polyad.custom.implicit import ImplicitError, custom_linear_solve, custom_root
from polyad.custom.library import custom_op
from polyad.graph import Graph
from polyad.graph.capture import SpecializedGraphWarning
from polyad.interop import numpy as numpy_api
from polyad.interop.scipy_fft import ScipyFFTBackend, scipy_fft_backend, use_scipy_fft_backend
from polyad.moved import install_moved_paths
from polyad.ops.elementwise import stop_gradient
from polyad.parallel.cluster import DistributedError, distributed
from polyad.parallel.plan import ChunkPlan
from polyad.scipy import linalg, optimize, sparse
from polyad.transforms.sparsity import SparsityFallbackWarning

from polyad.scipy import integrate  # isort: skip  (after the transforms it is built on)

fused = custom_ops  # the former name of polyad.custom_ops
numpy_api.install()  # NumPy's methods and functions on every tensor (polyad/interop/numpy)
install_moved_paths()

__version__ = "0.1.0"


def array_namespace(*xs: Any) -> types.ModuleType:
    """polyad's namespace for any mix of backend arrays, polyad tensors (of any transform, and those
    created inside one), abstract arrays (``ShapeDtype``, a fake function's arguments) and Python scalars.

    Args:
        *xs: the arrays (and scalars, or None) of a call.

    Returns:
        ``polyad.xp``. Raises TypeError for another type, or for backend arrays of two libraries.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.array_namespace(np.ones(2), 1.0) is pa.xp
        True
    """
    for x in xs:
        if not isinstance(x, Tensor | ShapeDtype | int | float | complex | bool) and x is not None:
            if dispatch.backend_of_array(x) is None:
                raise TypeError(f"array_namespace: {type(x).__name__} is not an array of a polyad backend")
    dispatch.backend_of([x for x in xs if not isinstance(x, Tensor | ShapeDtype)])
    return xp


# fail at import, with the reason and the choices, if POLYAD_BACKEND names a backend that cannot load
get_backend()

__all__ = [
    "ChunkPlan",
    "DistributedError",
    "distributed",
    "DEVICE_PRIORITY",
    "ConcretizationError",
    "checkpoint",
    "cond",
    "custom_jvp",
    "custom_linear_solve",
    "custom_root",
    "ImplicitError",
    "custom_vjp",
    "CustomDerivativeError",
    "fori_loop",
    "map",
    "scan",
    "switch",
    "while_loop",
    "DerivativeLostWarning",
    "TracedComplex",
    "TracedFloat",
    "ShapeDtype",
    "SparseJacobian",
    "ScipyFFTBackend",
    "SparsityFallbackWarning",
    "SpecializedGraphWarning",
    "Tensor",
    "array_namespace",
    "Graph",
    "backend",
    "call_delegate",
    "config",
    "make_graph",
    "custom_op",
    "library",
    "optimize",
    "sparse",
    "linalg",
    "custom_ops",
    "enable_grad",
    "eval_shape",
    "get_backend",
    "grad",
    "grad_and_value",
    "hessian",
    "hessian_sparsity",
    "integrate",
    "jacfwd",
    "jacobian_sparsity",
    "jacrev",
    "jit",
    "jvp",
    "linearize",
    "no_grad",
    "print_saved_residuals",
    "random",
    "register_device_type",
    "scipy_fft_backend",
    "set_backend",
    "sparse_hessian",
    "sparse_jacfwd",
    "sparse_jacobian",
    "sparse_jacrev",
    "stop_gradient",
    "use_scipy_fft_backend",
    "saved_residuals",
    "value_and_grad",
    "vjp",
    "vmap",
    "xp",
]

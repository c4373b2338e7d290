"""The public transforms, one file per family: reverse_mode.py (vjp, grad, grad_and_value,
value_and_grad, no_grad, enable_grad), forward_mode.py (jvp, linearize), vectorize.py (vmap),
jacobians.py (jacrev, jacfwd, hessian; complex_jacobians.py for complex layouts), sparse.py
(jacobian_sparsity, hessian_sparsity, sparse_jacfwd, sparse_jacrev, sparse_hessian; coloring.py
colours their patterns) capture.py (make_graph) and jit.py (jit); arguments.py holds the argument checks and
pytree helpers they share, chunking.py the chunked evaluation of vmap and the Jacobians
(chunk_size="auto", progress bars) and cluster.py their chunks as Dask tasks (pa.distributed).

These modules check arguments, walk pytrees (optree) and push levels; the interpreters in reverse.py,
forward.py and batching.py do the rest. Inputs and outputs are backend arrays. Each public transform
carries its pre-dispatch recording decorator (``polyad.predispatch``) where it is defined, so a new
transform is one new file here.
"""

from polyad.api.capture import make_graph
from polyad.api.chunking import ChunkPlan
from polyad.api.cluster import DistributedError, distributed
from polyad.api.forward_mode import jvp, linearize
from polyad.api.jacobians import hessian, jacfwd, jacrev
from polyad.api.jit import Jitted, jit
from polyad.api.reverse_mode import enable_grad, grad, grad_and_value, no_grad, value_and_grad, vjp
from polyad.api.sparse import (
    SparseJacobian,
    hessian_sparsity,
    jacobian_sparsity,
    sparse_hessian,
    sparse_jacfwd,
    sparse_jacrev,
)
from polyad.api.vectorize import vmap

__all__ = [
    "ChunkPlan",
    "DistributedError",
    "distributed",
    "SparseJacobian",
    "enable_grad",
    "grad",
    "grad_and_value",
    "hessian",
    "hessian_sparsity",
    "jacfwd",
    "jacobian_sparsity",
    "jacrev",
    "jit",
    "Jitted",
    "jvp",
    "linearize",
    "make_graph",
    "no_grad",
    "sparse_hessian",
    "sparse_jacfwd",
    "sparse_jacrev",
    "value_and_grad",
    "vjp",
    "vmap",
]

"""The public transforms, one file each, named after what it exports:

- ``grad.py``: vjp, grad, grad_and_value, value_and_grad, linearize, no_grad, enable_grad (reverse mode,
  ``polyad.transforms.reverse``);
- ``jvp.py``: jvp (forward mode, ``polyad.transforms.forward``);
- ``vmap.py``: vmap (``polyad.transforms.batching``);
- ``jacobians.py``: jacrev, jacfwd, hessian (``_complex_jacobians.py``: their complex layouts);
- ``sparsity.py``: jacobian_sparsity, hessian_sparsity (``polyad.transforms.sparsity``);
- ``sparse.py``: sparse_jacfwd, sparse_jacrev, sparse_jacobian, sparse_hessian (``_coloring.py`` colours
  their patterns);
- ``eval_shape.py``: eval_shape (``polyad.transforms.abstract``);
- ``graphs.py``: make_graph, call_delegate (``polyad.graph``);
- ``jit.py``: jit (``polyad.graph.tracing``, then ``polyad.graph.compiler``).

``_arguments.py`` holds the argument checks and pytree helpers they share (``_closed_over.py``,
``_weak_floats.py``: what jit checks and traces; the leading underscore: private to this package).
These modules check arguments, walk pytrees (optree) and push levels; the interpreters do the rest.
Inputs and outputs are backend arrays. Each public transform carries its pre-dispatch recording decorator
(``polyad.graph.predispatch``) where it is defined. ``polyad/__init__.py`` re-exports them; this package
re-exports nothing, so that ``polyad.api.grad`` is the module and ``polyad.grad`` the function.
"""

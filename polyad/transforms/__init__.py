"""The transforms, one module each: its tracer (a ``Tensor`` subclass), its interpreter, its rule kind and
the rules it derives from the ops' markers.

- ``reverse``: reverse mode (``ReverseTensor``, the tape, the backward pass; rule kind ``vjp``);
- ``forward``: forward mode (``DualTensor``; ``jvp``, derived for linear and bilinear ops);
- ``batching``: vmap (``BatchedTensor``, the loop fallback; ``batch``);
- ``abstract``: abstract evaluation (``AbstractTensor``; ``abstract_eval``);
- ``sparsity``: the Jacobian's non-zero pattern (``PatternTensor``; ``sparsity``, its table of rules in
  ``sparsity_rules``).

The public functions that push these levels live in ``polyad.api``; the captures (``make_graph``,
``pa.jit``'s tracing) in ``polyad.graph``.
"""

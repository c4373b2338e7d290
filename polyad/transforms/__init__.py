"""Transforms added after the original five (forward, reverse, batching, tracing, graph): each is a module
here with its tracer, interpreter, rule kind and rules (ARCHITECTURE.md, "where do I add a transform").

- ``sparsity``: the Jacobian's non-zero pattern, propagated as index sets (``sparsity_rules``: the
  per-op rules).
"""

"""Fusion of elementwise groups for ``pa.jit`` (being written: identity for now)."""


def fuse(graph, backend):
    """``graph`` with maximal elementwise groups fused for ``backend``; computes the same values."""
    return graph

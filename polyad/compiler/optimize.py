"""Graph optimisation passes for ``pa.jit`` (being written: identity for now)."""


def optimize(graph):
    """``graph`` simplified; computes the same values."""
    return graph

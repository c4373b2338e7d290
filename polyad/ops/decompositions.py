"""Decompositions for vmap: ops without a batching rule written in ops that have one.

``polyad.batching.decomposition`` imports this module on first need (under a lock), so importing polyad
does not pay for it. A decomposition receives the op's own arguments (batched tensors among them) and its
metadata, and must use only ops that batch by rule (or by another decomposition), never the op itself.
An op's own ``batch`` rule, when it has one, always wins over its decomposition here.
"""

from polyad.batching import register_decomposition
from polyad.core import bind


@register_decomposition("index_add")
def index_add(x, v, *arrays, key):
    """``x`` with ``v`` added at ``x[key]``: the flat positions ``key`` selects (getitem of an arange),
    then one 1-D ``scatter_add`` on the flattened ``x`` (repeated positions accumulate)."""
    from polyad.ops.creation import arange
    from polyad.ops.elementwise import _broadcast
    from polyad.ops.indexing import _getitem, scatter_add
    from polyad.ops.manipulation import _device, broadcast_to, reshape

    shape = tuple(x.shape)
    n = 1
    for s in shape:
        n *= s
    positions = bind(_getitem, reshape(arange(n, device=_device(x)), shape), *arrays, key=key)
    common = _broadcast(tuple(positions.shape), tuple(v.shape))
    flat_positions = reshape(broadcast_to(positions, common), (-1,))
    flat_values = reshape(broadcast_to(v, common), (-1,))
    return reshape(scatter_add(reshape(x, (-1,)), flat_positions, flat_values, axis=0), shape)

"""Kernels the standard lacks, written in standard Array API calls only (slow but portable)."""

import array_api_strict as xp
import numpy as np

from ..host import SparseSupport


def scatter_add(target, indices, values, axis):
    """Add ``values`` into a copy of ``target`` at integer ``indices`` along ``axis`` (repeats add up)."""
    n = target.shape[axis]
    onehot = xp.astype(indices[:, None] == xp.arange(n, device=target.device)[None, :], values.dtype)
    moved = xp.moveaxis(values, axis, -1)
    added = xp.moveaxis(moved @ onehot, -1, axis)
    return target + added


def index_add(target, key, values):
    """Add ``values`` into a copy of ``target`` at a general index ``key``; repeated indices accumulate."""
    out = xp.asarray(target, copy=True)
    flat = xp.reshape(xp.arange(out.size, device=out.device), out.shape)[key]
    shape = xp.broadcast_shapes(flat.shape, values.shape)
    flat = xp.reshape(xp.broadcast_to(flat, shape), (-1,))
    vals = xp.reshape(xp.broadcast_to(values, shape), (-1,))
    summed = scatter_add(xp.reshape(out, (-1,)), flat, vals, 0)
    return xp.reshape(summed, out.shape)


def _to_host(array):
    # NumPy reads arrays on the CPU device only: the stand-in devices move there first
    return np.asarray(array.to_device(xp.__array_namespace_info__().default_device()))


def _from_host(values, like):
    return xp.asarray(np.asarray(values), dtype=like.dtype).to_device(like.device)


# the sparse linear algebra of the contract: array_api_strict has no sparse matrices, so sparse Jacobians
# are ArrayCSR matrices in its arrays, built on their device; solves run SciPy on deliberate host copies
sparse = SparseSupport(to_host=_to_host, from_host=_from_host, namespace=xp)

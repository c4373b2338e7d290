"""Kernels the standard lacks, written as Dask graphs: nothing here computes a value.

``scatter_add`` builds each chunk of the result along the scattered axis from the indices that land in
it (one NumPy ``add.at`` per chunk), so a gradient scattered into a large chunked array stays chunked.
"""

import string

import array_api_compat.dask.array as compat
import dask
import dask.array as da
import numpy as np
from dask.array.core import elemwise, normalize_chunks

from ..host import SparseSupport


def scatter_add(target, indices, values, axis):
    """Add ``values`` into a copy of ``target`` at integer ``indices`` along ``axis`` (repeats add up)."""
    target, indices, values = da.asarray(target), da.asarray(indices), da.asarray(values)
    moved = da.moveaxis(target, axis, 0)
    vals = da.moveaxis(values, axis, 0)
    # every output chunk reads all the indices and values: one chunk along the scattered axis, the
    # target's chunks along the others
    vals = vals.rechunk((vals.shape[0],) + moved.chunks[1:])
    indices = indices.rechunk(-1)
    rest = string.ascii_letters[2 : 1 + moved.ndim]
    n = moved.shape[0]
    pieces, offset = [], 0
    for length in moved.chunks[0]:
        pieces.append(
            da.blockwise(
                _add_at_chunk,
                "a" + rest,
                indices,
                "z",
                vals,
                "z" + rest,
                new_axes={"a": length},
                concatenate=True,
                dtype=target.dtype,
                offset=offset,
                length=length,
                size=n,
                dtype_out=target.dtype,
            )  # fmt: skip
        )
        offset += length
    added = da.concatenate(pieces, axis=0) if len(pieces) > 1 else pieces[0]
    return da.moveaxis(moved + added, 0, axis)


def _add_at_chunk(indices, values, *, offset, length, size, dtype_out):
    """The part of a scatter-add landing in rows ``offset:offset + length`` (one NumPy chunk)."""
    out = np.zeros((length,) + values.shape[1:], dtype=dtype_out)
    indices = np.where(indices < 0, indices + size, indices)
    inside = (indices >= offset) & (indices < offset + length)
    np.add.at(out, indices[inside] - offset, values[inside])
    return out


def index_add(target, key, values):
    """Add ``values`` into a copy of ``target`` at a general index ``key``; repeated indices accumulate
    (the flat positions ``key`` selects, scattered into the flattened target)."""
    target = da.asarray(target)
    positions = da.reshape(da.arange(target.size), target.shape)[key]
    positions, values = da.broadcast_arrays(positions, da.asarray(values))
    flat = scatter_add(da.reshape(target, (-1,)), da.reshape(positions, (-1,)), da.reshape(values, (-1,)), 0)
    return da.reshape(flat, target.shape)


def broadcast_to(x, /, shape):
    """``x`` broadcast to ``shape``, with the broadcast axes split into chunks of Dask's automatic size.
    (Dask's own makes each such axis one chunk: the cotangent of a sum over a large array, broadcast back
    to its shape, would then be one chunk the size of the array.)"""
    x = da.asarray(x)
    shape = tuple(shape)
    if 0 in shape:
        return da.broadcast_to(x, shape)
    lead = len(shape) - x.ndim
    spread = [i < lead or (x.shape[i - lead] == 1 and shape[i] != 1) for i in range(len(shape))]
    chunks = tuple("auto" if s else x.chunks[i - lead] for i, s in enumerate(spread))
    return da.broadcast_to(x, shape, chunks=normalize_chunks(chunks, shape, dtype=x.dtype))


def reshape(x, /, shape, *, copy=None):
    """``x`` in ``shape``; where Dask refuses (an axis split unevenly across chunks: ``(2, 3) -> (3, 2)``
    in chunks of 2) through one flat axis, which Dask can always merge into and split from."""
    try:
        return compat.reshape(x, shape, copy=copy)
    except NotImplementedError:
        return compat.reshape(compat.reshape(x, (-1,), copy=copy), shape)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """``n`` forward differences along ``axis`` after joining ``prepend`` and ``append``. (Dask's own
    converts those two with NumPy, which computes them.)"""
    parts = [da.asarray(p) for p in (prepend, x, append) if p is not None]
    joined = da.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]
    return da.diff(joined, n=n, axis=axis)


def take_along_axis(x, indices, /, *, axis=-1):
    """Values of ``x`` at ``indices`` along ``axis`` (the other axes broadcast): NumPy's on blocks that
    hold the whole of ``axis`` (Dask has none)."""
    x, indices = da.asarray(x), da.asarray(indices)
    axis = axis % x.ndim
    rest = [s for i, s in enumerate(np.broadcast_shapes(*[_one_at(a.shape, axis) for a in (x, indices)]))]
    del rest[axis]
    x = da.broadcast_to(x, (*rest[:axis], x.shape[axis], *rest[axis:])).rechunk({axis: -1})
    indices = da.broadcast_to(indices, (*rest[:axis], indices.shape[axis], *rest[axis:])).rechunk({axis: -1})
    letters = string.ascii_letters[: x.ndim]
    out = letters[:axis] + "Z" + letters[axis + 1 :]
    return da.blockwise(
        np.take_along_axis, out, x, letters, indices, out, dtype=x.dtype, concatenate=True, axis=axis
    )


def _one_at(shape, axis):
    return shape[:axis] + (1,) + shape[axis + 1 :]


def cholesky(x, /, *, upper=False):
    """The Cholesky factor, lower unless ``upper``: array-api-compat's Dask wrapper passes ``upper`` on to
    Dask, whose default is the upper factor, so it returns the upper factor where the standard asks for
    the lower (and every derivative built on it would be wrong)."""
    return da.linalg.cholesky(x, lower=not upper)


linalg = {"cholesky": cholesky}  # merged into the namespace's linalg


def persist(*arrays):
    """The arrays computed, their chunks kept in memory (``dask.persist``, one graph for all): a loop that
    reads a value at every step then computes each step once, not every step before it again."""
    return dask.persist(*arrays)


def to_numpy(array):
    """A NumPy copy: computes ``array`` (the one place the backend asks Dask for values)."""
    return np.asarray(array.compute() if isinstance(array, da.Array) else array)


def map_host(f, args):
    """NumPy element-wise function ``f`` (a SciPy ufunc) applied chunk by chunk to the arrays and
    numbers among ``args``, broadcast together: a lazy array, or a tuple of them. A ufunc goes through
    Dask's ``__array_ufunc__`` (which finds the result dtype); another function is assumed to compute in
    the arrays' floating dtype (float64 for integer arguments), as SciPy's do."""
    if isinstance(f, np.ufunc):
        return f(*args)
    dtype = np.result_type(*[a.dtype for a in args if hasattr(a, "dtype")])
    return elemwise(f, *args, dtype=dtype if dtype.kind in "fc" else np.float64)


def _from_host(values, like):
    return da.from_array(np.asarray(values, dtype=like.dtype))


# the sparse linear algebra of the contract: Dask has no sparse matrices of its own here, so sparse
# Jacobians are ArrayCSR matrices in Dask arrays; solves compute their operands and run SciPy on the host
sparse = SparseSupport(to_host=to_numpy, from_host=_from_host, namespace=compat)

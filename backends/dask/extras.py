"""Kernels the standard lacks, written as Dask graphs: nothing here computes a value.

``scatter_add`` builds each chunk of the result along the scattered axis from the indices that land in
it (one NumPy ``add.at`` per chunk), so a gradient scattered into a large chunked array stays chunked.
"""

import string

import dask.array as da
import numpy as np
from dask.array.core import elemwise


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
                _add_at_chunk, "a" + rest, indices, "z", vals, "z" + rest,
                new_axes={"a": length}, concatenate=True, dtype=target.dtype,
                offset=offset, length=length, size=n, dtype_out=target.dtype,
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

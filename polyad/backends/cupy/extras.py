"""Kernels the standard lacks, written with CuPy's own routines."""

import cupy
import cupyx


def scatter_add(target, indices, values, axis):
    """Add ``values`` into a copy of ``target`` at integer ``indices`` along ``axis`` (repeats add up)."""
    out = target.copy()
    moved = cupy.moveaxis(out, axis, 0)
    cupyx.scatter_add(moved, indices, cupy.moveaxis(values, axis, 0))
    return out


def index_add(target, key, values):
    """Add ``values`` into a copy of ``target`` at a general index ``key``; repeated indices accumulate."""
    out = target.copy()
    cupyx.scatter_add(out, key, values)
    return out

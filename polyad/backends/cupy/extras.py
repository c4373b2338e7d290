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


def decompose_stack(f, x):
    """``f`` (eigh, svd: a tuple of arrays) of the stack of matrices ``x``, one matrix at a time.

    cuSOLVER's batched routines (syevj, gesvdj), which CuPy calls for a stack, pick other signs of the
    vectors than its one-matrix routines: vmap's one call on the stack then differed from the eager
    calls per example. One call per matrix gives each matrix the eager call's answer (and order)."""
    if x.ndim <= 2 or x.size == 0:
        return f(x)
    lead, core = x.shape[:-2], x.shape[-2:]
    flat = x.reshape((-1, *core))
    outs = [f(flat[i]) for i in range(flat.shape[0])]
    return tuple(cupy.stack(col).reshape(lead + col[0].shape) for col in zip(*outs))

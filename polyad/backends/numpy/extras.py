"""Kernels the standard lacks, written with NumPy's own fast routines."""

import numpy as np

from ..host import SparseSupport


def scatter_add(target, indices, values, axis):
    """Add ``values`` into a copy of ``target`` at integer ``indices`` along ``axis`` (repeats add up)."""
    out = np.array(target, copy=True)
    moved = np.moveaxis(out, axis, 0)
    np.add.at(moved, indices, np.moveaxis(values, axis, 0))
    return out


def index_add(target, key, values):
    """Add ``values`` into a copy of ``target`` at a general index ``key``; repeated indices accumulate."""
    out = np.array(target, copy=True)
    np.add.at(out, key, values)
    return out


def roll(x, shift, axis=None):
    """``np.roll``, in one pass for the common case of one int shift along one axis (a stencil's
    neighbour: two slice copies into one new array, where NumPy's roll concatenates)."""
    if isinstance(shift, int) and (isinstance(axis, int) or (axis is None and x.ndim == 1)) and x.ndim:
        ax = 0 if axis is None else axis % x.ndim
        n = x.shape[ax]
        s = shift % n if n else 0
        if s:
            out = np.empty_like(x)
            lead = (slice(None),) * ax
            out[(*lead, slice(s, None))] = x[(*lead, slice(None, n - s))]
            out[(*lead, slice(None, s))] = x[(*lead, slice(n - s, None))]
            return out
    return np.roll(x, shift, axis=axis)


def product_without_nan(g, d, divide=False):
    """``g * d`` (``g / d``) of NumPy arrays where it equals the zero-safe product, else None (the
    zero-safe products of ``polyad.ops.zero_safe`` then build their mask).

    Two cheap proofs, one sum each. Where ``d`` is much smaller than the product (an unbatched factor
    meeting vmap's batch of tangents), its own sum decides: a finite sum means no inf or NaN in ``d``
    (for a division: the sum of ``1 / d``, finite only if ``d`` holds no 0 and no NaN), so the mask would
    change nothing, whatever ``g`` holds. Otherwise the product's sum: no NaN there (a NaN, or inf - inf,
    makes it NaN) means no ``0 * inf`` either. (Where the product makes a NaN, NumPy warns as the plain
    product always did.)"""
    if not isinstance(g, np.ndarray | np.generic) or not isinstance(d, np.ndarray | np.generic | float):
        return None
    if 4 * np.size(d) <= np.size(g):
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            total = np.add.reduce(np.divide(1.0, d) if divide else d, None)
        if np.isfinite(total):
            return g / d if divide else g * d
    out = g / d if divide else g * d
    total = np.add.reduce(out, None)
    return None if total != total else out


# NumPy 2 already conforms for these; calling them directly skips array-api-compat's wrappers, which
# matter on the per-op hot path (sign is in abs's VJP, zeros_like seeds every cotangent).
sign = np.sign
matmul = np.matmul
matrix_transpose = np.matrix_transpose
permute_dims = np.permute_dims
zeros_like = np.zeros_like
ones_like = np.ones_like


# the sparse linear algebra of the contract: SciPy, on NumPy's arrays as they are (SciPy is imported on use)
sparse = SparseSupport()

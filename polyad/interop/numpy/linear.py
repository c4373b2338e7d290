"""NumPy's products (``np.dot``, ``np.einsum``, ``np.kron``, ``np.convolve``...) with NumPy's semantics
(``np.dot`` of N-D arrays contracts the last axis with the second-to-last), as compositions of polyad ops.

``np.einsum`` contracts its operands pairwise, left to right: a label repeated within an operand becomes a
diagonal, labels no one else needs are summed first, and each pair is one batched ``matmul`` (no operand is
ever broadcast to the product of all the dimensions).
"""

import math

import polyad.xp as pxp
from polyad.interop.numpy.common import arr, as_dtype, implements, is_complex, write_out, xp_of
from polyad.interop.numpy.shapes import moveaxis

# ------------------------------------------------------------------------------ products


@implements("dot", how="xp.matmul, xp.tensordot or xp.multiply by the shapes")
def dot(a, b, out=None):
    a, b = arr(a), arr(b)
    if a.ndim == 0 or b.ndim == 0:
        result = a * b
    elif b.ndim == 1 or (a.ndim <= 2 and b.ndim <= 2):
        result = pxp.matmul(a, b)
    else:  # sum over a's last axis and b's second-to-last
        result = pxp.tensordot(a, b, axes=((a.ndim - 1,), (b.ndim - 2,)))
    return write_out(out, result)


@implements("vdot", how="xp.vecdot of the flattened arrays (conjugating the first)")
def vdot(a, b):
    return pxp.vecdot(pxp.reshape(arr(a), (-1,)), pxp.reshape(arr(b), (-1,)))


@implements("inner", how="xp.tensordot over the last axes")
def inner(a, b):
    a, b = arr(a), arr(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return pxp.tensordot(a, b, axes=((a.ndim - 1,), (b.ndim - 1,)))


@implements("outer", "linalg.outer", how="xp.multiply of the flattened arrays, broadcast")
def outer(a, b, out=None):
    a, b = pxp.reshape(arr(a), (-1, 1)), pxp.reshape(arr(b), (1, -1))
    return write_out(out, a * b)


@implements("kron", how="xp.multiply of interleaved axes, xp.reshape")
def kron(a, b):
    a, b = arr(a), arr(b)
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    a = pxp.reshape(a, tuple(x for s in sa for x in (s, 1)))
    b = pxp.reshape(b, tuple(x for s in sb for x in (1, s)))
    return pxp.reshape(a * b, tuple(p * q for p, q in zip(sa, sb)))


def _as_axes(v):
    return (v,) if isinstance(v, int) else tuple(v)


@implements("tensordot", "linalg.tensordot", how="xp.tensordot")
def tensordot(a, b, axes=2):
    if not isinstance(axes, int):
        axes = (_as_axes(axes[0]), _as_axes(axes[1]))
    return pxp.tensordot(arr(a), arr(b), axes=axes)


@implements("cross", how="xp.linalg.cross (3-vectors), the z-component formula (2-vectors)")
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(arr(a), axisa, -1), moveaxis(arr(b), axisb, -1)
    na, nb = a.shape[-1], b.shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product (dimension must be 2 or 3)")
    if na == 2 and nb == 2:
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    if na == 2:
        a = pxp.concat([a, pxp.zeros_like(a[..., :1])], axis=-1)
    if nb == 2:
        b = pxp.concat([b, pxp.zeros_like(b[..., :1])], axis=-1)
    a, b = pxp.broadcast_arrays(a, b)
    return moveaxis(pxp.linalg.cross(a, b, axis=-1), -1, axisc)


@implements("linalg.cross", how="xp.linalg.cross")
def linalg_cross(x1, x2, /, *, axis=-1):
    return pxp.linalg.cross(arr(x1), arr(x2), axis=axis)


@implements("linalg.vecdot", how="xp.vecdot")
def vecdot(x1, x2, /, *, axis=-1):
    return pxp.vecdot(arr(x1), arr(x2), axis=axis)


# ------------------------------------------------------------------------------ einsum

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _parse_term(term, ndim):
    """Labels of one operand: letters as themselves, the ellipsis's axes as -k..-1 (right-aligned)."""
    if "..." in term:
        head, tail = term.split("...")
        count = ndim - len(head) - len(tail)
        if count < 0:
            raise ValueError(f"einstein sum subscripts string {term!r} has more labels than dimensions")
        return list(head) + list(range(-count, 0)) + list(tail)
    if len(term) != ndim:
        raise ValueError(f"operand has {ndim} dimensions, but its subscripts {term!r} name {len(term)}")
    return list(term)


def _from_sublists(args):
    """The subscripts string of einsum's sublist form ``(op0, sublist0, op1, sublist1, ..., [out])``."""
    out = args[-1] if len(args) % 2 == 1 else None
    pairs = args[:-1] if out is not None else args
    operands, terms = list(pairs[0::2]), list(pairs[1::2])

    def text(sub):
        return "".join("..." if s is Ellipsis else _LETTERS[s] for s in sub)

    subscripts = ",".join(text(t) for t in terms) + ("" if out is None else "->" + text(out))
    return subscripts, operands


def _diagonals(x, labels):
    """An operand with each label repeated within it taken along its diagonal."""
    while True:
        repeated = next((lab for lab in labels if labels.count(lab) > 1), None)
        if repeated is None:
            return x, labels
        i = labels.index(repeated)
        j = labels.index(repeated, i + 1)
        x = pxp.linalg.diagonal(pxp.moveaxis(x, (i, j), (-2, -1)))
        labels = [lab for k, lab in enumerate(labels) if k not in (i, j)] + [repeated]


def _sum_labels(x, labels, drop):
    axes = tuple(i for i, lab in enumerate(labels) if lab in drop)
    if not axes:
        return x, labels
    return pxp.sum(x, axis=axes), [lab for lab in labels if lab not in drop]


def _contract(a, la, b, lb, keep):
    """Two operands contracted over their shared labels that ``keep`` does not need: one batched matmul."""
    shared = [lab for lab in la if lab in lb]
    for lab in shared:  # size-1 axes of a broadcast ellipsis meet full ones
        i, j = la.index(lab), lb.index(lab)
        if a.shape[i] != b.shape[j]:
            if a.shape[i] == 1:
                a = pxp.broadcast_to(a, a.shape[:i] + (b.shape[j],) + a.shape[i + 1 :])
            else:
                b = pxp.broadcast_to(b, b.shape[:j] + (a.shape[i],) + b.shape[j + 1 :])
    batch = [lab for lab in shared if lab in keep]
    summed = [lab for lab in shared if lab not in keep]
    a_only = [lab for lab in la if lab not in shared]
    b_only = [lab for lab in lb if lab not in shared]
    size = dict(zip(la, a.shape)) | dict(zip(lb, b.shape))
    a = pxp.permute_dims(a, tuple(la.index(lab) for lab in batch + a_only + summed))
    b = pxp.permute_dims(b, tuple(lb.index(lab) for lab in batch + summed + b_only))
    nb, na, nk, nn = (math.prod(size[lab] for lab in group) for group in (batch, a_only, summed, b_only))
    product = pxp.matmul(pxp.reshape(a, (nb, na, nk)), pxp.reshape(b, (nb, nk, nn)))
    labels = batch + a_only + b_only
    return pxp.reshape(product, tuple(size[lab] for lab in labels)), labels


@implements("einsum", how="diagonals, sums and pairwise batched xp.matmul")
def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    if isinstance(operands[0], str):
        subscripts, ops = operands[0], list(operands[1:])
    else:
        subscripts, ops = _from_sublists(operands)
    ops = [arr(op) if dtype is None else pxp.astype(arr(op), as_dtype(dtype, op)) for op in ops]
    inputs, arrow, output = subscripts.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ops):
        raise ValueError(f"einsum: {len(terms)} subscripts for {len(ops)} operands")
    labels = [_parse_term(t, op.ndim) for t, op in zip(terms, ops)]
    ellipsis = max((-min((lab for lab in ls if isinstance(lab, int)), default=0) for ls in labels), default=0)
    if arrow:
        out_labels = _parse_term(
            output, len(output.replace("...", "")) + (ellipsis if "..." in output else 0)
        )
    else:
        letters = [lab for ls in labels for lab in ls if isinstance(lab, str)]
        out_labels = list(range(-ellipsis, 0)) + sorted(
            lab for lab in set(letters) if letters.count(lab) == 1
        )
    pending = [_diagonals(op, ls) for op, ls in zip(ops, labels)]
    for k, (op, ls) in enumerate(pending):  # labels needed by no one else: summed now
        others = set(out_labels).union(*(set(p[1]) for i, p in enumerate(pending) if i != k))
        pending[k] = _sum_labels(op, ls, {lab for lab in ls if lab not in others})
    x, lx = pending[0]
    for i in range(1, len(pending)):
        keep = set(out_labels).union(*(set(p[1]) for p in pending[i + 1 :]))
        x, lx = _contract(x, lx, pending[i][0], pending[i][1], keep)
    x, lx = _sum_labels(x, lx, {lab for lab in lx if lab not in out_labels})
    missing = [lab for lab in out_labels if lab not in lx]
    if missing:
        raise ValueError(
            f"einstein sum subscripts string included output subscript(s) {missing} not in inputs"
        )
    return write_out(out, pxp.permute_dims(x, tuple(lx.index(lab) for lab in out_labels)) if lx else x)


# ------------------------------------------------------------------------------ convolution


def _convolve_full(a, v):
    """Full discrete linear convolution of two 1-D arrays: a gather of the zero-padded ``v`` times ``a``."""
    n, m = a.shape[0], v.shape[0]
    ns = xp_of(v)
    zeros = ns.zeros((n - 1,), dtype=v.dtype, device=v.device)
    padded = pxp.concat([zeros, v, zeros])
    k = ns.reshape(ns.arange(n + m - 1, device=v.device), (-1, 1))
    j = ns.reshape(ns.arange(n, device=v.device), (1, -1))
    gathered = pxp.reshape(pxp.take(padded, ns.reshape(k + (n - 1) - j, (-1,))), (n + m - 1, n))
    return pxp.matmul(gathered, a)


def _mode_slice(full, n, m, mode):
    if mode == "full":
        return full
    long, short = max(n, m), min(n, m)
    if mode == "same":
        start = (short - 1) // 2
        return full[start : start + long]
    if mode == "valid":
        return full[short - 1 : long]
    raise ValueError(f"mode must be 'full', 'same' or 'valid', got {mode!r}")


@implements("convolve", how="a gather of the padded kernel, xp.matmul")
def convolve(a, v, mode="full"):
    a, v = arr(a), arr(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError("np.convolve takes 1-D arrays")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError("np.convolve: inputs cannot be empty")
    return _mode_slice(_convolve_full(a, v), a.shape[0], v.shape[0], mode)


@implements("correlate", how="np.convolve with the conjugate kernel reversed")
def correlate(a, v, mode="valid"):
    a, v = arr(a), arr(v)
    return convolve(a, pxp.flip(pxp.conj(v) if is_complex(v) else v), mode)


@implements("polymul", how="np.convolve")
def polymul(a1, a2):
    return convolve(a1, a2)

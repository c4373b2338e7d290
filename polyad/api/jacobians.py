"""Jacobians (torch.func's semantics and layout): jacrev (one vjp, then vmap over the standard basis of
the outputs), jacfwd (vmap of jvp over the standard basis of the inputs) and hessian (jacfwd of jacrev).

Both Jacobians end in ``_assemble``, which cuts what they computed into one O + I block per output leaf
and input leaf.
"""

import functools
import math

import optree

from polyad import dispatch
from polyad.api.arguments import (
    _check_argnums,
    _check_callable,
    _check_chunk_size,
    _check_has_aux,
    _check_inputs,
    _check_randomness,
    _check_real_floating,
    _diff_args,
    _flatten,
    _partial,
)
from polyad.api.forward_mode import _jvp
from polyad.api.reverse_mode import _vjp
from polyad.api.vectorize import vmap
from polyad.core import Tensor
from polyad.ops.common import _bottom
from polyad.ops.creation import arange, eye, zeros
from polyad.ops.dtypes import astype
from polyad.ops.manipulation import concat, expand_dims, reshape
from polyad.predispatch import recorded


def _eye_rows(start, stop, n, like):
    """Rows ``start:stop`` of the n x n identity, with ``like``'s dtype and device."""
    return eye(stop - start, n, k=start, dtype=like.dtype, device=_bottom(like).device)


def _one_hot(i, n, like):
    """Row ``i`` of the n x n identity (under vmap: a batch of rows), with ``like``'s dtype and device."""
    return astype(arange(n, device=_bottom(like).device) == i, like.dtype)


def _split_basis(rows, leaves, sizes, lead):
    """Cut basis ``rows`` (last axis: the flattened leaves) into arrays shaped like ``leaves``."""
    parts, off = [], 0
    for x, n in zip(leaves, sizes):
        piece = rows if len(leaves) == 1 else rows[(slice(None),) * lead + (slice(off, off + n), ...)]
        piece = reshape(piece, tuple(piece.shape[:lead]) + tuple(x.shape))
        parts.append(piece if piece.dtype == x.dtype else astype(piece, x.dtype))
        off += n
    return parts


def _offsets(shapes):
    """``(start, stop)`` of each shape's elements in the concatenation of them all, flattened."""
    spans, off = [], 0
    for s in shapes:
        n = math.prod(s)
        spans.append((off, off + n))
        off += n
    return spans


def _assemble(jac, o_shapes, o_tree, i_shapes, in_tree, single, by_output):
    """The torch.func layout: the output pytree of (a tuple over argnums of) input pytrees of O + I blocks.

    ``jac`` is the Jacobian as a transform computed it: with ``by_output`` (jacfwd), one array
    (*O, total inputs) per output leaf; else (jacrev), one array (total outputs, *I) per input leaf.
    """
    o_spans, i_spans = _offsets(o_shapes), _offsets(i_shapes)
    out_leaves = []
    for i, o in enumerate(o_shapes):
        blocks = []
        for k, x in enumerate(i_shapes):
            if by_output:
                a, (start, stop) = jac[i], i_spans[k]
                block = a if len(i_shapes) == 1 else a[..., start:stop]
            else:
                a, (start, stop) = jac[k], o_spans[i]
                block = a if len(o_shapes) == 1 else a[start:stop, ...]
            blocks.append(reshape(block, o + x))
        per_arg = optree.tree_unflatten(in_tree, blocks)
        out_leaves.append(per_arg[0] if single else per_arg)
    return optree.tree_unflatten(o_tree, out_leaves)


def _buffers(in_flat, total):
    """Preallocated raw result rows (total, *I) per input leaf, or None when inputs are transform tensors."""
    if any(isinstance(x, Tensor) for x in in_flat):
        return None
    bufs = []
    for x in in_flat:
        xp = dispatch.backend_of_array(x).xp
        bufs.append(xp.empty((total, *x.shape), dtype=x.dtype, device=x.device))
    return bufs


@recorded("jacrev")
def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian by reverse mode: one ``vjp``, then ``vmap(vjp_fn)`` over the standard basis of the
    outputs (torch.func.jacrev's semantics).

    Args:
        func: a function of real floating arrays returning a real floating array or a pytree of them.
        argnums: int or tuple of ints: the positional arguments to differentiate with respect to.
        has_aux: ``func`` returns ``(output, aux)``; aux is returned unchanged, not differentiated.
        chunk_size: None: one vmap over all basis rows; k: chunks of k rows (the result is preallocated
            and filled chunk by chunk, capping peak memory); 1: a plain loop of vjp calls, no vmap.

    Returns:
        A function returning the Jacobian (and aux). For an output leaf of shape O and an input of shape
        I the block has shape O + I. With tuple ``argnums`` each output leaf holds a tuple with one entry
        per argnum; pytree inputs give pytrees of blocks; pytree outputs give the output's structure
        around them. Its rows are input cotangents: each block has its input's dtype.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    _check_callable(func, "jacrev")
    _check_argnums(argnums, "jacrev")
    _check_has_aux(has_aux, "jacrev")
    _check_chunk_size(chunk_size, "jacrev")

    @functools.wraps(func)
    def jac_f(*args, **kwargs):
        what, single, nums, diff = _diff_args("jacrev", func, argnums, args)
        in_flat, in_tree = _flatten(diff)
        _check_real_floating(in_flat, in_tree, what, "argument", nums)
        partial_func = _partial(func, args, kwargs, nums)
        out, backward, aux, _ = _vjp(partial_func, diff, has_aux, what, nums=nums, jacobian=True)
        o_flat, o_tree = _flatten(out)
        sizes = [math.prod(o.shape) for o in o_flat]
        total = sum(sizes)

        def vjp_rows(basis):  # basis rows -> one cotangent per input leaf (rows first under vmap)
            cts = optree.tree_unflatten(o_tree, _split_basis(basis, o_flat, sizes, 0))
            return optree.tree_leaves(backward(cts, False))

        def vjp_row_of(i):  # the basis row made inside and handed over: nothing keeps the whole basis
            return optree.tree_leaves(
                backward(
                    optree.tree_unflatten(
                        o_tree, _split_basis(_one_hot(i, total, o_flat[0]), o_flat, sizes, 0)
                    ),
                    False,
                )
            )

        if total == 0:
            rows = [zeros((0, *x.shape), dtype=x.dtype, device=_bottom(x).device) for x in in_flat]
        elif total == 1:  # one output element (a scalar loss): one vjp, no batch level to vmap
            rows = [expand_dims(r, axis=0) for r in vjp_rows(_eye_rows(0, 1, 1, o_flat[0]))]
        elif chunk_size is None or (chunk_size >= total and chunk_size > 1):
            rows = vmap(vjp_row_of)(arange(total, device=_bottom(o_flat[0]).device))
        else:
            # chunks of basis rows; raw results are copied into preallocated rows (peak memory: the
            # Jacobian plus one chunk), transform tensors are concatenated at the end
            buffers, pieces = _buffers(in_flat, total), []
            for start in range(0, total, chunk_size):
                stop = min(start + chunk_size, total)
                basis = _eye_rows(start, stop, total, o_flat[0])
                if chunk_size == 1:
                    piece = [reshape(p, (1, *p.shape)) for p in vjp_rows(reshape(basis, (total,)))]
                else:
                    piece = vmap(vjp_rows)(basis)
                if buffers is not None and any(isinstance(p, Tensor) for p in piece):
                    pieces, buffers = [[b[:start, ...] for b in buffers]] if start else [], None
                if buffers is None:
                    pieces.append(piece)
                else:
                    for b, p in zip(buffers, piece):
                        b[start:stop, ...] = p
                del piece, basis
            if buffers is not None:
                rows = buffers
            else:
                rows = [concat([p[k] for p in pieces], axis=0) for k in range(len(in_flat))]
        o_shapes = [tuple(o.shape) for o in o_flat]
        i_shapes = [tuple(x.shape) for x in in_flat]
        jac = _assemble(rows, o_shapes, o_tree, i_shapes, in_tree, single, by_output=False)
        return (jac, aux) if has_aux else jac

    return jac_f


@recorded("jacfwd")
def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian by forward mode: ``vmap(jvp)`` over the standard basis of the inputs
    (torch.func.jacfwd's semantics).

    Args:
        func, argnums, has_aux: as ``jacrev``.
        randomness: passed to the vmap over the basis ("error", "different" or "same").

    Returns:
        A function returning the Jacobian (and aux), laid out as ``jacrev``'s: shape O + I per output leaf
        and input. Its columns are output tangents: each block has its output's dtype.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jacfwd(lambda x: x ** 3)(np.array([1.0, 2.0]))
        array([[ 3.,  0.],
               [ 0., 12.]])
    """
    _check_callable(func, "jacfwd")
    _check_argnums(argnums, "jacfwd")
    _check_has_aux(has_aux, "jacfwd")
    _check_randomness(randomness, "jacfwd")

    @functools.wraps(func)
    def jac_f(*args, **kwargs):
        what, single, nums, diff = _diff_args("jacfwd", func, argnums, args)
        in_flat, in_tree = _flatten(diff)
        _check_inputs(in_flat, in_tree, what, "argument", nums)
        _check_real_floating(in_flat, in_tree, what, "argument", nums)
        sizes = [math.prod(x.shape) for x in in_flat]
        total = sum(sizes)
        partial_func = _partial(func, args, kwargs, nums)

        def push(basis_row):
            tangents = tuple(optree.tree_unflatten(in_tree, _split_basis(basis_row, in_flat, sizes, 0)))
            res = _jvp(partial_func, diff, tangents, False, has_aux, what)
            return (res[1], res[2]) if has_aux else res[1]

        if not in_flat:
            raise ValueError(f"{what}: the differentiated arguments hold no arrays")
        basis = _eye_rows(0, total, total, in_flat[0])
        if has_aux:
            tangents, aux = vmap(push, out_dims=(-1, None), randomness=randomness)(basis)
        else:
            tangents = vmap(push, out_dims=-1, randomness=randomness)(basis)
        t_flat, t_tree = _flatten(tangents)  # each (*O, total)
        _check_real_floating(t_flat, t_tree, what, "output")
        o_shapes = [tuple(t.shape[:-1]) for t in t_flat]
        i_shapes = [tuple(x.shape) for x in in_flat]
        jac = _assemble(t_flat, o_shapes, t_tree, i_shapes, in_tree, single, by_output=True)
        return (jac, aux) if has_aux else jac

    return jac_f


@recorded("hessian")
def hessian(func, argnums=0):
    """The Hessian, ``jacfwd(jacrev(func, argnums), argnums)`` (forward over reverse, as torch.func).

    Args:
        func: a function of real floating arrays returning a real 0-d array.
        argnums: int or tuple of ints: the positional arguments to differentiate twice.

    Returns:
        A function returning the Hessian: for an input of shape I, an array of shape I + I (with tuple
        ``argnums``, nested tuples of blocks, one per pair of arguments).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.hessian(lambda x: pa.xp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    _check_callable(func, "hessian")
    _check_argnums(argnums, "hessian")
    forward_over_reverse = jacfwd(jacrev(func, argnums), argnums)

    @functools.wraps(func)
    def hessian_f(*args, **kwargs):
        what, _, nums, diff = _diff_args("hessian", func, argnums, args)
        in_flat, in_tree = _flatten(diff)
        _check_inputs(in_flat, in_tree, what, "argument", nums)  # named as hessian's, not jacfwd's
        _check_real_floating(in_flat, in_tree, what, "argument", nums)
        return forward_over_reverse(*args, **kwargs)

    return hessian_f

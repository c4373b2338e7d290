"""The public transforms: vjp, grad, grad_and_value, value_and_grad, jvp, linearize, vmap, jacrev,
jacfwd, hessian; and the gradient-mode guards no_grad, enable_grad, stop_gradient.

This module checks arguments, walks pytrees (optree) and pushes levels; the interpreters in
reverse.py, forward.py and batching.py do the rest. Inputs and outputs are backend arrays.
"""

import functools
import math
from contextlib import contextmanager

import optree

from polyad import dispatch
from polyad.batching import BatchedTensor, BatchInterpreter
from polyad.core import Tensor, _tls, current_level, new_level
from polyad.core import plain as _plain
from polyad.forward import DualTensor, ForwardInterpreter
from polyad.ops.common import is_complex, is_floating
from polyad.predispatch import not_recorded, recorded, recorded_call
from polyad.reverse import ReverseInterpreter

# ------------------------------------------------------------------------------ helpers


def _is_array(x):
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def _fname(func):
    return getattr(func, "__name__", type(func).__name__)


def _check_callable(func, transform):
    if not callable(func):
        raise TypeError(f"{transform}(func, ...): func must be callable, got {type(func).__name__}")


def _flatten(tree):
    return optree.tree_flatten(tree, none_is_leaf=False)


def _check_arrays(leaves, what):
    for i, x in enumerate(leaves):
        if not _is_array(x):
            raise TypeError(
                f"{what}: every input must be an array (numpy, cupy or array_api_strict), "
                f"got {type(x).__name__} at leaf {i}; wrap Python numbers with pa.asarray"
            )


def _normalize_argnums(argnums, nargs, transform):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums) if isinstance(argnums, tuple | list) else None
    if nums is None or not nums or not all(isinstance(a, int) and not isinstance(a, bool) for a in nums):
        raise TypeError(
            f"{transform}(argnums={argnums!r}): argnums must be an int or a non-empty tuple of ints"
        )
    out = []
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(
                f"{transform}(argnums={argnums!r}): argnum {a} is out of range for a function called "
                f"with {nargs} positional argument(s)"
            )
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise ValueError(
            f"{transform}(argnums={argnums!r}): argnums must not repeat an argument; with "
            f"{nargs} positional argument(s) they name {tuple(out)}"
        )
    return single, tuple(out)


def _split_aux(out, has_aux, transform):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else f"a {type(out).__name__}"
        raise TypeError(
            f"{transform} with has_aux=True: func must return a pair (output, aux), got {got}; "
            "pass has_aux=False if func returns only its output"
        )
    return out


def _lower_tree(tree, interp):
    """Replace tensors of ``interp``'s level in ``tree`` by the values underneath (for aux outputs)."""

    def low(x):
        if isinstance(x, Tensor) and x._interp is interp:
            if isinstance(x, BatchedTensor):
                from polyad.ops.manipulation import moveaxis

                return moveaxis(x._value, x._aux, 0)
            return x._value
        return _plain(x)

    return optree.tree_map(low, tree)


def _zeros_like(x):
    from polyad.ops.creation import zeros_like

    return zeros_like(x)


def _add(a, b):
    from polyad.ops.elementwise import add

    return add(a, b)


# ------------------------------------------------------------------------------ reverse mode


def _leaf_name(tree, i, root, nums=None):
    """A readable name for leaf ``i`` of ``tree`` (a pytree or its PyTreeSpec): "primals[0]['w']",
    "argument 1[0]". For error messages only. ``nums`` maps the first path index to an argnum."""
    if isinstance(tree, optree.PyTreeSpec):
        path = tree.paths()[i]
    else:
        path = optree.tree_paths(tree, none_is_leaf=False)[i]
    if nums is not None:
        root, path = f"argument {nums[path[0]]}", path[1:]
    return root + "".join(f"[{k!r}]" for k in path)


def _check_inputs(leaves, tree, what, root, nums=None):
    """Every leaf is a floating (real or complex) array; errors name the offending leaf."""
    for i, x in enumerate(leaves):
        if not _is_array(x):
            raise TypeError(
                f"{what}: {_leaf_name(tree, i, root, nums)} must be an array (numpy, cupy or "
                f"array_api_strict), got {type(x).__name__}; wrap Python numbers with pa.asarray"
            )
        if not is_floating(x):
            raise TypeError(
                f"{what}: {_leaf_name(tree, i, root, nums)} must have a floating dtype to be "
                f"differentiated, got {x.dtype}"
            )


def _check_has_aux(has_aux, transform):
    if not isinstance(has_aux, bool):
        raise TypeError(f"{transform}(has_aux={has_aux!r}): has_aux must be True or False")


def _vjp(func, primals, has_aux, what, root="primals", nums=None):
    """The work of ``vjp`` and ``grad``: run ``func`` once at a new reverse level.

    Returns ``(output, backward, aux, interp)``; ``backward(cotangents, consume)`` returns the tuple of
    cotangents of ``primals``, and with ``consume`` frees the tape as it walks it (``grad``).
    """
    flat, tree = _flatten(primals)
    _check_inputs(flat, tree, what, root, nums)
    with new_level(ReverseInterpreter) as interp:
        leaves = [interp.new_leaf(x) for x in flat]
        # read the ids now: ``x[k] = v`` or ``x += y`` inside func turns a leaf into another tensor
        leaf_ids = [leaf._aux for leaf in leaves]
        out = func(*optree.tree_unflatten(tree, leaves))
        out, aux = _split_aux(out, has_aux, what)
        out_flat, out_tree = _flatten(out)
        if has_aux:
            aux = _lower_tree(aux, interp)
    for i, o in enumerate(out_flat):
        if not _is_array(o):
            raise TypeError(
                f"{what}: func must return arrays, got {type(o).__name__} at {_leaf_name(out, i, 'output')}"
            )
    if out_flat and not any(is_floating(o) for o in out_flat):
        got = ", ".join(str(o.dtype) for o in out_flat[:3]) + (", ..." if len(out_flat) > 3 else "")
        raise TypeError(
            f"{what}: func must return a floating output to differentiate, got dtype {got}; integer and "
            "boolean outputs carry no derivative (next to floating outputs they are allowed and get none)"
        )
    values = [o._value if isinstance(o, Tensor) and o._interp is interp else _plain(o) for o in out_flat]
    ids = [o._aux if isinstance(o, Tensor) and o._interp is interp else None for o in out_flat]
    del leaves, out, out_flat  # the tape and the ids are all backward needs

    def backward(cotangents, consume):
        ct_flat, ct_tree = _flatten(cotangents)
        if ct_tree != out_tree:
            raise ValueError(
                f"vjp_fn(cotangents): cotangents must have the structure of the output, {out_tree}, "
                f"got {ct_tree}"
            )
        seeds = {}
        for i, (c, v, k) in enumerate(zip(ct_flat, values, ids)):
            if not _is_array(c):
                raise TypeError(
                    f"vjp_fn(cotangents): the cotangent of {_leaf_name(cotangents, i, 'output')} must be an "
                    f"array, got {type(c).__name__}"
                )
            if tuple(c.shape) != tuple(v.shape):
                raise ValueError(
                    f"vjp_fn(cotangents): the cotangent of {_leaf_name(cotangents, i, 'output')} has shape "
                    f"{tuple(c.shape)}, expected the output's shape {tuple(v.shape)}"
                )
            if not is_floating(v):
                continue  # an integer or boolean output: no derivative, its cotangent is ignored
            if not is_floating(c) or (is_complex(c) and not is_complex(v)):
                raise TypeError(
                    f"vjp_fn(cotangents): the cotangent of {_leaf_name(cotangents, i, 'output')} has dtype "
                    f"{c.dtype}, expected a floating dtype like the output's {v.dtype}"
                )
            if k is not None:
                prev = seeds.get(k)
                seeds[k] = c if prev is None else _add(prev, c)
        cotangents = ct_flat = c = prev = None  # the seeds dict alone holds them: used up as it goes
        cts = interp.backward(seeds, consume=consume) if seeds else {}
        grads = [cts.get(k) for k in leaf_ids]
        grads = [_zeros_like(x) if g is None else g for g, x in zip(grads, flat)]
        return tuple(optree.tree_unflatten(tree, grads))

    return optree.tree_unflatten(out_tree, values), backward, aux, interp


def vjp(func, *primals, has_aux=False):
    """Evaluate ``func(*primals)`` and return a function computing vector-Jacobian products.

    Args:
        func: a function of arrays (pytrees of arrays allowed) returning arrays, at least one floating
            (integer and boolean outputs carry no derivative: their cotangents are ignored).
        *primals: the point; each a floating backend array or a pytree of them.
        has_aux: if True, ``func`` returns ``(output, aux)`` and aux is returned, not differentiated.

    Returns:
        ``(output, vjp_fn)`` or ``(output, vjp_fn, aux)``. ``vjp_fn(cotangents)`` takes cotangents with the
        structure, shapes and dtypes of ``output`` and returns a tuple with one cotangent per primal (zeros
        for a primal the output does not depend on). It may be called many times: it keeps the recorded
        computation alive until it is dropped. Complex inputs follow PyTorch's convention (see
        ``polyad.ops.elementwise``): the cotangent is ``conj(J)^T g``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> out, f_vjp = pa.vjp(pa.xp.sin, np.array([0.0, 1.0]))
        >>> f_vjp(np.ones(2))[0].round(4)
        array([1.    , 0.5403])
    """
    _check_callable(func, "vjp")
    _check_has_aux(has_aux, "vjp")
    output, backward, aux, _ = _vjp(func, primals, has_aux, f"vjp({_fname(func)})")

    def vjp_fn(cotangents):
        return backward(cotangents, False)

    if has_aux:
        return output, vjp_fn, aux
    return output, vjp_fn


def _grad_impl(func, argnums, has_aux, args, kwargs, transform):
    single, nums = _normalize_argnums(argnums, len(args), transform)

    def partial_func(*diff):
        full = list(args)
        for n, d in zip(nums, diff):
            full[n] = d
        return func(*full, **kwargs)

    what = f"{transform}({_fname(func)}, argnums={argnums!r})"
    out, backward, aux, interp = _vjp(partial_func, [args[n] for n in nums], has_aux, what, nums=nums)
    if not _is_array(out) or tuple(out.shape) != ():
        got = f"an array of shape {tuple(out.shape)}" if _is_array(out) else f"a {type(out).__name__}"
        hint = " (func returns a pair: pass has_aux=True?)" if isinstance(out, tuple) and not has_aux else ""
        raise ValueError(
            f"{what}: func must return a scalar (a 0-d array), got {got}{hint}; "
            "use pa.vjp or pa.jacrev for non-scalar outputs"
        )
    if is_complex(out):
        raise TypeError(
            f"{what}: func must return a real floating scalar, got {out.dtype}; differentiate a real "
            "function of it (real, abs) or use pa.vjp"
        )
    from polyad.ops.creation import ones_like

    try:
        grads = backward(ones_like(out), True)
    finally:
        interp.tape = []  # grad returns no vjp_fn: nothing can use the tape again
    return (grads[0] if single else grads), out, aux


def grad(func, argnums=0, has_aux=False):
    """The gradient of a scalar function, as a function.

    Args:
        func: returns a real 0-d array (or ``(output, aux)`` with ``has_aux=True``).
        argnums: which positional argument(s) to differentiate: an int (negative allowed) or a tuple.
            Each may be a pytree (tuple, list, dict, namedtuple) of floating arrays.
        has_aux: whether ``func`` also returns auxiliary data, returned unchanged (not differentiated).

    Returns:
        A function with ``func``'s arguments returning the gradient (the argument's structure; a tuple of
        them for tuple ``argnums``), or ``(gradient, aux)`` with ``has_aux``. Keyword arguments are passed
        through, not differentiated. For a complex input ``z = x + iy`` the gradient of the real loss ``L``
        is ``dL/dx + i dL/dy`` (PyTorch's convention).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.grad(lambda x: pa.xp.sum(x ** 2))(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    _check_callable(func, "grad")
    _check_has_aux(has_aux, "grad")

    @functools.wraps(func)
    def grad_f(*args, **kwargs):
        g, _, aux = _grad_impl(func, argnums, has_aux, args, kwargs, "grad")
        return (g, aux) if has_aux else g

    return grad_f


def grad_and_value(func, argnums=0, has_aux=False):
    """Like ``grad`` but returns ``(gradient, value)`` or ``(gradient, (value, aux))`` (torch.func's order).

    Args:
        func, argnums, has_aux: as for ``grad``.

    Returns:
        A function returning ``(gradient, value)``, or ``(gradient, (value, aux))`` with ``has_aux``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> g, v = pa.grad_and_value(lambda x: pa.xp.sum(x * x))(np.array([3.0]))
        >>> g, float(v)
        (array([6.]), 9.0)
    """
    _check_callable(func, "grad_and_value")
    _check_has_aux(has_aux, "grad_and_value")

    @functools.wraps(func)
    def f(*args, **kwargs):
        g, out, aux = _grad_impl(func, argnums, has_aux, args, kwargs, "grad_and_value")
        return (g, (out, aux)) if has_aux else (g, out)

    return f


def value_and_grad(func, argnums=0, has_aux=False):
    """Like ``grad`` but returns ``(value, gradient)`` or ``((value, aux), gradient)`` (JAX's order).

    Args:
        func, argnums, has_aux: as for ``grad``.

    Returns:
        A function returning ``(value, gradient)``, or ``((value, aux), gradient)`` with ``has_aux``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> v, g = pa.value_and_grad(lambda x: pa.xp.sum(x * x))(np.array([3.0]))
        >>> float(v), g
        (9.0, array([6.]))
    """
    _check_callable(func, "value_and_grad")
    _check_has_aux(has_aux, "value_and_grad")

    @functools.wraps(func)
    def f(*args, **kwargs):
        g, out, aux = _grad_impl(func, argnums, has_aux, args, kwargs, "value_and_grad")
        return ((out, aux), g) if has_aux else (out, g)

    return f


# ------------------------------------------------------------------------------ gradient mode


@contextmanager
def no_grad():
    """Inside the block, grad levels that already exist record nothing (torch.func's semantics: a
    ``no_grad`` inside a differentiated function is respected; one around the transform call is not).

    Example:
        >>> import numpy as np, polyad as pa
        >>> def f(x):
        ...     with pa.no_grad():
        ...         c = x * 2.0          # a constant to grad
        ...     return pa.xp.sum(c * x)
        >>> pa.grad(f)(np.array([1.0]))
        array([2.])
    """
    previous = _tls.no_grad_level
    _tls.no_grad_level = current_level()
    try:
        yield
    finally:
        _tls.no_grad_level = previous


@contextmanager
def enable_grad():
    """Undo an enclosing ``no_grad`` inside the block."""
    previous = _tls.no_grad_level
    _tls.no_grad_level = 0
    try:
        yield
    finally:
        _tls.no_grad_level = previous


# ------------------------------------------------------------------------------ forward mode


def _check_tangents(p_flat, p_tree, t_flat, t_tree, what, root):
    """Tangents match their primals in structure, shape and dtype; errors name the leaf."""
    if p_tree != t_tree:
        raise ValueError(f"{what}: tangents must have the structure of the primals, {p_tree}, got {t_tree}")
    for i, (p, t) in enumerate(zip(p_flat, t_flat)):
        if not _is_array(t):
            raise TypeError(
                f"{what}: the tangent of {_leaf_name(p_tree, i, root)} must be an array, "
                f"got {type(t).__name__}"
            )
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(
                f"{what}: the tangent of {_leaf_name(p_tree, i, root)} has shape {tuple(t.shape)}, expected "
                f"its primal's shape {tuple(p.shape)}"
            )
        if t.dtype != p.dtype:
            raise TypeError(
                f"{what}: the tangent of {_leaf_name(p_tree, i, root)} has dtype {t.dtype}, expected its "
                f"primal's dtype {p.dtype}"
            )


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """Evaluate ``func(*primals)`` and its Jacobian-vector product with ``tangents``.

    Args:
        func: a function of arrays (pytrees allowed).
        primals: a tuple of the positional arguments (floating arrays or pytrees of them).
        tangents: a tuple with the same structure, shapes and dtypes as ``primals``.
        strict: if True, an output that does not depend on the inputs is an error (else its tangent is 0).
        has_aux: ``func`` returns ``(output, aux)``; aux is returned, not differentiated.

    Returns:
        ``(output, jvp_out)`` or ``(output, jvp_out, aux)``. For complex inputs the tangent is the ordinary
        complex derivative ``f'(z) t`` (for holomorphic ``f``).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jvp(pa.xp.exp, (np.array([0.0]),), (np.array([2.0]),))
        (array([1.]), array([2.]))
    """
    _check_callable(func, "jvp")
    _check_has_aux(has_aux, "jvp")
    what = f"jvp({_fname(func)})"
    if not isinstance(primals, tuple):
        raise TypeError(
            f"{what}: primals must be a tuple of the positional arguments, got {type(primals).__name__}; "
            "for one argument x write (x,)"
        )
    if not isinstance(tangents, tuple):
        raise TypeError(
            f"{what}: tangents must be a tuple like primals, got {type(tangents).__name__}; "
            "for one argument write (t,)"
        )
    p_flat, p_tree = _flatten(primals)
    t_flat, t_tree = _flatten(tangents)
    _check_inputs(p_flat, p_tree, what, "primals")
    _check_tangents(p_flat, p_tree, t_flat, t_tree, what, "primals")
    with new_level(ForwardInterpreter) as interp:
        duals = [DualTensor(p, interp, t) for p, t in zip(p_flat, t_flat)]
        out = func(*optree.tree_unflatten(p_tree, duals))
        out, aux = _split_aux(out, has_aux, what)
        o_flat, o_tree = _flatten(out)
        if has_aux:
            aux = _lower_tree(aux, interp)
    outs, tans = [], []
    for i, o in enumerate(o_flat):
        if isinstance(o, Tensor) and o._interp is interp:
            outs.append(o._value)
            tans.append(o._aux)
            continue
        if not _is_array(o):
            raise TypeError(
                f"{what}: func must return arrays, got {type(o).__name__} at {_leaf_name(out, i, 'output')}"
            )
        if strict:
            raise RuntimeError(
                f"{what} with strict=True: {_leaf_name(out, i, 'output')} does not depend on the inputs "
                "(its tangent is identically zero); pass strict=False to get zeros"
            )
        outs.append(_plain(o))
        tans.append(_plain(_zeros_like(o)))
    result = (optree.tree_unflatten(o_tree, outs), optree.tree_unflatten(o_tree, tans))
    if has_aux:
        return result + (aux,)
    return result


def linearize(func, *primals):
    """Evaluate ``func(*primals)`` once and return a function for its JVP at that point.

    The primal computation is recorded once; ``jvp_fn(*tangents)`` replays only the tangent rules on the
    recorded values, never the primal ops again (cheaper than calling ``jvp`` for each tangent when
    ``func`` is expensive). ``no_grad`` inside ``func`` does not apply (forward mode, as in torch.func).

    Args:
        func: a function of arrays (pytrees allowed) returning floating arrays.
        *primals: the point.

    Returns:
        ``(output, jvp_fn)``; ``jvp_fn(*tangents)`` takes tangents with the structure, shapes and dtypes
        of ``primals`` and returns the tangent of the output.

    Example:
        >>> import numpy as np, polyad as pa
        >>> out, f_jvp = pa.linearize(pa.xp.sin, np.array([0.0]))
        >>> f_jvp(np.array([3.0]))
        array([3.])
    """
    _check_callable(func, "linearize")
    what = f"linearize({_fname(func)})"
    flat, tree = _flatten(primals)
    _check_inputs(flat, tree, what, "primals")
    with new_level(ReverseInterpreter, False) as interp:
        leaves = [interp.new_leaf(x) for x in flat]
        # read the ids now: ``x[k] = v`` or ``x += y`` inside func turns a leaf into another tensor
        leaf_ids = [leaf._aux for leaf in leaves]
        out = func(*optree.tree_unflatten(tree, leaves))
        out_flat, out_tree = _flatten(out)
    for i, o in enumerate(out_flat):
        if not _is_array(o):
            raise TypeError(
                f"{what}: func must return arrays, got {type(o).__name__} at {_leaf_name(out, i, 'output')}"
            )
    values = [o._value if isinstance(o, Tensor) and o._interp is interp else _plain(o) for o in out_flat]
    ids = [o._aux if isinstance(o, Tensor) and o._interp is interp else None for o in out_flat]
    out_ids = frozenset(k for k in ids if k is not None)  # the sweep frees every other tangent after use
    del leaves, out, out_flat

    def jvp_fn(*tangents):
        t_flat, t_tree = _flatten(tangents)
        _check_tangents(flat, tree, t_flat, t_tree, f"{what}'s jvp_fn", "primals")
        tans = interp.forward_sweep(dict(zip(leaf_ids, t_flat)), keep=out_ids)
        outs = []
        for k, v in zip(ids, values):
            t = None if k is None else tans.get(k)
            outs.append(_zeros_like(v) if t is None else t)
        return optree.tree_unflatten(out_tree, outs)

    return optree.tree_unflatten(out_tree, values), jvp_fn


# ------------------------------------------------------------------------------ vmap


def _describe_call(func, in_dims, out_dims):
    return f"vmap({_fname(func)}, in_dims={in_dims!r}, out_dims={out_dims!r})(<inputs>)"


def _is_dim(d):
    return isinstance(d, int) and not isinstance(d, bool)


def _dims_leaves(dims, tree, n, what, call, noun):
    """One dim (int or None) per leaf of ``tree`` from ``dims``: an int, None, or a pytree prefix."""
    if dims is None or _is_dim(dims):
        return [dims] * n
    try:
        full = optree.tree_broadcast_prefix(dims, tree, none_is_leaf=True)
    except ValueError as exc:
        raise ValueError(f"{call}: {what}={dims!r} is not a pytree prefix of the {noun} ({exc})") from None
    leaves = optree.tree_leaves(full, none_is_leaf=True)
    for d in leaves:
        if d is not None and not _is_dim(d):
            raise TypeError(f"{call}: every entry of {what} must be an int or None, got {d!r}")
    return leaves


def _map_inputs(flat, dims, call):
    """Check the mapped inputs; returns (normalised dims, batch size)."""
    size, first, out = None, None, []
    for i, (x, d) in enumerate(zip(flat, dims)):
        if d is None or x is None:
            out.append(None)
            continue
        if not _is_array(x):
            raise ValueError(
                f"{call}: in_dim {d} maps input leaf {i}, a {type(x).__name__}, but only arrays can be "
                "mapped; give it in_dim None"
            )
        nd = len(x.shape)
        if not -nd <= d < nd:
            raise ValueError(
                f"{call}: in_dim {d} is out of range for input leaf {i} of shape {tuple(x.shape)} "
                f"(valid: {-nd} to {nd - 1})"
                if nd
                else f"{call}: input leaf {i} is 0-d: it has no dim {d} to map"
            )
        d %= nd
        if size is None:
            size, first = x.shape[d], (i, tuple(x.shape), d)
        elif x.shape[d] != size:
            raise ValueError(
                f"{call}: mapped dimensions have different sizes: input leaf {first[0]} (shape {first[1]}, "
                f"dim {first[2]}) has {size}, input leaf {i} (shape {tuple(x.shape)}, dim {d}) has "
                f"{x.shape[d]}"
            )
        out.append(d)
    if size is None:
        raise ValueError(f"{call}: no input is mapped: at least one in_dim must be an int for an array input")
    return out, size


def _move_out(out, interp, size, out_dims, call):
    """Outputs of the vmapped function with their batch dimension at ``out_dims`` (unbatched ones are
    broadcast along a new one)."""
    from polyad.ops.manipulation import broadcast_to, expand_dims, moveaxis

    o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=True)
    odims = _dims_leaves(out_dims, out, len(o_flat), "out_dims", call, "outputs")
    res = []
    for i, (o, d) in enumerate(zip(o_flat, odims)):
        if o is None:
            res.append(None)
            continue
        if not _is_array(o):
            raise TypeError(
                f"{call}: func must return arrays (or pytrees of them), got a {type(o).__name__} at "
                f"output leaf {i}"
            )
        batched = isinstance(o, BatchedTensor) and o._interp is interp
        if d is None:
            if batched:
                raise ValueError(
                    f"{call}: output leaf {i} is batched (it depends on a mapped input) but its out_dim is "
                    "None; give it an int out_dim"
                )
            res.append(_plain(o))
            continue
        nd = len(o.shape) + 1
        if not -nd <= d < nd:
            raise ValueError(f"{call}: out_dim {d} is out of range for output leaf {i} of rank {nd - 1}")
        d %= nd
        if batched:
            v = o._value if o._aux == d else moveaxis(o._value, o._aux, d)
        else:
            shape = list(o.shape)
            shape.insert(d, size)
            v = broadcast_to(expand_dims(o, axis=d), tuple(shape))
        res.append(_plain(v))
    return optree.tree_unflatten(o_tree, res)


def _vmap_call(func, flat, dims, tree, size, kwargs, out_dims, randomness, call):
    with new_level(BatchInterpreter, size, randomness) as interp:
        args = [x if d is None else BatchedTensor(x, interp, d) for x, d in zip(flat, dims)]
        return _move_out(func(*optree.tree_unflatten(tree, args), **kwargs), interp, size, out_dims, call)


def _join(pieces, out_dims, call, combine):
    """Join per-chunk (or per-example) outputs leaf by leaf along their out_dims."""
    first, o_tree = optree.tree_flatten(pieces[0], none_is_leaf=True)
    cols = [optree.tree_leaves(p, none_is_leaf=True) for p in pieces]
    odims = _dims_leaves(out_dims, pieces[0], len(first), "out_dims", call, "outputs")
    res = []
    for k, (leaf, d) in enumerate(zip(first, odims)):
        if leaf is None or d is None:
            res.append(leaf)
        else:
            res.append(combine([c[k] for c in cols], d, len(leaf.shape)))
    return optree.tree_unflatten(o_tree, res)


def _vmap_loop(func, flat, dims, tree, size, kwargs, out_dims, randomness, call):
    """chunk_size=1: call ``func`` on each example, unbatched, and stack (Python control flow works)."""
    from polyad import random
    from polyad.batching import LoopLevel
    from polyad.ops.manipulation import stack, take_index

    snapshot = random._snapshot() if randomness == "same" else None
    per = []
    with new_level(LoopLevel, size, randomness):
        for i in range(size):
            if snapshot is not None and i:
                random._restore(snapshot)
            args = [x if d is None else take_index(x, i, axis=d) for x, d in zip(flat, dims)]
            out = func(*optree.tree_unflatten(tree, args), **kwargs)
            for j, o in enumerate(optree.tree_leaves(out, none_is_leaf=True)):
                if o is not None and not _is_array(o):
                    raise TypeError(
                        f"{call}: func must return arrays (or pytrees of them), got a {type(o).__name__} at "
                        f"output leaf {j}"
                    )
            per.append(out)
    if not per:
        raise ValueError(f"{call}: chunk_size=1 cannot infer the output of an empty batch")
    return _join(per, out_dims, call, lambda xs, d, nd: _plain(stack(xs, axis=d % (nd + 1))))


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorise ``func`` over a batch dimension of its inputs (torch.func.vmap's semantics).

    Args:
        func: a function of arrays written for one example; it may return a pytree of arrays.
        in_dims: the batch dimension of the positional arguments: an int (every array argument), None
            (unmapped), or a tuple with one entry per positional argument, each an int, None or a pytree
            prefix of that argument. Negative dims count from the end. Keyword arguments are never mapped.
        out_dims: where each output's batch dimension goes: an int or a pytree prefix of the output
            (None for an output that does not depend on a mapped input).
        randomness: how ``pa.random`` behaves inside: "error" (raise), "different" (independent draws per
            batch element) or "same" (one draw for the whole batch). See ``polyad.random``.
        chunk_size: run the batch in chunks of this many examples and concatenate (caps memory);
            1 calls ``func`` once per example, unbatched, in a Python loop.

    Returns:
        The batched function. Arrays created inside ``func`` (``xp.zeros``...) may be updated in place
        with batched values (``x[0] = y``): the update is functionalised and ``x`` becomes batched.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.vmap(lambda x, y: pa.xp.sum(x * y), in_dims=(0, None))(np.ones((3, 2)), np.arange(2.0))
        array([1., 1., 1.])
    """
    _check_callable(func, "vmap")
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap(randomness={randomness!r}): must be 'error', 'different' or 'same'")
    if chunk_size is not None and (not _is_dim(chunk_size) or chunk_size <= 0):
        raise ValueError(f"vmap(chunk_size={chunk_size!r}): chunk_size must be None or a positive int")
    if not (in_dims is None or _is_dim(in_dims) or isinstance(in_dims, tuple | list)):
        raise TypeError(
            f"vmap(in_dims={in_dims!r}): in_dims must be an int, None, or a tuple with one entry per "
            "positional argument"
        )

    @functools.wraps(func)
    def vmapped(*args, **kwargs):
        call = _describe_call(func, in_dims, out_dims)
        flat, tree = optree.tree_flatten(args, none_is_leaf=True)
        if isinstance(in_dims, tuple | list):
            if len(in_dims) != len(args):
                raise ValueError(
                    f"{call}: in_dims has {len(in_dims)} entries but func was called with {len(args)} "
                    "positional argument(s); give one in_dim per positional argument"
                )
            dims = _dims_leaves(tuple(in_dims), args, len(flat), "in_dims", call, "arguments")
        else:
            dims = [in_dims] * len(flat)
        dims, size = _map_inputs(flat, dims, call)
        if chunk_size == 1:
            return _vmap_loop(func, flat, dims, tree, size, kwargs, out_dims, randomness, call)
        if chunk_size is None or chunk_size >= size:
            return _vmap_call(func, flat, dims, tree, size, kwargs, out_dims, randomness, call)
        from polyad import random
        from polyad.ops.manipulation import concat

        snapshot = random._snapshot() if randomness == "same" else None
        pieces = []
        for start in range(0, size, chunk_size):
            if snapshot is not None and start:
                random._restore(snapshot)  # every chunk sees the same draws (torch.func does the same)
            stop = min(start + chunk_size, size)
            part = [x if d is None else _slice_along(x, d, start, stop) for x, d in zip(flat, dims)]
            pieces.append(
                _vmap_call(func, part, dims, tree, stop - start, kwargs, out_dims, randomness, call)
            )
        return _join(pieces, out_dims, call, lambda xs, d, nd: _plain(concat(xs, axis=d % nd)))

    return vmapped


def _slice_along(x, d, start, stop):
    return x[(slice(None),) * d + (slice(start, stop), ...)]


# ------------------------------------------------------------------------------ Jacobians


def _check_real(leaves, what, kind):
    for i, x in enumerate(leaves):
        if _is_array(x) and is_complex(x):
            raise TypeError(
                f"{what}: {kind} leaf {i} is complex ({x.dtype}); jacrev, jacfwd and hessian support real "
                "floating inputs and outputs only (as torch.func): split complex values into real and "
                "imaginary parts"
            )


def _partial(func, args, kwargs, nums):
    """``func`` as a function of the arguments at ``nums`` only (the others fixed)."""

    def partial_func(*diff):
        full = list(args)
        for n, d in zip(nums, diff):
            full[n] = d
        return func(*full, **kwargs)

    partial_func.__name__ = _fname(func)
    return partial_func


def _eye_rows(start, stop, n, like):
    """Rows ``start:stop`` of the n x n identity, with ``like``'s dtype and device."""
    from polyad.ops.common import _bottom
    from polyad.ops.creation import eye

    return eye(stop - start, n, k=start, dtype=like.dtype, device=_bottom(like).device)


def _one_hot(i, n, like):
    """Row ``i`` of the n x n identity (under vmap: a batch of rows), with ``like``'s dtype and device."""
    from polyad.ops.common import _bottom
    from polyad.ops.creation import arange
    from polyad.ops.dtypes import astype

    return astype(arange(n, device=_bottom(like).device) == i, like.dtype)


def _arange_like(n, like):
    from polyad.ops.common import _bottom
    from polyad.ops.creation import arange

    return arange(n, device=_bottom(like).device)


def _split_basis(rows, leaves, sizes, lead):
    """Cut basis ``rows`` (last axis: the flattened leaves) into arrays shaped like ``leaves``."""
    from polyad.ops.dtypes import astype
    from polyad.ops.manipulation import reshape

    parts, off = [], 0
    for x, n in zip(leaves, sizes):
        piece = rows if len(leaves) == 1 else rows[(slice(None),) * lead + (slice(off, off + n), ...)]
        piece = reshape(piece, tuple(piece.shape[:lead]) + tuple(x.shape))
        parts.append(piece if piece.dtype == x.dtype else astype(piece, x.dtype))
        off += n
    return parts


def _assemble(jac_rows, o_flat, o_tree, sizes, in_tree, single):
    """The torch.func layout from ``jac_rows`` (per input leaf k, an array (total_out, *I_k)): the output
    pytree of (a tuple over argnums of) input pytrees of O + I blocks."""
    from polyad.ops.manipulation import reshape

    out_leaves, off = [], 0
    for o, n in zip(o_flat, sizes):
        blocks = []
        for r in jac_rows:
            block = r if len(o_flat) == 1 else r[off : off + n, ...]
            blocks.append(reshape(block, tuple(o.shape) + tuple(r.shape[1:])))
        per_arg = optree.tree_unflatten(in_tree, blocks)
        out_leaves.append(per_arg[0] if single else per_arg)
        off += n
    return optree.tree_unflatten(o_tree, out_leaves)


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
        around them.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
    """
    _check_callable(func, "jacrev")
    if chunk_size is not None and (not _is_dim(chunk_size) or chunk_size <= 0):
        raise ValueError(f"jacrev(chunk_size={chunk_size!r}): chunk_size must be None or a positive int")

    @functools.wraps(func)
    def jac_f(*args, **kwargs):
        from polyad.ops.creation import zeros
        from polyad.ops.manipulation import concat, reshape

        what = f"jacrev({_fname(func)}, argnums={argnums!r})"
        single, nums = _normalize_argnums(argnums, len(args), "jacrev")
        diff = tuple(args[n] for n in nums)
        in_flat, in_tree = _flatten(diff)
        _check_real(in_flat, what, "input")
        out, backward, aux, _ = _vjp(_partial(func, args, kwargs, nums), diff, has_aux, what, nums=nums)
        o_flat, o_tree = _flatten(out)
        _check_real(o_flat, what, "output")
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
            rows = [zeros((0, *x.shape), dtype=x.dtype, device=_device_of(x)) for x in in_flat]
        elif total == 1:  # one output element (a scalar loss): one vjp, no batch level to vmap
            from polyad.ops.manipulation import expand_dims

            rows = [expand_dims(r, axis=0) for r in vjp_rows(_eye_rows(0, 1, 1, o_flat[0]))]
        elif chunk_size is None or (chunk_size >= total and chunk_size > 1):
            rows = vmap(vjp_row_of)(_arange_like(total, o_flat[0]))
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
        jac = _assemble(rows, o_flat, o_tree, sizes, in_tree, single)
        return (jac, aux) if has_aux else jac

    return jac_f


def _device_of(x):
    from polyad.ops.common import _bottom

    return _bottom(x).device


def _buffers(in_flat, total):
    """Preallocated raw result rows (total, *I) per input leaf, or None when inputs are transform tensors."""
    if any(isinstance(x, Tensor) for x in in_flat):
        return None
    bufs = []
    for x in in_flat:
        xp = dispatch.backend_of_array(x).xp
        bufs.append(xp.empty((total, *x.shape), dtype=x.dtype, device=x.device))
    return bufs


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian by forward mode: ``vmap(jvp)`` over the standard basis of the inputs
    (torch.func.jacfwd's semantics).

    Args:
        func, argnums, has_aux: as ``jacrev``.
        randomness: passed to the vmap over the basis ("error", "different" or "same").

    Returns:
        A function returning the Jacobian (and aux), laid out as ``jacrev``'s: shape O + I per output leaf
        and input.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jacfwd(lambda x: x ** 3)(np.array([1.0, 2.0]))
        array([[ 3.,  0.],
               [ 0., 12.]])
    """
    _check_callable(func, "jacfwd")

    @functools.wraps(func)
    def jac_f(*args, **kwargs):
        from polyad.ops.manipulation import reshape

        what = f"jacfwd({_fname(func)}, argnums={argnums!r})"
        single, nums = _normalize_argnums(argnums, len(args), "jacfwd")
        diff = tuple(args[n] for n in nums)
        in_flat, in_tree = _flatten(diff)
        _check_inputs(in_flat, in_tree, what, "argument", nums)
        _check_real(in_flat, what, "input")
        sizes = [math.prod(x.shape) for x in in_flat]
        total = sum(sizes)
        partial_func = _partial(func, args, kwargs, nums)

        def push(basis_row):
            tangents = tuple(optree.tree_unflatten(in_tree, _split_basis(basis_row, in_flat, sizes, 0)))
            res = jvp(partial_func, diff, tangents, has_aux=has_aux)
            return (res[1], res[2]) if has_aux else res[1]

        if not in_flat:
            raise ValueError(f"{what}: the differentiated arguments hold no arrays")
        basis = _eye_rows(0, total, total, in_flat[0])
        if has_aux:
            tangents, aux = vmap(push, out_dims=(-1, None), randomness=randomness)(basis)
        else:
            tangents = vmap(push, out_dims=-1, randomness=randomness)(basis)
        t_flat, t_tree = _flatten(tangents)
        _check_real(t_flat, what, "output")
        jac_leaves = []
        for t in t_flat:  # (*O, total)
            o_shape = tuple(t.shape[:-1])
            blocks, off = [], 0
            for x, n in zip(in_flat, sizes):
                block = t if len(in_flat) == 1 else t[..., off : off + n]
                blocks.append(reshape(block, o_shape + tuple(x.shape)))
                off += n
            per_arg = optree.tree_unflatten(in_tree, blocks)
            jac_leaves.append(per_arg[0] if single else per_arg)
        jac = optree.tree_unflatten(t_tree, jac_leaves)
        return (jac, aux) if has_aux else jac

    return jac_f


def hessian(func, argnums=0):
    """The Hessian, ``jacfwd(jacrev(func, argnums), argnums)`` (forward over reverse, as torch.func).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.hessian(lambda x: pa.xp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    _check_callable(func, "hessian")
    return jacfwd(jacrev(func, argnums), argnums)


# ------------------------------------------------------------------------------ pre-dispatch capture
# make_graph(pre_dispatch=True) records applications of these transforms as transform nodes.
grad = recorded("grad")(grad)
grad_and_value = recorded("grad_and_value")(grad_and_value)
value_and_grad = recorded("value_and_grad")(value_and_grad)
vmap = recorded("vmap")(vmap)
jacrev = recorded("jacrev")(jacrev)
jacfwd = recorded("jacfwd")(jacfwd)
hessian = recorded("hessian")(hessian)
jvp = recorded_call("jvp")(jvp)
vjp = not_recorded("vjp")(vjp)
linearize = not_recorded("linearize")(linearize)

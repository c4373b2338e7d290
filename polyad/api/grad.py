"""Reverse mode: vjp, grad, grad_and_value, value_and_grad, linearize, and the gradient-mode guards
no_grad and enable_grad.

``_record`` runs a function once at a new reverse level (the tape of ``polyad.transforms.reverse``);
``vjp`` and the grads walk that tape backwards, ``linearize`` replays it forwards with the JVP rules for
each tangent.
"""

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import optree

from polyad.api._arguments import (
    check_argnums,
    check_callable,
    check_has_aux,
    check_inputs,
    check_like,
    check_real_floating,
    check_structure,
    check_tangents,
    diff_args,
    flatten,
    func_name,
    in_dtype_of,
    is_array,
    leaf_name,
    level_outputs,
    numbers_as_arrays,
    partial_of,
)
from polyad.core import Tensor, current_level, new_level, recording_off_up_to
from polyad.core import plain as _plain
from polyad.core.avals import dtype_name, is_complex, is_floating
from polyad.graph.predispatch import not_recorded, recorded
from polyad.ops.creation import ones, ones_like, zeros_like
from polyad.ops.elementwise import add
from polyad.transforms.reverse import PendingTensor, ReverseInterpreter, computed, worth_deferring


def _record(func, flat, tree, has_aux, what, respect_no_grad=True, defer=False):
    """Run ``func`` once on ``flat`` (the leaves of ``tree``), each wrapped as a leaf of a new reverse
    level that records every op on its tape.

    Returns ``(interp, leaf_ids, values, ids, out_tree, aux)``: the level (it holds the tape), the leaves'
    ids, the output leaves' values and ids (None for an output that does not depend on the inputs), the
    output's structure, and aux with this level's tensors lowered (None without ``has_aux``).
    """
    with new_level(ReverseInterpreter, respect_no_grad, defer and worth_deferring(flat)) as interp:
        leaves = [interp.new_leaf(x) for x in flat]
        # read the ids now: ``x[k] = v`` or ``x += y`` inside func turns a leaf into another tensor
        leaf_ids = [leaf._aux for leaf in leaves]
        out = func(*optree.tree_unflatten(tree, leaves))
        out, out_flat, out_tree, aux = level_outputs(out, interp, has_aux, what)
    for i, o in enumerate(out_flat):
        if not is_array(o):
            raise TypeError(
                f"{what}: func must return arrays, got {type(o).__name__} at {leaf_name(out, i, 'output')}"
            )
    values = [_plain(o._value if isinstance(o, Tensor) and o._interp is interp else o) for o in out_flat]
    ids = [o._aux if isinstance(o, Tensor) and o._interp is interp else None for o in out_flat]
    return interp, leaf_ids, values, ids, out_tree, aux  # the tape and the ids are all the callers need


def run_vjp(func, primals, has_aux, what, root="primals", nums=None, jacobian=False, defer=False):
    """The work of ``vjp``, ``grad`` and ``jacrev``: run ``func`` once at a new reverse level.

    Returns ``(output, backward, aux, interp)``; ``backward(cotangents, consume, ones=False)`` returns the
    tuple of cotangents of ``primals``, each in its primal's dtype, and with ``consume`` frees the tape as
    it walks it (``grad``); ``ones``: every cotangent is all ones (reverse.py skips products by them).
    ``jacobian``: every output must be real floating (jacrev), not just one (vjp). ``defer``: values no
    rule reads may stay uncomputed (``polyad.transforms.reverse.PendingTensor``; the output and aux may
    be pending: ``computed`` gives their values).
    """
    flat, tree = flatten(primals)
    check_inputs(flat, tree, what, root, nums)
    interp, leaf_ids, values, ids, out_tree, aux = _record(func, flat, tree, has_aux, what, defer=defer)
    if jacobian:
        check_real_floating(values, out_tree, what, "output")
    elif values and not any(is_floating(v) for v in values):
        got = ", ".join(str(v.dtype) for v in values[:3]) + (", ..." if len(values) > 3 else "")
        raise TypeError(
            f"{what}: func must return a floating output to differentiate, got dtype {got}; integer and "
            "boolean outputs carry no derivative (next to floating outputs they are allowed and get none)"
        )

    def backward(cotangents, consume, ones=False):
        ct_flat, ct_tree = flatten(cotangents)
        numbers_as_arrays(ct_flat)
        check_structure(ct_tree, out_tree, "vjp_fn(cotangents)", "cotangent", "output")
        seeds = {}
        for i, (c, v, k) in enumerate(zip(ct_flat, values, ids)):
            check_like(c, v, "vjp_fn(cotangents)", "cotangent", "the output's", out_tree, i, "output")
            if not is_floating(v):
                continue  # an integer or boolean output: no derivative, its cotangent is ignored
            if not is_floating(c) or (is_complex(c) and not is_complex(v)):
                raise TypeError(
                    f"vjp_fn(cotangents): the cotangent of {leaf_name(cotangents, i, 'output')} has dtype "
                    f"{dtype_name(c.dtype)}, expected a floating dtype like the output's "
                    f"{dtype_name(v.dtype)}"
                )
            if k is not None:
                prev = seeds.get(k)
                seeds[k] = c if prev is None else add(prev, c)
        cotangents = ct_flat = c = prev = None  # the seeds dict alone holds them: used up as it goes
        cts = interp.backward(seeds, consume=consume, ones=ones) if seeds else {}
        grads = [cts.get(k) for k in leaf_ids]
        grads = [zeros_like(x) if g is None else _plain(in_dtype_of(g, x)) for g, x in zip(grads, flat)]
        return tuple(optree.tree_unflatten(tree, grads))

    return optree.tree_unflatten(out_tree, values), backward, aux, interp


@not_recorded("vjp")
def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Evaluate ``func(*primals)`` and return a function computing vector-Jacobian products.

    Args:
        func: a function of arrays (pytrees of arrays allowed) returning arrays, at least one floating
            (integer and boolean outputs carry no derivative: their cotangents are ignored).
        *primals: the point; each a floating backend array or a pytree of them.
        has_aux: if True, ``func`` returns ``(output, aux)`` and aux is returned, not differentiated.

    Returns:
        ``(output, vjp_fn)`` or ``(output, vjp_fn, aux)``. ``vjp_fn(cotangents)`` takes cotangents with the
        structure, shapes and dtypes of ``output`` and returns a tuple with one cotangent per primal, in
        the primal's dtype (zeros for a primal the output does not depend on). It may be called many
        times: it keeps the recorded computation alive until it is dropped. Complex inputs follow PyTorch's
        convention (see ``polyad.ops.elementwise``): the cotangent is ``conj(J)^T g``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> out, f_vjp = pa.vjp(pa.xp.sin, np.array([0.0, 1.0]))
        >>> f_vjp(np.ones(2))[0].round(4)
        array([1.    , 0.5403])
    """
    check_callable(func, "vjp")
    check_has_aux(has_aux, "vjp")
    output, backward, aux, _ = run_vjp(func, primals, has_aux, f"vjp({func_name(func)})")

    def vjp_fn(cotangents):
        return backward(cotangents, False)

    if has_aux:
        return output, vjp_fn, aux
    return output, vjp_fn


def _grad_impl(func, argnums, has_aux, args, kwargs, transform):
    """``(gradient, value, aux, deferred)`` of ``func(*args, **kwargs)`` for the grads; the tape is freed
    after. With ``deferred``, value and aux may hold pending tensors (``reverse.computed`` computes them)."""
    what, single, nums, diff = diff_args(transform, func, argnums, args)
    partial_func = partial_of(func, args, kwargs, nums)
    out, backward, aux, interp = run_vjp(partial_func, diff, has_aux, what, nums=nums, defer=True)
    if not is_array(out) or tuple(out.shape) != ():
        got = f"an array of shape {tuple(out.shape)}" if is_array(out) else f"a {type(out).__name__}"
        hint = " (func returns a pair: pass has_aux=True?)" if isinstance(out, tuple) and not has_aux else ""
        raise ValueError(
            f"{what}: func must return a scalar (a 0-d array), got {got}{hint}; "
            "use pa.vjp or pa.jacrev for non-scalar outputs"
        )
    if is_complex(out):
        raise TypeError(
            f"{what}: func must return a real floating scalar, got {dtype_name(out.dtype)}; differentiate a "
            "real function of it (real, abs) or use pa.vjp"
        )
    # a symbolic one (rules skip products by it), made without computing a pending loss
    seed = ones((), dtype=out.dtype, device=out.device) if type(out) is PendingTensor else ones_like(out)
    try:
        grads = backward(seed, True, ones=True)
    finally:
        interp.tape = []  # grad returns no vjp_fn: nothing can use the tape again
    return (grads[0] if single else grads), out, aux, interp.defer


def _grad_transform(transform, func, argnums, has_aux, arrange):
    """The function a grad-family transform returns: ``arrange(gradient, value, aux)`` of each call."""
    check_callable(func, transform)
    check_argnums(argnums, transform)
    check_has_aux(has_aux, transform)

    @functools.wraps(func)
    def grad_f(*args, **kwargs):
        grads, value, aux, deferred = _grad_impl(func, argnums, has_aux, args, kwargs, transform)
        # a pending value is computed only if arrange hands it back (grad drops it)
        return computed(arrange(grads, value, aux)) if deferred else arrange(grads, value, aux)

    return grad_f


@recorded("grad")
def grad(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """The gradient of a scalar function, as a function.

    Args:
        func: returns a real 0-d array (or ``(output, aux)`` with ``has_aux=True``); ``float()`` of a traced
            value counts when returned or passed back to polyad (scikit-learn's metrics end in
            ``return float(...)``): the number is its tensor again (see ``polyad.core.tensor``).
        argnums: which positional argument(s) to differentiate: an int (negative allowed) or a tuple.
            Each may be a pytree (tuple, list, dict, namedtuple) of floating arrays.
        has_aux: whether ``func`` also returns auxiliary data, returned unchanged (not differentiated).

    Returns:
        A function with ``func``'s arguments returning the gradient (the argument's structure; a tuple of
        them for tuple ``argnums``), or ``(gradient, aux)`` with ``has_aux``. Keyword arguments are passed
        through, not differentiated. For a complex input ``z = x + iy`` the gradient of the real loss ``L``
        is ``dL/dx + i dL/dy`` (PyTorch's convention). The gradient has its input's dtype, whatever
        precision ``func`` computed in (JAX's and torch.func's rule).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.grad(lambda x: pa.xp.sum(x ** 2))(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    return _grad_transform("grad", func, argnums, has_aux, lambda g, out, aux: (g, aux) if has_aux else g)


@recorded("grad_and_value")
def grad_and_value(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
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
    return _grad_transform(
        "grad_and_value", func, argnums, has_aux, lambda g, out, aux: (g, (out, aux)) if has_aux else (g, out)
    )


@recorded("value_and_grad")
def value_and_grad(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
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
    return _grad_transform(
        "value_and_grad", func, argnums, has_aux, lambda g, out, aux: ((out, aux), g) if has_aux else (out, g)
    )


# ------------------------------------------------------------------------------ gradient mode


@contextmanager
def no_grad() -> Iterator[None]:
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
    with recording_off_up_to(current_level()):
        yield


@contextmanager
def enable_grad() -> Iterator[None]:
    """Undo an enclosing ``no_grad`` inside the block."""
    with recording_off_up_to(0):
        yield


@not_recorded("linearize")
def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """Evaluate ``func(*primals)`` once and return a function for its JVP at that point.

    The primal computation is recorded once; ``jvp_fn(*tangents)`` replays only the tangent rules on the
    recorded values, never the primal ops again (cheaper than calling ``jvp`` for each tangent when
    ``func`` is expensive). ``no_grad`` inside ``func`` does not apply (forward mode, as in torch.func).

    Args:
        func: a function of arrays (pytrees allowed) returning floating arrays.
        *primals: the point.

    Returns:
        ``(output, jvp_fn)``; ``jvp_fn(*tangents)`` takes tangents with the structure, shapes and dtypes
        of ``primals`` and returns the tangent of the output, in the output's dtype.

    Example:
        >>> import numpy as np, polyad as pa
        >>> out, f_jvp = pa.linearize(pa.xp.sin, np.array([0.0]))
        >>> f_jvp(np.array([3.0]))
        array([3.])
    """
    check_callable(func, "linearize")
    what = f"linearize({func_name(func)})"
    flat, tree = flatten(primals)
    check_inputs(flat, tree, what, "primals")
    interp, leaf_ids, values, ids, out_tree, _ = _record(func, flat, tree, False, what, respect_no_grad=False)
    out_ids = frozenset(k for k in ids if k is not None)  # the sweep frees every other tangent after use

    def jvp_fn(*tangents):
        t_flat, t_tree = flatten(tangents)
        check_tangents(flat, tree, t_flat, t_tree, f"{what}'s jvp_fn", "primals")
        tans = interp.forward_sweep(dict(zip(leaf_ids, t_flat)), keep=out_ids)
        outs = []
        for k, v in zip(ids, values):
            t = None if k is None else tans.get(k)
            outs.append(zeros_like(v) if t is None else _plain(in_dtype_of(t, v)))
        return optree.tree_unflatten(out_tree, outs)

    return optree.tree_unflatten(out_tree, values), jvp_fn

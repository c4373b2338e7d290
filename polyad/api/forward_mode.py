"""Forward mode: jvp (a forward level carrying tangents, forward.py) and linearize (a reverse level's
tape recorded once, then replayed forwards with the JVP rules for each tangent)."""

from collections.abc import Callable
from typing import Any

import optree

from polyad.api.arguments import (
    _check_callable,
    _check_has_aux,
    _check_inputs,
    _check_like,
    _check_structure,
    _flatten,
    _fname,
    _in_dtype_of,
    _is_array,
    _leaf_name,
    _lower_tree,
    _reconnect_tree,
    _split_aux,
)
from polyad.api.reverse_mode import _record
from polyad.core import Tensor, new_level
from polyad.core import plain as _plain
from polyad.core.tensor import check_lost
from polyad.forward import DualTensor, ForwardInterpreter
from polyad.ops.common import _dtype_name
from polyad.ops.creation import zeros_like
from polyad.predispatch import not_recorded, recorded_call


def _check_tangents(p_flat, p_tree, t_flat, t_tree, what, root):
    """Tangents match their primals in structure, shape and dtype; errors name the leaf."""
    _check_structure(t_tree, p_tree, what, "tangent", "primals")
    for i, (p, t) in enumerate(zip(p_flat, t_flat)):
        _check_like(t, p, what, "tangent", "its primal's", p_tree, i, root)
        if t.dtype != p.dtype:
            raise TypeError(
                f"{what}: the tangent of {_leaf_name(p_tree, i, root)} has dtype {_dtype_name(t.dtype)}, "
                f"expected its primal's dtype {_dtype_name(p.dtype)}"
            )


@recorded_call("jvp")
def jvp(
    func: Callable[..., Any],
    primals: tuple[Any, ...],
    tangents: tuple[Any, ...],
    *,
    strict: bool = False,
    has_aux: bool = False,
) -> tuple[Any, ...]:
    """Evaluate ``func(*primals)`` and its Jacobian-vector product with ``tangents``.

    Args:
        func: a function of arrays (pytrees allowed).
        primals: a tuple of the positional arguments (floating arrays or pytrees of them).
        tangents: a tuple with the same structure, shapes and dtypes as ``primals``.
        strict: if True, an output that does not depend on the inputs is an error (else its tangent is 0).
        has_aux: ``func`` returns ``(output, aux)``; aux is returned, not differentiated.

    Returns:
        ``(output, jvp_out)`` or ``(output, jvp_out, aux)``; each tangent has its output's dtype. For
        complex inputs the tangent is the ordinary complex derivative ``f'(z) t`` (for holomorphic ``f``).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jvp(pa.xp.exp, (np.array([0.0]),), (np.array([2.0]),))
        (array([1.]), array([2.]))
    """
    _check_callable(func, "jvp")
    _check_has_aux(has_aux, "jvp")
    _check_has_aux(strict, "jvp", "strict")
    return _jvp(func, primals, tangents, strict, has_aux, f"jvp({_fname(func)})")


def _jvp(func, primals, tangents, strict, has_aux, what):
    """The work of ``jvp`` (and of ``jacfwd``, per basis vector): errors start with ``what``."""
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
        out = _reconnect_tree(out)
        o_flat, o_tree = _flatten(out)
        if interp.numbers:
            check_lost(interp, what, any(isinstance(o, Tensor) and o._interp is interp for o in o_flat))
        if has_aux:
            aux = _lower_tree(aux, interp)
    outs, tans = [], []
    for i, o in enumerate(o_flat):
        if isinstance(o, Tensor) and o._interp is interp and o._aux is not None:
            outs.append(_plain(o._value))
            tans.append(_plain(_in_dtype_of(o._aux, o._value)))
            continue
        if isinstance(o, Tensor) and o._interp is interp:
            o = o._value  # a result with no derivative (a comparison, an integer result): a zero tangent
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
        tans.append(_plain(zeros_like(o)))
    result = (optree.tree_unflatten(o_tree, outs), optree.tree_unflatten(o_tree, tans))
    if has_aux:
        return result + (aux,)
    return result


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
    _check_callable(func, "linearize")
    what = f"linearize({_fname(func)})"
    flat, tree = _flatten(primals)
    _check_inputs(flat, tree, what, "primals")
    interp, leaf_ids, values, ids, out_tree, _ = _record(func, flat, tree, False, what, respect_no_grad=False)
    out_ids = frozenset(k for k in ids if k is not None)  # the sweep frees every other tangent after use

    def jvp_fn(*tangents):
        t_flat, t_tree = _flatten(tangents)
        _check_tangents(flat, tree, t_flat, t_tree, f"{what}'s jvp_fn", "primals")
        tans = interp.forward_sweep(dict(zip(leaf_ids, t_flat)), keep=out_ids)
        outs = []
        for k, v in zip(ids, values):
            t = None if k is None else tans.get(k)
            outs.append(zeros_like(v) if t is None else _plain(_in_dtype_of(t, v)))
        return optree.tree_unflatten(out_tree, outs)

    return optree.tree_unflatten(out_tree, values), jvp_fn

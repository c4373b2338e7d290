"""jvp: a forward level carrying tangents (``polyad.transforms.forward``)."""

from collections.abc import Callable
from typing import Any

import optree

from polyad.api._arguments import (
    check_callable,
    check_has_aux,
    check_inputs,
    check_tangents,
    flatten,
    func_name,
    in_dtype_of,
    is_array,
    leaf_name,
    level_outputs,
)
from polyad.core import Tensor, new_level
from polyad.core import plain as _plain
from polyad.graph.predispatch import recorded_call
from polyad.ops.creation import zeros_like
from polyad.transforms.forward import DualTensor, ForwardInterpreter


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
    check_callable(func, "jvp")
    check_has_aux(has_aux, "jvp")
    check_has_aux(strict, "jvp", "strict")
    return run_jvp(func, primals, tangents, strict, has_aux, f"jvp({func_name(func)})")


def run_jvp(func, primals, tangents, strict, has_aux, what):
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
    p_flat, p_tree = flatten(primals)
    t_flat, t_tree = flatten(tangents)
    check_inputs(p_flat, p_tree, what, "primals")
    check_tangents(p_flat, p_tree, t_flat, t_tree, what, "primals")
    with new_level(ForwardInterpreter) as interp:
        duals = [DualTensor(p, interp, t) for p, t in zip(p_flat, t_flat)]
        out = func(*optree.tree_unflatten(p_tree, duals))
        out, o_flat, o_tree, aux = level_outputs(out, interp, has_aux, what)
    outs, tans = [], []
    for i, o in enumerate(o_flat):
        if isinstance(o, Tensor) and o._interp is interp and o._aux is not None:
            outs.append(_plain(o._value))
            tans.append(_plain(in_dtype_of(o._aux, o._value)))
            continue
        if isinstance(o, Tensor) and o._interp is interp:
            o = o._value  # a result with no derivative (a comparison, an integer result): a zero tangent
        if not is_array(o):
            raise TypeError(
                f"{what}: func must return arrays, got {type(o).__name__} at {leaf_name(out, i, 'output')}"
            )
        if strict:
            raise RuntimeError(
                f"{what} with strict=True: {leaf_name(out, i, 'output')} does not depend on the inputs "
                "(its tangent is identically zero); pass strict=False to get zeros"
            )
        outs.append(_plain(o))
        tans.append(_plain(zeros_like(o)))
    result = (optree.tree_unflatten(o_tree, outs), optree.tree_unflatten(o_tree, tans))
    if has_aux:
        return result + (aux,)
    return result

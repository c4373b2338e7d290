"""Conditionals as ops: ``switch`` (``branches[index](*operands)``, the index clamped) and ``cond`` (two
branches on a boolean), with JAX's ``lax`` signatures and semantics.

Outside every transform the chosen branch is called, and only it runs on values; the others are traced
abstractly (no values) to check that every branch returns the same structure, shapes and dtypes. Under a
transform each branch is traced once (``polyad.control.closure``: what it closes over becomes explicit)
and the choice is one op, ``SWITCH``, whose rules transform it as a whole:

- vmap: with an unbatched index, one switch of the vmapped branches; with a batched one (each example its
  own branch), every branch runs on the whole batch and each example takes its own branch's result
  (a select, as JAX does).
- jvp: one switch of the branches under jvp.
- grad/vjp: the transpose is one switch too, of the branches' pullbacks: the backward pass runs the
  chosen branch again, recorded, and pulls the cotangent back (nothing of the branch is stored).
"""

import optree

import polyad.xp as xp
from polyad.control.bodies import BatchedBody, DualBody, recorded
from polyad.control.closure import trace
from polyad.control.loops import as_array, as_arrays, check_carry, func_name
from polyad.core import Op, Tensor, bind, transform_active
from polyad.core.avals import ShapeDtype, dtype_kind, dtype_name, is_floating, ndim_of, shape_of
from polyad.ops.base import astype, reshape, where
from polyad.ops.elementwise import equal
from polyad.ops.fills import zeros_like


def _concrete_index(index, n):
    """The branch ``index`` chooses among ``n``, clamped to ``[0, n - 1]`` as JAX does."""
    return min(max(int(index), 0), n - 1)


def _closure_slices(branches):
    """The positions, among a switch's closure values, of each branch's."""
    out, k = [], 0
    for b in branches:
        out.append(slice(k, k + len(b.closures)))
        k += len(b.closures)
    return out


def run_switch(args, *, branches, n_ops, **params):
    """The chosen branch on whatever the arguments are (the index concrete)."""
    index, operands, closure = args[0], list(args[1 : 1 + n_ops]), list(args[1 + n_ops :])
    k = _concrete_index(index, len(branches))
    return tuple(branches[k](*operands, *closure[_closure_slices(branches)[k]]))


def _kernel(xp_, *args, **params):
    return run_switch(args, **params)


def _abstract(xp_, *avals, branches, **params):
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    return tuple(ShapeDtype(a.shape, a.dtype, device) for a in branches[0].out_avals)


class _Branch:
    """A branch as the transformed switch sees it: all the operands and every branch's closure, of which
    it passes its own on."""

    closures = ()
    graph = None

    def __init__(self, inner, n_ops, own, out_avals=None):
        self.inner, self.n_ops, self.own = inner, n_ops, own
        self.out_avals = inner.out_avals if out_avals is None else out_avals
        self.where = inner.where
        self.draws_random = getattr(inner, "draws_random", False)

    def __call__(self, *args):
        return self.inner(*args[: self.n_ops], *args[self.n_ops :][self.own])


# ------------------------------------------------------------------------------ vmap


def _batch(info, dims, index, *values, branches, n_ops, **params):
    size = info.batch_size
    index_dim, value_dims = dims[0], dims[1:]
    batched = [BatchedBody(_Branch(b, n_ops, s), value_dims, size, info.randomness) for b, s in
               zip(branches, _closure_slices(branches))]  # fmt: skip
    if index_dim is None:
        outs = bind(SWITCH, index, *values, branches=tuple(batched), n_ops=n_ops, **params)
        return outs, (0,) * len(outs)
    # each example its own branch: every branch on the whole batch, then a select per example
    index = xp.clip(_to_front(index, index_dim), 0, len(branches) - 1)
    results = [b(*values) for b in batched]
    outs = []
    for k in range(len(results[0])):
        out = results[-1][k]
        for j in range(len(results) - 2, -1, -1):
            r = results[j][k]
            out = where(reshape(equal(index, j), (size,) + (1,) * (ndim_of(r) - 1)), r, out)
        outs.append(out)
    return tuple(outs), (0,) * len(outs)


def _to_front(v, d):
    return v if d == 0 else xp.moveaxis(v, d, 0)


# ------------------------------------------------------------------------------ jvp


def _jvp(tangents, out, index, *values, branches, n_ops, **params):
    t_values = tangents[1:]
    given = [k for k, t in enumerate(t_values) if t is not None]
    floats = [k for k, a in enumerate(branches[0].out_avals) if dtype_kind(a.dtype) in "fc"]
    n_in = len(values)
    duals = tuple(
        DualBody(_Branch(b, n_ops, s), n_in, given, floats)
        for b, s in zip(branches, _closure_slices(branches))
    )
    tangents_given = [t_values[k] for k in given]
    outs = bind(SWITCH, index, *values, *tangents_given, branches=duals, n_ops=n_in + len(given), **params)
    n_out = len(branches[0].out_avals)
    t_out = [None] * n_out
    for k, t in zip(floats, outs[n_out:]):
        t_out[k] = t
    return tuple(outs[:n_out]), tuple(t_out)


_jvp.computes_primal = True


# ------------------------------------------------------------------------------ grad


class _Pullback:
    """A branch's backward pass as a switch branch: operands, closures, then the output cotangents in;
    one cotangent per operand and closure value out (zeros for none)."""

    closures = ()
    graph = None

    def __init__(self, branch, n_values, n_out, in_avals):
        self.branch, self.n_values, self.n_out = branch, n_values, n_out
        self.out_avals = in_avals
        self.where = branch.where
        self.draws_random = getattr(branch, "draws_random", False)

    def __call__(self, *args):
        values, cts = args[: self.n_values], args[self.n_values :]
        _, pullback = recorded(self.branch, list(values))
        grads = pullback(list(cts))
        return [zeros_like(v) if g is None else g for g, v in zip(grads, values)]


def _vjp(g, out, index, *values, branches, n_ops, **params):
    n_out = len(branches[0].out_avals)
    floats = [k for k, v in enumerate(values) if hasattr(v, "dtype") and is_floating(v)]
    in_avals = [ShapeDtype(tuple(shape_of(v)), v.dtype) for v in values]
    pulls = tuple(
        _Pullback(_Branch(b, n_ops, s), len(values), n_out, in_avals)
        for b, s in zip(branches, _closure_slices(branches))
    )
    cts = bind(SWITCH, index, *values, *g, branches=pulls, n_ops=len(values) + n_out, **params)
    return (None, *[cts[k] if k in floats else None for k in range(len(values))])


SWITCH = Op(
    "switch",
    _kernel,
    multiple_results=True,
    higher_order=lambda *args, **params: run_switch(args, **params),
    abstract_eval=_abstract,
    batch=_batch,
    jvp=_jvp,
    vjp=_vjp,
)


# ------------------------------------------------------------------------------ the public functions


def switch(index, branches, *operands):
    """``branches[index](*operands)``, with ``index`` clamped to the branches' range, as
    ``jax.lax.switch``.

    Args:
        index: an integer scalar (a Python int or a 0-d integer array).
        branches: a sequence of functions of ``*operands``, returning outputs of one structure, shapes and
            dtypes.
        *operands: the branches' arguments (pytrees of arrays).

    Returns:
        The chosen branch's output. Under vmap with a batched ``index`` each example takes its own
        branch (every branch then runs on the whole batch).

    Example:
        >>> import numpy as np, polyad as pa
        >>> branches = [lambda x: x * 2.0, lambda x: pa.xp.sin(x), lambda x: -x]
        >>> float(pa.switch(1, branches, np.float64(0.0)))
        0.0
        >>> float(pa.grad(lambda x: pa.switch(7, branches, x))(np.float64(1.0)))  # index 7: the last branch
        -1.0
    """
    where = "pa.switch"
    branches = tuple(branches) if isinstance(branches, list | tuple) else branches
    if not isinstance(branches, tuple) or not branches:
        raise TypeError(f"{where}: branches must be a non-empty sequence of functions, got {branches!r}")
    for k, b in enumerate(branches):
        if not callable(b):
            raise TypeError(f"{where}: branches[{k}] must be callable, got {type(b).__name__}")
    _check_index(index, where)
    return _switch(index, branches, operands, where, [f"branch {k}" for k in range(len(branches))])


def _switch(index, branches, operands, where, names):
    """``switch``'s work; ``where`` names the call and ``names`` each branch in messages (``pa.cond``'s are
    false_fun and true_fun)."""
    flat, tree = optree.tree_flatten(operands, none_is_leaf=False)
    flat = as_arrays(flat, where, "operands")
    if not transform_active() and not isinstance(index, Tensor):
        k = _concrete_index(index, len(branches))
        out = branches[k](*operands)
        _check_eager(out, k, branches, tree, flat, where, names)
        return out
    traced = [
        _trace_branch(b, tree, flat, f"{where} {name} ({func_name(b)})") for b, name in zip(branches, names)
    ]
    out_tree = traced[0][1]
    for k, (body, t) in enumerate(traced[1:], 1):
        check_carry(body.out_avals, traced[0][0].out_avals, where, names[k], names[0], (t, out_tree), OUTPUT)
    bodies = tuple(body for body, _ in traced)
    if isinstance(index, bool | int):  # on the operands' device, as the carry's numbers
        index = as_arrays([int(index)], where, "index", flat)[0]
    index = astype(xp.asarray(index), xp.int64) if not isinstance(index, Tensor) else index
    closure = [c for b in bodies for c in b.closures]
    outs = bind(SWITCH, index, *flat, *closure, branches=bodies, n_ops=len(flat))
    return optree.tree_unflatten(out_tree, list(outs))


def _check_index(index, where):
    if isinstance(index, bool) or not (isinstance(index, int) or hasattr(index, "dtype")):
        raise TypeError(f"{where}: index must be an integer scalar, got {index!r}")
    if hasattr(index, "dtype"):
        if tuple(getattr(index, "shape", ())) != () or dtype_kind(index.dtype) in "fcb":
            raise TypeError(
                f"{where}: index must be an integer scalar (a 0-d integer array), got shape "
                f"{tuple(index.shape)} and dtype {dtype_name(index.dtype)}"
            )


def _trace_branch(branch, tree, flat, where):
    out_tree = []

    def flat_branch(*leaves):
        out = branch(*optree.tree_unflatten(tree, list(leaves)))
        o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=False)
        out_tree.append(o_tree)
        return tuple(as_array(o, where, "its output") for o in o_flat)

    body = trace(flat_branch, flat, where, advice=BRANCH_ADVICE)
    return body, out_tree[0]


BRANCH_ADVICE = (
    "under a transform every branch is traced once, on abstract values, so Python control flow (if, float(), "
    "int()) cannot depend on the operands or on a value computed from them: choose with xp.where(c, a, b) or "
    "a nested pa.cond"
)


OUTPUT = "an output"


def _check_eager(out, k, branches, tree, flat, where, names):
    """Outside transforms only the chosen branch ``k`` runs; each other one is traced abstractly (shapes and
    dtypes, no values) and its output compared with ``out``, as under a transform, so that branches that
    disagree fail eagerly too, not first under ``grad`` or ``pa.jit``. A branch that cannot be traced
    (Python control flow on the operands' values, a NumPy-only function) is checked only where it runs.
    A trace that agreed is remembered (``_AGREED``) for the same code, closure and operand types, so an
    eager loop calling ``cond`` at every step traces each branch once, not once a step."""
    o_flat, o_tree = optree.tree_flatten(out, none_is_leaf=False)
    for j, branch in enumerate(branches):
        if j == k:
            continue
        key = _branch_key(branch, tree, flat)
        seen = _AGREED.get(key) if key is not None else None
        if seen is not None and _agree(o_flat, o_tree, *seen):
            continue
        try:
            body, t = _trace_branch(branch, tree, flat, f"{where} {names[j]} ({func_name(branch)})")
        except Exception:  # noqa: BLE001  (eagerly, a branch not taken need not be traceable)
            continue
        check_carry(o_flat, body.out_avals, where, names[k], names[j], (o_tree, t), OUTPUT)
        if key is not None:
            if len(_AGREED) >= 1024:  # a bound: keys hold code objects and closure signatures
                _AGREED.clear()
            _AGREED[key] = (t, body.out_avals)


_AGREED = {}


def _agree(o_flat, o_tree, tree, avals):
    try:
        check_carry(o_flat, avals, "", "", "", (o_tree, tree))
    except TypeError:
        return False
    return True


def _signature(v):
    """What of a value can change a traced branch's output types: an array's shape and dtype, a plain
    scalar's value; anything else by identity."""
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return ("array", tuple(shape_of(v)), dtype_name(v.dtype))
    if v is None or isinstance(v, bool | int | float | complex | str):
        return (type(v), v)
    return ("object", id(v))


def _branch_key(branch, tree, flat):
    """A branch's code, closure and defaults and the operands' types: the same key, the same trace."""
    code = getattr(branch, "__code__", None)
    if code is None:
        return None
    cells = []
    for cell in getattr(branch, "__closure__", None) or ():
        try:
            cells.append(_signature(cell.cell_contents))
        except ValueError:  # an empty cell
            cells.append(None)
    defaults = tuple(_signature(d) for d in getattr(branch, "__defaults__", None) or ())
    return (code, tuple(cells), defaults, tree, tuple(_signature(x) for x in flat))


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, as ``jax.lax.cond``.

    Args:
        pred: a boolean scalar (a Python bool or a 0-d bool array).
        true_fun, false_fun: functions of ``*operands`` returning outputs of one structure and types.
        *operands: their arguments.

    Returns:
        The chosen function's output; under vmap with a batched ``pred``, each example's own.

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: pa.cond(x > 0, lambda v: v * v, lambda v: -v, x)
        >>> float(f(np.float64(3.0))), float(pa.grad(f)(np.float64(-2.0)))
        (9.0, -1.0)
    """
    where = "pa.cond"
    for name, f in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(f):
            raise TypeError(f"{where}: {name} must be callable, got {type(f).__name__}")
    names = ("false_fun", "true_fun")  # branch 0 and 1 of the switch
    if isinstance(pred, bool):
        return _switch(int(pred), (false_fun, true_fun), operands, where, names)
    if (
        not hasattr(pred, "dtype")
        or tuple(getattr(pred, "shape", (None,))) != ()
        or dtype_name(pred.dtype) != "bool"
    ):
        raise TypeError(f"{where}: pred must be a boolean scalar (a 0-d bool array or a bool), got {pred!r}")
    if not transform_active() and not isinstance(pred, Tensor):
        return _switch(int(bool(pred)), (false_fun, true_fun), operands, where, names)
    return _switch(astype(pred, xp.int64), (false_fun, true_fun), operands, where, names)

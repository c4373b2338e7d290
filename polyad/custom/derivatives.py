"""Custom derivative rules on plain Python functions: ``custom_jvp`` and ``custom_vjp``, with JAX's API
(``f.defjvp(jvp)``, ``f.defvjp(fwd, bwd)``, ``nondiff_argnums``).

A call under a transform is one op, ``CUSTOM_DERIVATIVE``: its inputs are the function's array arguments
(flat) and then the values it closes over (found by tracing it once, ``polyad.control.closure``; a function
that cannot be traced, because it hands values to SciPy, has the tensors of its Python closure cells
instead). Its rules call the user's:

- jvp (``jvp``, ``jacfwd``): the function's JVP rule; a function with only a VJP refuses forward mode.
- vjp (``grad``, ``vjp``, ``jacrev``): ``fwd`` in the primal pass (its residuals kept), ``bwd`` in the
  backward pass; a function with only a JVP rule is differentiated in reverse by transposing that rule
  (its tangent map, recorded at a new reverse level and pulled back). A function with both uses each
  where it belongs (JAX refuses that, jax-ml/jax#3996).
- batch (``vmap``): one op of the rules vmapped (each user rule runs at a new vmap level); a rule or a
  primal that cannot be batched (Python control flow on a batched value, a SciPy call) is run once per
  example, with vmap's ``LoopFallbackWarning``.

Derivatives with respect to a value the function closes over are refused (the rules give none): pass it
as an argument. What the rules return is checked (count, structure, shape, dtype, array type) with errors
naming the function and the rule.
"""

import functools
import inspect
import warnings

import optree

import polyad.core.dispatch as dispatch
from polyad.control.bodies import function_op
from polyad.control.closure import substituted, trace, unaliased
from polyad.control.loops import as_array, func_name
from polyad.core import ConcretizationError, Tensor, bind, new_level, plain, transform_active
from polyad.core.avals import ShapeDtype, bottom, dtype_name, is_array, is_complex, is_floating, shape_of
from polyad.custom.rule_calls import CustomDerivativeError, call_fwd, call_jvp, has_batched
from polyad.ops.base import astype, broadcast_to, expand_dims, move_to_front, moveaxis, stack, take_index
from polyad.ops.fills import zeros_like
from polyad.ops.reductions import sum as sum_of
from polyad.transforms.batching import BatchedTensor, BatchInterpreter, LoopFallbackWarning
from polyad.transforms.reverse import ReverseInterpreter

# ------------------------------------------------------------------------------ checks


def conform(value, ref, where, what):
    """``value``, returned by a rule as ``what`` (a derivative of ``ref``), made to match ``ref``: an
    array of ``ref``'s library and shape, of its dtype (cast within real or complex floating), or an
    error naming ``where`` and ``what``. None stays None; a non-floating ``ref`` carries no derivative."""
    if value is None or not hasattr(ref, "shape") or not is_floating(ref):
        return None
    if isinstance(value, bool | int | float | complex):
        value = _scalar_like(value, ref)
    array = bottom(value)
    if not isinstance(value, Tensor) and dispatch.backend_of_array(array) is None:
        raise CustomDerivativeError(
            f"{where} returned a {type(value).__name__} as {what}; expected an array of shape "
            f"{tuple(shape_of(ref))} and dtype {dtype_name(ref.dtype)}"
        )
    ref_owner = dispatch.backend_of_array(bottom(ref))
    owner = dispatch.backend_of_array(array)
    if ref_owner is not None and owner is not None and owner is not ref_owner:
        raise CustomDerivativeError(
            f"{where} returned a {owner.name} array as {what}, but its primal is a {ref_owner.name} array; "
            "compute it from the rule's arguments with polyad.xp"
        )
    shape, ref_shape = tuple(shape_of(value)), tuple(shape_of(ref))
    if shape != ref_shape:
        raise CustomDerivativeError(
            f"{where} returned an array of shape {shape} as {what}; expected shape {ref_shape}"
        )
    if dtype_name(value.dtype) != dtype_name(ref.dtype):
        if not is_floating(value) or is_complex(value) != is_complex(ref):
            raise CustomDerivativeError(
                f"{where} returned dtype {dtype_name(value.dtype)} as {what}, but its primal has dtype "
                f"{dtype_name(ref.dtype)}: a derivative has a floating dtype of its primal's kind"
            )
        value = astype(value, ref.dtype)
    return value


def _scalar_like(number, ref):
    """A Python number a rule returned for an array derivative: that number in ``ref``'s shape."""
    return zeros_like(ref) + number


def _flat_matching(tree_value, tree, where, what):
    """The leaves of ``tree_value``, which must have the structure ``tree`` (else an error naming it)."""
    leaves, got = optree.tree_flatten(tree_value, none_is_leaf=True)
    if got != optree.tree_structure(optree.tree_unflatten(tree, [0] * tree.num_leaves), none_is_leaf=True):
        raise CustomDerivativeError(f"{where} returned {what} of structure {got}; expected {tree}")
    return leaves


def _level(x):
    """The level of a transform's tensor (0 for anything else)."""
    return x._interp.level if isinstance(x, Tensor) and x._interp is not None else 0


def closure_error(where):
    """The error for a derivative asked with respect to a value ``where``'s function closes over."""
    return CustomDerivativeError(
        f"{where}: a derivative was asked with respect to a value the function closes over (a traced "
        "value it uses without taking it as an argument); its custom rules give derivatives only for its "
        "arguments, so this one would be lost: pass that value as an argument"
    )


# ------------------------------------------------------------------------------ the function's rules


class Rules:
    """The user's rules of one call, on flat values: ``values`` are the flat array arguments and then the
    closure values, each closed-over tensor object standing for its value while a rule runs."""

    def __init__(self, fn, where, in_tree, nondiff, closures, out_tree, out_avals, jvp, fwd, bwd):
        self.fn, self.where, self.in_tree, self.nondiff = fn, where, in_tree, nondiff
        self.closures, self.out_tree, self.out_avals = tuple(closures), out_tree, out_avals
        self.user_jvp, self.user_fwd, self.user_bwd = jvp, fwd, bwd
        self.n_args = in_tree.num_leaves

    has_jvp = property(lambda self: self.user_jvp is not None)
    has_vjp = property(lambda self: self.user_bwd is not None)

    def full_args(self, flat_args):
        """The function's positional arguments: the array ones rebuilt, the static ones put back."""
        diff = list(optree.tree_unflatten(self.in_tree, list(flat_args)))
        out = []
        for i in range(len(diff) + len(self.nondiff)):
            out.append(self.nondiff[i] if i in self.nondiff else diff.pop(0))
        return out

    def _call(self, values, call, extra=()):
        """``call(argument values)`` with the closure standing for its values; its result may hold no
        tensor of a level above every value it was given (``extra``: the tangents, residuals and
        cotangents): such a tensor came from a traced value the rule closes over that the function does
        not (a derivative about to be mixed up with the transform running the rule)."""
        top = max((_level(x) for x in optree.tree_leaves([values, extra], none_is_leaf=False)), default=0)
        values = unaliased(self.closures, values) if self.closures else list(values)
        n = self.n_args
        with substituted(self.closures, values[n:], self.where) as stand_ins:
            result = call(values[:n])
            if stand_ins:  # a closed-over value returned as it is: the value it stands for, not the object
                result = optree.tree_map(lambda o: stand_ins.get(id(o), o), result, none_is_leaf=True)
            if any(_level(x) > top for x in optree.tree_leaves(result, none_is_leaf=False)):
                raise CustomDerivativeError(
                    f"{self.where}: a rule returned a value of a transform it was not handed: it closes "
                    "over a traced value the function itself does not use, whose derivative would be mixed "
                    "up with the one being computed; pass that value as an argument"
                )
        return result

    def _outputs(self, out, where, what):
        if self.out_tree is None:  # a function that could not be traced: its first output sets it
            self.out_tree = optree.tree_structure(out, none_is_leaf=False)
        leaves = _flat_matching(out, self.out_tree, where, what)
        leaves = [as_array(o, where, what) for o in leaves]
        if self.out_avals is not None:
            for o, a in zip(leaves, self.out_avals):
                if isinstance(a, ShapeDtype) and (
                    tuple(shape_of(o)) != a.shape or dtype_name(o.dtype) != dtype_name(a.dtype)
                ):
                    raise CustomDerivativeError(
                        f"{where} returned {what} of shape {tuple(shape_of(o))} and dtype "
                        f"{dtype_name(o.dtype)} where the function gives {a.shape} {dtype_name(a.dtype)}"
                    )
        return leaves

    def primal(self, values):
        def call(args):
            return self._outputs(self.fn(*self.full_args(args)), self.where, "its output")

        return self._call(values, call)

    def jvp(self, values, tangents, then=None):
        """``(outputs, output tangents)``, flat, from the user's JVP rule (zeros for None tangents);
        ``then(outputs, tangents)`` instead, computed while the closure still stands for ``values``."""
        where = f"{self.where}'s jvp rule"

        def call(args):
            ts = [zeros_like(a) if t is None else t for a, t in zip(args, tangents)]
            nondiff = [self.nondiff[i] for i in sorted(self.nondiff)]
            primals = tuple(optree.tree_unflatten(self.in_tree, list(args)))
            tans = tuple(optree.tree_unflatten(self.in_tree, ts))
            result = self.user_jvp(*nondiff, primals, tans)
            if not (isinstance(result, tuple | list) and len(result) == 2):
                raise CustomDerivativeError(
                    f"{where} must return (primal_out, tangent_out), got {type(result).__name__}"
                    + (f" of length {len(result)}" if isinstance(result, tuple | list) else "")
                )
            outs = self._outputs(result[0], where, "primal_out")
            t_leaves = _flat_matching(result[1], self.out_tree, where, "tangent_out")
            touts = [conform(t, o, where, f"the tangent of output {k}") for k, (t, o) in
                     enumerate(zip(t_leaves, outs))]  # fmt: skip
            return (outs, touts) if then is None else then(outs, touts)

        return self._call(values, call, tangents)

    def fwd(self, values):
        """``(outputs, residuals)`` from the user's ``fwd``."""
        where = f"{self.where}'s fwd"

        def call(args):
            result = self.user_fwd(*self.full_args(args))
            if not (isinstance(result, tuple | list) and len(result) == 2):
                raise CustomDerivativeError(
                    f"{where} must return (output, residuals), got {type(result).__name__}"
                )
            return self._outputs(result[0], where, "its output"), result[1]

        return self._call(values, call)

    def bwd(self, values, residuals, cotangents):
        """One cotangent per flat array argument (None for none) from the user's ``bwd``."""
        where = f"{self.where}'s bwd"

        def call(args):
            nondiff = [self.nondiff[i] for i in sorted(self.nondiff)]
            g = optree.tree_unflatten(self.out_tree, list(cotangents))
            result = self.user_bwd(*nondiff, residuals, g)
            diff = optree.tree_unflatten(self.in_tree, list(args))
            if not isinstance(result, tuple | list) or len(result) != len(diff):
                got = f"{len(result)} entries" if isinstance(result, tuple | list) else type(result).__name__
                raise CustomDerivativeError(
                    f"{where} must return a tuple with one cotangent per differentiable argument "
                    f"({len(diff)}), got {got}"
                )
            out = []
            for k, (c, a) in enumerate(zip(result, diff)):
                a_leaves, a_tree = optree.tree_flatten(a, none_is_leaf=False)
                if c is None:
                    out.extend([None] * len(a_leaves))
                    continue
                c_leaves = _flat_matching(c, a_tree, where, f"the cotangent of argument {k}")
                out.extend(conform(ci, ai, where, f"the cotangent of argument {k}")
                           for ci, ai in zip(c_leaves, a_leaves))  # fmt: skip
            return out

        return self._call(values, call, (residuals, cotangents))


# ------------------------------------------------------------------------------ the op


def _run(*values, rules, **params):
    return tuple(rules.primal(list(values)))


def _abstract(xp_, *avals, rules, **params):
    if rules.out_avals is None:
        raise ConcretizationError(
            f"{rules.where}: the function could not be traced (it needs concrete values), so its output "
            "shapes are unknown to pa.jit and eval_shape"
        )
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    return tuple(ShapeDtype(a.shape, a.dtype, device) for a in rules.out_avals)


def _jvp(tangents, out, *values, rules, **params):
    n = rules.n_args
    if any(t is not None for t in tangents[n:]):
        raise closure_error(rules.where)
    if not rules.has_jvp:
        if rules.has_vjp:
            raise CustomDerivativeError(
                f"{rules.where}: forward mode (jvp, jacfwd) needs a JVP rule, and the function has only a "
                "VJP rule; give it one with defjvp (a function may carry both)"
            )
        raise CustomDerivativeError(f"{rules.where}: no derivative rule was defined (defjvp or defvjp)")
    if has_batched(list(values) + list(tangents)):  # an enclosing vmap: the rule as an op it can loop
        outs, touts = call_jvp(rules, list(values), list(tangents[:n]))
    else:
        outs, touts = rules.jvp(list(values), list(tangents[:n]))
    return tuple(outs), tuple(touts)


_jvp.computes_primal = True


def _vjp_forward(*values, rules, **params):
    if rules.has_vjp:
        if has_batched(values):  # an enclosing vmap: the rule as an op it can loop over
            outs, residuals = call_fwd(rules, list(values))
        else:
            outs, residuals = rules.fwd(list(values))
        return tuple(outs), residuals
    if not rules.has_jvp:
        raise CustomDerivativeError(f"{rules.where}: no derivative rule was defined (defjvp or defvjp)")
    return bind(CUSTOM_DERIVATIVE, *values, rules=rules, **params), None


def _vjp(g, out, *values, rules, residuals, **params):
    n = rules.n_args
    if rules.has_vjp:
        leaves, tree = optree.tree_flatten(residuals, none_is_leaf=False)
        arrays = [k for k, r in enumerate(leaves) if is_array(r)]
        static = [None if k in arrays else r for k, r in enumerate(leaves)]
        floats = tuple(k for k, v in enumerate(values[:n]) if is_floating(v))
        out = bind(BWD_CALL, *values, *[leaves[k] for k in arrays], *g, rules=rules,
                   residuals=(tree, tuple(arrays), tuple(static)), floats=floats, n_out=len(g))  # fmt: skip
        cts = [None] * n
        for k, c in zip(floats, out):
            cts[k] = c
    elif has_batched(list(values) + list(g)):  # an enclosing vmap: the transposition as an op it can loop
        floats = tuple(k for k, v in enumerate(values[:n]) if is_floating(v))
        out = bind(BWD_CALL, *values, *g, rules=rules, residuals=None, floats=floats, n_out=len(g))
        cts = [None] * n
        for k, c in zip(floats, out):
            cts[k] = c
    else:
        cts = _transposed_jvp(rules, list(values), list(g))

    def refuse():
        raise closure_error(rules.where)

    return tuple(cts) + tuple(refuse for _ in values[n:])


def _transposed_jvp(rules, values, g):
    """The cotangents of the arguments by transposing the JVP rule: its tangent map (linear in the
    tangents) recorded at a new reverse level from zero tangents, then pulled back from ``g``."""
    n = rules.n_args

    def backward(outs, touts):  # run while the closed-over objects stand for what was recorded
        seeds = {}
        for t, gi in zip(touts, g):
            if isinstance(t, Tensor) and t._interp is interp and t._aux is not None and gi is not None:
                seeds[t._aux] = gi if t._aux not in seeds else seeds[t._aux] + gi
        return interp.backward(seeds, consume=True)

    with new_level(ReverseInterpreter) as interp:
        leaves = [interp.new_leaf(plain(zeros_like(v))) if is_floating(v) else None for v in values[:n]]
        ct = rules.jvp(values, leaves, then=backward)
    return [None if leaf is None else ct.get(leaf._aux) for leaf in leaves]


def _batch(info, dims, *values, rules, **params):
    inner = BatchedRules(rules, dims, info.batch_size, info.randomness)
    try:
        outs = bind(CUSTOM_DERIVATIVE, *values, rules=inner, **params)
    except CustomDerivativeError:
        raise
    except TypeError:  # ConcretizationError, or a conversion refused (np.asarray of a batched value)
        return NotImplemented  # a rule or the function on a batched value: vmap's per-example loop
    return outs, (0,) * len(outs)


CUSTOM_DERIVATIVE = function_op(
    "custom_derivative", _run, abstract_eval=_abstract, jvp=_jvp, vjp=_vjp, batch=_batch
)
_vjp.forward = _vjp_forward


def _run_bwd(*args, rules, residuals, floats, n_out):
    """The user's ``bwd`` as an op of its own (``BWD_CALL``), so that an enclosing vmap that cannot batch
    it (a rule that needs concrete values) runs it once per example, and enclosing derivatives see its
    ops (its body). Arguments: the values, the residuals' arrays, the output cotangents; ``residuals``
    None: the transposition of the JVP rule instead (a function without a VJP rule)."""
    if residuals is None:  # a JVP rule's transposition (no VJP rule)
        values, g = args[: len(args) - n_out], args[len(args) - n_out :]
        cts = _transposed_jvp(rules, list(values), list(g))
        return tuple(zeros_like(values[k]) if cts[k] is None else cts[k] for k in floats)
    tree, arrays, static = residuals
    n_values = len(args) - len(arrays) - n_out
    values, res, g = args[:n_values], args[n_values : n_values + len(arrays)], args[n_values + len(arrays) :]
    leaves = list(static)
    for k, r in zip(arrays, res):
        leaves[k] = r
    cts = rules.bwd(list(values), optree.tree_unflatten(tree, leaves), list(g))
    return tuple(zeros_like(values[k]) if cts[k] is None else cts[k] for k in floats)


def _bwd_batch(info, dims, *args, rules, residuals, floats, n_out):
    try:
        with new_level(BatchInterpreter, info.batch_size, info.randomness) as interp:
            wrapped = [a if d is None else BatchedTensor(a, interp, d) for a, d in zip(args, dims)]
            outs = _run_bwd(*wrapped, rules=rules, residuals=residuals, floats=floats, n_out=n_out)
            outs = tuple(batch_front(o, interp, info.batch_size) for o in outs)
    except CustomDerivativeError:
        raise
    except TypeError:  # a bwd that needs per-example values: vmap's loop
        return NotImplemented
    return outs, (0,) * len(outs)


def _bwd_abstract(xp_, *avals, floats, **params):
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    return tuple(ShapeDtype(tuple(avals[k].shape), avals[k].dtype, device) for k in floats)


BWD_CALL = function_op("custom_derivative_bwd", _run_bwd, abstract_eval=_bwd_abstract, batch=_bwd_batch)


# ------------------------------------------------------------------------------ vmap of the rules


def batch_front(o, interp, size):
    """``o``, computed at the vmap level ``interp``, with the batch at 0 (broadcast if it has none)."""
    if isinstance(o, Tensor) and o._interp is interp:
        return move_to_front(o._value, o._aux)
    return broadcast_to(expand_dims(o, axis=0), (size, *shape_of(o)))


class BatchedRules:
    """``rules`` vmapped: values with their batch dimension at ``dims`` (None: unbatched); every output
    and output tangent with the batch at 0; residuals kept with their batch dimensions; cotangents
    returned with their argument's layout (summed over the batch for an unbatched argument)."""

    def __init__(self, rules, dims, size, randomness):
        self.rules, self.dims, self.size, self.randomness = rules, tuple(dims), size, randomness
        self.where, self.n_args, self.closures = rules.where, rules.n_args, ()
        self.has_jvp, self.has_vjp = rules.has_jvp, rules.has_vjp
        self.out_avals = None
        if rules.out_avals is not None:
            self.out_avals = [ShapeDtype((size, *a.shape), a.dtype, a.device) for a in rules.out_avals]

    def _wrap(self, interp, values, dims):
        return [
            v if d is None or v is None else BatchedTensor(plain(v), interp, d) for v, d in zip(values, dims)
        ]

    def _level(self):
        return new_level(BatchInterpreter, self.size, self.randomness)

    def primal(self, values):
        with self._level() as interp:
            outs = self.rules.primal(self._wrap(interp, values, self.dims))
            return [batch_front(o, interp, self.size) for o in outs]

    def jvp(self, values, tangents, then=None):
        with self._level() as interp:

            def front(outs, touts):
                outs = [batch_front(o, interp, self.size) for o in outs]
                touts = [None if t is None else batch_front(t, interp, self.size) for t in touts]
                return (outs, touts) if then is None else then(outs, touts)

            wrapped = self._wrap(interp, values, self.dims), self._wrap(interp, tangents, self.dims)
            return self.rules.jvp(*wrapped, then=front)

    def fwd(self, values):
        with self._level() as interp:
            outs, residuals = self.rules.fwd(self._wrap(interp, values, self.dims))
            outs = [batch_front(o, interp, self.size) for o in outs]
            leaves, tree = optree.tree_flatten(residuals, none_is_leaf=False)
            kept = [(move_to_front(r._value, r._aux), 0) if isinstance(r, Tensor) and r._interp is interp
                    else (r, None) for r in leaves]  # fmt: skip
        return outs, (tree, kept)

    def bwd(self, values, residuals, cotangents):
        tree, kept = residuals
        try:
            with self._level() as interp:
                res = optree.tree_unflatten(tree, self._wrap(interp, *zip(*kept)) if kept else [])
                g = self._wrap(interp, cotangents, [0] * len(cotangents))
                cts = self.rules.bwd(self._wrap(interp, values, self.dims), res, g)
                return [self._to_layout(c, interp, d) for c, d in zip(cts, self.dims)]
        except CustomDerivativeError:
            raise
        except TypeError:  # a bwd that needs per-example values (ConcretizationError, np.asarray)
            return self._bwd_loop(values, tree, kept, cotangents)

    def _to_layout(self, c, interp, dim):
        """A cotangent computed at the vmap level ``interp`` in its argument's layout."""
        if c is None:
            return None
        batched = isinstance(c, Tensor) and c._interp is interp
        if dim is None:  # an argument shared by every example: the examples' cotangents add up
            return sum_of(move_to_front(c._value, c._aux), axis=0) if batched else c * self.size
        if not batched:
            c = batch_front(c, interp, self.size)
        else:
            c = move_to_front(c._value, c._aux)
        return c if dim == 0 else moveaxis(c, 0, dim)

    def _bwd_loop(self, values, tree, kept, cotangents):
        warnings.warn(
            f"vmap: {self.where}'s bwd cannot be batched (it needs per-example values); running it in a "
            "per-example loop (slow)",
            LoopFallbackWarning,
            stacklevel=2,
        )
        per_example = []
        for i in range(self.size):
            vals = [v if d is None else take_index(v, i, axis=d) for v, d in zip(values, self.dims)]
            res = optree.tree_unflatten(tree, [r if d is None else take_index(r, i, axis=d) for r, d in kept])
            g = [None if c is None else take_index(c, i, axis=0) for c in cotangents]
            per_example.append(self.rules.bwd(vals, res, g))
        out = []
        for k, d in enumerate(self.dims[: self.n_args]):
            cs = [p[k] for p in per_example]
            if all(c is None for c in cs):
                out.append(None)
                continue
            cs = [zeros_like(take_index(values[k], 0, axis=d) if d is not None else values[k])
                  if c is None else c for c in cs]  # fmt: skip
            stacked = stack(cs)
            out.append(sum_of(stacked, axis=0) if d is None else moveaxis(stacked, 0, d) if d else stacked)
        return out


# ------------------------------------------------------------------------------ the public classes


def cell_tensors(fn, depth=2):
    """The tensors of active transforms in ``fn``'s closure cells and defaults (and, to ``depth``, in
    those of the functions found there): the closure of a function that cannot be traced."""
    found, seen = {}, set()

    def visit(f, d):
        if id(f) in seen:
            return
        seen.add(id(f))
        f = getattr(f, "__func__", f)
        cells = [c.cell_contents for c in (getattr(f, "__closure__", None) or ()) if _filled(c)]
        cells += list(getattr(f, "__defaults__", None) or ())
        if isinstance(f, functools.partial):
            cells += list(f.args) + list(f.keywords.values())
        for leaf in optree.tree_leaves(cells, none_is_leaf=False):
            if isinstance(leaf, Tensor) and leaf._interp is not None:
                found.setdefault(id(leaf), leaf)
            elif callable(leaf) and d > 0:
                visit(leaf, d - 1)

    visit(fn, depth)
    return list(found.values())


def _filled(cell):
    try:
        cell.cell_contents  # noqa: B018  (an empty cell raises)
    except ValueError:
        return False
    return True


class _CustomDerivative:
    kind = "custom_jvp"

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"pa.{self.kind}: fun must be callable, got {type(fun).__name__}")
        given = nondiff_argnums
        if isinstance(nondiff_argnums, int) and not isinstance(nondiff_argnums, bool):
            nondiff_argnums = (nondiff_argnums,)
        if not isinstance(nondiff_argnums, tuple | list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in nondiff_argnums
        ):
            nondiff_argnums = given
            raise TypeError(
                f"pa.{self.kind}({func_name(fun)}): nondiff_argnums must be a tuple of non-negative ints, "
                f"got {nondiff_argnums!r}"
            )
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(set(nondiff_argnums)))
        self.jvp = self.fwd = self.bwd = None
        self.where = f"pa.{self.kind}({func_name(fun)})"
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None

    def defjvp(self, jvp):
        """Set the JVP rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``
        (``primals`` and ``tangents``: tuples of the other arguments). Returns ``jvp`` (a decorator)."""
        if not callable(jvp):
            raise TypeError(f"{self.where}.defjvp: the rule must be callable, got {type(jvp).__name__}")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """Set the JVP rule from one function per differentiable argument, as JAX's ``defjvps``:
        ``jvps[i](tangent_i, primal_out, *primals) -> its contribution to the output tangent`` (None: the
        output does not depend on argument ``i``); the contributions add up. No ``nondiff_argnums``."""
        if self.nondiff_argnums:
            raise TypeError(f"{self.where}.defjvps: not available with nondiff_argnums; use defjvp")
        for i, f in enumerate(jvps):
            if f is not None and not callable(f):
                raise TypeError(
                    f"{self.where}.defjvps: jvps[{i}] must be callable or None, got {type(f).__name__}"
                )
        fun = self.fun

        def jvp(primals, tangents):
            if len(jvps) != len(primals):
                raise CustomDerivativeError(
                    f"{self.where}.defjvps: {len(jvps)} rule(s) for {len(primals)} differentiable argument(s)"
                )
            out = fun(*primals)
            total = None
            for f, t in zip(jvps, tangents):
                if f is None:
                    continue
                term = f(t, out, *primals)
                total = term if total is None else optree.tree_map(lambda a, b: a + b, total, term)
            if total is None:
                total = optree.tree_map(zeros_like, out)
            return out, total

        self.jvp = jvp

    def defvjp(self, fwd, bwd):
        """Set the VJP rule: ``fwd(*args) -> (output, residuals)`` and ``bwd(*nondiff_args, residuals,
        output_cotangent) -> tuple`` (one cotangent per other argument, each structured like it, None
        for zero)."""
        for name, f in (("fwd", fwd), ("bwd", bwd)):
            if not callable(f):
                raise TypeError(f"{self.where}.defvjp: {name} must be callable, got {type(f).__name__}")
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        if kwargs:
            if self._signature is None:
                raise TypeError(f"{self.where}: pass the arguments positionally")
            bound = self._signature.bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
            if bound.kwargs:
                raise TypeError(
                    f"{self.where}: keyword-only arguments are not supported; make them positional"
                )
        if not transform_active():
            return self.fun(*args)
        for i in self.nondiff_argnums:
            if i >= len(args):
                raise TypeError(
                    f"{self.where}: nondiff_argnums has {i}, but the call has {len(args)} arguments"
                )
        nondiff = {i: args[i] for i in self.nondiff_argnums}
        for i, v in nondiff.items():
            if any(isinstance(leaf, Tensor) and leaf._interp is not None
                   for leaf in optree.tree_leaves(v, none_is_leaf=False)):  # fmt: skip
                raise TypeError(
                    f"{self.where}: argument {i} is in nondiff_argnums but holds a traced value; values at "
                    "nondiff_argnums are handed to the rules as they are (static), so its derivative or "
                    "batch would be lost: pass it as an ordinary argument"
                )
        diff = tuple(a for i, a in enumerate(args) if i not in nondiff)
        flat, in_tree = optree.tree_flatten(diff, none_is_leaf=False)
        flat = [as_array(v, self.where, "its array arguments") for v in flat]
        rules = self._rules(flat, in_tree, nondiff)
        outs = bind(CUSTOM_DERIVATIVE, *flat, *rules.closures, rules=rules)
        return optree.tree_unflatten(rules.out_tree, list(outs))

    def _rules(self, flat, in_tree, nondiff):
        out_tree = []

        def flat_f(*leaves):
            full = Rules(self.fun, self.where, in_tree, nondiff, (), None, None, None, None, None)
            out = self.fun(*full.full_args(leaves))
            leaves_out, tree = optree.tree_flatten(out, none_is_leaf=False)
            out_tree.append(tree)
            return tuple(as_array(o, self.where, "its output") for o in leaves_out)

        try:
            body = trace(flat_f, flat, self.where)
        except TypeError:  # the function needs concrete values (SciPy): its closure from its cells
            body = None
        if body is not None:
            closures, out_avals, tree = body.closures, body.out_avals, out_tree[0]
        else:
            closures = cell_tensors(self.fun) + [
                t for f in (self.jvp, self.fwd, self.bwd) if f is not None for t in cell_tensors(f)
            ]
            closures = list({id(t): t for t in closures}.values())
            out_avals = tree = None  # learnt from the first run (the kernel, or a rule)
        return Rules(self.fun, self.where, in_tree, nondiff, closures, tree, out_avals,
                     self.jvp, self.fwd, self.bwd)  # fmt: skip


class custom_jvp(_CustomDerivative):
    """A function with a custom JVP rule (``jax.custom_jvp``'s API), and optionally a VJP rule too.

    Args:
        fun: the function; its positional arguments are pytrees of arrays (or static values at
            ``nondiff_argnums``).
        nondiff_argnums: positions of arguments handed to the rules as they are (not differentiated).

    Returns:
        A callable with ``fun``'s signature; ``defjvp(jvp)`` gives it its rule. Forward mode uses the
        JVP rule; reverse mode transposes it (or uses ``defvjp``'s rule if one was given); vmap batches
        the rules. A derivative with respect to a value ``fun`` closes over is refused.

    Example:
        >>> import numpy as np, polyad as pa
        >>> @pa.custom_jvp
        ... def log1pexp(x):
        ...     return pa.xp.log1p(pa.xp.exp(x))
        >>> @log1pexp.defjvp
        ... def log1pexp_jvp(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return log1pexp(x), t * (1.0 - 1.0 / (1.0 + pa.xp.exp(x)))
        >>> float(pa.grad(log1pexp)(np.float64(100.0)))
        1.0
    """

    kind = "custom_jvp"


class custom_vjp(_CustomDerivative):
    """A function with a custom VJP rule (``jax.custom_vjp``'s API), and optionally a JVP rule too.

    Args:
        fun: the function; its positional arguments are pytrees of arrays (or static values at
            ``nondiff_argnums``). It may hand values to other libraries (SciPy): it is then not traced.
        nondiff_argnums: positions of arguments handed to the rules as they are (not differentiated).

    Returns:
        A callable with ``fun``'s signature; ``defvjp(fwd, bwd)`` gives it its rule. Reverse mode uses
        it; forward mode needs ``defjvp`` too; vmap batches the rules (a per-example loop where one
        cannot be batched). A derivative with respect to a value ``fun`` closes over is refused.

    Example:
        >>> import numpy as np, polyad as pa
        >>> @pa.custom_vjp
        ... def clip_gradient(x):
        ...     return x
        >>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (pa.xp.clip(g, -1.0, 1.0),))
        >>> pa.grad(lambda x: pa.xp.sum(3.0 * clip_gradient(x)))(np.ones(2))
        array([1., 1.])
    """

    kind = "custom_vjp"


__all__ = ["CUSTOM_DERIVATIVE", "CustomDerivativeError", "custom_jvp", "custom_vjp"]

"""A body seen through a transform: what a control-flow op's rule hands the levels below in place of the
user's body, so that they see one op still (the loop of a ``jvp``, of a ``vmap``), never the body's ops.

Each takes the flat inputs of the transformed op and runs the inner body once at a new level of its
transform (``vmap``: ``BatchedBody``; ``jvp``: ``DualBody``), returning the flat outputs underneath;
``recorded`` runs a body once at a new reverse level and returns its outputs with the pullback (a loop's
turn). Every one has the ``Body`` protocol: ``body(*inputs) -> list``, ``out_avals``, ``where``,
``closures`` (empty: the transformed op passes its closure explicitly) and ``graph`` (None: not traced).
"""

import optree

from polyad.core import Op, Tensor, new_level, plain
from polyad.core.avals import ShapeDtype, is_floating, shape_of
from polyad.ops.base import broadcast_to, expand_dims, move_to_front, moveaxis, stack
from polyad.ops.fills import zeros_like
from polyad.transforms.batching import BatchedTensor, BatchInterpreter
from polyad.transforms.forward import DualTensor, ForwardInterpreter
from polyad.transforms.reverse import ReverseInterpreter


class BatchedBody:
    """``body`` vmapped: inputs with the batch dimension ``dims[i]`` (None: unbatched), every output with
    the batch at 0 (an output that does not depend on the batch is broadcast along it)."""

    closures = ()
    graph = None

    def __init__(self, body, dims, size, randomness):
        self.body, self.dims, self.size, self.randomness = body, tuple(dims), size, randomness
        self.out_avals = [
            ShapeDtype((size, *a.shape), a.dtype, a.device) if isinstance(a, ShapeDtype) else a
            for a in body.out_avals
        ]
        self.where = body.where
        self.draws_random = getattr(body, "draws_random", False)

    def __call__(self, *args):
        with new_level(BatchInterpreter, self.size, self.randomness) as interp:
            wrapped = [v if d is None else BatchedTensor(v, interp, d) for v, d in zip(args, self.dims)]
            outs = self.body(*wrapped)
            return [_batch_front(o, interp, self.size) for o in outs]


def function_op(name, run, **rules):
    """A Python function run as one op (a user's rule, a loop's backward sweep): the kernel runs ``run`` on
    backend arrays and hands back raw arrays (what ``run`` makes inside a transform comes back as
    FreshTensors); a transform with no rule of its own among ``rules`` runs ``run`` on its tensors.
    One op where the function's own ops would otherwise be unrolled into every transform's trace.

    Args:
        name: the op's name.
        run: ``run(*args, **params)``, a tuple of arrays.
        **rules: ``Op``'s rules and markers (``abstract_eval``, ``batch``, ``jvp``, ``vjp``).

    Returns:
        The ``Op`` (``multiple_results``: ``bind`` returns a tuple).

    Example:
        >>> import polyad as pa
        >>> twice = function_op("doc::twice", lambda x: (2 * x,), register=False,
        ...                     abstract_eval=lambda xp, x: (x,))
        >>> [float(v) for v in twice.bind(pa.xp.ones(2))[0]]
        [2.0, 2.0]
    """
    return Op(
        name,
        lambda xp_, *args, **params: tuple(plain(o) for o in run(*args, **params)),
        multiple_results=True,
        higher_order=run,
        **rules,
    )


def _batch_front(o, interp, size):
    if isinstance(o, Tensor) and o._interp is interp:
        return move_to_front(o._value, o._aux)
    return broadcast_to(expand_dims(o, axis=0), (size, *shape_of(o)))


class DualBody:
    """``body`` under jvp. Inputs: the primals, then a tangent for each input at ``tangent_of`` (the
    positions whose tangents are passed); outputs: the primals, then a tangent for each output at
    ``out_tangents`` (zeros where the body's tangent is zero, so the loop's carry keeps its structure)."""

    closures = ()
    graph = None

    def __init__(self, body, n_inputs, tangent_of, out_tangents):
        self.body, self.n_inputs, self.tangent_of, self.out_tangents = (
            body,
            n_inputs,
            tangent_of,
            out_tangents,
        )
        avals = body.out_avals
        self.out_avals = list(avals) + [avals[k] for k in out_tangents]
        self.where = body.where
        self.draws_random = getattr(body, "draws_random", False)

    def __call__(self, *args):
        primals = args[: self.n_inputs]
        tangents = dict(zip(self.tangent_of, args[self.n_inputs :]))
        with new_level(ForwardInterpreter) as interp:
            duals = [DualTensor(p, interp, tangents.get(i)) for i, p in enumerate(primals)]
            outs = self.body(*duals)
            values, tans = [], []
            for o in outs:
                if isinstance(o, Tensor) and o._interp is interp:
                    values.append(o._value)
                    tans.append(o._aux)
                else:
                    values.append(o)
                    tans.append(None)
        return values + [zeros_like(values[k]) if tans[k] is None else tans[k] for k in self.out_tangents]


def vmapped(f, tree):
    """``f`` (a function of one pytree of structure ``tree``) mapped over the leading axis of every leaf:
    a vmap with every input batched at 0 and every output returned with its batch at 0."""

    def batched(arg):
        leaves = optree.tree_leaves(arg, none_is_leaf=False)
        size = shape_of(leaves[0])[0]
        with new_level(BatchInterpreter, size, "error") as interp:
            out = f(optree.tree_unflatten(tree, [BatchedTensor(x, interp, 0) for x in leaves]))
            return optree.tree_map(lambda o: _batch_front(o, interp, size), out, none_is_leaf=False)

    return batched


def step_pullback(body, args):
    """``(outputs, pullback)`` of one step, as ``recorded``; a compiled body (``pa.jit``) given backend
    arrays runs its compiled step and pullback instead (the pullback runs the step again, compiled,
    when it is called: a loop's turn is one call)."""
    compiled = getattr(body, "compiled_pullback", None)
    if compiled is not None and all(not isinstance(a, Tensor) for a in args):

        def pullback(cotangents):
            return compiled(list(args), cotangents)

        return None, pullback
    return recorded(body, args)


def recorded(body, args, keep=False):
    """``(outputs, pullback)``: ``body(*args)`` run once at a new reverse level, every floating input a
    leaf; ``pullback(cotangents)`` (one per output, None for none) returns one cotangent per input (None
    where it has none) and frees the recording, unless ``keep``: a recording kept in an op's residuals,
    whose pullback runs as often as the enclosing ``vjp_fn`` is called."""
    with new_level(ReverseInterpreter) as interp:
        leaves = [interp.new_leaf(a) if _differentiable(a) else a for a in args]
        ids = [leaf._aux if isinstance(leaf, Tensor) and leaf._interp is interp else None for leaf in leaves]
        outs = body(*leaves)
        out_ids = [o._aux if isinstance(o, Tensor) and o._interp is interp else None for o in outs]
        values = [o._value if isinstance(o, Tensor) and o._interp is interp else o for o in outs]

    def pullback(cotangents, last=False):  # last: the final call of a kept recording, which it frees
        seeds = {}
        for i, g in zip(out_ids, cotangents):
            if i is not None and g is not None:
                seeds[i] = g if i not in seeds else seeds[i] + g
        ct = interp.backward(seeds, consume=not keep or last)
        return [None if i is None else ct.get(i) for i in ids]

    return values, pullback


def _differentiable(a):
    return hasattr(a, "dtype") and hasattr(a, "shape") and is_floating(a)


def with_batch_at(value, dim, size, axis=0):
    """``value`` with its batch dimension ``dim`` moved to ``axis`` (broadcast along a new one where it
    has none, ``dim`` None): how a rule hands a batched backward pass its inputs, all batched."""
    if dim is None:
        value = expand_dims(value, axis=axis)
        shape = list(shape_of(value))
        shape[axis] = size
        return broadcast_to(value, tuple(shape))
    return moveaxis(value, dim, axis)


def each_example(run, size, groups, dims):
    """``run(*groups)`` once per example, its outputs stacked at 0: ``groups`` are lists of plain arrays,
    each with the batch at ``dims`` (0, or None: shared by every example). vmap's per-example loop, for
    a kernel handed a whole batch its function cannot take at once."""
    outs = [
        run(
            *(
                [a if d is None else a[i, ...] for a, d in zip(g, gd, strict=True)]
                for g, gd in zip(groups, dims)
            )
        )
        for i in range(size)
    ]
    return [stack([plain(o) for o in column]) for column in zip(*outs, strict=True)]

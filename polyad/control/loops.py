"""Loops as ops: ``scan``, ``fori_loop`` and ``map``, with JAX's ``lax`` signatures and semantics.

Outside every transform a loop is the Python loop it describes, run on the backend's arrays with nothing
recorded: the body is called once per step. Under a transform (or ``pa.jit``) the body is traced once,
abstractly, to find what it closes over (``polyad.control.closure``), and the loop is one op, ``SCAN``
(``polyad.control.scan``), whose rules transform it as a whole: no transform unrolls it into its caller,
and reverse mode stores what ``checkpoints=`` says.
"""

import optree

import polyad.config as config
import polyad.control.schedules as schedules
import polyad.core.dispatch as dispatch
import polyad.xp as xp
from polyad.control.bodies import vmapped
from polyad.control.closure import LOOP_ADVICE, abstract_of, owned, owned_next, trace
from polyad.control.scan import SCAN
from polyad.core import bind, transform_active
from polyad.core.avals import ShapeDtype, dtype_name, is_array, ndim_of, shape_of

CHECKPOINTS = (
    "None (store every step), an int >= 1 (the most carries stored: the binomial schedule), 'sqrt' or 'auto'"
)


def func_name(f):
    return getattr(f, "__name__", None) or type(f).__name__


def check_checkpoints(checkpoints, max_memory, where):
    """Validate ``checkpoints=`` and ``max_memory=`` of a loop (``where`` names the call)."""
    ok = isinstance(checkpoints, int) and not isinstance(checkpoints, bool) and checkpoints >= 1
    ok = ok or checkpoints is None or (isinstance(checkpoints, str) and checkpoints in ("sqrt", "auto"))
    if not ok:
        raise ValueError(f"{where}: checkpoints must be {CHECKPOINTS}, got {checkpoints!r}")
    if max_memory is not None:
        if checkpoints != "auto":
            raise ValueError(
                f"{where}: max_memory is the budget of checkpoints='auto'; got checkpoints={checkpoints!r}"
            )
        try:
            schedules.parse_memory(max_memory)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: {e}") from None


def as_array(v, where, what, like=None):
    """A leaf of a loop's carry or xs as an array: Python numbers become arrays (of ``like``'s library and
    device, an array among their siblings, else of the default backend), arrays stay."""
    if is_array(v) or dispatch.backend_of_array(v) is not None:
        return v
    if isinstance(v, bool | int | float | complex):
        device = getattr(like, "device", None)  # a tracer's too (pa.jit), whose value is abstract
        if device is None:
            return xp.asarray(v)
        # on the arrays' device: a counter (x, 0) over a CuPy x with NumPy the default backend stayed a
        # NumPy array, and the body's x * n mixed two libraries
        backend = dispatch.backend_of_device(device)
        return backend.xp.asarray(v, device=dispatch.placement(backend, device))
    raise TypeError(f"{where}: {what} must hold arrays or Python numbers, got a {type(v).__name__}")


def as_arrays(leaves, where, what, siblings=()):
    """``as_array`` of each of ``leaves``, Python numbers placed with the first array among ``leaves``
    and ``siblings``."""
    like = next((v for v in (*leaves, *siblings) if not isinstance(v, bool | int | float | complex)), None)
    return [as_array(v, where, what, like) for v in leaves]


def check_carry(leaves, init, where, what="the body", of="init", trees=None, noun="a carry", error=TypeError):
    """What a function returned (arrays, or their abstract values when traced) against a reference of
    the same kind: the same structure (``trees``, a pair: the returned pytree structure and the
    reference's; None where the caller checks it) and, per array leaf, the same shape and dtype. A loop's
    carry against its initial one (checked at each eager step and once for a traced body, whose compiled
    shapes are fixed), a branch's output against the other branches'. A Python number is taken in the
    reference's dtype, as under a transform; eagerly a changed carry only ran on before (issue 33).

    Args:
        leaves: the returned leaves; init: the reference's, in the same order.
        where: the construct, named in the message ("pa.scan(step)", "pa.cond").
        what, of: how the message names the function that returned ``leaves`` and the reference.
        trees: ``(returned structure, reference structure)`` to compare first, or None.
        noun: what is compared ("a carry", "an output").
        error: the exception class raised (a ``TypeError``'s subclass: a solver's ``ImplicitError``).

    Raises:
        TypeError: (``error``) naming ``where``, what differs (structure, or a leaf's shape or dtype) and
            both values.

    Example:
        >>> import numpy as np
        >>> check_carry([np.zeros(2)], [np.zeros(3)], "pa.scan(step)")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: pa.scan(step): the body must return a carry ...; leaf 0 is (3,) float64 in init and ...
    """
    if trees is not None and trees[0] != trees[1]:
        raise error(
            f"{where}: {what} must return {noun} of the same structure as {of}; {of} has {trees[1]} and "
            f"{what} returned {trees[0]}"
        )
    for k, (c, i) in enumerate(zip(leaves, init)):
        if not hasattr(c, "dtype") or not hasattr(i, "dtype"):  # a Python number (eager fori_loop's init)
            continue
        if tuple(shape_of(c)) != tuple(shape_of(i)) or dtype_name(c.dtype) != dtype_name(i.dtype):
            raise error(
                f"{where}: {what} must return {noun} of the same shapes and dtypes as {of}; leaf {k} is "
                f"{tuple(shape_of(i))} {dtype_name(i.dtype)} in {of} and {tuple(shape_of(c))} "
                f"{dtype_name(c.dtype)} in {what} (cast it with xp.astype, broadcast it with "
                "xp.broadcast_to)"
            )


def scan(f, init, xs=None, length=None, *, reverse=False, checkpoints=None, max_memory=None):
    """Loop ``f`` over the leading axis of ``xs``, carrying a state: ``carry, y = f(carry, x)`` for each
    ``x``, as ``jax.lax.scan``.

    Args:
        f: ``f(carry, x) -> (carry, y)``; the carry keeps its structure, shapes and dtypes; ``y`` may be
            None. It may close over any value, differentiated or not.
        init: the initial carry (a pytree of arrays).
        xs: a pytree of arrays with a common leading length, or None (then ``length`` is needed).
        length: the number of steps (checked against ``xs``).
        reverse: run from the last ``x`` to the first (``ys`` keep the order of ``xs``).
        checkpoints: what reverse mode stores: None every step's recording; an int ``s``: at most ``s``
            carries, with the binomial (Revolve) schedule, the fewest recomputations there are; "sqrt":
            about ``sqrt(2 length)`` carries and at most two sweeps; "auto": as many carries as
            ``max_memory`` holds.
        max_memory: the budget of "auto" (bytes, or a string such as "400MiB"); default
            ``pa.config.max_memory``.

    Returns:
        ``(carry, ys)``: the final carry, and the ``y`` of each step stacked along a new leading axis.

    Example:
        >>> import numpy as np, polyad as pa
        >>> def run(a):
        ...     carry, ys = pa.scan(lambda c, x: (a * c + x, c), 0.5, np.array([0.1, -0.3, 0.2]))
        ...     return carry + pa.xp.sum(ys)
        >>> round(float(run(0.7)), 12)  # carry 0.2105, ys 0.5 + 0.45 + 0.015
        1.1755
        >>> round(float(pa.grad(run)(np.float64(0.7))), 12)  # 1.5 a**2 + 1.2 a + 0.3
        1.875
    """
    where = f"pa.scan({func_name(f)})"
    if not callable(f):
        raise TypeError(f"{where}: f must be callable, got {type(f).__name__}")
    return _scan(f, init, xs, length, reverse, checkpoints, max_memory, where, "the step's slice of xs")


def _scan(f, init, xs, length, reverse, checkpoints, max_memory, where, x_name):
    """``scan``'s work; ``where`` names the call in messages (``pa.fori_loop(body)``, ``pa.map(f)``), and
    ``x_name`` what a step's x is (for a ``ConcretizationError`` naming it)."""
    if not isinstance(reverse, bool):
        raise TypeError(f"{where}: reverse must be True or False, got {reverse!r}")
    check_checkpoints(checkpoints, max_memory, where)
    init_flat, init_tree = optree.tree_flatten(init, none_is_leaf=False)
    xs_flat, xs_tree = optree.tree_flatten(xs, none_is_leaf=False)
    init_flat = as_arrays(init_flat, where, "init", xs_flat)
    xs_flat = as_arrays(xs_flat, where, "xs", init_flat)
    n = _length(xs_flat, length, where)
    if not transform_active():
        return _eager(f, init_flat, init_tree, xs_flat, xs_tree, n, reverse, where)
    x_avals = [ShapeDtype(tuple(shape_of(x))[1:], x.dtype, abstract_of(x).device) for x in xs_flat]
    y_tree = []
    step = _step(f, init_flat, init_tree, xs_tree, y_tree, where)
    names = carry_names(len(init_flat)) + [x_name] * len(xs_flat)
    body = trace(step, (*init_flat, *x_avals), where, names, LOOP_ADVICE)
    check_carry(body.out_avals[: len(init_flat)], init_flat, where)
    if checkpoints == "auto" and max_memory is None:
        max_memory = config.max_memory
    outs = bind(
        SCAN,
        *init_flat,
        *xs_flat,
        *body.closures,
        body=body,
        length=n,
        reverse=reverse,
        n_carry=len(init_flat),
        n_xs=len(xs_flat),
        checkpoints=checkpoints,
        max_memory=max_memory,
    )
    nc = len(init_flat)
    return optree.tree_unflatten(init_tree, list(outs[:nc])), optree.tree_unflatten(
        y_tree[0], list(outs[nc:])
    )


def carry_names(n):
    """How a ``ConcretizationError`` names each of a loop carry's ``n`` leaves."""
    return ["the loop carry"] if n == 1 else [f"leaf {k} of the loop carry" for k in range(n)]


def _length(xs_flat, length, where):
    lengths = set()
    for x in xs_flat:
        if ndim_of(x) == 0:
            raise ValueError(f"{where}: every leaf of xs needs a leading axis to scan over; got a 0-d array")
        lengths.add(shape_of(x)[0])
    if len(lengths) > 1:
        raise ValueError(f"{where}: the leaves of xs have different leading lengths {sorted(lengths)}")
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise TypeError(f"{where}: length must be an int >= 0, got {length!r}")
        if lengths and lengths != {length}:
            raise ValueError(f"{where}: length={length} but xs have leading length {lengths.pop()}")
        return length
    if not lengths:
        raise ValueError(f"{where}: with xs=None, pass length= (the number of steps)")
    return lengths.pop()


def _step(f, init_flat, init_tree, xs_tree, y_tree, where):
    """The body as a function of flat leaves (carry, then x) returning flat leaves (carry, then y);
    ``y_tree`` receives the structure of ``y``."""
    nc = len(init_flat)
    dtypes = [i.dtype for i in init_flat]

    def step(*leaves):
        out = f(
            optree.tree_unflatten(init_tree, list(leaves[:nc])),
            optree.tree_unflatten(xs_tree, list(leaves[nc:])),
        )
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise TypeError(f"{where}: the body must return a pair (carry, y), got {type(out).__name__}")
        c_flat, c_tree = optree.tree_flatten(out[0], none_is_leaf=False)
        check_carry([], [], where, trees=(c_tree, init_tree))  # shapes: on the traced body's avals
        y_flat, tree = optree.tree_flatten(out[1], none_is_leaf=False)
        if not y_tree:
            y_tree.append(tree)
        c_flat = [
            c if not isinstance(c, bool | int | float | complex) else xp.asarray(c, dtype=d)
            for c, d in zip(c_flat, dtypes)
        ]
        y_flat = [as_array(y, where, "y") for y in y_flat]
        return (*c_flat, *y_flat)

    return step


def _eager(f, init_flat, init_tree, xs_flat, xs_tree, n, reverse, where):
    """The loop outside every transform: the Python loop on the backend's arrays."""
    # the body's own carry and x each step: a write into them reaches neither the caller's arrays nor a y
    # kept from an earlier step (nothing is traced here to tell whether the body writes)
    carry = owned(init_flat)
    ys = []
    for i in range(n):
        t = n - 1 - i if reverse else i
        x = optree.tree_unflatten(xs_tree, owned([x[t, ...] for x in xs_flat]))
        carry, y = _checked(f(optree.tree_unflatten(init_tree, carry), x), init_tree, where)
        y_leaves = optree.tree_leaves(y, none_is_leaf=False)
        carry = optree.tree_leaves(carry, none_is_leaf=False)
        check_carry(carry, init_flat, where)
        carry = owned_next(carry, [*y_leaves, *init_flat])
        ys.append(y)
    carry = optree.tree_unflatten(init_tree, carry)
    if reverse:
        ys.reverse()
    if not ys:  # the structure and shapes of y from an abstract run of the body
        x_avals = [ShapeDtype(tuple(shape_of(x))[1:], x.dtype) for x in xs_flat]
        y_tree = []
        step = _step(f, init_flat, init_tree, xs_tree, y_tree, where)
        body = trace(step, (*init_flat, *x_avals), where, advice=LOOP_ADVICE)
        avals = body.out_avals[len(init_flat) :]
        return carry, optree.tree_unflatten(
            y_tree[0], [xp.zeros((0, *a.shape), dtype=a.dtype) for a in avals]
        )
    leaves = [optree.tree_flatten(y, none_is_leaf=False) for y in ys]
    y_tree = leaves[0][1]
    stacked = [xp.stack([xp.asarray(l[0][k]) for l in leaves]) for k in range(y_tree.num_leaves)]
    return carry, optree.tree_unflatten(y_tree, stacked)


def _checked(out, init_tree, where):
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise TypeError(f"{where}: the body must return a pair (carry, y), got {type(out).__name__}")
    check_carry([], [], where, trees=(optree.tree_structure(out[0], none_is_leaf=False), init_tree))
    return out


def fori_loop(lower, upper, body, init, *, checkpoints=None, max_memory=None):
    """``val = body(i, val)`` for ``i`` in ``range(lower, upper)``, as ``jax.lax.fori_loop``.

    Args:
        lower, upper: the range, Python ints.
        body: ``body(i, val) -> val``; ``i`` is a 0-d integer array (eagerly too).
        init: the initial value (a pytree of arrays).
        checkpoints, max_memory: as ``scan``'s.

    Returns:
        The final value.

    Example:
        >>> import polyad as pa
        >>> int(pa.fori_loop(0, 4, lambda i, v: v + i, 0))
        6
    """
    where = f"pa.fori_loop({func_name(body)})"
    for name, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{where}: {name} must be a Python int, got {v!r}")
    if not callable(body):
        raise TypeError(f"{where}: body must be callable, got {type(body).__name__}")
    check_checkpoints(checkpoints, max_memory, where)  # eagerly too: the call would fail under grad
    if not transform_active():  # i a 0-d integer array, as under a transform (and in JAX)
        leaves, tree = optree.tree_flatten(init, none_is_leaf=False)
        val = optree.tree_unflatten(tree, owned(leaves))  # the body's own, as scan's
        for i in range(lower, upper):
            out, out_tree = optree.tree_flatten(body(xp.asarray(i), val), none_is_leaf=False)
            check_carry(out, leaves, where, trees=(out_tree, tree))
            val = optree.tree_unflatten(tree, owned_next(out, leaves))
        return val
    n = max(upper - lower, 0)
    step = _fori_step(body)
    device = next((v.device for v in optree.tree_leaves(init) if hasattr(v, "shape")), None)  # the carry's
    index = xp.arange(lower, lower + n, device=device)
    carry, _ = _scan(step, init, index, None, False, checkpoints, max_memory, where, "the loop index i")
    return carry


def _fori_step(body):
    def step(val, i):
        return body(i, val), None

    step.__name__ = func_name(body)
    return step


def map(f, xs, *, batch_size=None):  # noqa: A001  (jax.lax.map's name)
    """``f`` applied to each slice of ``xs`` along its leading axis, one after the other (a loop, not
    vmap's batch: the memory of one application at a time), as ``jax.lax.map``.

    Args:
        f: a function of one slice (a pytree of arrays).
        xs: a pytree of arrays with a common leading length.
        batch_size: apply ``f`` to this many slices at once (vmapped), in a loop over the batches.

    Returns:
        The results stacked along a new leading axis.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.map(lambda x: x @ x, np.arange(6.0).reshape(3, 2))
        array([ 1., 13., 41.])
    """
    where = f"pa.map({func_name(f)})"
    if not callable(f):
        raise TypeError(f"{where}: f must be callable, got {type(f).__name__}")
    if batch_size is not None:
        return _batched_map(f, xs, batch_size, where)

    def step(carry, x):
        return carry, f(x)

    step.__name__ = func_name(f)
    return _scan(step, (), xs, None, False, None, None, where, "the slice of xs")[1]


def _batched_map(f, xs, batch_size, where):
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise TypeError(f"{where}: batch_size must be an int >= 1, got {batch_size!r}")
    flat, tree = optree.tree_flatten(xs, none_is_leaf=False)
    n = _length(flat, None, where)
    full = n // batch_size * batch_size
    g = vmapped(f, tree)
    parts = []
    if full:
        blocks = [xp.reshape(x[:full, ...], (n // batch_size, batch_size, *shape_of(x)[1:])) for x in flat]
        ys = map(lambda b: g(b), optree.tree_unflatten(tree, blocks))
        parts.append(optree.tree_map(lambda y: xp.reshape(y, (full, *shape_of(y)[2:])), ys))
    if full < n:
        parts.append(g(optree.tree_unflatten(tree, [x[full:, ...] for x in flat])))
    if len(parts) == 1:
        return parts[0]
    return optree.tree_map(lambda a, b: xp.concat([a, b]), parts[0], parts[1])

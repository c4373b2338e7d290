"""What every public transform shares: argument checks (callables, argnums, has_aux, input arrays), pytree
helpers (flattening, readable leaf names) and ``func`` seen as a function of its differentiated arguments.

Errors name the transform, the function and the offending leaf ("argument 1['w']"), so that a wrong call
is fixed from the message alone.
"""

import optree

import polyad.core.dispatch as dispatch
from polyad.core import Tensor
from polyad.core import plain as _plain
from polyad.core.avals import dtype_name, is_complex, is_floating
from polyad.core.tensor import check_lost, numbers_alive, reconnect
from polyad.ops.dtypes import astype
from polyad.ops.elementwise import real
from polyad.ops.manipulation import moveaxis
from polyad.transforms.batching import BatchedTensor


def is_array(x):
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def is_dim(d):
    """An axis number (an int, not a bool)."""
    return isinstance(d, int) and not isinstance(d, bool)


def func_name(func):
    return getattr(func, "__name__", type(func).__name__)


def check_callable(func, transform):
    if not callable(func):
        raise TypeError(f"{transform}(func, ...): func must be callable, got {type(func).__name__}")


def check_has_aux(has_aux, transform, name="has_aux"):
    """``has_aux`` (or the flag ``name``) is True or False."""
    if not isinstance(has_aux, bool):
        raise TypeError(f"{transform}({name}={has_aux!r}): {name} must be True or False")


def check_argnums(argnums, transform):
    """``argnums`` is an int or a non-empty tuple (or list) of ints; returns them as a tuple. Their range
    is checked at each call, when the number of arguments is known (``_normalize_argnums``)."""
    nums = (argnums,) if is_dim(argnums) else tuple(argnums) if isinstance(argnums, tuple | list) else None
    if nums is None or not nums or not all(is_dim(a) for a in nums):
        raise TypeError(
            f"{transform}(argnums={argnums!r}): argnums must be an int or a non-empty tuple of ints"
        )
    return nums


def check_randomness(randomness, transform):
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"{transform}(randomness={randomness!r}): must be 'error', 'different' or 'same'")


def flatten(tree):
    return optree.tree_flatten(tree, none_is_leaf=False)


def _normalize_argnums(argnums, nargs, transform):
    """``(single, nums)``: whether ``argnums`` is one int, and the argument positions it names (>= 0)."""
    single = is_dim(argnums)
    nums = check_argnums(argnums, transform)
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


def partial_of(func, args, kwargs, nums):
    """``func`` as a function of the arguments at ``nums`` only (the others fixed)."""

    def partial_func(*diff):
        full = list(args)
        for n, d in zip(nums, diff):
            full[n] = d
        return func(*full, **kwargs)

    partial_func.__name__ = func_name(func)
    return partial_func


def split_aux(out, has_aux, transform):
    """``(output, aux)`` of ``func``'s result; aux is None without ``has_aux``."""
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        got = f"a tuple of {len(out)}" if isinstance(out, tuple) else f"a {type(out).__name__}"
        raise TypeError(
            f"{transform} with has_aux=True: func must return a pair (output, aux), got {got}; "
            "pass has_aux=False if func returns only its output"
        )
    return out


def reconnect_tree(out):
    """A function's output with each number polyad handed out (``float(t)``, ``t.item()``: scikit-learn's
    metrics end in ``return float(...)``) turned back into its tensor, so its derivative is kept."""
    if not numbers_alive():
        return out
    return optree.tree_map(reconnect, out, none_is_leaf=True)


def lower_tree(tree, interp):
    """Replace tensors of ``interp``'s level in ``tree`` by the values underneath (for aux outputs)."""

    def low(x):
        if isinstance(x, Tensor) and x._interp is interp:
            if isinstance(x, BatchedTensor):
                return _plain(moveaxis(x._value, x._aux, 0))
            return _plain(x._value)
        return _plain(x)

    return optree.tree_map(low, tree)


def leaf_name(tree, i, root, nums=None):
    """A readable name for leaf ``i`` of ``tree`` (a pytree or its PyTreeSpec): "primals[0]['w']",
    "argument 1[0]". For error messages only. ``nums`` maps the first path index to an argnum."""
    if isinstance(tree, optree.PyTreeSpec):
        path = tree.paths()[i]
    else:
        path = optree.tree_paths(tree, none_is_leaf=False)[i]
    if nums is not None:
        root, path = f"argument {nums[path[0]]}", path[1:]
    return root + "".join(f"[{k!r}]" for k in path)


def numbers_as_arrays(leaves):
    """``leaves`` (a list, changed in place and returned) with each Python float (not a number polyad
    handed out for a live tensor: that is its tensor) as a 0-d float64 array of the default backend, as
    JAX accepts one where an array is expected: ``pa.grad(f)(0.8)``."""
    for i, x in enumerate(leaves):
        if type(x) is float:
            t = reconnect(x)
            if t is x:
                xp = dispatch.default_backend().xp
                t = xp.asarray(x, dtype=xp.float64)
            leaves[i] = t
    return leaves


def check_inputs(leaves, tree, what, root, nums=None):
    """Every leaf is a floating (real or complex) array, a Python float becoming a 0-d array
    (``numbers_as_arrays``: ``leaves`` changes in place); errors name the offending leaf."""
    numbers_as_arrays(leaves)
    for i, x in enumerate(leaves):
        if not is_array(x):
            hint = (
                f"; write {float(x)!r} (a float) or pa.xp.asarray({x!r}, dtype=pa.xp.float64): an integer "
                "carries no derivative"
                if isinstance(x, int)
                else "; make one with pa.xp.asarray"
            )
            raise TypeError(
                f"{what}: {leaf_name(tree, i, root, nums)} must be an array (numpy, cupy or "
                f"array_api_strict) or a Python float, got {type(x).__name__}{hint}"
            )
        if not is_floating(x):
            raise TypeError(
                f"{what}: {leaf_name(tree, i, root, nums)} must have a floating dtype to be "
                f"differentiated, got {dtype_name(x.dtype)}"
            )


def diff_args(transform, func, argnums, args):
    """What a transform with ``argnums`` differentiates: ``(what, single, nums, diff)``, with ``what`` the
    call for error messages and ``diff`` the tuple of the differentiated arguments."""
    single, nums = _normalize_argnums(argnums, len(args), transform)
    return f"{transform}({func_name(func)}, argnums={argnums!r})", single, nums, tuple(args[n] for n in nums)


def check_structure(tree, ref_tree, what, noun, ref):
    """(Co)tangents ``tree`` have the structure ``ref_tree`` of what they belong to."""
    if tree != ref_tree:
        raise ValueError(f"{what}: {noun}s must have the structure of the {ref}, {ref_tree}, got {tree}")


def check_like(x, ref, what, noun, ref_noun, tree, i, root):
    """``x``, the (co)tangent of leaf ``i`` of ``tree``, is an array of ``ref``'s shape. The leaf is named
    only for an error: naming walks the tree."""
    if not is_array(x):
        raise TypeError(
            f"{what}: the {noun} of {leaf_name(tree, i, root)} must be an array, got {type(x).__name__}"
        )
    if tuple(x.shape) != tuple(ref.shape):
        raise ValueError(
            f"{what}: the {noun} of {leaf_name(tree, i, root)} has shape {tuple(x.shape)}, expected "
            f"{ref_noun} shape {tuple(ref.shape)}"
        )


def check_real_floating(leaves, tree, what, root, nums=None):
    """Jacobians (jacrev, jacfwd, hessian) take and give real floating arrays unless told how to treat
    complex ones (``holomorphic``, ``complex_layout``); errors name the leaf of ``tree`` ("argument 0",
    "output[1]": see ``leaf_name``)."""
    kind = "output" if root == "output" else "input"
    for i, x in enumerate(leaves):
        if not is_array(x):
            continue
        if is_complex(x):
            raise TypeError(
                f"{what}: {leaf_name(tree, i, root, nums)} is complex ({dtype_name(x.dtype)}); pass "
                "holomorphic=True for the complex Jacobian of a holomorphic function (as JAX), or "
                "complex_layout='real' or 'wirtinger' for any function of complex values"
            )
        if not is_floating(x):
            raise TypeError(
                f"{what}: {leaf_name(tree, i, root, nums)} has dtype {dtype_name(x.dtype)}; jacrev, jacfwd "
                f"and hessian differentiate real floating {kind}s only (integer and boolean values carry no "
                "derivative)"
                + ("; return such outputs as aux, with has_aux=True" if kind == "output" else "")
            )


def in_dtype_of(d, ref):
    """Derivative ``d`` in the dtype of ``ref``, the primal it belongs to, as JAX and torch.func give it: the
    cotangent of an input has the input's dtype, the tangent of an output the output's (a float32 input
    promoted to float64 inside gets a float32 gradient). A complex derivative of a real primal is its
    real part (PyTorch's convention)."""
    if d.dtype == ref.dtype:
        return d
    if is_complex(d) and not is_complex(ref):
        d = real(d)
    return d if d.dtype == ref.dtype else astype(d, ref.dtype)


def check_tangents(p_flat, p_tree, t_flat, t_tree, what, root):
    """Tangents match their primals in structure, shape and dtype; errors name the leaf."""
    check_structure(t_tree, p_tree, what, "tangent", "primals")
    numbers_as_arrays(t_flat)
    for i, (p, t) in enumerate(zip(p_flat, t_flat)):
        check_like(t, p, what, "tangent", "its primal's", p_tree, i, root)
        if t.dtype != p.dtype:
            raise TypeError(
                f"{what}: the tangent of {leaf_name(p_tree, i, root)} has dtype {dtype_name(t.dtype)}, "
                f"expected its primal's dtype {dtype_name(p.dtype)}"
            )


def level_outputs(out, interp, has_aux, what):
    """``(out, out_flat, out_tree, aux)`` of a function run at ``interp``'s level: the aux split off and
    lowered to the values underneath, the numbers polyad handed out reconnected to their tensors, and a
    derivative that may have been lost through one of them warned about (``check_lost``)."""
    out, aux = split_aux(out, has_aux, what)
    out = reconnect_tree(out)
    out_flat, out_tree = flatten(out)
    if interp.numbers:
        check_lost(interp, what, any(isinstance(o, Tensor) and o._interp is interp for o in out_flat))
    if has_aux:
        aux = lower_tree(aux, interp)
    return out, out_flat, out_tree, aux

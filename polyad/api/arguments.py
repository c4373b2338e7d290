"""What every public transform shares: argument checks (callables, argnums, has_aux, input arrays), pytree
helpers (flattening, readable leaf names) and ``func`` seen as a function of its differentiated arguments.

Errors name the transform, the function and the offending leaf ("argument 1['w']"), so that a wrong call
is fixed from the message alone.
"""

import optree

from polyad import dispatch
from polyad.batching import BatchedTensor
from polyad.core import Tensor
from polyad.core import plain as _plain
from polyad.ops.common import is_floating
from polyad.ops.manipulation import moveaxis


def _is_array(x):
    return isinstance(x, Tensor) or dispatch.backend_of_array(x) is not None


def _is_dim(d):
    """An axis number (an int, not a bool)."""
    return isinstance(d, int) and not isinstance(d, bool)


def _fname(func):
    return getattr(func, "__name__", type(func).__name__)


def _check_callable(func, transform):
    if not callable(func):
        raise TypeError(f"{transform}(func, ...): func must be callable, got {type(func).__name__}")


def _check_has_aux(has_aux, transform):
    if not isinstance(has_aux, bool):
        raise TypeError(f"{transform}(has_aux={has_aux!r}): has_aux must be True or False")


def _flatten(tree):
    return optree.tree_flatten(tree, none_is_leaf=False)


def _normalize_argnums(argnums, nargs, transform):
    """``(single, nums)``: whether ``argnums`` is one int, and the argument positions it names (>= 0)."""
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums) if isinstance(argnums, tuple | list) else None
    if nums is None or not nums or not all(_is_dim(a) for a in nums):
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


def _partial(func, args, kwargs, nums):
    """``func`` as a function of the arguments at ``nums`` only (the others fixed)."""

    def partial_func(*diff):
        full = list(args)
        for n, d in zip(nums, diff):
            full[n] = d
        return func(*full, **kwargs)

    partial_func.__name__ = _fname(func)
    return partial_func


def _split_aux(out, has_aux, transform):
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


def _lower_tree(tree, interp):
    """Replace tensors of ``interp``'s level in ``tree`` by the values underneath (for aux outputs)."""

    def low(x):
        if isinstance(x, Tensor) and x._interp is interp:
            if isinstance(x, BatchedTensor):
                return _plain(moveaxis(x._value, x._aux, 0))
            return _plain(x._value)
        return _plain(x)

    return optree.tree_map(low, tree)


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


def _diff_args(transform, func, argnums, args):
    """What a transform with ``argnums`` differentiates: ``(what, single, nums, diff)``, with ``what`` the
    call for error messages and ``diff`` the tuple of the differentiated arguments."""
    single, nums = _normalize_argnums(argnums, len(args), transform)
    return f"{transform}({_fname(func)}, argnums={argnums!r})", single, nums, tuple(args[n] for n in nums)


def _check_structure(tree, ref_tree, what, noun, ref):
    """(Co)tangents ``tree`` have the structure ``ref_tree`` of what they belong to."""
    if tree != ref_tree:
        raise ValueError(f"{what}: {noun}s must have the structure of the {ref}, {ref_tree}, got {tree}")


def _check_like(x, ref, what, noun, ref_noun, tree, i, root):
    """``x``, the (co)tangent of leaf ``i`` of ``tree``, is an array of ``ref``'s shape. The leaf is named
    only for an error: naming walks the tree."""
    if not _is_array(x):
        raise TypeError(
            f"{what}: the {noun} of {_leaf_name(tree, i, root)} must be an array, got {type(x).__name__}"
        )
    if tuple(x.shape) != tuple(ref.shape):
        raise ValueError(
            f"{what}: the {noun} of {_leaf_name(tree, i, root)} has shape {tuple(x.shape)}, expected "
            f"{ref_noun} shape {tuple(ref.shape)}"
        )

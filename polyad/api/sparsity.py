"""Sparsity patterns of Jacobians and Hessians (``jacobian_sparsity``, ``hessian_sparsity``), found by the
sparsity transform (``polyad.transforms.sparsity``) in one evaluation on index sets, and what the sparse
Jacobians of ``sparse.py`` share with them: the checked differentiated arguments and a user's pattern as
a canonical SciPy CSR array (patterns and colourings live on the host, once per pattern).
"""

import functools
import math
from collections.abc import Callable
from typing import Any

import optree

import polyad.core.dispatch as dispatch
from polyad import backends
from polyad.api._arguments import (
    check_argnums,
    check_callable,
    check_inputs,
    check_real_floating,
    diff_args,
    flatten,
    partial_of,
)
from polyad.api.grad import grad
from polyad.backends.host import np
from polyad.core import Tensor
from polyad.graph.predispatch import not_recorded
from polyad.transforms.sparsity import dependence
from polyad.transforms.sparsity_rules import scipy_sparse

# ------------------------------------------------------------------------------ arguments


def differentiated_arguments(transform, func, argnums, args):
    """``(what, nums, diff, leaves, tree)`` of a call: the differentiated arguments, checked to be real
    floating backend arrays (not another transform's tensors: the result is a SciPy matrix)."""
    what, _, nums, diff = diff_args(transform, func, argnums, args)
    leaves, tree = flatten(diff)
    check_inputs(leaves, tree, what, "argument", nums)
    check_real_floating(leaves, tree, what, "argument", nums)
    for x in leaves:
        if isinstance(x, Tensor):
            raise TypeError(
                f"{what}: the arguments must be plain arrays, got a polyad {type(x).__name__}: a sparse "
                "Jacobian is a SciPy matrix, which no transform can carry (call it outside grad, vmap, jvp)"
            )
    if not leaves:
        raise ValueError(f"{what}: the differentiated arguments hold no arrays")
    return what, nums, diff, leaves, tree


def as_pattern(sparsity, transform):
    """A user's pattern as a canonical boolean CSR array; a clear error for anything else."""
    sp = scipy_sparse()
    foreign = sparse_owner(sparsity)  # another library's sparse matrix (cupyx): its host copy, once
    if foreign is not None:
        sparsity = foreign.to_scipy(sparsity)
    if sp.issparse(sparsity):
        p = sp.csr_array(sparsity)
    elif hasattr(sparsity, "shape") and hasattr(sparsity, "dtype") and not isinstance(sparsity, Tensor):
        backend = dispatch.backend_of_array(sparsity)
        host = np.asarray(backend.to_numpy(sparsity) if backend is not None else sparsity)
        if host.ndim != 2:
            raise ValueError(f"{transform}(sparsity=...): sparsity must be 2-D, got shape {host.shape}")
        p = sp.csr_array(host)
    else:
        raise TypeError(
            f"{transform}(sparsity=...): sparsity must be a 2-D scipy.sparse matrix or array (as "
            f"pa.jacobian_sparsity returns) or a 2-D boolean array, got {type(sparsity).__name__}"
        )
    if p.ndim != 2:
        raise ValueError(f"{transform}(sparsity=...): sparsity must be 2-D, got shape {p.shape}")
    p = p.astype(bool)
    p.eliminate_zeros()
    p.sum_duplicates()
    return p


def sparse_owner(matrix: Any) -> Any:
    """The sparse support (the backend contract's ``sparse`` field) of the loaded backend whose library
    made ``matrix``, for a sparse matrix of a library other than SciPy (cupyx's).

    Args:
        matrix: any object.

    Returns:
        That backend's sparse support, or None (SciPy's own matrices, and anything not a sparse matrix).

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> from polyad.api.sparsity import sparse_owner
        >>> sparse_owner(sp.eye(2)) is None, sparse_owner(np.eye(2)) is None
        (True, True)
    """
    if scipy_sparse().issparse(matrix):
        return None
    for backend in backends.loaded().values():
        if backend.sparse is not None and backend.sparse.is_sparse(matrix):
            return backend.sparse
    return None


# ------------------------------------------------------------------------------ patterns


def detect_pattern(transform, func, argnums, args, kwargs):
    """The pattern of ``func``'s Jacobian at ``args``: a boolean CSR array (output, input elements)."""
    what, nums, diff, leaves, tree = differentiated_arguments(transform, func, argnums, args)
    partial_func = partial_of(func, args, kwargs, nums)

    def on_leaves(*xs):
        return partial_func(*optree.tree_unflatten(tree, list(xs)))

    out_tree, outs = dependence(on_leaves, leaves, what)
    values = [v for v, _ in outs]
    for i, (v, p) in enumerate(outs):
        if p is None:
            raise TypeError(f"{what}: func must return arrays, got {type(v).__name__} (output leaf {i})")
    check_real_floating(values, out_tree, what, "output")
    n = sum(math.prod(x.shape) for x in leaves)
    if not outs:
        return scipy_sparse().csr_array((0, n), dtype=bool)
    p = scipy_sparse().vstack([p for _, p in outs], format="csr").astype(bool)
    p.sum_duplicates()
    return p


@not_recorded("jacobian_sparsity")
def jacobian_sparsity(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The non-zero pattern of ``func``'s Jacobian, found in one evaluation on index sets.

    Every intermediate value carries, per element, the set of input elements it depends on: element-wise
    ops unite their arguments' sets, reductions unite along their axes, indexing and reshapes move them,
    products with a constant operand follow its non-zeros. The pattern is conservative (it never misses a
    non-zero: an op without a rule makes every output depend on every input of its arguments, with a
    ``SparsityFallbackWarning``) and, for the element-wise, indexing, reduction and product ops of
    stencils and banded operators, exact. It does not depend on the values of the inputs, except through
    Python control flow on them (``if float(x) > 0``), which takes the branch of the point given.

    Args:
        func: a function of real floating arrays (pytrees allowed) returning real floating arrays.
        argnums: int or tuple of ints: the positional arguments to differentiate with respect to.

    Returns:
        A function of ``func``'s arguments returning a boolean ``scipy.sparse.csr_array`` of shape
        (output elements, input elements): rows are the output's leaves flattened in C order one after
        the other, columns those of the differentiated arguments. Needs SciPy (``polyad[scipy]``).

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: x[1:] - x[:-1]
        >>> pa.jacobian_sparsity(f)(np.zeros(4)).toarray().astype(int)
        array([[1, 1, 0, 0],
               [0, 1, 1, 0],
               [0, 0, 1, 1]])
    """
    check_callable(func, "jacobian_sparsity")
    check_argnums(argnums, "jacobian_sparsity")

    @functools.wraps(func)
    def sparsity_f(*args, **kwargs):
        return detect_pattern("jacobian_sparsity", func, argnums, args, kwargs)

    return sparsity_f


@not_recorded("hessian_sparsity")
def hessian_sparsity(func: Callable[..., Any], argnums: int | tuple[int, ...] = 0) -> Callable[..., Any]:
    """The non-zero pattern of ``func``'s Hessian: the Jacobian pattern of its gradient (the sparsity
    transform runs through ``grad``'s backward pass, whose rules are polyad ops), made symmetric.

    Args:
        func: a function of real floating arrays returning a real 0-d array.
        argnums: int or tuple of ints: the positional arguments to differentiate twice.

    Returns:
        A function of ``func``'s arguments returning a symmetric boolean ``scipy.sparse.csr_array`` of
        shape (input elements, input elements).

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: pa.xp.sum(x[1:] * x[:-1])
        >>> pa.hessian_sparsity(f)(np.ones(3)).toarray().astype(int)
        array([[0, 1, 0],
               [1, 0, 1],
               [0, 1, 0]])
    """
    gradient = checked_gradient(func, argnums, "hessian_sparsity")

    @functools.wraps(func)
    def sparsity_f(*args, **kwargs):
        return symmetric_pattern(detect_pattern("hessian_sparsity", gradient, argnums, args, kwargs))

    return sparsity_f


def checked_gradient(func, argnums, transform):
    """``grad(func, argnums)``, its arguments checked in the name of ``transform``."""
    check_callable(func, transform)
    check_argnums(argnums, transform)
    return grad(func, argnums)


def symmetric_pattern(p):
    s = (p + p.T).tocsr().astype(bool)
    s.sum_duplicates()
    return s

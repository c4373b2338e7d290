"""Sparse Jacobians and Hessians: the non-zero pattern found by the sparsity transform
(``polyad.transforms.sparsity``), its columns (or rows) coloured (``coloring.py``), one JVP (or VJP) per
colour pushed through ``vmap``, the compressed result spread back into a SciPy CSR array.

Rows and columns are elements in C order: the output's leaves one after the other (rows), the
differentiated arguments' leaves one after the other (columns); for one 1-D input and output, the usual
Jacobian matrix. SciPy is an optional extra (``pip install polyad[scipy]``); on CUDA arrays the result is
a ``cupyx.scipy.sparse`` matrix.
"""

import functools
import math
from collections.abc import Callable
from typing import Any

import optree

import polyad.dispatch as dispatch
from polyad.api.arguments import (
    check_argnums,
    check_callable,
    check_inputs,
    check_real_floating,
    diff_args,
    flatten,
    partial_of,
)
from polyad.api.coloring import ORDERS, color_columns
from polyad.api.grad import grad, run_vjp
from polyad.api.jvp import run_jvp
from polyad.api.vmap import vmap
from polyad.backends.host import np
from polyad.core import Tensor
from polyad.graph.predispatch import not_recorded
from polyad.ops.common import bottom
from polyad.ops.creation import arange
from polyad.ops.dtypes import astype
from polyad.ops.manipulation import concat, reshape
from polyad.transforms.sparsity import dependence
from polyad.transforms.sparsity_rules import scipy_sparse

# ------------------------------------------------------------------------------ arguments


def _differentiated(transform, func, argnums, args):
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


def _check_coloring(coloring, transform):
    if coloring not in ORDERS:
        raise ValueError(
            f"{transform}(coloring={coloring!r}): coloring must be one of {', '.join(map(repr, ORDERS))}"
        )


def _as_pattern(sparsity, transform):
    """A user's pattern as a canonical boolean CSR array; a clear error for anything else."""
    sp = scipy_sparse()
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


# ------------------------------------------------------------------------------ patterns


def _patterns(transform, func, argnums, args, kwargs):
    """The pattern of ``func``'s Jacobian at ``args``: a boolean CSR array (output, input elements)."""
    what, nums, diff, leaves, tree = _differentiated(transform, func, argnums, args)
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
        return _patterns("jacobian_sparsity", func, argnums, args, kwargs)

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
    gradient = _gradient(func, argnums, "hessian_sparsity")

    @functools.wraps(func)
    def sparsity_f(*args, **kwargs):
        return _symmetric(_patterns("hessian_sparsity", gradient, argnums, args, kwargs))

    return sparsity_f


def _gradient(func, argnums, transform):
    """``grad(func, argnums)``, its arguments checked in the name of ``transform``."""
    check_callable(func, transform)
    check_argnums(argnums, transform)
    return grad(func, argnums)


def _symmetric(p):
    s = (p + p.T).tocsr().astype(bool)
    s.sum_duplicates()
    return s


# ------------------------------------------------------------------------------ compressed evaluation


class SparseJacobian:
    """A function returning a sparse Jacobian (what ``sparse_jacfwd``, ``sparse_jacrev`` and
    ``sparse_hessian`` return): call it like ``func``.

    Attributes:
        sparsity: the pattern it uses at every call (a boolean CSR array), or None: detected at each call.
        colors: each column's colour (forward) or row's (reverse), or None while the pattern is unknown.
        n_colors: the number of JVPs (or VJPs) per call, or None.
    """

    def __init__(self, transform, func, argnums, sparsity, coloring, mode, detect):
        self.transform = transform
        self.func = func
        self.argnums = argnums
        self.mode = mode  # "forward": colour columns, push JVPs; "reverse": colour rows, pull VJPs
        self.coloring = coloring
        self._detect = detect  # args, kwargs -> the pattern at that point
        self._known = None if sparsity is None else self._colored(_as_pattern(sparsity, transform))
        self.sparsity = None if sparsity is None else self._known.pattern
        functools.update_wrapper(self, func, updated=())

    @property
    def colors(self) -> Any:
        return None if self._known is None else self._known.colors

    @property
    def n_colors(self) -> int | None:
        return None if self._known is None else self._known.n_colors

    def _colored(self, pattern):
        return _Colored(pattern, self.mode, self.coloring)

    def __repr__(self):
        how = "detected at each call" if self.sparsity is None else f"{self.n_colors} colours"
        return f"<{self.transform} of {getattr(self.func, '__name__', self.func)!r}: {how}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.sparsity is not None:
            known = self._known
        else:  # this point's pattern; its colouring is kept while the pattern stays the same
            pattern = self._detect(args, kwargs)
            known = self._known
            if known is None or not _same_structure(known.pattern, pattern):
                known = self._known = self._colored(pattern)
        return _evaluate(self, known, args, kwargs)


class _Colored:
    """A pattern, its colouring, and where decompression reads each non-zero in the products with the
    colour seeds (``at``) and which entries of the products must be zero (``unread``, flat)."""

    __slots__ = ("pattern", "colors", "n_colors", "at", "unread", "seeds")

    def __init__(self, pattern, mode, coloring):
        self.pattern = pattern
        self.colors = color_columns(pattern if mode == "forward" else pattern.T, coloring)
        self.n_colors = int(self.colors.max(initial=-1)) + 1
        rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
        cols = pattern.indices
        self.at = (self.colors[cols], rows) if mode == "forward" else (self.colors[rows], cols)
        unread = np.ones((self.n_colors, pattern.shape[0 if mode == "forward" else 1]), dtype=bool)
        unread[self.at] = False
        self.unread = np.flatnonzero(unread)
        self.seeds = {}  # (library, device, dtype, probe) -> the seed matrix there (``_seeds``)


def _same_structure(a, b):
    return a.shape == b.shape and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def _evaluate(jac, known, args, kwargs):
    pattern, n_colors = known.pattern, known.n_colors
    what, nums, diff, leaves, tree = _differentiated(jac.transform, jac.func, jac.argnums, args)
    partial_func = partial_of(jac.func, args, kwargs, nums)
    n = sum(math.prod(x.shape) for x in leaves)
    if pattern.shape[1] != n:
        raise ValueError(
            f"{what}: sparsity has shape {pattern.shape}, but the differentiated arguments have {n} elements "
            "(its columns)"
        )
    # a given pattern is checked along one more direction (a detected one holds by construction); an
    # empty pattern still needs one product, for the output's size
    probe = jac.sparsity is not None or n_colors == 0
    if jac.mode == "forward":
        products, m, like = _forward(partial_func, diff, leaves, tree, known, probe, what)
    else:
        products, m, like = _reverse(partial_func, diff, leaves, pattern.shape[0], known, probe, what)
    if pattern.shape != (m, n):
        raise ValueError(
            f"{what}: sparsity has shape {pattern.shape}, but the Jacobian at these arguments has shape "
            f"{(m, n)} (output elements, input elements)"
        )
    products = np.asarray(dispatch.backend_of_array(like).to_numpy(products))
    result = _decompress(known, products[:n_colors], jac.mode, what)
    if probe:
        _check_probe(result, products[n_colors], jac.mode, what)
    return _on_device(result, like)


def _seeds(known, like, probe):
    """The seed matrix on ``like``'s backend and device (made once per pattern there): row ``c`` the sum
    of the basis vectors of colour ``c``; with ``probe``, one more row, ``_probe``'s vector."""
    backend = dispatch.backend_of_array(like)
    key = (backend.name, str(like.device), str(like.dtype), probe)
    seeds = known.seeds.get(key)
    if seeds is None:
        seeds = known.seeds[key] = _make_seeds(known.colors, known.n_colors, like, probe, backend)
    return seeds


def _make_seeds(colors, n_colors, like, probe, backend):
    c = backend.xp.asarray(colors.tolist(), device=like.device) if len(colors) else arange(0)
    seeds = astype(reshape(arange(n_colors, device=like.device), (-1, 1)) == c, like.dtype)
    if not probe:
        return seeds
    row = backend.xp.asarray(_probe(len(colors)).tolist(), dtype=like.dtype, device=like.device)
    return concat([seeds, reshape(row, (1, -1))])


@functools.lru_cache(maxsize=8)
def _probe(n):
    """The direction a given pattern is checked along: fixed, without zeros or simple ratios."""
    v = np.random.default_rng(20260101).uniform(0.5, 1.5, n)
    v.flags.writeable = False
    return v


def _split(row, leaves):
    """Vector ``row`` cut into arrays shaped like ``leaves``, in their dtypes."""
    parts, start = [], 0
    for x in leaves:
        size = math.prod(x.shape)
        piece = reshape(row[start : start + size], tuple(x.shape))
        parts.append(piece if piece.dtype == x.dtype else astype(piece, x.dtype))
        start += size
    return parts


def _joined(tree_value):
    leaves, _ = flatten(tree_value)
    flat = [reshape(x, (-1,)) for x in leaves]
    return flat[0] if len(flat) == 1 else concat(flat)


def _forward(partial_func, diff, leaves, tree, known, probe, what):
    """``(products, m, like)``: the JVPs with the seeds (n_colors rows, and the probe's), (rows, m), one
    per seed under vmap; ``like``: an output, for the result's dtype and device."""
    outputs = []

    def push(seed):
        tangents = tuple(optree.tree_unflatten(tree, _split(seed, leaves)))
        out, tangent = run_jvp(partial_func, diff, tangents, False, False, what)
        if not outputs:
            o_leaves, o_tree = flatten(out)
            check_real_floating(o_leaves, o_tree, what, "output")
            outputs.extend(o_leaves)
        return _joined(tangent)

    products = vmap(push)(_seeds(known, leaves[0], probe))
    return products, sum(math.prod(o.shape) for o in outputs), bottom(outputs[0]) if outputs else leaves[0]


def _reverse(partial_func, diff, leaves, rows, known, probe, what):
    """``(products, m, like)``: the VJPs with the seeds (n_colors rows, and the probe's), (rows, n)."""
    out, backward, _, _ = run_vjp(partial_func, diff, False, what, jacobian=True)
    o_leaves, o_tree = flatten(out)
    m = sum(math.prod(o.shape) for o in o_leaves)
    if rows != m:
        return None, m, leaves[0]  # a pattern of the wrong shape: _evaluate says so

    def pull(seed):
        return _joined(backward(optree.tree_unflatten(o_tree, _split(seed, o_leaves)), False))

    return vmap(pull)(_seeds(known, o_leaves[0], probe)), m, leaves[0]


def _decompress(known, products, mode, what):
    """The sparse Jacobian from the products with the colour seeds: each non-zero ``(i, j)`` of the
    pattern is alone among its colour in its row (forward) or column (reverse). A non-zero of the products
    that no entry of the pattern accounts for is one the pattern misses: an error."""
    stray = np.flatnonzero(products.ravel()[known.unread])
    if len(stray):
        c, k = divmod(int(known.unread[stray[0]]), products.shape[1])
        where = f"row {k}" if mode == "forward" else f"column {k}"
        other = "columns" if mode == "forward" else "rows"
        _missed(what, f"a non-zero in {where} among the {other} of colour {c} ({products[c, k]!r})")
    p = known.pattern
    return scipy_sparse().csr_array((products[known.at], p.indices.copy(), p.indptr.copy()), shape=p.shape)


def _missed(what, found):
    raise ValueError(
        f"{what}: the Jacobian at these arguments has {found} where sparsity has none: the pattern misses a "
        "non-zero here. Pass a pattern that holds at every point it is used at (pa.jacobian_sparsity at "
        "this point, or sparsity=None to detect it at each call)"
    )


def _check_probe(jac, product, mode, what):
    """The product with ``_probe``'s vector, computed by one more JVP (VJP), against the sparse result's:
    a non-zero the pattern lacks shows as a difference beyond rounding."""
    r = _probe(jac.shape[1] if mode == "forward" else jac.shape[0])
    mat = jac if mode == "forward" else jac.T
    expected = mat @ r
    scale = abs(mat) @ abs(r) + np.abs(product)
    tol = 1000 * np.finfo(product.dtype).eps * scale
    bad = np.nonzero(np.abs(product - expected) > tol)[0]
    if len(bad):
        k = int(bad[0])
        where = f"row {k}" if mode == "forward" else f"column {k}"
        _missed(
            what,
            f"non-zeros in {where} (its product with a test vector is {product[k]!r}, "
            f"the pattern's entries give {expected[k]!r})",
        )


def _on_device(result, like):
    """The CSR result on ``like``'s device: CuPy arrays get a ``cupyx.scipy.sparse`` matrix."""
    if dispatch.backend_of_array(like).name == "cupy":
        import cupyx.scipy.sparse

        return cupyx.scipy.sparse.csr_matrix(result)
    return result


# ------------------------------------------------------------------------------ public functions


def _sparse_transform(transform, func, argnums, sparsity, coloring, mode, detect_with):
    check_callable(func, transform)
    check_argnums(argnums, transform)
    _check_coloring(coloring, transform)

    def detect(args, kwargs):
        return detect_with(transform, func, argnums, args, kwargs)

    return SparseJacobian(transform, func, argnums, sparsity, coloring, mode, detect)


@not_recorded("sparse_jacfwd")
def sparse_jacfwd(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    sparsity: Any = None,
    coloring: str = "dsatur",
) -> "SparseJacobian":
    """The Jacobian as a sparse matrix, by forward mode: one JVP per colour of its columns.

    Columns that share no row get one colour; one ``jvp`` with the sum of their basis vectors gives all
    their non-zeros at once, so a banded or stencil Jacobian costs a handful of JVPs (pushed together
    through ``vmap``) whatever its size. Values are exact (automatic differentiation, not finite
    differences).

    Args:
        func: a function of real floating arrays (pytrees allowed) returning real floating arrays.
        argnums: int or tuple of ints: the positional arguments to differentiate with respect to.
        sparsity: the Jacobian's pattern, (output elements, input elements), as ``pa.jacobian_sparsity``
            returns (a scipy.sparse matrix or array, or a 2-D boolean array): coloured once, reused at every
            call (Newton iterations). It must hold at every point it is used at: a non-zero it misses is an
            error where the compressed products show it. None: detected at each call (its colouring is kept
            while the detected pattern stays the same).
        coloring: the colouring's vertex order, "dsatur" (fewest colours), "largest_first" or "natural"
            (faster to colour; see ``polyad.api.coloring``).

    Returns:
        A ``SparseJacobian``: called like ``func``, it returns a ``scipy.sparse.csr_array`` with the
        pattern's structure (a ``cupyx.scipy.sparse.csr_matrix`` on CUDA arrays); rows and columns as in
        ``jacobian_sparsity``. Its ``sparsity``, ``colors`` and ``n_colors`` describe the colouring.

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: x[1:] ** 2 - x[:-1]
        >>> x = np.arange(1000.0)
        >>> jac = pa.sparse_jacfwd(f, sparsity=pa.jacobian_sparsity(f)(x))
        >>> jac.n_colors  # 2 JVPs for a 999 x 1000 Jacobian
        2
        >>> jac(x)[:2, :3].toarray()
        array([[-1.,  2.,  0.],
               [ 0., -1.,  4.]])
    """
    return _sparse_transform("sparse_jacfwd", func, argnums, sparsity, coloring, "forward", _patterns)


@not_recorded("sparse_jacrev")
def sparse_jacrev(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    sparsity: Any = None,
    coloring: str = "dsatur",
) -> "SparseJacobian":
    """The Jacobian as a sparse matrix, by reverse mode: one VJP per colour of its rows (rows that share
    no column get one colour). Cheaper than ``sparse_jacfwd`` where rows need fewer colours than columns
    (a few dense columns: a row colouring avoids them).

    Args:
        func, argnums, sparsity, coloring: as ``sparse_jacfwd`` (the rows are coloured).

    Returns:
        A ``SparseJacobian`` returning a ``scipy.sparse.csr_array``, as ``sparse_jacfwd``'s.

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: pa.xp.cumulative_sum(x)[::100]
        >>> jac = pa.sparse_jacrev(f)
        >>> jac(np.ones(300)).toarray()[:, [0, 99, 100, 299]]
        array([[1., 0., 0., 0.],
               [1., 1., 1., 0.],
               [1., 1., 1., 0.]])
        >>> jac.n_colors  # the rows share columns: one colour each
        3
    """
    return _sparse_transform("sparse_jacrev", func, argnums, sparsity, coloring, "reverse", _patterns)


@not_recorded("sparse_hessian")
def sparse_hessian(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    sparsity: Any = None,
    coloring: str = "dsatur",
) -> "SparseJacobian":
    """The Hessian as a sparse matrix: forward mode over the gradient (Hessian-vector products), one per
    colour of the Hessian's columns (a distance-1 colouring of its column-intersection graph, the direct
    method: it does not use symmetry to share colours, as a star colouring would, and reads every entry
    from one product).

    Args:
        func: a function of real floating arrays returning a real 0-d array.
        argnums: int or tuple of ints: the positional arguments to differentiate twice.
        sparsity: the Hessian's pattern as ``pa.hessian_sparsity`` returns, reused at every call; None:
            detected at each call.
        coloring: as ``sparse_jacfwd``.

    Returns:
        A ``SparseJacobian`` returning the Hessian, (input elements, input elements), as a
        ``scipy.sparse.csr_array``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: pa.xp.sum(x[1:] * x[:-1] ** 2)
        >>> pa.sparse_hessian(f)(np.array([1.0, 2.0, 3.0])).toarray()
        array([[4., 2., 0.],
               [2., 6., 4.],
               [0., 4., 0.]])
    """
    gradient = _gradient(func, argnums, "sparse_hessian")

    def detect(transform, _, argnums, args, kwargs):
        return _symmetric(_patterns(transform, gradient, argnums, args, kwargs))

    if sparsity is not None:  # a Hessian is symmetric: a one-sided pattern would miss entries
        sparsity = _as_pattern(sparsity, "sparse_hessian")
        if sparsity.shape[0] != sparsity.shape[1]:
            raise ValueError(
                f"sparse_hessian(sparsity=...): a Hessian's pattern is square, got {sparsity.shape}"
            )
        sparsity = _symmetric(sparsity)
    jac = _sparse_transform("sparse_hessian", gradient, argnums, sparsity, coloring, "forward", detect)
    functools.update_wrapper(jac, func, updated=())
    return jac

"""Sparse Jacobians and Hessians: the non-zero pattern found by the sparsity transform
(``polyad.transforms.sparsity``), its columns (or rows) coloured (``_coloring.py``), one JVP (or VJP) per
colour pushed through ``vmap``, the values read from the products into the sparse container of the
input's backend (its contract's ``sparse`` field) by index arithmetic on the device.

Rows and columns are elements in C order: the output's leaves one after the other (rows), the
differentiated arguments' leaves one after the other (columns); for one 1-D input and output, the usual
Jacobian matrix. Where the result lives: NumPy arrays give a ``scipy.sparse.csr_array``, CuPy arrays a
``cupyx.scipy.sparse.csr_matrix`` (built on the GPU), array_api_strict and Dask arrays (libraries without
sparse matrices) a ``polyad.backends.array_csr.ArrayCSR``: CSR arrays of their library, on the input's
device (``toarray()`` densifies there). With a pattern given
(``sparsity=``), a call copies nothing to the host: the pattern is coloured once on the host, its seed and
index arrays are moved to each device once, and the call reads one boolean (the check that the pattern
holds). Pattern detection (``sparsity=None``) runs on the host. SciPy is an optional extra
(``pip install polyad[scipy]``), needed for patterns and colourings.
"""

import functools
import math
from collections.abc import Callable
from typing import Any

import optree

import polyad.core.dispatch as dispatch
from polyad.api._arguments import check_argnums, check_callable, check_real_floating, flatten, partial_of
from polyad.api._coloring import ORDERS, SYMMETRIC, bidirectional_colors, color_columns, symmetric_colors
from polyad.api.grad import run_vjp
from polyad.api.jvp import run_jvp
from polyad.api.sparsity import (
    as_pattern,
    checked_gradient,
    detect_pattern,
    differentiated_arguments,
    symmetric_pattern,
)
from polyad.api.vmap import vmap
from polyad.backends.host import np
from polyad.core import plain
from polyad.core.avals import bottom
from polyad.graph.predispatch import not_recorded
from polyad.ops.creation import arange
from polyad.ops.dtypes import astype
from polyad.ops.manipulation import concat, reshape

MODES = ("forward", "reverse", "bidirectional", "auto")

# ------------------------------------------------------------------------------ arguments


def _check_coloring(coloring, transform):
    allowed = ORDERS + SYMMETRIC if transform == "sparse_hessian" else ORDERS
    if coloring not in allowed:
        why = (
            ""
            if transform == "sparse_hessian" or coloring not in SYMMETRIC
            else " (a star colouring needs a symmetric matrix: sparse_hessian)"
        )
        choices = ", ".join(map(repr, allowed))
        raise ValueError(f"{transform}(coloring={coloring!r}): coloring must be one of {choices}{why}")


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
        # "forward": colour columns, push JVPs; "reverse": colour rows, pull VJPs; "bidirectional": some
        # rows by VJPs, the others by JVPs; "auto": the one of these three with the fewest products
        self.mode = mode
        self.coloring = coloring
        self._detect = detect  # args, kwargs -> the pattern at that point
        self._known = None if sparsity is None else self._colored(as_pattern(sparsity, transform))
        self.sparsity = None if sparsity is None else self._known.pattern
        functools.update_wrapper(self, func, updated=())

    @property
    def colors(self) -> Any:
        return None if self._known is None else self._known.colors

    @property
    def n_colors(self) -> int | None:
        return None if self._known is None else self._known.n_colors

    @property
    def chosen_mode(self) -> str | None:
        """The direction the colouring in use takes ("forward", "reverse", "bidirectional"), or None."""
        return None if self._known is None else self._known.mode

    def _colored(self, pattern):
        if self.mode != "auto":
            return _Colored(pattern, self.mode, self.coloring)
        # the fewest products of the three (ties: forward, then reverse)
        candidates = [_Colored(pattern, mode, self.coloring) for mode in MODES[:3]]
        return min(candidates, key=lambda c: c.n_colors)

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
    """A pattern, its colouring, and where each non-zero is read in the products with the colour seeds
    (``read``: flat indices into the (colours, rows) products, in the pattern's CSR order) and which
    entries of the products no non-zero lands in, so must be zero (``unread``, flat). Index arrays on a
    device are made once per device (``placed``): a call with the pattern then copies nothing to the host.

    ``symmetric``: a Hessian's pattern, coloured by a star colouring: a non-zero ``(i, j)`` is read at
    ``(colour of j, row i)`` where ``j`` is the only column of its colour in row ``i``, else (by symmetry)
    at ``(colour of i, row j)``, where the star colouring makes ``i`` the only one."""

    __slots__ = ("pattern", "colors", "n_colors", "read", "unread", "placed", "mode", "source", "parts")

    def __init__(self, pattern, mode, coloring):
        self.pattern, self.mode, self.parts = pattern, mode, None
        rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
        cols = pattern.indices.astype(np.int64)
        self.placed = {}  # (library, device, dtype, probe) -> _Placed
        if mode == "bidirectional":
            self._split(coloring, rows, cols)
            return
        if mode == "forward" and coloring in SYMMETRIC:
            self.colors = symmetric_colors(pattern, coloring)
        else:
            self.colors = color_columns(pattern if mode == "forward" else pattern.T, coloring)
        self.n_colors = k = int(self.colors.max(initial=-1)) + 1
        if mode == "reverse":  # entry (i, j) at (colour of row i, column j)
            width, seed, at = pattern.shape[1], self.colors[rows], cols
        else:  # entry (i, j) at (colour of column j, row i)
            width, seed, at = pattern.shape[0], self.colors[cols], rows
        share = np.bincount(at * k + seed, minlength=width * k) if k else np.zeros(0, np.int64)
        self.read = seed * width + at
        alone = share[at * k + seed] == 1
        # direct recovery: each product entry holds at most one non-zero, whose column (forward) or row
        # (reverse) ``source`` names (the probe's length where it holds none): the probe's product is then
        # checked from the products themselves (no sparse matrix-vector product)
        other = cols if mode == "forward" else rows
        self.source = np.full(k * width, pattern.shape[1 if mode == "forward" else 0], dtype=np.int64)
        self.source[self.read] = other
        if not alone.all():  # a star colouring: read the mirrored entry (j, i) instead
            mirror_seed, mirror_at = self.colors[rows], cols
            if not (share[mirror_at * k + mirror_seed][~alone] == 1).all():
                raise RuntimeError("polyad's star colouring is not a star colouring here: please report this")
            self.read = np.where(alone, self.read, mirror_seed * width + mirror_at)
            self.source = None
        occupied = np.zeros(k * width, dtype=bool)
        occupied[seed * width + at] = True
        self.unread = np.flatnonzero(~occupied)

    def _split(self, coloring, rows, cols):
        """Bidirectional: the rows ``by_rows`` from VJPs (products (kr, n), first), the others from JVPs
        (products (kf, m), after them); ``read`` and ``unread`` index the two flattened one after the
        other. A JVP product's entry at a VJP-side row sums several non-zeros: it is neither read nor
        checked (the probe checks those rows)."""
        (m, n), p = self.pattern.shape, self.pattern
        by_rows, col_colors, row_colors = bidirectional_colors(p, coloring)
        kf, kr = int(col_colors.max(initial=-1)) + 1, int(row_colors.max(initial=-1)) + 1
        self.colors, self.n_colors = (col_colors, row_colors), kf + kr
        self.parts = (_Part(col_colors, kf), _Part(row_colors, kr))
        on_rows = by_rows[rows]
        self.read = np.where(on_rows, row_colors[rows] * n + cols, kr * n + col_colors[cols] * m + rows)
        reverse_hit = np.zeros(kr * n, dtype=bool)
        reverse_hit[self.read[on_rows]] = True
        forward_hit = np.zeros((kf, m), dtype=bool)
        forward_hit[:, by_rows] = True  # not checked
        forward_hit.reshape(-1)[self.read[~on_rows] - kr * n] = True
        self.unread = np.concatenate([np.flatnonzero(~reverse_hit), kr * n + np.flatnonzero(~forward_hit)])
        self.source = None

    def flat_size(self, probe):
        """The length of the flattened products (with the probe's, a JVP's, where ``probe``)."""
        m, n = self.pattern.shape
        if self.mode == "bidirectional":
            kf, kr = self.parts[0].n_colors, self.parts[1].n_colors
            return kr * n + (kf + int(probe)) * m
        return (self.n_colors + int(probe)) * (m if self.mode == "forward" else n)

    def probe_length(self):
        """The probe's length: the input's size (a JVP), or the output's (a VJP)."""
        return self.pattern.shape[0 if self.mode == "reverse" else 1]


class _Part:
    """One direction of a bidirectional colouring: its colours (-1: none) and its seed matrices."""

    __slots__ = ("colors", "n_colors", "seeds")

    def __init__(self, colors, n_colors):
        self.colors, self.n_colors, self.seeds = colors, n_colors, {}

    def seeds_on(self, like, probe):
        backend = dispatch.backend_of_array(like)
        key = (backend.name, str(like.device), str(like.dtype), probe)
        if key not in self.seeds:
            self.seeds[key] = _make_seeds(self.colors, self.n_colors, like, probe, backend)
        return self.seeds[key]


class _Placed:
    """A colouring's arrays on one device: the seed matrix, the index arrays of ``_Colored``, the CSR
    structure (or, for a backend whose sparse container is "dense", each dense entry's index into the
    products) and the probe vector."""

    __slots__ = (
        "_seeds",
        "_make",
        "read",
        "unread",
        "indices",
        "indptr",
        "dense_at",
        "probe",
        "source",
        "sparse",
    )

    def __init__(self, known, backend, like, probe):
        bxp, device = backend.xp, like.device
        self._seeds = None
        self._make = lambda: _make_seeds(known.colors, known.n_colors, like, probe, backend)
        self.sparse = backend.sparse
        if self.sparse is None:
            raise TypeError(
                f"sparse Jacobians: backend {backend.name!r} declares no sparse support (its contract's "
                "``sparse`` field): its arrays cannot hold a sparse Jacobian"
            )

        def put(host, dtype=None):  # a host index array to the device, once per pattern
            return (
                bxp.asarray(host, device=device)
                if dtype is None
                else bxp.asarray(host, dtype=dtype, device=device)
            )

        self.read = put(known.read.astype(np.int64))
        self.unread = put(known.unread.astype(np.int64)) if len(known.unread) else None
        p = known.pattern
        if self.sparse.container == "csr":
            self.indices, self.indptr, self.dense_at = (
                put(p.indices.astype(np.int64)),
                put(p.indptr.astype(np.int64)),
                None,
            )
        else:  # every dense entry reads the products, or the zero appended to them
            at = np.full(p.shape[0] * p.shape[1], known.flat_size(probe), dtype=np.int64)
            rows = np.repeat(np.arange(p.shape[0]), np.diff(p.indptr))
            at[rows * p.shape[1] + p.indices] = known.read
            self.indices = self.indptr = None
            self.dense_at = put(at)
        self.probe = self.source = None
        if probe:  # the probe vector, a zero after it (for the entries ``source`` has none for)
            self.probe = put(np.append(_probe(known.probe_length()), 0.0), like.dtype)
            self.source = None if known.source is None else put(known.source)

    @property
    def seeds(self):
        """The seed matrix (``_make_seeds``), made on first use."""
        if self._seeds is None:
            self._seeds = self._make()
        return self._seeds

    def assemble(self, flat, shape, backend):
        """The Jacobian from the products (flat): the values each non-zero reads, in the backend's
        sparse container (CSR), or its dense array."""
        if self.dense_at is None:
            return self.sparse.csr(backend.xp.take(flat, self.read), self.indices, self.indptr, shape)
        bxp = backend.xp
        padded = bxp.concat([flat, bxp.zeros(1, dtype=flat.dtype, device=flat.device)])
        return bxp.reshape(bxp.take(padded, self.dense_at), shape)


def _same_structure(a, b):
    return a.shape == b.shape and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def _evaluate(jac, known, args, kwargs):
    pattern, n_colors = known.pattern, known.n_colors
    what, nums, diff, leaves, tree = differentiated_arguments(jac.transform, jac.func, jac.argnums, args)
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
    mode = known.mode
    if mode == "bidirectional":
        products, m = _both(partial_func, diff, leaves, tree, known, probe, what)
    elif mode == "forward":
        seeds_of = _seeds_of(known, probe)
        products, m = _forward(partial_func, diff, leaves, tree, seeds_of, what)
    else:
        products, m = _reverse(partial_func, diff, leaves, pattern.shape[0], _seeds_of(known, probe), what)
    if pattern.shape != (m, n):
        raise ValueError(
            f"{what}: sparsity has shape {pattern.shape}, but the Jacobian at these arguments has shape "
            f"{(m, n)} (output elements, input elements)"
        )
    # everything below is index arithmetic on the products' device: no host copy
    products = plain(products)
    backend = dispatch.backend_of_array(products)
    bxp = backend.xp
    placed = _placed(known, backend, products, probe)
    flat = bxp.reshape(products, (-1,))
    result = placed.assemble(flat, pattern.shape, backend)
    suspect = []  # 0-d booleans: a non-zero the pattern lacks shows in one of them
    if placed.unread is not None:
        suspect.append(bxp.any(bxp.take(flat, placed.unread) != 0))
    if probe:
        # the probe's product: the last row (bidirectional: the last m entries, a JVP's)
        product, r = (
            (flat[flat.shape[0] - m :] if mode == "bidirectional" else products[n_colors, ...]),
            placed.probe,
        )
        if placed.source is not None:  # direct recovery: from the products, by index arithmetic
            terms = products[:n_colors, ...] * bxp.reshape(bxp.take(r, placed.source), (n_colors, -1))
            expected = bxp.sum(terms, axis=0)
            scale = bxp.sum(bxp.abs(terms), axis=0) + bxp.abs(product)
        else:  # a star colouring's sums: the result's product with the probe
            mat, r = (result.T if mode == "reverse" else result), r[:-1]
            expected = mat @ r
            scale = abs(mat) @ bxp.abs(r) + bxp.abs(product)
        tolerance = 1000 * bxp.finfo(product.dtype).eps
        suspect.append(bxp.any(bxp.abs(product - expected) > tolerance * scale))
    if suspect and bool(functools.reduce(lambda a, b: a | b, suspect)):  # one scalar read
        if mode == "bidirectional":
            _missed(what, "non-zeros (the compressed products show them)")
        _explain_missed(known, products, result, placed, mode, what, backend)
    return result


def _seeds_of(known, probe):
    """``like -> the seed matrix`` of a one-direction colouring on ``like``'s device."""
    return lambda like: _placed(known, dispatch.backend_of_array(like), like, probe).seeds


def _both(partial_func, diff, leaves, tree, known, probe, what):
    """``(products, m)`` of a bidirectional colouring: the VJPs' products and the JVPs' (with the
    probe's), flattened one after the other."""
    columns, rows = known.parts
    forward, m = _forward(partial_func, diff, leaves, tree, lambda like: columns.seeds_on(like, probe), what)
    forward = plain(forward)
    if rows.n_colors == 0 or known.pattern.shape[0] != m:
        return forward, m
    backward, _ = _reverse(partial_func, diff, leaves, m, lambda like: rows.seeds_on(like, False), what)
    bxp = dispatch.backend_of_array(forward).xp
    return bxp.concat([bxp.reshape(plain(backward), (-1,)), bxp.reshape(forward, (-1,))]), m


def _placed(known, backend, like, probe):
    """The colouring's arrays on ``like``'s backend, device and dtype (made once per pattern there)."""
    key = (backend.name, str(like.device), str(like.dtype), probe)
    placed = known.placed.get(key)
    if placed is None:
        placed = known.placed[key] = _Placed(known, backend, like, probe)
    return placed


def _make_seeds(colors, n_colors, like, probe, backend):
    """The seed matrix on ``like``'s device: row ``c`` the sum of the basis vectors of colour ``c``; with
    ``probe``, one more row, ``_probe``'s vector."""
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


def _forward(partial_func, diff, leaves, tree, seeds_of, what):
    """``(products, m)``: the JVPs with the seeds (n_colors rows, and the probe's), (rows, m), one per seed
    under vmap."""
    outputs = []

    def push(seed):
        tangents = tuple(optree.tree_unflatten(tree, _split(seed, leaves)))
        out, tangent = run_jvp(partial_func, diff, tangents, False, False, what)
        if not outputs:
            o_leaves, o_tree = flatten(out)
            check_real_floating(o_leaves, o_tree, what, "output")
            outputs.extend(o_leaves)
        return _joined(tangent)

    products = vmap(push)(seeds_of(plain(leaves[0])))
    return products, sum(math.prod(o.shape) for o in outputs)


def _reverse(partial_func, diff, leaves, rows, seeds_of, what):
    """``(products, m)``: the VJPs with the seeds (n_colors rows, and the probe's), (rows, n)."""
    out, backward, _, _ = run_vjp(partial_func, diff, False, what, jacobian=True)
    o_leaves, o_tree = flatten(out)
    m = sum(math.prod(o.shape) for o in o_leaves)
    if rows != m:
        return None, m  # a pattern of the wrong shape: _evaluate says so

    def pull(seed):
        return _joined(backward(optree.tree_unflatten(o_tree, _split(seed, o_leaves)), False))

    return vmap(pull)(seeds_of(plain(bottom(o_leaves[0])))), m


def _explain_missed(known, products, result, placed, mode, what, backend):
    """The error for a pattern that misses a non-zero (host copies: this is the error path)."""
    host = np.asarray(backend.to_numpy(products))
    flat = host.ravel()
    stray = np.flatnonzero(flat[known.unread]) if len(known.unread) else []
    if len(stray):
        c, k = divmod(int(known.unread[stray[0]]), host.shape[1])
        where = f"row {k}" if mode == "forward" else f"column {k}"
        other = "columns" if mode == "forward" else "rows"
        _missed(what, f"a non-zero in {where} among the {other} of colour {c} ({host[c, k]!r})")
    dense = np.asarray(backend.to_numpy(placed.sparse.to_dense(result)))
    mat = dense if mode == "forward" else dense.T
    product = host[known.n_colors]
    expected = mat @ _probe(mat.shape[1])
    k = int(np.argmax(np.abs(product - expected)))
    where = f"row {k}" if mode == "forward" else f"column {k}"
    _missed(
        what,
        f"non-zeros in {where} (its product with a test vector is {product[k]!r}, "
        f"the pattern's entries give {expected[k]!r})",
    )


def _missed(what, found):
    raise ValueError(
        f"{what}: the Jacobian at these arguments has {found} where sparsity has none: the pattern misses a "
        "non-zero here. Pass a pattern that holds at every point it is used at (pa.jacobian_sparsity at "
        "this point, or sparsity=None to detect it at each call)"
    )


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
            (faster to colour; see ``polyad.api._coloring``).

    Returns:
        A ``SparseJacobian``: called like ``func``, it returns a ``scipy.sparse.csr_array`` with the
        pattern's structure for NumPy arrays, a ``cupyx.scipy.sparse.csr_matrix`` for CuPy arrays (made on
        the GPU), an ``ArrayCSR`` of the library's arrays for array_api_strict and Dask arrays (see this
        module); rows and columns as in ``jacobian_sparsity``. Its ``sparsity``, ``colors`` and
        ``n_colors`` describe the colouring.

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
    return _sparse_transform("sparse_jacfwd", func, argnums, sparsity, coloring, "forward", detect_pattern)


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
        A ``SparseJacobian`` returning the backend's sparse container, as ``sparse_jacfwd``'s.

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
    return _sparse_transform("sparse_jacrev", func, argnums, sparsity, coloring, "reverse", detect_pattern)


@not_recorded("sparse_jacobian")
def sparse_jacobian(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    sparsity: Any = None,
    coloring: str = "dsatur",
    mode: str = "auto",
) -> "SparseJacobian":
    """The Jacobian as a sparse matrix, in the direction its pattern needs fewest products for.

    ``mode="bidirectional"`` splits the rows: the densest rows are read from VJPs (one per colour of
    those rows), the others from JVPs (one per colour of the columns, which now only need to differ
    where they share one of the other rows). A Jacobian with one dense row and one dense column (a
    global constraint and a global parameter) takes a few products this way, where forward mode needs one
    per column and reverse mode one per row. Each non-zero is read directly from one product.

    Args:
        func, argnums, sparsity, coloring: as ``sparse_jacfwd``.
        mode: "auto" (forward, reverse or bidirectional, whichever needs the fewest products for the
            pattern), "forward" (as ``sparse_jacfwd``), "reverse" (as ``sparse_jacrev``) or
            "bidirectional".

    Returns:
        A ``SparseJacobian`` returning the backend's sparse container, as ``sparse_jacfwd``'s; its
        ``chosen_mode`` says which direction the colouring takes, ``n_colors`` how many products.

    Example:
        >>> import numpy as np, polyad as pa
        >>> def f(x):  # a dense row (the total) and a dense column (the scale x[0])
        ...     return pa.xp.concat([x[0] * x[1:] ** 2, pa.xp.sum(x, keepdims=True)])
        >>> x = np.linspace(1.0, 2.0, 50)
        >>> jac = pa.sparse_jacobian(f, sparsity=pa.jacobian_sparsity(f)(x))
        >>> jac.chosen_mode, jac.n_colors
        ('bidirectional', 3)
        >>> bool(np.allclose(jac(x).toarray(), pa.jacfwd(f)(x)))
        True
    """
    if mode not in MODES:
        raise ValueError(f"sparse_jacobian(mode={mode!r}): mode must be one of {', '.join(map(repr, MODES))}")
    return _sparse_transform("sparse_jacobian", func, argnums, sparsity, coloring, mode, detect_pattern)


@not_recorded("sparse_hessian")
def sparse_hessian(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    sparsity: Any = None,
    coloring: str = "auto",
) -> "SparseJacobian":
    """The Hessian as a sparse matrix: forward mode over the gradient (Hessian-vector products), one per
    colour of the Hessian's columns. ``coloring="star"`` uses symmetry: a star colouring of its adjacency
    graph (``polyad.api._coloring.star_coloring``), each entry read directly from the product where it is
    alone among its colour in its row, or, by symmetry, from its mirror's (no substitution). An arrowhead
    Hessian (one dense row and column, as any objective with a global parameter has) takes 2 products
    this way instead of one per column. A distance-1 colouring ("dsatur", "largest_first", "natural")
    reads every entry from its own column's product.

    Args:
        func: a function of real floating arrays returning a real 0-d array.
        argnums: int or tuple of ints: the positional arguments to differentiate twice.
        sparsity: the Hessian's pattern as ``pa.hessian_sparsity`` returns, reused at every call; None:
            detected at each call.
        coloring: "auto" (the default: the star colouring where it has fewer colours than the distance-1
            DSATUR colouring, else that one), "star", or a distance-1 order as ``sparse_jacfwd``'s.

    Returns:
        A ``SparseJacobian`` returning the Hessian, (input elements, input elements), in the container of
        the input's backend, as ``sparse_jacfwd``'s.

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = lambda x: pa.xp.sum(x[1:] * x[:-1] ** 2)
        >>> pa.sparse_hessian(f)(np.array([1.0, 2.0, 3.0])).toarray()
        array([[4., 2., 0.],
               [2., 6., 4.],
               [0., 4., 0.]])
        >>> arrowhead = lambda x: pa.xp.sum((x[:-1] ** 2 + x[-1] ** 2) ** 2)  # ARWHEAD's quartic part
        >>> x = np.linspace(0.5, 1.5, 200)
        >>> H = pa.sparse_hessian(arrowhead, sparsity=pa.hessian_sparsity(arrowhead)(x))
        >>> H.n_colors, pa.sparse_hessian(arrowhead, coloring="dsatur", sparsity=H.sparsity).n_colors
        (2, 200)
    """
    gradient = checked_gradient(func, argnums, "sparse_hessian")

    def detect(transform, _, argnums, args, kwargs):
        return symmetric_pattern(detect_pattern(transform, gradient, argnums, args, kwargs))

    if sparsity is not None:  # a Hessian is symmetric: a one-sided pattern would miss entries
        sparsity = as_pattern(sparsity, "sparse_hessian")
        if sparsity.shape[0] != sparsity.shape[1]:
            raise ValueError(
                f"sparse_hessian(sparsity=...): a Hessian's pattern is square, got {sparsity.shape}"
            )
        sparsity = symmetric_pattern(sparsity)
    jac = _sparse_transform("sparse_hessian", gradient, argnums, sparsity, coloring, "forward", detect)
    functools.update_wrapper(jac, func, updated=())
    return jac

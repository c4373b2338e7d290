"""Jacobians (torch.func's semantics and layout): jacrev (one vjp, then vmap over the standard basis of
the outputs), jacfwd (vmap of jvp over the standard basis of the inputs) and hessian (jacfwd of jacrev).

A Jacobian is computed by rows of its basis: ``_Reverse.rows(start, stop)`` gives the cotangents of basis
rows start:stop of the outputs, ``_Forward.rows`` the tangents of those of the inputs. A call runs them
in one chunk, in chunks (``chunk_size``: an int, or "auto" from a memory budget, ``chunking.py``) joined
into a preallocated result, or as Dask tasks (``client=``, ``cluster.py``); ``_assemble`` then cuts the
rows into one O + I block per output leaf and input leaf. Complex layouts (``_complex_jacobians.py``) wrap
all of this around the realified function.
"""

import collections
import functools
import math
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import optree

import polyad.core.dispatch as dispatch
from polyad.api._arguments import (
    check_argnums,
    check_callable,
    check_has_aux,
    check_inputs,
    check_randomness,
    check_real_floating,
    diff_args,
    flatten,
    leaf_name,
    partial_of,
)
from polyad.api._complex_jacobians import check_complex_options, complex_layout_jacobian
from polyad.api.grad import run_vjp
from polyad.api.jvp import run_jvp
from polyad.api.vmap import vmap
from polyad.core import Tensor
from polyad.core.avals import bottom, dtype_name, is_complex, is_read_only, read_only
from polyad.graph.predispatch import recorded
from polyad.ops.creation import arange, asarray, eye, zeros
from polyad.ops.dtypes import astype
from polyad.ops.elementwise import conj
from polyad.ops.linalg.products import registered_identity_rows
from polyad.ops.manipulation import expand_dims, reshape
from polyad.parallel import cluster
from polyad.parallel.plan import Joined, check_chunk_options, measure, nbytes, plan, progress_bar
from polyad.transforms.reverse import release

_BASES = collections.OrderedDict()  # (n, dtype, device) -> the n x n identity, read-only: the last used
_BASES_LOCK = threading.Lock()  # Dask's threads may run jacfwd chunks side by side
BASES_BYTES = 2**20  # a whole basis up to this size is kept for later calls, the last few up to it in all


def _eye_rows(start, stop, n, like):
    """Rows ``start:stop`` of the n x n identity, with ``like``'s dtype and device. A small whole basis
    (one chunk) is made once and kept, read-only (jacfwd copies it if it reaches the result): a fresh one
    costs the kernel's zeroing of new pages on every call (W5's hessian: 0.2 ms of 3). Chunks are not
    kept: their sizes are what the memory budget allowed."""
    dtype, device = like.dtype, bottom(like).device
    whole = start == 0 and stop == n and n * n * getattr(dtype, "itemsize", 8) <= BASES_BYTES
    key = basis = None
    if whole:
        try:
            key = (n, type(dtype), dtype, device)
            with _BASES_LOCK:
                basis = _BASES.get(key)
                if basis is not None:
                    _BASES.move_to_end(key)
                    return basis
        except TypeError:  # a dtype or device that cannot be a key
            key = None
    basis = eye(stop - start, n, k=start, dtype=dtype, device=device)
    if key is not None and not isinstance(basis, Tensor) and read_only(basis) is not None:
        with _BASES_LOCK:
            _BASES[key] = basis
            while sum(b.nbytes for b in _BASES.values()) > BASES_BYTES:
                _BASES.popitem(last=False)
    return basis


def _own_memory(tree):
    """``tree`` with every array marked read-only copied: views of the caller's arrays (a product by the
    identity basis) and the kept basis itself never reach the caller."""
    return optree.tree_map(lambda x: asarray(x, copy=True) if is_read_only(x) else x, tree)


def _one_hot(i, n, like):
    """Row ``i`` of the n x n identity (under vmap: a batch of rows), with ``like``'s dtype and device."""
    return astype(arange(n, device=bottom(like).device) == i, like.dtype)


def _split_basis(rows, leaves, sizes, lead):
    """Cut basis ``rows`` (last axis: the flattened leaves) into arrays shaped like ``leaves``."""
    parts, off = [], 0
    for x, n in zip(leaves, sizes):
        piece = rows if len(leaves) == 1 else rows[(slice(None),) * lead + (slice(off, off + n), ...)]
        if tuple(piece.shape[lead:]) != tuple(x.shape):  # kept as it is otherwise: the identity stays known
            piece = reshape(piece, tuple(piece.shape[:lead]) + tuple(x.shape))
        parts.append(piece if piece.dtype == x.dtype else astype(piece, x.dtype))
        off += n
    return parts


def _offsets(shapes):
    """``(start, stop)`` of each shape's elements in the concatenation of them all, flattened."""
    spans, off = [], 0
    for s in shapes:
        n = math.prod(s)
        spans.append((off, off + n))
        off += n
    return spans


def _assemble(jac, o_shapes, o_tree, i_shapes, in_tree, single, by_output, reshape=reshape):
    """The torch.func layout: the output pytree of (a tuple over argnums of) input pytrees of O + I blocks.

    ``jac`` is the Jacobian as a transform computed it: with ``by_output`` (jacfwd), one array
    (*O, total inputs) per output leaf; else (jacrev), one array (total outputs, *I) per input leaf.
    ``reshape``: polyad's, or Dask's for lazy Dask arrays.
    """
    o_spans, i_spans = _offsets(o_shapes), _offsets(i_shapes)
    out_leaves = []
    for i, o in enumerate(o_shapes):
        blocks = []
        for k, x in enumerate(i_shapes):
            if by_output:
                a, (start, stop) = jac[i], i_spans[k]
                block = a if len(i_shapes) == 1 else a[..., start:stop]
            else:
                a, (start, stop) = jac[k], o_spans[i]
                block = a if len(o_shapes) == 1 else a[start:stop, ...]
            blocks.append(reshape(block, o + x))
        per_arg = optree.tree_unflatten(in_tree, blocks)
        out_leaves.append(per_arg[0] if single else per_arg)
    return optree.tree_unflatten(o_tree, out_leaves)


def _check_jacobian_dtypes(leaves, tree, what, root, holomorphic, nums=None):
    """Real floating leaves; with ``holomorphic``, complex ones (JAX's rule)."""
    if not holomorphic:
        return check_real_floating(leaves, tree, what, root, nums)
    for i, x in enumerate(leaves):
        if not is_complex(x):
            raise TypeError(
                f"{what} with holomorphic=True: {leaf_name(tree, i, root, nums)} has dtype "
                f"{dtype_name(x.dtype)}; the complex Jacobian of a holomorphic function needs complex "
                "inputs and outputs (complex_layout='real' takes real and complex ones alike)"
            )


class _Spec(NamedTuple):
    """What a Jacobian computes; with ``client=`` it travels to the workers, which compute rows of it."""

    mode: str  # "jacrev" or "jacfwd"
    func: object
    argnums: object
    has_aux: bool
    holomorphic: bool
    randomness: str  # of jacfwd's vmap over the basis
    loop: bool  # chunk_size=1: plain jvp calls, no vmap (jacrev's chunks of one row never vmap)


class _Options(NamedTuple):
    """Where and in what pieces a Jacobian runs (the driver's business, not the workers')."""

    chunk_size: object  # None, a positive int or "auto"
    max_memory: object
    client: object  # None or a cluster.Distributed
    progress: bool


class _Call:
    """One call of a Jacobian: its differentiated arguments checked, ``func`` as a function of them."""

    def __init__(self, spec, args, kwargs):
        self.what, self.single, self.nums, self.diff = diff_args(spec.mode, spec.func, spec.argnums, args)
        self.in_flat, self.in_tree = flatten(self.diff)
        check_inputs(self.in_flat, self.in_tree, self.what, "argument", self.nums)
        _check_jacobian_dtypes(self.in_flat, self.in_tree, self.what, "argument", spec.holomorphic, self.nums)
        if not self.in_flat:
            raise ValueError(f"{self.what}: the differentiated arguments hold no arrays")
        self.partial = partial_of(spec.func, args, kwargs, self.nums)
        self.i_shapes = [tuple(x.shape) for x in self.in_flat]


class _Reverse:
    """jacrev's rows: the forward pass recorded once, then the vjp of each basis row of the outputs. Rows
    are input cotangents (each in its input's dtype): one array (rows, *I) per input leaf."""

    axis = 0

    def __init__(self, spec, call):
        # run_vjp checks real outputs (real floating, as before holomorphic existed); complex ones here
        out, self.backward, self.aux, self.tape = run_vjp(
            call.partial, call.diff, spec.has_aux, call.what, nums=call.nums, jacobian=not spec.holomorphic
        )
        self.o_flat, self.o_tree = flatten(out)
        if spec.holomorphic:
            _check_jacobian_dtypes(self.o_flat, self.o_tree, call.what, "output", True)
        self.sizes = [math.prod(o.shape) for o in self.o_flat]
        self.total = sum(self.sizes)
        self.spec, self.call = spec, call

    def _row(self, i):
        # the basis row is made here and handed over, in one expression: no local name keeps the whole
        # basis (total x total under vmap) alive while the backward pass runs
        return optree.tree_leaves(
            self.backward(
                optree.tree_unflatten(
                    self.o_tree,
                    _split_basis(_one_hot(i, self.total, self.o_flat[0]), self.o_flat, self.sizes, 0),
                ),
                False,
                ones=self.total == 1,  # the basis of a scalar output is one: rules skip products by it
            )
        )

    def finish(self):
        """The rows are done: the caller's arrays the tape read are writeable again now, not when the
        garbage collector breaks a cycle through the tape (a loop body closing over a leaf makes one)."""
        release(self.tape.held)

    def rows(self, start, stop):
        if stop == start:
            rows = [zeros((0, *x.shape), dtype=x.dtype, device=bottom(x).device) for x in self.call.in_flat]
        elif stop - start == 1:  # one row (a scalar loss, or chunk_size=1): a vjp, no batch level
            rows = [expand_dims(r, axis=0) for r in self._row(start)]
        else:
            rows = vmap(self._row)(arange(start, stop, device=bottom(self.o_flat[0]).device))
        # the vjp of basis row i is row i of conj(J) (PyTorch's convention): J for a holomorphic f
        return [conj(r) for r in rows] if self.spec.holomorphic else rows

    def assemble(self, rows, reshape=reshape):
        o_shapes = [tuple(o.shape) for o in self.o_flat]
        c = self.call
        return _assemble(rows, o_shapes, self.o_tree, c.i_shapes, c.in_tree, c.single, False, reshape)


class _Forward:
    """jacfwd's rows: the jvp of each basis row of the inputs, under one vmap per chunk. Rows are output
    tangents (each in its output's dtype): one array (*O, rows) per output leaf."""

    axis = -1

    def __init__(self, spec, call):
        self.sizes = [math.prod(s) for s in call.i_shapes]
        self.total = sum(self.sizes)
        self.spec, self.call = spec, call
        self.aux = self.t_tree = None

    def _push(self, basis_row):
        c = self.call
        tangents = tuple(optree.tree_unflatten(c.in_tree, _split_basis(basis_row, c.in_flat, self.sizes, 0)))
        res = run_jvp(c.partial, c.diff, tangents, False, self.spec.has_aux, c.what)
        return (res[1], res[2]) if self.spec.has_aux else res[1]

    def rows(self, start, stop):
        basis = _eye_rows(start, stop, self.total, self.call.in_flat[0])
        with registered_identity_rows(basis, start):  # matmul's batching rule skips products by it
            return self._rows(basis, start, stop)

    def _rows(self, basis, start, stop):
        spec = self.spec
        if spec.loop and stop - start == 1:
            res = self._push(reshape(basis, (self.total,)))
            tangents, aux = res if spec.has_aux else (res, None)
            tangents = optree.tree_map(lambda t: expand_dims(t, axis=-1), tangents)
        else:
            out_dims = (-1, None) if spec.has_aux else -1
            res = vmap(self._push, out_dims=out_dims, randomness=spec.randomness)(basis)
            tangents, aux = res if spec.has_aux else (res, None)
        t_flat, t_tree = flatten(tangents)  # each (*O, stop - start)
        if self.t_tree is None:
            _check_jacobian_dtypes(t_flat, t_tree, self.call.what, "output", spec.holomorphic)
            self.t_tree, self.aux = t_tree, aux
        return t_flat

    def assemble(self, rows, reshape=reshape, o_shapes=None):
        o_shapes = o_shapes or [tuple(t.shape[:-1]) for t in rows]
        c = self.call
        return _assemble(rows, o_shapes, self.t_tree, c.i_shapes, c.in_tree, c.single, True, reshape)


_ENGINES = {"jacrev": _Reverse, "jacfwd": _Forward}


def _axes(axis):
    return lambda leaves: [axis % len(p.shape) for p in leaves]


def _jacobian(spec, opts, args, kwargs):
    call = _Call(spec, args, kwargs)
    setting = cluster.resolve(opts.client, optree.tree_leaves((args, kwargs)), call.what)
    if setting is not None:
        return _on_cluster(spec, opts, setting, call, args, kwargs)
    engine = _ENGINES[spec.mode](spec, call)
    chunks = _plan(spec, opts, call, None, engine.total)[0]
    joined = Joined(engine.total, _axes(engine.axis))
    bar = progress_bar(opts.progress, engine.total, call.what, "row")
    try:
        for start in range(0, max(engine.total, 1), chunks.chunk_size):
            stop = min(start + chunks.chunk_size, engine.total)
            joined.add(start, stop, engine.rows(start, stop))
            bar.update(stop - start)
    finally:
        bar.close()
        getattr(engine, "finish", lambda: None)()
    jac = _own_memory(engine.assemble(joined.result()))
    return (jac, engine.aux) if spec.has_aux else jac


def _plan(spec, opts, call, setting, rows=None, need_shapes=False):
    """``(ChunkPlan, (output ShapeDtypes, their tree) or None)`` of a call. Runs the function on abstract
    arrays (eval_shape) when the plan needs it: ``chunk_size="auto"``, rows not known yet (jacrev's
    outputs), or ``need_shapes``; without an abstract run (a Python branch on a value), one real run."""
    per_row = fixed = 0
    shapes = None
    if opts.chunk_size == "auto" or rows is None or need_shapes:
        try:
            out, inter, xp = measure(call.partial, call.diff, call.what)
        except ValueError:
            if opts.chunk_size == "auto":
                raise
            out, inter, xp = call.partial(*call.diff), 0, None
        o_flat, o_tree = flatten(out[0] if spec.has_aux else out)
        shapes = (o_flat, o_tree)
        n_out, n_in = (sum(math.prod(a.shape) for a in leaves) for leaves in (o_flat, call.in_flat))
        if rows is None:
            rows = n_out if spec.mode == "jacrev" else n_in
        if xp is not None:
            in_bytes, out_bytes = nbytes(call.in_flat, xp), nbytes(o_flat, xp)
            # a row: a basis row, a row of the result and a batched copy of every intermediate; fixed:
            # the result, preallocated (each task's own rows on a cluster), and jacrev's forward pass
            per_row = inter + in_bytes + out_bytes
            if spec.mode == "jacrev":
                fixed = inter + (0 if setting else n_out * in_bytes)
            else:
                fixed = 0 if setting else n_in * out_bytes
    split = cluster.n_threads(setting) if setting is not None else 1
    return plan(opts.chunk_size, rows, per_row, fixed, opts.max_memory, call.what, split), shapes


def _chunk_plan(spec, opts):
    def chunk_plan(*args, **kwargs):
        """The ChunkPlan this Jacobian would use for these arguments (nothing is differentiated)."""
        call = _Call(spec, args, kwargs)
        return _plan(
            spec, opts, call, cluster.resolve(opts.client, optree.tree_leaves((args, kwargs)), call.what)
        )[0]

    return chunk_plan


# ------------------------------------------------------------------------------ on a Dask cluster


def _jacobian_task(spec, arguments, start, stop, chunk):
    """On a Dask worker: rows start:stop of the Jacobian, ``chunk`` rows at a time (the caller's chunk
    size: what one vmap holds), as NumPy arrays, one list of leaves per chunk (the driver copies each into
    the result: joined here first, they would be copied twice), and aux, from the first."""
    args, kwargs = cluster.to_backend(arguments)
    engine = _ENGINES[spec.mode](spec, _Call(spec, args, kwargs))
    parts = [cluster.to_host(engine.rows(a, min(a + chunk, stop))) for a in range(start, stop, chunk)]
    first = start == 0
    tree = (engine.o_tree if spec.mode == "jacrev" else engine.t_tree) if first else None
    return parts, (cluster.to_host(engine.aux) if spec.has_aux and first else None), tree


def _on_cluster(spec, opts, setting, call, args, kwargs):
    cluster.check_randomness(spec.randomness, call.what)
    lazy = setting.lazy
    # jacrev's rows are its outputs: their number (and a lazy result's shapes) from eval_shape here
    rows = sum(math.prod(s) for s in call.i_shapes) if spec.mode == "jacfwd" else None
    chunks, shapes = _plan(spec, opts, call, setting, rows, need_shapes=lazy)
    if chunks.rows == 0:
        return _jacobian(spec, opts._replace(client=None), args, kwargs)
    ranges = [(s, min(s + chunks.chunk_size, chunks.rows)) for s in range(0, chunks.rows, chunks.chunk_size)]
    if not lazy:  # an array: the chunks in one run per worker thread (a lazy result: a task per block)
        ranges = [(run[0][0], run[-1][1]) for run in cluster.runs(ranges, setting)]
    arguments = (cluster.to_host(args), cluster.to_host(kwargs))
    parts = [(a, b, chunks.chunk_size) for a, b in ranges]
    tasks = cluster.submit(setting, call.what, _jacobian_task, spec, arguments, parts)
    engine = object.__new__(_ENGINES[spec.mode])  # only to assemble: the driver computes no row
    engine.spec, engine.call = spec, call
    if lazy:
        o_flat, engine.o_tree = shapes
        engine.t_tree = engine.o_tree
        rows = []
        for k in range(len(call.in_flat) if spec.mode == "jacrev" else len(o_flat)):
            ref = call.in_flat[k] if spec.mode == "jacrev" else o_flat[k]
            parts = [
                cluster.dask_array(
                    cluster.item(t, 0, 0, k),
                    (b - a, *ref.shape) if spec.mode == "jacrev" else (*ref.shape, b - a),
                    ref.dtype,
                )
                for t, (a, b) in zip(tasks, ranges)
            ]
            rows.append(cluster.dask_concat(parts, engine.axis % (len(ref.shape) + 1)))
        engine.o_flat = o_flat
        o_shapes = [tuple(o.shape) for o in o_flat]
        kw = {} if spec.mode == "jacrev" else {"o_shapes": o_shapes}
        jac = engine.assemble(rows, reshape=_dask_reshape, **kw)
        return (jac, cluster.item(tasks[0], 1)) if spec.has_aux else jac
    ref = call.in_flat[0]
    backend = dispatch.backend_of_array(ref)
    joined = Joined(chunks.rows, _axes(engine.axis))

    def join(i, result):  # as each task ends, while the others still run
        start, stop = ranges[i]
        for a, piece in zip(range(start, stop, chunks.chunk_size), result[0]):
            b = min(a + chunks.chunk_size, stop)
            joined.add(a, b, cluster.to_backend(piece, backend, ref.device))

    labels = [f"rows {a}:{b}" for a, b in ranges]
    results = cluster.gather(setting, call.what, tasks, labels, opts.progress, join)
    if spec.mode == "jacrev":
        engine.o_flat, engine.o_tree = shapes
    else:
        engine.t_tree = results[0][2]
    jac = engine.assemble(joined.result())
    return (jac, cluster.to_backend(results[0][1], backend, ref.device)) if spec.has_aux else jac


def _dask_reshape(a, shape):
    return a if tuple(a.shape) == tuple(shape) else a.reshape(shape)


# ------------------------------------------------------------------------------ the public transforms


def _make(mode, func, argnums, has_aux, randomness, options):
    """A Jacobian transform: checks its configuration once, returns the function of the arguments."""
    chunk_size, holomorphic, complex_layout, max_memory, client, progress = options
    check_callable(func, mode)
    check_argnums(argnums, mode)
    check_has_aux(has_aux, mode)
    check_randomness(randomness, mode)
    check_complex_options(holomorphic, complex_layout, mode)
    chunk_size = check_chunk_options(chunk_size, max_memory, mode)
    check_has_aux(progress, mode, "progress")
    client = cluster.check_client(client, mode)
    if complex_layout is not None:
        passed = {"chunk_size": chunk_size, "max_memory": max_memory, "client": client, "progress": progress}
        if mode == "jacfwd":
            passed["randomness"] = randomness
        real_transform = jacrev if mode == "jacrev" else jacfwd
        jac_f = complex_layout_jacobian(real_transform, mode, func, argnums, has_aux, complex_layout, passed)
        chunk_plan = jac_f.chunk_plan
        jac_f = functools.wraps(func)(jac_f)
        jac_f.chunk_plan = chunk_plan  # not func's own, which wraps copied
        return jac_f
    spec = _Spec(mode, func, argnums, has_aux, holomorphic, randomness, chunk_size == 1)
    opts = _Options(chunk_size, max_memory, client, progress)

    @functools.wraps(func)
    def jac_f(*args, **kwargs):
        return _jacobian(spec, opts, args, kwargs)

    jac_f.chunk_plan = _chunk_plan(spec, opts)
    return jac_f


_SHARED_ARGS = """
        chunk_size: None: every basis row in one vmap; k: chunks of k rows (the result is preallocated
            and filled chunk by chunk, capping peak memory); 1: a plain loop of {one} calls, no vmap;
            "auto": the largest chunk whose estimated memory fits ``max_memory`` (see
            ``polyad.parallel.plan``; ``transformed.chunk_plan(*args)`` reports the choice).
        holomorphic: True: ``func`` is holomorphic with complex inputs and outputs; the result is its
            complex Jacobian ``df/dz`` (JAX's ``holomorphic=True``).
        complex_layout: for any function of complex values (holomorphic or not): "real", the Jacobian
            of the map on (real, imaginary) pairs, each complex leaf of shape S a real one of shape
            S + (2,); "wirtinger", the pair ``(df/dz, df/dz̄)``. See ``polyad.api._complex_jacobians``.
        max_memory: the memory budget of ``chunk_size="auto"`` (bytes, or a string like "512MiB";
            default ``polyad.config.max_memory``); implies "auto". With a client: per task.
        client: a ``distributed.Client`` or ``pa.distributed(client, ...)``: the chunks run as tasks on
            that Dask cluster (without ``chunk_size``: one chunk per worker thread). Default: the
            innermost ``with pa.distributed(...)`` block, if any. See ``pa.distributed``.
        progress: show a progress bar over the rows (tqdm; Dask's own bar with a client)."""


@recorded("jacrev")
def jacrev(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    has_aux: bool = False,
    chunk_size: int | str | None = None,
    holomorphic: bool = False,
    complex_layout: str | None = None,
    max_memory: int | str | None = None,
    client: Any = None,
    progress: bool = False,
) -> Callable[..., Any]:
    """The Jacobian by reverse mode: one ``vjp``, then ``vmap(vjp_fn)`` over the standard basis of the
    outputs (torch.func.jacrev's semantics).

    Args:
        func: a function of real floating arrays returning a real floating array or a pytree of them
            (complex ones with ``holomorphic`` or ``complex_layout``).
        argnums: int or tuple of ints: the positional arguments to differentiate with respect to.
        has_aux: ``func`` returns ``(output, aux)``; aux is returned unchanged, not differentiated.{args}

    Returns:
        A function returning the Jacobian (and aux). For an output leaf of shape O and an input of shape
        I the block has shape O + I. With tuple ``argnums`` each output leaf holds a tuple with one entry
        per argnum; pytree inputs give pytrees of blocks; pytree outputs give the output's structure
        around them. Its rows are input cotangents: each block has its input's dtype.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jacrev(lambda x: x ** 2)(np.array([1.0, 2.0]))
        array([[2., 0.],
               [0., 4.]])
        >>> pa.jacrev(lambda z: z * pa.xp.conj(z), complex_layout="wirtinger")(np.array([1 + 2j]))[1]
        array([[1.+2.j]])
    """
    options = (chunk_size, holomorphic, complex_layout, max_memory, client, progress)
    return _make("jacrev", func, argnums, has_aux, "error", options)


@recorded("jacfwd")
def jacfwd(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    has_aux: bool = False,
    *,
    randomness: str = "error",
    chunk_size: int | str | None = None,
    holomorphic: bool = False,
    complex_layout: str | None = None,
    max_memory: int | str | None = None,
    client: Any = None,
    progress: bool = False,
) -> Callable[..., Any]:
    """The Jacobian by forward mode: ``vmap(jvp)`` over the standard basis of the inputs
    (torch.func.jacfwd's semantics).

    Args:
        func, argnums, has_aux: as ``jacrev``.
        randomness: passed to the vmap over the basis ("error", "different" or "same").{args}

    Returns:
        A function returning the Jacobian (and aux), laid out as ``jacrev``'s: shape O + I per output leaf
        and input. Its columns are output tangents: each block has its output's dtype.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.jacfwd(lambda x: x ** 3)(np.array([1.0, 2.0]))
        array([[ 3.,  0.],
               [ 0., 12.]])
        >>> pa.jacfwd(pa.xp.exp, holomorphic=True)(np.array([1j * np.pi]))
        array([[-1.+1.2246468e-16j]])
    """
    options = (chunk_size, holomorphic, complex_layout, max_memory, client, progress)
    return _make("jacfwd", func, argnums, has_aux, randomness, options)


jacrev.__doc__ = jacrev.__doc__.format(args=_SHARED_ARGS.format(one="vjp"))
jacfwd.__doc__ = jacfwd.__doc__.format(args=_SHARED_ARGS.format(one="jvp"))


@recorded("hessian")
def hessian(
    func: Callable[..., Any],
    argnums: int | tuple[int, ...] = 0,
    *,
    chunk_size: int | str | None = None,
    holomorphic: bool = False,
    complex_layout: str | None = None,
    max_memory: int | str | None = None,
    client: Any = None,
    progress: bool = False,
) -> Callable[..., Any]:
    """The Hessian, ``jacfwd(jacrev(func, argnums), argnums)`` (forward over reverse, as torch.func).

    Args:
        func: a function of real floating arrays returning a real 0-d array (complex ones with
            ``holomorphic`` or ``complex_layout``).
        argnums: int or tuple of ints: the positional arguments to differentiate twice.
        chunk_size, max_memory, client, progress: those of the outer ``jacfwd`` (its rows are the
            gradient's derivatives along each input direction).
        holomorphic, complex_layout: as ``jacrev``, for both derivatives: "real" gives the Hessian of
            the realified map; "wirtinger" the pair of pairs
            ``((d2f/dz dz, d2f/dz̄ dz), (d2f/dz dz̄, d2f/dz̄ dz̄))`` (the outer pair over the second
            derivative).

    Returns:
        A function returning the Hessian: for an input of shape I, an array of shape I + I (with tuple
        ``argnums``, nested tuples of blocks, one per pair of arguments).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.hessian(lambda x: pa.xp.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    check_callable(func, "hessian")
    check_argnums(argnums, "hessian")
    check_complex_options(holomorphic, complex_layout, "hessian")
    first = jacrev(func, argnums, holomorphic=holomorphic, complex_layout=complex_layout)
    forward_over_reverse = jacfwd(
        first,
        argnums,
        chunk_size=chunk_size,
        holomorphic=holomorphic,
        complex_layout=complex_layout,
        max_memory=max_memory,
        client=client,
        progress=progress,
    )

    @functools.wraps(func)
    def hessian_f(*args, **kwargs):
        what, _, nums, diff = diff_args("hessian", func, argnums, args)
        in_flat, in_tree = flatten(diff)
        check_inputs(in_flat, in_tree, what, "argument", nums)  # named as hessian's, not jacfwd's
        if complex_layout is None:
            _check_jacobian_dtypes(in_flat, in_tree, what, "argument", holomorphic, nums)
        return forward_over_reverse(*args, **kwargs)

    hessian_f.chunk_plan = forward_over_reverse.chunk_plan  # type: ignore[attr-defined]
    return hessian_f

"""pa.jit: trace a function once per input signature, optimise and fuse its graph, replay it compiled.

A call flattens the arguments, builds the signature (tree structure; per array its backend, shape, dtype
and device; the values of static arguments and of non-array leaves) and looks it up in a bounded LRU cache.
On a miss, ``polyad.graph.tracing.trace_graph`` records the function on abstract values (no data, so Python
control flow on a traced value raises a ``ConcretizationError``), then the pipeline runs:
``optimize`` -> ``fuse(graph, backend, math)`` -> ``reuse_buffers`` (``polyad.graph.compiler``) ->
``Graph.compile``.

Arguments that are tensors of active transforms (``pa.grad(pa.jit(f))``, ``pa.vmap(pa.jit(f))``, a jit
inside another jit or inside ``make_graph``) take another path: the optimised, unfused graph is replayed
by binding each of its ops, so the enclosing transforms differentiate, batch or record every op by its
rules (fused kernels need not have rules).
"""

import collections
import functools
import inspect
import threading
from collections.abc import Callable, Iterable

import optree

import polyad.core as core
import polyad.core.dispatch as dispatch
import polyad.graph.compiler as compiler
from polyad.api import _closed_over as closed_over
from polyad.api._arguments import check_callable, func_name, is_dim
from polyad.api._weak_floats import WEAK_FLOAT, is_traced_leaf, weak_aval, weak_value
from polyad.backends import fusion_compiler
from polyad.core import FreshTensor, Tensor
from polyad.core.avals import ShapeDtype, bottom
from polyad.core.dispatch import BY_TYPE
from polyad.core.tensor import reconnect
from polyad.graph import predispatch
from polyad.graph.compiler.codegen import interpret_graph
from polyad.graph.compiler.fusion import check_math
from polyad.graph.ir import Const
from polyad.graph.tracing import trace_graph

CACHE_SIZE = 64  # traced signatures kept per jitted function (least recently used goes first)


def jit(
    func: Callable,
    *,
    static_argnums: int | Iterable[int] = (),
    static_argnames: str | Iterable[str] = (),
    donate_argnums: int | Iterable[int] = (),
    math: str = "fast",
) -> "Jitted":
    """``func`` traced once per input signature and replayed as compiled straight-line code.

    The first call with a new signature (tree structure of the arguments; each array's backend, shape,
    dtype and device; the values of static arguments) traces ``func`` on abstract values, optimises and
    fuses the graph and compiles it for the arrays' backend; later calls with that signature run the
    compiled code without calling ``func`` (Python side effects happen at trace time only, as in JAX).
    Up to ``CACHE_SIZE`` (64) signatures are kept per jitted function, the least recently used dropped
    first (``cache_info()``, ``clear_cache()``).

    While tracing, array arguments have no values: ``bool``, ``float``, ``int``, ``item()`` or
    ``np.asarray`` of one raises ``pa.ConcretizationError`` naming it. Mark such an argument static, or
    write the branch with ``xp.where``. Python floats are traced too, weakly typed as in JAX (a new value
    does not trace again; ``x32 * dt`` stays float32, as eagerly; ``polyad/api/_weak_floats.py``). Python
    ints, complex numbers, strings and dtypes among the arguments are part of the signature (a new one
    traces again), so they keep their Python semantics; pass an array to trace over its values. Other
    objects are refused unless marked static (their hash and ``==`` then key the
    cache, so they must compare by value). Arrays the function closes over are read at each call, so an
    in-place change to one (``W[0] = 1.0``, ``W += dW``) is seen, as eagerly (JAX bakes them in at the
    first trace): an array that reaches a traced op is an input of the compiled code; one the function
    computes with by its library alone (``W * 2.0`` of a NumPy ``W``) is compared with a copy at each
    call, and a change traces again (``polyad.api._closed_over``). A rebound global is not seen (pass
    what changes as an argument). Arrays made inside the function are constants of the trace, folded at
    compile time. Values of enclosing transforms it
    closes over are inputs of the trace, replayed on at each call. ``pa.random`` draws are refused
    inside (they would replay as constants): draw outside and pass the values in.

    ``pa.jit`` composes with every transform both ways: ``pa.jit(pa.grad(f))`` compiles the gradient,
    ``pa.grad(pa.jit(f))`` (and jvp, vmap, the Jacobians) transforms the traced graph op by op.

    Results may differ from eager ones in the last bits, as JAX's do: on NumPy arrays with Numba installed
    (the ``jit`` extra), element-wise code fuses into one loop whose functions (exp, log, sin, tanh, pow,
    erf...) are vectorised ones, each within 1 ulp (exp, log) or 2 ulps (the others) of the exact result
    where NumPy's are within about 1 (the table per function and dtype is in the documentation's
    "Compilation" page). ``math="exact"`` gives eager's results bit for bit: those functions then run as
    NumPy calls between the fused loops, which hold only the correctly rounded arithmetic. Large fused
    loops run on several cores when that was measured to pay (``POLYAD_FUSION_THREADS`` caps the threads).

    Args:
        func: a function of arrays (pytrees allowed, keyword arguments too), returning arrays, Python
            numbers or pytrees of them.
        static_argnums: positions of arguments that are not traced: their values (hashable) are part of
            the signature, and Python control flow on them is free. Names of the same parameters are
            static too when passed by keyword.
        static_argnames: names of keyword arguments that are static (and their positions, if ``func``'s
            signature has them).
        donate_argnums: positions of array arguments the caller gives up: the compiled code may reuse
            their memory for its results, so after the call the caller must not read those arrays again
            (as with JAX). Today no pass writes into them on any backend; the promise is recorded on the
            graph (``graph.donated``) for the optimiser.

    Returns:
        A ``Jitted`` callable with ``lower(*args)`` (the traced, optimised and compiled forms),
        ``cache_info()`` and ``clear_cache()``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> f = pa.jit(pa.grad(lambda x: pa.xp.sum(pa.xp.sin(x) ** 2)))
        >>> f(np.array([0.0, np.pi / 4]))
        array([0., 1.])
        >>> pa.grad(lambda x: pa.xp.sum(pa.jit(pa.xp.exp)(x)))(np.zeros(2))
        array([1., 1.])
    """
    check_callable(func, "jit")
    check_math(math, "jit")
    return Jitted(func, static_argnums, static_argnames, donate_argnums, math)


def _int_tuple(value, name):
    nums = (value,) if is_dim(value) else tuple(value) if isinstance(value, tuple | list | range) else None
    if nums is None or not all(is_dim(n) for n in nums):
        raise TypeError(f"jit({name}={value!r}): {name} must be an int or a tuple of ints")
    return nums


def _str_tuple(value, name):
    names = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, tuple | list) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise TypeError(f"jit({name}={value!r}): {name} must be a str or a tuple of str")
    return names


def _pipeline(optimized, backend, math, device=None):
    """``(fused graph, compiled code)`` of an optimised graph: fusion (its loops' functions by ``math``),
    then the bodies of its loops compiled by this same pipeline, then in-place reuse of dead buffers last
    (the passes before it do not know in-place ops), then code."""
    fused = compiler.fuse(optimized, backend.name, math)
    fused = compiler.compile_bodies(fused, lambda body: _compile_body(body, backend, math, device))
    fused = compiler.reuse_buffers(fused, backend.name)
    return fused, fused.compile(backend.name, device)


def _compile_body(graph, backend, math, device):
    optimized = compiler.optimize(graph)
    _, compiled = _pipeline(optimized, backend, math, device)
    fn = compiled.fn
    whole = compiler.step_function(optimized, backend, fn)  # a small state's step: one call
    return whole if whole is not None else lambda *args: fn(*args)  # the flat arguments as they come


class _Entry:
    """One traced signature: the captured graph, the optimised graph (replayed under transforms), the
    compiled fused graph (for raw arrays) and the structure of the outputs.

    A first call need not wait for the optimiser and the fusion (tens of milliseconds for a graph of a
    few thousand nodes, the steps of an unrolled loop): ``finish`` is then the rest of the pipeline,
    which a background thread runs (``fusion_compiler.submit``) while calls run ``graph`` as it was traced
    (eager's kernels); ``run`` switches when it is done. ``optimized``, ``fused`` and ``compiled`` run it
    at once where asked for before (``lower``, a transformed call)."""

    __slots__ = (
        "graph", "_optimized", "_fused", "_compiled", "run", "out_tree", "single", "lifted",
        "closed", "watch", "_finish", "_lock",
    )  # fmt: skip

    def __init__(self, graph, optimized, fused, compiled, lifted=(), closed=(), watch=(), finish=None):
        self.graph = graph
        self._optimized = optimized
        self._fused = fused
        self._compiled = compiled
        # backend arrays the function closed over, inputs before those: read at each call, so that an
        # in-place change to one between calls is seen, as eagerly
        self.closed = tuple(closed)
        self.watch = watch  # arrays it names that NumPy consumed while tracing (closed_over.watched)
        self.run = None
        if compiled is not None:
            self._install(fused if fused is not None else graph, compiled)
        self.out_tree = graph.out_tree
        self.single = self.out_tree.is_leaf()  # one output, no pytree to rebuild
        # tensors of enclosing transforms the function closed over, the graph's last inputs: such an
        # entry serves one call only (it is not cached)
        self.lifted = lifted
        self._finish = finish  # () -> (optimized, fused, compiled): the pipeline still to run, or None
        self._lock = threading.Lock() if finish is not None else None

    def _install(self, graph, compiled):
        run = compiled.fn
        held = [i for i, r in enumerate(graph.outputs) if isinstance(r, Const)]
        if held:  # an output that is a constant of the trace: a fresh copy per call, as eagerly
            run = functools.partial(_copy_outputs, compiled.fn, held, compiled.backend.xp)
        if self.closed:
            run = functools.partial(_with_closed, run, self.closed)
        self.run = run

    def finish(self):
        """Run the rest of the pipeline now if it has not run (the background thread's job)."""
        if self._finish is None:
            return
        with self._lock:
            if self._finish is None:
                return
            optimized, fused, compiled = self._finish()
            self._optimized, self._fused, self._compiled = optimized, fused, compiled
            self._install(fused, compiled)
            self._finish = None

    @property
    def optimized(self):
        self.finish()
        return self._optimized

    @property
    def fused(self):
        self.finish()
        return self._fused

    @property
    def compiled(self):
        self.finish()
        return self._compiled


class Lowered:
    """What ``Jitted.lower(*args)`` returns: the forms of one traced signature. ``graph``: as traced;
    ``optimized_graph``: after ``polyad.graph.compiler.optimize``; ``fused_graph``: after ``fuse``;
    ``compiled``: the ``CompiledGraph`` (``compiled.source`` is the generated code); ``as_text()``: all
    of it as text."""

    def __init__(self, entry):
        self.graph = entry.graph
        self.optimized_graph = entry.optimized
        self.fused_graph = entry.fused
        self.compiled = entry.compiled

    def as_text(self):
        text = f"# traced\n{self.graph}\n# optimized\n{self.optimized_graph}\n"
        if self.compiled is None:
            return text + "# not compiled: it closes over values of enclosing transforms, replayed op by op"
        return (
            f"{text}# fused\n{self.fused_graph}\n# compiled for {self.compiled.backend.name}\n"
            f"{self.compiled.source}"
        )

    def __repr__(self):
        return self.as_text()


def _device(x):
    """The device of array ``x`` as a part of a cache key (hashable)."""
    return dispatch.device_key(getattr(x, "device", None))


class Jitted:
    """A function compiled by ``pa.jit``: call it like the function. See ``pa.jit``."""

    def __init__(self, func, static_argnums, static_argnames, donate_argnums, math="fast"):
        nums = _int_tuple(static_argnums, "static_argnums")
        names = _str_tuple(static_argnames, "static_argnames")
        donate = _int_tuple(donate_argnums, "donate_argnums")
        params = _parameters(func)
        if params is not None:
            kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            positional = [p.name for p in params.values() if p.kind in kinds]
            var_pos = any(p.kind == p.VAR_POSITIONAL for p in params.values())
            var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
            for n in nums + donate:
                if not var_pos and not -len(positional) <= n < len(positional):
                    which = "static_argnums" if n in nums else "donate_argnums"
                    raise ValueError(
                        f"jit({which}={n!r}): {func_name(func)} takes {len(positional)} positional "
                        f"argument(s) ({', '.join(positional) or 'none'}); {n} is out of range"
                    )
            for name in names:
                if name not in params and not var_kw:
                    raise ValueError(
                        f"jit(static_argnames={name!r}): {func_name(func)} has no parameter {name!r} (it has "
                        f"{', '.join(params) or 'none'})"
                    )
            # as JAX: a static position is static by name too, and a static name at its position
            count = len(positional)
            by_position = tuple(positional[n] for n in nums if -count <= n < count)
            names = tuple(dict.fromkeys(names + by_position))
            keyword_ok = [n for n in positional if params[n].kind is not inspect.Parameter.POSITIONAL_ONLY]
            by_name = tuple(positional.index(n) for n in names if n in keyword_ok)
            nums = tuple(dict.fromkeys(nums + by_name))
        overlap = set(nums) & set(donate)
        if overlap:
            raise ValueError(
                f"jit(donate_argnums={donate_argnums!r}): argument(s) {sorted(overlap)} are also static; "
                "only traced array arguments can be donated"
            )
        self.func = func
        self.static_argnums = nums
        self.static_argnames = frozenset(names)
        self.donate_argnums = donate
        self.math = math  # part of every cache key below through this object: one Jitted, one mode
        self._plain_call = not nums and not names  # no static arguments: the fast path
        self._where = f"pa.jit({func_name(func)})"
        self._cache = collections.OrderedDict()
        self.hits = self.misses = 0
        self._generation = core.GENERATION[0]
        functools.update_wrapper(self, func, updated=())

    # ------------------------------------------------------------------ calls

    def __call__(self, *args, **kwargs):
        if core.pre_dispatch_hook() is not None and predispatch.recording():
            # inside make_graph(pre_dispatch=True): one transform node, whose replay jits its body again
            config = {
                "static_argnums": self.static_argnums,
                "static_argnames": tuple(self.static_argnames),
                "math": self.math,
            }
            return predispatch.record_transform("jit", jit, self.func, ((), config), args, kwargs)
        entry, leaves, mode = self._lookup(args, kwargs)
        if entry.watch and closed_over.changed(entry.watch):  # changed in place since the trace: again
            self._forget(entry)
            entry, leaves, mode = self._lookup(args, kwargs)
        if entry.lifted:
            return _replay(entry, [*leaves, *entry.closed, *entry.lifted])
        if mode is _COMPILED:
            out = entry.run(*leaves)
            return out[0] if entry.single else optree.tree_unflatten(entry.out_tree, list(out))
        if mode is _TRANSFORMED:
            return _replay(entry, [*leaves, *entry.closed])
        out = entry.run(*leaves)  # plain tensors among the inputs: plain tensors out, as eagerly
        out = [Tensor(o) if dispatch.backend_of_array(o) is not None else o for o in out]
        return optree.tree_unflatten(entry.out_tree, out)

    def lower(self, *args, **kwargs) -> Lowered:
        """The traced, optimised, fused and compiled forms for these arguments (traced if not cached).

        Example:
            >>> import numpy as np, polyad as pa
            >>> lowered = pa.jit(lambda x: pa.xp.sin(x) * 2).lower(np.zeros(3))
            >>> [node.op.name for node in lowered.graph.nodes]
            ['sin', 'multiply']
        """
        return Lowered(self._lookup(args, kwargs)[0])

    def cache_info(self):
        """``(hits, misses, size, maxsize)`` of the signature cache."""
        return CacheInfo(self.hits, self.misses, len(self._cache), CACHE_SIZE)

    def clear_cache(self):
        """Forget every traced signature."""
        self._cache.clear()

    def __repr__(self):
        mode = "" if self.math == "fast" else f", math={self.math!r}"
        return f"<pa.jit of {self.func!r}{mode}>"

    def __reduce__(self):  # pickled (to a Dask worker): the function and options, not the compiled code
        config = (self.static_argnums, tuple(self.static_argnames), self.donate_argnums, self.math)
        return (_rebuilt, (self.func, *config))

    def __get__(self, obj, objtype=None):  # a jitted method binds like the function would
        return self if obj is None else functools.partial(self, obj)

    # ------------------------------------------------------------------ signatures

    def _lookup(self, args, kwargs):
        """``(entry, array leaves, mode)`` for a call: the cached entry of its signature (traced now if
        new), the arrays to run it on, and how to run it."""
        if core.GENERATION[0] != self._generation:  # a kernel or rule was swapped (library.override)
            self._cache.clear()
            self._generation = core.GENERATION[0]
        if self._plain_call and not kwargs and args:
            # the common call, arrays only: the key is their signatures, no pytree flattening
            sig = []
            for x in args:
                b = BY_TYPE.get(type(x))
                if b is None:
                    break
                sig.append((type(x), x.shape, x.dtype, _device(x)))  # the type: its backend
            else:
                key = tuple(sig)
                entry = self._cache.get(key)
                if entry is None:
                    flat, tree = optree.tree_flatten(args, none_is_leaf=False)
                    entry = self._insert(key, args, kwargs, flat, tree, sig, b)
                else:
                    self._hit(key)
                return entry, args, _COMPILED
            dynamic, statics = args, ()
        else:
            dynamic, statics = self._split(args, kwargs)
        flat, tree = optree.tree_flatten(dynamic, none_is_leaf=False)
        sig = []
        leaves = []
        mode = _COMPILED
        backend = None
        weak = []  # positions in ``leaves`` of Python floats: traced, weakly typed (_weak_floats.py)
        for x in flat:
            b = BY_TYPE.get(type(x))
            if b is None and not isinstance(x, Tensor):
                b = dispatch.backend_of_array(x)  # a type not seen yet, or not an array (None)
            if b is None and isinstance(x, float):
                x = reconnect(x)  # a number polyad handed out for a tensor (float(t)) is that tensor
                if not isinstance(x, Tensor):
                    sig.append(WEAK_FLOAT)
                    weak.append(len(leaves))
                    leaves.append(x)
                    continue
                sig.append((WEAK_FLOAT, x.dtype))  # weak too, a tensor of an enclosing transform underneath
                mode = _TRANSFORMED
                leaves.append(x)
                continue
            if b is not None:
                sig.append((b, x.shape, x.dtype, _device(x)))
                leaves.append(x)
                backend = b
            elif isinstance(x, Tensor):
                b, array = _backend_under(x)
                sig.append((b, x.shape, x.dtype, _device(array)))
                if x._interp is None or type(x) is FreshTensor:
                    if mode is _COMPILED and type(x) is not FreshTensor:
                        mode = _PLAIN
                    leaves.append(bottom(x))
                else:
                    mode = _TRANSFORMED
                    leaves.append(x)
                backend = b
            elif isinstance(x, _VALUE_TYPES) or "dtype" in type(x).__name__.lower():
                sig.append((type(x), x))  # a Python number, string, dtype...: part of the signature
            else:
                raise TypeError(
                    f"{self._where}: {self._leaf_label(args, kwargs, tree, len(sig))} is a "
                    f"{type(x).__name__}, which pa.jit cannot trace (it traces arrays, and keys the cache on "
                    "Python numbers, strings and dtypes); pass its arrays as arguments, or mark the "
                    "argument static (static_argnums / static_argnames): its hash and == then key the "
                    "cache, so it must compare by value"
                )
        if backend is None:
            backend = dispatch.default_backend()
        if mode is _TRANSFORMED:  # replay on the tensors themselves
            leaves = [
                x
                for x in (reconnect(x) if isinstance(x, float) else x for x in flat)
                if isinstance(x, Tensor | float) or _array_backend(x) is not None
            ]
            weak = [k for k, x in enumerate(leaves) if isinstance(x, float)]
        for k in weak:
            leaves[k] = weak_value(leaves[k], backend)
        key = (tree, tuple(sig), statics, backend)
        try:
            entry = self._cache.get(key)
        except TypeError:  # an unhashable static value: name it
            raise self._unhashable(args, kwargs, flat, tree) from None
        if entry is None:
            entry = self._insert(key, args, kwargs, flat, tree, sig, backend)
        else:
            self._hit(key)
        return entry, leaves, mode

    def _insert(self, key, args, kwargs, flat, tree, sig, backend):
        """Trace a new signature and cache it under ``key``, dropping the least recently used beyond
        ``CACHE_SIZE``."""
        self.misses += 1
        entry = self._trace(args, kwargs, flat, tree, sig, backend)
        if entry.lifted:
            return entry
        self._cache[key] = entry
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return entry

    def _forget(self, entry):
        for key in [k for k, e in self._cache.items() if e is entry]:
            del self._cache[key]

    def _hit(self, key):
        self.hits += 1
        try:
            self._cache.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile: the entry stays usable for this call
            pass

    def _split(self, args, kwargs):
        """``(dynamic, statics)``: the traced arguments ``(positional, keyword)`` and the static ones as a
        hashable key part."""
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_args = tuple((i, args[i]) for i in sorted(static_pos))
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        static_kwargs = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        return (dyn_args, dyn_kwargs), (static_args, static_kwargs)

    def _rebuild(self, args, kwargs, tree, flat):
        """A function of the traced leaves (arrays, Python floats) that calls ``func`` with everything else
        in place."""
        positions = [i for i, x in enumerate(flat) if is_traced_leaf(x)]
        plain_call = self._plain_call and not kwargs
        n = len(args)
        static_pos = {i % n for i in self.static_argnums if -n <= i < n} if n else set()

        def call(*traced):
            leaves = list(flat)
            for p, t in zip(positions, traced):
                leaves[p] = t
            dynamic = optree.tree_unflatten(tree, leaves)
            if plain_call:
                return self.func(*dynamic)
            dyn_args, dyn_kwargs = dynamic
            it = iter(dyn_args)
            full = [args[i] if i in static_pos else next(it) for i in range(n)]
            full_kwargs = {k: (kwargs[k] if k in self.static_argnames else dyn_kwargs[k]) for k in kwargs}
            return self.func(*full, **full_kwargs)

        return call, positions

    def _trace(self, args, kwargs, flat, tree, sig, backend):
        call, positions = self._rebuild(args, kwargs, tree, flat)
        weak = {k for k, p in enumerate(positions) if sig[p] is WEAK_FLOAT or sig[p][0] is WEAK_FLOAT}
        # each array's device itself, not its cache key (a CuPy device's key is a tuple: no device)
        avals = [
            weak_aval(flat[p], backend)
            if k in weak
            else ShapeDtype(tuple(sig[p][1]), sig[p][2], getattr(bottom(flat[p]), "device", None))
            for k, p in enumerate(positions)
        ]
        in_tree = optree.tree_structure(tuple(range(len(avals))))
        names = [self._leaf_label(args, kwargs, tree, p) for p in positions]
        graph, closed, lifted = trace_graph(
            call, avals, in_tree, backend, self._where, names, closed_inputs=True, weak=weak
        )
        graph.donated = self._donated(args, flat, positions)
        # the inputs' device, where the compiled code makes what has no input to follow (None: the default)
        devices = (a.device for k, a in enumerate(avals) if k not in weak and a.device is not None)
        device = dispatch.placement(backend, next(devices, None))
        watch = closed_over.watched(self.func, closed)
        if lifted:  # values of enclosing transforms closed over: replayed on them, never compiled
            return _Entry(graph, compiler.optimize(graph), None, None, lifted, closed, watch)
        math = self.math

        def finish():
            optimized = compiler.optimize(graph)
            fused, compiled = _pipeline(optimized, backend, math, device)
            if backend.host_arrays:  # the fused CPU loops (run on host arrays) start compiling now
                for node in fused.nodes:
                    warm = getattr(getattr(node.op, "kernels", {}).get("cpu"), "warm", None)
                    if warm is not None:
                        warm()
            return optimized, fused, compiled

        if fusion_compiler.mode() == "wait":
            return _Entry(graph, *finish(), closed=closed, watch=watch)
        if compiles_first(graph):
            with fusion_compiler.waiting():
                entry = _Entry(graph, *finish(), closed=closed, watch=watch)
            entry.run = _first_call_compiles(entry, entry.run)
            return entry
        # the first calls run the graph as traced, its nodes' kernels in a loop; the rest in the background
        entry = _Entry(
            graph,
            None,
            None,
            interpret_graph(graph, backend, device),
            closed=closed,
            watch=watch,
            finish=finish,
        )
        entry.run = _then_finish(entry, entry.run)
        return entry

    def _leaf_label(self, args, kwargs, tree, i):
        """A readable name of leaf ``i`` of a call's traced arguments: "argument 1['w']", "argument 'y'"."""
        path = tree.paths()[i]
        if self._plain_call and not kwargs:
            head, rest = f"argument {path[0]}", path[1:]
        elif path[0] == 0:  # among the positional arguments that are not static
            n = len(args)
            static_pos = {j % n for j in self.static_argnums if -n <= j < n}
            dynamic = [j for j in range(n) if j not in static_pos]
            head, rest = f"argument {dynamic[path[1]]}", path[2:]
        else:
            head, rest = f"argument {path[1]!r}", path[2:]
        return head + "".join(f"[{k!r}]" for k in rest)

    def _donated(self, args, flat, positions):
        """The graph input numbers the caller donated (``donate_argnums``), each checked to be arrays."""
        if not self.donate_argnums:
            return frozenset()
        n = len(args)
        ids = set()
        for d in self.donate_argnums:
            if not -n <= d < n:
                raise ValueError(
                    f"{self._where}: donate_argnums names argument {d}, but the call has {n} positional "
                    "argument(s)"
                )
            leaves = optree.tree_leaves(args[d % n], none_is_leaf=False)
            if not leaves or not all(_array_backend(x) is not None or isinstance(x, Tensor) for x in leaves):
                raise TypeError(
                    f"{self._where}: donated argument {d} must be an array or a pytree of arrays, got a "
                    f"{type(args[d % n]).__name__}"
                )
            ids.update(id(x) for x in leaves)
        return frozenset(k for k, p in enumerate(positions) if id(flat[p]) in ids)

    def _unhashable(self, args, kwargs, flat, tree):
        for i, a in [
            (i, args[i % len(args)]) for i in self.static_argnums if len(args) and -len(args) <= i < len(args)
        ]:
            if not _hashable(a):
                return TypeError(
                    f"{self._where}: static argument {i} is an unhashable {type(a).__name__}; static "
                    "values are cache keys: pass a hashable value (a tuple, not a list)"
                )
        for k, v in kwargs.items():
            if k in self.static_argnames and not _hashable(v):
                return TypeError(
                    f"{self._where}: static argument {k!r} is an unhashable {type(v).__name__}; static "
                    "values are cache keys: pass a hashable value (a tuple, not a list)"
                )
        for i, x in enumerate(flat):
            if not _hashable(x):
                return TypeError(
                    f"{self._where}: leaf {i} of the arguments is an unhashable {type(x).__name__}, neither "
                    "an array nor a hashable value (non-array leaves are part of the cache key)"
                )
        return TypeError(f"{self._where}: the arguments cannot be hashed into a cache key")


_COMPILED, _PLAIN, _TRANSFORMED = "compiled", "plain", "transformed"
# non-array leaves that key the cache by value
_VALUE_TYPES = (int, float, complex, str, bytes, slice, type(Ellipsis), type)
CacheInfo = collections.namedtuple("CacheInfo", "hits misses size maxsize")


def _rebuilt(func, static_argnums, static_argnames, donate_argnums, math="fast"):
    return jit(
        func,
        static_argnums=static_argnums,
        static_argnames=static_argnames,
        donate_argnums=donate_argnums,
        math=math,
    )


def _replay(entry, leaves):
    """The optimised graph replayed op by op on ``leaves`` (tensors of enclosing transforms among them):
    each op is bound, so those transforms see it. An output that is a constant of the trace is copied."""
    graph = entry.optimized
    out = graph.run(leaves, {})
    if any(isinstance(r, Const) for r in graph.outputs):
        flat = optree.tree_leaves(out, none_is_leaf=False)
        for i, r in enumerate(graph.outputs):
            b = dispatch.backend_of_array(flat[i]) if isinstance(r, Const) else None
            if b is not None:
                flat[i] = b.xp.asarray(flat[i], copy=True)
        out = optree.tree_unflatten(graph.out_tree, flat)
    return out


# the op names of loops: their bodies run many times, so eager kernels there cost many times the compile
LOOP_OPS = frozenset(("scan", "scan_reverse", "while_loop", "while_loop_reverse"))
# element results of a graph above which its eager run (about a nanosecond each) costs what compiling
# its fused loops costs (a few tenths of a second): such a graph compiles before its first run
COMPILE_FIRST_ELEMENTS = 2**28


def compiles_first(graph):
    """Whether a traced graph compiles before its first run rather than in the background: it holds a
    loop (at any depth) or its nodes compute ``COMPILE_FIRST_ELEMENTS`` element results or more. A small
    graph runs eager's kernels at once while its loops compile in the background (its first call costs
    little either way)."""
    elements = 0
    for node in graph.nodes:
        if node.op.name in LOOP_OPS:
            return True
        for value in node.params.values():
            if hasattr(value, "nodes") and compiles_first(value):  # a body: checkpoint, cond branches
                return True
        for out in node.outputs:
            size = 1
            for d in out.shape:
                size *= d if isinstance(d, int) else 1
            elements += size
    return elements >= COMPILE_FIRST_ELEMENTS


def _first_call_compiles(entry, run):
    """``run`` whose first call compiles each fused loop it reaches before running it (loop bodies'
    loops included), so that not one step of a long loop runs eager's kernels."""

    def first(*args):
        with fusion_compiler.waiting():
            out = run(*args)
        if entry.run is first:
            entry.run = run
        return out

    return first


def _then_finish(entry, run):
    """``run``, which hands the rest of ``entry``'s pipeline to the background thread once a call has
    returned: the first call does not share the interpreter with that work (on two cores it took twice
    as long while optimise and fuse ran beside it)."""

    def first(*args):
        out = run(*args)
        if entry.run is first:
            entry.run = run
            fusion_compiler.submit(entry.finish)
        return out

    return first


def _with_closed(fn, closed, *args):
    return fn(*args, *closed)


def _copy_outputs(fn, held, bxp, *args):
    out = list(fn(*args))
    for i in held:
        out[i] = bxp.asarray(out[i], copy=True)  # the caller may write into it: the graph keeps its own
    return tuple(out)


def _array_backend(x):
    b = BY_TYPE.get(type(x))
    return b if b is not None else dispatch.backend_of_array(x)


def _hashable(x):
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _parameters(func):
    try:
        return inspect.signature(func).parameters
    except (TypeError, ValueError):  # a builtin or C function without a signature
        return None


def _backend_under(x):
    """``(backend, array)`` of tensor ``x``: the array under all its levels and that array's backend; for
    a traced or abstract value (no array underneath: a jit inside a jit, or inside eval_shape), the
    backend its interpreter evaluates on."""
    while isinstance(x._value, Tensor):
        x = x._value
    array = x._value
    b = dispatch.backend_of_array(array)
    if b is None:
        b = getattr(x._interp, "backend", None) or dispatch.default_backend()
    return b, array


__all__ = ["jit", "Jitted", "Lowered", "CACHE_SIZE"]

"""The core: the Tensor type, the op registry, ``bind`` and the level stack.

Every namespace function ends in ``bind(op, *arrays, **metadata)``. ``bind`` finds the highest transform
level among the array arguments and hands the call to that level's interpreter; the interpreter unwraps
its own tensors, calls ``bind`` again on what is underneath (so lower levels see what it emits) and wraps
the result. When no tensor of any transform is among the arguments the call reaches ``eval_op``, which
picks a kernel (``dispatch.choose_kernel``) and runs it on raw backend arrays.
"""

import functools
import threading
from contextlib import contextmanager

from polyad import backends, dispatch, exits, standard
from polyad.dispatch import _BY_TYPE
from polyad.exits import TensorExits, unusable

_get_ident = threading.get_ident

# --------------------------------------------------------------------------------------------- levels


class _LevelState(threading.local):
    def __init__(self):
        self.stack = [None]  # stack[level] is the interpreter of that level; level 0 is eager evaluation
        self.no_grad_level = 0  # reverse levels <= this record nothing (pa.no_grad)


_tls = _LevelState()


class Interpreter:
    """Base of the per-transform interpreters (reverse, forward, batching).

    An interpreter owns one level number. ``process(op, args, params)`` receives every op whose highest
    argument level is its own; arguments of lower levels are constants to it.
    """

    # a transform runs a higher-order op's body on its own tensors; a capture (graph, eval_shape) sees
    # the op as one
    transforms_bodies = True
    # for messages about values leaving it (polyad.exits): what the transform is called, what its tensors
    # carry, and a hint of the fix
    transform = "a polyad transform"
    carries = "transform data"
    exit_hint = ""
    differentiates = False  # whether its tensors carry derivatives (grad, jvp)

    def __init__(self, level):
        self.level = level
        self.active = True
        self.owner = _get_ident()  # the thread running the transform: no other may use its tensors
        self.numbers = None  # ids of the Python numbers it handed out (polyad.exits)

    def process(self, op, args, params):
        raise NotImplementedError

    def close(self):
        """Called once when the level is popped (after ``active`` turns False)."""


@contextmanager
def new_level(cls, *args):
    """Push an interpreter of class ``cls`` at the next level; pop it on exit, even on error."""
    stack = _tls.stack
    interp = cls(len(stack), *args)
    stack.append(interp)
    try:
        yield interp
    finally:
        interp.active = False
        interp.owner = None
        interp.close()
        if interp.numbers is not None:
            exits.forget(interp)
        # restore exactly: anything pushed above us by a failing inner transform goes too
        del stack[interp.level :]


def current_level():
    """The number of the innermost active level (0 when no transform is active)."""
    return len(_tls.stack) - 1


def active_interpreters():
    """The active interpreters, innermost last."""
    return _tls.stack[1:]


# --------------------------------------------------------------------------------------------- tensor


class Tensor(TensorExits):
    """A polyad tensor: a backend array (or a lower-level tensor) seen through one transform level.

    Every tensor has the same three slots, so that an in-place update can turn a tensor into another
    kind (``__setitem__`` writing a batched value into an unbatched tensor changes its class):

    - ``_value``: the backend array, or the lower-level tensor, underneath;
    - ``_interp``: the interpreter of the level this tensor belongs to (None for a plain tensor);
    - ``_aux``: per-transform data (tape node, tangent, batch dimension).

    A plain ``Tensor(array)`` lives at level 0 and makes any backend array speak polyad's namespace.
    Conversions and copies (``float``, ``item``, ``np.asarray``, DLPack, pickle, ``deepcopy``...), every
    way a value leaves a transform, come from ``polyad.exits.TensorExits``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> t = pa.Tensor(np.arange(3.0))
        >>> (2.0 * t + 1).shape
        (3,)
    """

    __slots__ = ("_value", "_interp", "_aux")
    # Results of level-0 ops on a plain tensor are plain tensors; on a FreshTensor (False), FreshTensors.
    _sticky = True
    # NumPy and CuPy must not swallow a tensor into an object array: defer to our reflected operators.
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, value, interp=None, aux=None):
        self._value = value
        self._interp = interp
        self._aux = aux

    # -- metadata (the batching tensor overrides shape)
    @property
    def shape(self):
        return tuple(self._value.shape)

    @property
    def dtype(self):
        return self._value.dtype

    @property
    def device(self):
        return self._value.device

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def level(self):
        return 0 if self._interp is None else self._interp.level

    @property
    def mT(self):
        return _xp.matrix_transpose(self)

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError(f"Tensor.T needs a 2-D tensor, got {self.ndim}-D; use .mT or permute_dims")
        return _xp.permute_dims(self, (1, 0))

    def __array_namespace__(self, *, api_version=None):
        if api_version is not None and api_version not in standard.SUPPORTED_VERSIONS:
            raise ValueError(
                f"polyad implements Array API {standard.API_VERSION} (and the revisions before it); "
                f"api_version={api_version!r} is unknown"
            )
        return _xp

    def to_device(self, device, /, *, stream=None):
        return _xp._to_device(self, device=device, stream=stream)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, key):
        return _xp._getitem(self, key)

    def __setitem__(self, key, value):
        # Functionalised: compute the updated tensor out of place, then make this object be it.
        self._become(_xp._index_update(self, key, value))

    def _become(self, other):
        if not isinstance(other, Tensor):
            other = Tensor(other)
        self.__class__ = type(other)
        self._value, self._interp, self._aux = other._value, other._interp, other._aux
        return self

    def __repr__(self):
        kind = type(self).__name__
        return f"{kind}(level={self.level}, shape={self.shape}, dtype={self.dtype}, value={self._value!r})"

    __hash__ = None  # type: ignore[assignment]


class FreshTensor(Tensor):
    """A plain level-0 tensor for an array created inside a transform, so ``x[key] = traced`` can rebind
    ``x`` (to a batched or differentiated tensor).

    Level-0 ops on it return FreshTensors while a transform is active (raw arrays after), so that what
    is computed from it keeps polyad's namespace (``0 == xp.asarray(n)`` is a FreshTensor, not a NumPy
    bool array, and ``array_namespace`` of it and the transform's tensors is ``polyad.xp``). Every
    transform sees it as the constant array it holds (``split_args``).
    """

    __slots__ = ()
    _sticky = False

    def _become(self, other):
        return Tensor._become(self, other if isinstance(other, Tensor) else FreshTensor(other))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy ufunc on an array made inside a transform (a constant): NumPy computes it on the array
        inputs = tuple(i._value if type(i) is FreshTensor else i for i in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)


def fresh(array):
    """``array`` as a ``FreshTensor`` while any transform is active (creation functions call this), so that
    ``x[key] = traced`` can rebind ``x``; unchanged outside transforms."""
    return FreshTensor(array) if len(_tls.stack) > 1 else array


def plain(value):
    """A transform's output as the caller sees it: a ``FreshTensor`` handed back as its raw array."""
    return value._value if type(value) is FreshTensor else value


class ConcretizationError(TypeError):
    """A Python value (bool, float, int, shape) was asked of a tensor that has no single value."""


# Operator name -> namespace function; installed on Tensor by ``install_operators`` once the namespace
# exists (core cannot import the ops: they import core).
_BINARY_OPERATORS = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "pow",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_COMPARISONS = {
    "__eq__": "equal",
    "__ne__": "not_equal",
    "__lt__": "less",
    "__le__": "less_equal",
    "__gt__": "greater",
    "__ge__": "greater_equal",
}
_UNARY_OPERATORS = {
    "__neg__": "negative",
    "__pos__": "positive",
    "__abs__": "abs",
    "__invert__": "bitwise_invert",
}

_xp = None  # the polyad namespace module, set by install_operators


def install_operators(namespace):
    """Give Tensor the Python operators of the standard, each calling the namespace function."""
    global _xp
    _xp = namespace

    def forward(fn):
        op = getattr(fn, "op", None)
        if op is None:
            return lambda self, other: fn(self, other)
        return lambda self, other: bind(op, self, other)

    def reflected(fn):
        op = getattr(fn, "op", None)
        if op is None:
            return lambda self, other: fn(other, self)
        return lambda self, other: bind(op, other, self)

    def inplace(fn):
        def op(self, other):
            result = fn(self, other)
            return self._become(result) if isinstance(result, Tensor) else result

        return op

    for name, fname in _BINARY_OPERATORS.items():
        fn = getattr(namespace, fname)
        setattr(Tensor, f"__{name}__", forward(fn))
        setattr(Tensor, f"__r{name}__", reflected(fn))
        setattr(Tensor, f"__i{name}__", inplace(fn))
    for dunder, fname in _COMPARISONS.items():
        setattr(Tensor, dunder, forward(getattr(namespace, fname)))
    for dunder, fname in _UNARY_OPERATORS.items():
        fn = getattr(namespace, fname)
        op = getattr(fn, "op", None)
        setattr(
            Tensor,
            dunder,
            (lambda self, _fn=fn: _fn(self)) if op is None else (lambda self, _op=op: bind(_op, self)),
        )


# --------------------------------------------------------------------------------------------- ops

OPS = {}  # name -> Op: the one registry of every array function


class RuleKind:
    """One kind of per-op rule, declared by the transform module that reads it (``reverse.VJP``,
    ``forward.JVP``, ``batching.BATCH``, ``tracing.ABSTRACT_EVAL``).

    ``name`` keys ``Op.rules``; ``signature`` documents the rule's one fixed signature; ``derive(op)``
    builds a rule from the op's markers when it has none (the linear and bilinear JVPs), or returns None.
    Custom-op registration (``register_rule``), ``library.override`` and pre-dispatch read ``RULE_KINDS``,
    so a new transform is one new module that declares its kind, plus the rules it needs.
    """

    __slots__ = ("name", "signature", "derive")

    def __init__(self, name, signature, derive=None):
        self.name = name
        self.signature = signature
        self.derive = derive

    def __repr__(self):
        return f"RuleKind({self.name!r})"


RULE_KINDS = {}  # name -> RuleKind, in declaration order


def rule_kind(name, signature, derive=None):
    """Declare (or, on re-import, return) the rule kind ``name``; see ``RuleKind``."""
    kind = RULE_KINDS.get(name)
    if kind is None:
        kind = RULE_KINDS[name] = RuleKind(name, signature, derive)
    return kind


def rule_of(op, kind):
    """``op``'s rule of ``kind``: the registered one, else the one ``kind.derive`` builds (cached), else
    None."""
    rule = op.rules.get(kind.name)
    if rule is None and kind.derive is not None:
        rule = op.derived.get(kind.name)
        if rule is None:
            rule = kind.derive(op)
            if rule is not None:
                op.derived[kind.name] = rule
    return rule


class Op:
    """One array function: its kernels, and a table of rules keyed by rule kind (``RULE_KINDS``).

    The rule kinds polyad's transforms declare, one fixed signature each:

    - ``abstract_eval(xp, *avals, **params) -> aval | tuple``: output shapes and dtypes, computing nothing;
    - ``vjp(cotangent, out, *primals, **params) -> tuple``: one cotangent per positional argument
      (None where there is none);
    - ``jvp(tangents, out, *primals, **params) -> tangent``: ``tangents`` has one entry per positional
      argument, None for a zero tangent;
    - ``batch(info, dims, *values, **params) -> (out, out_dim)``: ``info`` is the vmap level
      (``batch_size``, ``randomness``); ``dims`` has one batch dimension per positional argument, None
      where it is not batched. A rule may return ``NotImplemented`` for a case it cannot batch: vmap then
      loops over the batch.

    Markers replace rules that would be repeated: ``linear`` (the JVP is the op applied to the tangents),
    ``bilinear`` (linear in each of two arrays: the JVP is ``op(t1, x2) + op(x1, t2)``), ``nondiff`` (the
    output carries no derivative: comparisons, integer results, rounding), ``shape_only`` (the output
    depends only on the first argument's shape and dtype: ``shape_only(xp, shape, dtype, **params)``
    builds it without that argument, as compiled graphs do).
    ``decomposition(*args, **params)``, where set, computes the op with other ops; a transform without a
    rule for the op runs it on its own tensors instead of looping.
    ``higher_order(*args, **params)``, where set, is the op's body (``call_delegate``'s graph): transform
    levels run it on their own tensors, so each op inside is transformed by its rules; capture levels
    (graphs, ``eval_shape``) treat the op as one.
    Kernels: ``generic(xp, *args, **params)`` written against the Array API namespace ``xp``, and
    ``kernels[device_type]`` with the same signature, chosen by ``dispatch.choose_kernel``.
    """

    __slots__ = (
        "name",
        "_generic",
        "impls",
        "kernels",
        "rules",
        "derived",
        "linear",
        "bilinear",
        "nondiff",
        "multiple_results",
        "from_device",
        "shape_only",
        "decomposition",
        "higher_order",
        "__weakref__",
    )

    def __init__(
        self,
        name,
        generic=None,
        *,
        linear=False,
        bilinear=False,
        nondiff=False,
        multiple_results=False,
        register=True,
        **rules,
    ):
        if register and name in OPS:
            raise ValueError(f"an op named {name!r} is already registered")
        self.name = name
        self._generic = generic
        self.impls = {}  # backend -> the generic kernel bound to its namespace (the eager fast path)
        self.kernels = {}
        self.rules = {k: r for k, r in rules.items() if r is not None}
        self.derived = {}  # rules built by a RuleKind's derive from the markers, cached
        self.linear = linear
        self.bilinear = bilinear
        self.nondiff = nondiff
        self.multiple_results = multiple_results
        self.from_device = False  # creation ops: the backend comes from the ``device`` parameter
        self.shape_only = None
        self.decomposition = None
        self.higher_order = None
        if register:
            OPS[name] = self
            for backend in backends.loaded().values():
                _attach_kernels(self, backend)

    def bind(self, *args, **params):
        return bind(self, *args, **params)

    @property
    def generic(self):
        return self._generic

    @generic.setter
    def generic(self, kernel):
        self._generic = kernel
        self.impls.clear()

    def resolve(self, backend):
        """The generic kernel bound to ``backend``'s namespace, cached: a kernel that only calls the
        backend function of the same name resolves to that function itself."""
        kernel = self._generic
        if kernel is None:
            return None
        path = getattr(kernel, "backend_path", None)
        if path is not None:
            impl = backend.xp
            for part in path:
                impl = getattr(impl, part)
        else:
            impl = functools.partial(kernel, backend.xp)
        self.impls[backend] = impl
        return impl

    def __repr__(self):
        return f"Op({self.name!r})"


def _attach_kernels(op, backend):
    """Give ``op`` the device kernels ``backend`` declares for it (a kernel registered explicitly wins)."""
    for dt, kernel in backend.kernels.get(op.name, {}).items():
        op.kernels.setdefault(dt, kernel)


def _on_backend(event, backend):
    """What the core hands a backend when it loads (``backends.subscribe``): polyad's Tensor type, for
    operator deferral, and its kernels attached to the ops they name; they are detached if it goes."""
    for name, by_type in backend.kernels.items():
        op = OPS.get(name)
        if op is None:
            continue
        if event == "loaded":
            _attach_kernels(op, backend)
        else:
            for dt, kernel in by_type.items():
                if op.kernels.get(dt) is kernel:
                    del op.kernels[dt]
    if event == "loaded" and backend.defer_to is not None:
        backend.defer_to(Tensor)


backends.subscribe(_on_backend)


_pre_dispatch = None  # set while make_graph(pre_dispatch=True) captures: sees every call first
_hook = None  # what bind calls first: _pre_dispatch, or _reconnecting while polyad's numbers are alive
PASS = object()  # what the pre-dispatch hook returns for a call it does not record


def set_pre_dispatch_hook(hook):
    """Install ``hook(op, args, params) -> result | PASS`` at the top of the dispatcher (None removes it)."""
    global _pre_dispatch
    with exits._LOCK:
        _pre_dispatch = hook
        _update_hook()


def _update_hook():
    """Called under ``exits._LOCK`` when the pre-dispatch hook changes, or polyad's numbers appear or go:
    with none alive and no capture, ``bind`` calls nothing first (the eager path pays nothing)."""
    global _hook
    _hook = _reconnecting if exits._LIVE else _pre_dispatch


def _reconnecting(op, args, params):
    """``bind``'s hook while numbers polyad handed out are alive (``float(t)``, ``t.item()``): such a
    number reaching an op is its tensor again, so its derivative is kept (``polyad.exits``)."""
    new = exits.reconnect_call(op, args, params)
    if new is not None:
        return bind(op, *new, **params)
    return PASS if _pre_dispatch is None else _pre_dispatch(op, args, params)


exits._on_live_change = _update_hook  # type: ignore[assignment]


def bind(op, *args, **params):
    """Apply ``op`` to positional arrays ``args`` with keyword metadata ``params``, through every level."""
    if _hook is not None:
        out = _hook(op, args, params)
        if out is not PASS:
            return out
    top = None
    plain = False
    for a in args:
        if isinstance(a, Tensor):
            i = a._interp
            if i is None:
                plain = True
            elif top is None or i.level > top.level:
                top = i
    if top is not None:
        if top.owner != _get_ident():  # finished (an escaped tracer), or another thread's transform
            raise unusable(top, f"op {op.name!r}")
        if op.higher_order is not None and top.transforms_bodies:
            return op.higher_order(*args, **params)
        return top.process(op, args, params)
    if plain:
        return eval_op(op, args, params)
    return eval_raw(op, args, params)


def eval_raw(op, args, params):
    """Level 0 on raw backend arrays: the eager fast path (the generic kernel already bound to the
    backend's namespace). Interpreters call it directly when no argument is a tensor."""
    if op.kernels or op.from_device:
        return eval_op(op, args, params)
    backend = _BY_TYPE.get(type(args[0])) if len(args) == 1 and args else None
    if backend is None:
        backend = dispatch.backend_of(args)
    impl = op.impls.get(backend)
    if impl is None:
        impl = op.resolve(backend)
    return impl(*args, **params)


def eval_op(op, args, params):
    """Level 0: run the op's kernel on backend arrays (plain tensors are unwrapped and rewrapped)."""
    wrapped = unwrap = False
    for a in args:
        if isinstance(a, Tensor):
            unwrap = True
            if a._sticky:
                wrapped = True
                break
    if unwrap:
        args = tuple(a._value if isinstance(a, Tensor) else a for a in args)
    if op.from_device:
        backend = dispatch.backend_of_device(params.get("device"))
    else:
        backend = dispatch.backend_of(args)
    kernel = op.generic if not op.kernels else dispatch.choose_kernel(op, backend, args)
    out = kernel(backend.xp, *args, **params)
    if wrapped:
        if op.multiple_results:
            return tuple(Tensor(o) for o in out)
        return Tensor(out)
    if unwrap:  # from FreshTensors: FreshTensors while a transform is active
        if op.multiple_results:
            return tuple(fresh(o) for o in out)
        return fresh(out)
    return out


def all_none(entries):
    """Whether every entry is None: an op whose arguments are all constants of a level (no tape id, no
    tangent). Interpreters test the first entry inline before calling this (the per-op path is hot)."""
    for e in entries:
        if e is not None:
            return False
    return True


def split_args(interp, args):
    """Unwrap ``interp``'s tensors among an op's arguments: ``(values, auxes, lower)``, where ``auxes`` has
    each tensor's ``_aux`` (None for constants) and ``lower`` says whether a tensor of a lower level remains
    among the values (else the interpreter may call ``eval_raw`` directly). A ``FreshTensor`` is a constant
    to every transform: its array is the value. A one-argument op reaches an interpreter only through that
    interpreter's own tensor: no loop for it (the per-op path is hot)."""
    n = len(args)
    if n == 1:
        v = args[0]._value
        return (v,), (args[0]._aux,), isinstance(v, Tensor)
    if n == 2:
        a, b = args
        if isinstance(a, Tensor) and a._interp is interp:
            va, ia = a._value, a._aux
        else:
            va, ia = (a._value if type(a) is FreshTensor else a), None
        if isinstance(b, Tensor) and b._interp is interp:
            vb, ib = b._value, b._aux
        else:
            vb, ib = (b._value if type(b) is FreshTensor else b), None
        return (va, vb), (ia, ib), isinstance(va, Tensor) or isinstance(vb, Tensor)
    values = []
    auxes = []
    lower = False
    for a in args:
        if isinstance(a, Tensor) and a._interp is interp:
            v = a._value
            auxes.append(a._aux)
        else:
            v = a._value if type(a) is FreshTensor else a
            auxes.append(None)
        values.append(v)
        if not lower and isinstance(v, Tensor):
            lower = True
    return values, auxes, lower

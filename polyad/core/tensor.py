"""The polyad tensor, and every way a value leaves a transform, guarded in one place.

A ``Tensor`` is a backend array (or a lower-level tensor) seen through one transform level; each transform
subclasses it (``ReverseTensor``, ``DualTensor``, ``BatchedTensor``, ...). It carries what a bare value
cannot: its derivative (grad, jvp), its batch (vmap), its place in a graph (make_graph). Each exit either
keeps that or refuses with a message naming the transform and the fix. A plain level-0 ``Tensor`` and a
``FreshTensor`` (an array created inside a transform) carry nothing and leave freely. A tensor of a
finished transform, or of a transform running in another thread, is refused everywhere (``bind`` checks
the same for ops).

- Arrays: ``np.asarray`` (``__array__``), DLPack (``__dlpack__``, ``__dlpack_device__``), the buffer
  protocol (``__buffer__``, ``bytes()``), pickle (``__reduce__``, ``__reduce_ex__``) and ``concrete()``
  refuse: a NumPy array, a capsule or bytes cannot carry a derivative or a batch (``refusals.py``: the
  habit and its fix). So does a write of a transform's value into a tensor made outside it.
- Copies keep it: ``copy.copy`` is the same value; ``copy.deepcopy`` is an op of the transform (as in
  JAX), which differentiates, batches and records like any other, so a dict of tracers deep-copied keeps
  every derivative.
- Python scalars. ``bool()``, ``int()`` and ``operator.index`` give plain values: branching on a value is
  exact (the derivative of a branch is the derivative of the path taken) and an integer has derivative
  zero. ``float()`` must return an exact Python float (CPython converts anything else), so polyad
  remembers the very object it hands out: when that object comes back into polyad (an op's argument,
  ``xp.asarray``, ``xp.full``, a transform's output, as in scikit-learn's metrics, which end in
  ``return float(...)``) it is its tensor again, derivative included. ``complex()`` cannot be followed
  (CPython rebuilds the number it returns): inside grad or jvp it warns. ``item()`` and ``tolist()`` return
  ``TracedFloat``/``TracedComplex``, numbers whose arithmetic with numbers and arrays stays traced.
  Python arithmetic on a ``float()`` result, and ``math`` functions of any of them, make plain numbers
  polyad cannot see: such a number of a value carrying a derivative that never comes back is reported as
  the transform ends (``DerivativeLostWarning``, naming the conversion and the line), unless the code
  only compares, branches on, rounds or prints it (``call_sites.classify`` reads the converting call).
- vmap: a conversion of a batched value whose examples all agree returns the common value, so a branch
  on it is the same for every example and exact (``BatchedTensor._scalar``); else a ConcretizationError.

The namespace (``polyad.xp``) gives the class its operators and indexing once it is assembled
(``install_namespace``): this layer sits below the ops those call.
"""

import math
import threading
import warnings

import polyad.backends as backends
import polyad.core.standard as standard
from polyad.core import refusals
from polyad.core.call_sites import classify

_get_ident = threading.get_ident
_LOCK = threading.Lock()
_OWN_FILES = (__file__,)  # where a number is handed out, the user's call is the first frame outside


class DerivativeLostWarning(UserWarning):
    """A number taken from a value carrying a derivative (``float()``, ``math.log(x)``, ``item()``...) was
    computed with and never came back to polyad: its derivative was lost. Raised as the transform ends,
    naming the conversion and the line; uses that only compare or branch are not reported."""


class ConcretizationError(TypeError):
    """A Python value (bool, float, int, shape) was asked of a tensor that has no single value."""


# ------------------------------------------------------------------------------ ownership


def _thread_name(ident):
    names = {t.ident: t.name for t in threading.enumerate()}
    return repr(names.get(ident, f"thread id {ident}"))


def unusable(interp, what):
    """The error for a tensor of ``interp`` reaching ``what`` where it cannot be used: its transform has
    finished (an escaped tracer) or it belongs to another thread."""
    if not interp.active:
        return RuntimeError(
            f"a tensor of a finished {type(interp).__name__} (level {interp.level}) reached {what}: a tracer "
            "escaped the transform that made it (stored in a global or closure?)"
        )
    return RuntimeError(
        f"a tensor of {interp.transform} (level {interp.level}, run by thread {_thread_name(interp.owner)}) "
        f"reached {what} in thread {_thread_name(_get_ident())}: a transform's values belong to the thread "
        "that runs it, and its record must not be written from another; run the transform inside that "
        "thread, or hand the thread plain arrays"
    )


def _owner_checked(tensor, what):
    """``tensor``'s interpreter (None for a plain tensor), after checking it may be used here."""
    interp = tensor._interp
    if interp is not None and interp.owner != _get_ident():
        raise unusable(interp, what)
    return interp


def _refuse(tensor, what, hint=""):
    """Refuse an exit that would drop what a transform's tensor carries; a plain tensor passes."""
    interp = _owner_checked(tensor, what)
    if interp is not None:
        raise TypeError(
            f"{what} of a {type(tensor).__name__} (a value inside {interp.transform}) is refused: it would "
            f"drop the {interp.carries} the value carries. Compute on it with polyad.xp functions "
            f"(pa.xp.asarray and pa.xp.from_dlpack keep it){interp.exit_hint}{hint}"
        )


def _refuse_store(tensor, interp):
    """``buf[i] = x`` stores ``float(x)`` into a NumPy array: refused where ``x`` has no single value
    (vmap, pa.jit) or carries a derivative the store would drop, naming the habit and its fix."""
    try:
        tensor._scalar("float")
    except ConcretizationError as e:
        raise ConcretizationError(refusals.store_message(tensor, interp, None)) from e
    if _carries_derivative(tensor):
        raise TypeError(refusals.store_message(tensor, interp, interp.carries))


# ------------------------------------------------------------------------------ numbers handed out

# id -> (number, tensor, note): numbers polyad handed out for transforms' tensors, each alive as long as
# its level (``forget``); note is [what, where, came_back]. While any is alive, bind runs reconnect_call.
LIVE = {}
LIVE_LISTENERS = []  # called with ``bool(LIVE)`` whenever it changes (the dispatcher's hook)


def on_live_change(listener):
    """Call ``listener(alive)`` whenever numbers handed out start or stop being alive (``alive`` True
    when some are): the dispatcher checks numbers' arguments only while any is."""
    LIVE_LISTENERS.append(listener)


def _live_changed():
    for listener in LIVE_LISTENERS:
        listener(bool(LIVE))


def _remember(number, tensor, what):
    note = _note(tensor, what)
    interp = tensor._interp
    with _LOCK:
        LIVE[id(number)] = (number, tensor, note)
        if interp.numbers is None:
            interp.numbers = []
            interp.on_close.append(forget)
        interp.numbers.append(id(number))
        if len(LIVE) == 1:
            _live_changed()
    return note


def forget(interp):
    """``interp``'s level has closed: the numbers it handed out are plain numbers from now on."""
    with _LOCK:
        for i in interp.numbers:
            LIVE.pop(i, None)
        interp.numbers = None
        if not LIVE:
            _live_changed()


def _tensor_of(x, mark=True):
    """The live tensor behind ``x`` if polyad handed ``x`` out, else None."""
    cls = type(x)
    if cls is TracedFloat or cls is TracedComplex:
        t = x._live()
        if t is not None and mark:
            x._note[2] = True
        return t
    if cls is float:
        entry = LIVE.get(id(x))
        if entry is not None and entry[0] is x:
            t = entry[1]
            if mark:
                entry[2][2] = True
            return t if t.ndim == 0 else t.__array_namespace__().reshape(t, ())
    return None


def numbers_alive():
    """Whether any number polyad handed out is still alive (else ``reconnect`` has nothing to do)."""
    return bool(LIVE)


def reconnect(x):
    """``x``'s tensor if ``x`` is a number polyad handed out for a live tensor (``float(t)``,
    ``t.item()``...), else ``x`` itself. Cheap when none is alive."""
    if not LIVE:
        return x
    t = _tensor_of(x)
    return x if t is None else t


def reconnect_call(op, args, params):
    """``args`` with polyad's numbers replaced by their tensors, or None where there are none. The tensor
    takes the dtype of the first floating array among the other arguments, as the Python number would.
    A number among ``params`` (metadata: it carries no derivative) is refused."""
    for name, v in params.items():
        t = _tensor_of(v, mark=False) if type(v) in _NUMBER_TYPES else None
        if t is not None:
            raise TypeError(
                f"op {op.name!r} got, as its parameter {name}, a number taken from a value inside "
                f"{t._interp.transform} (float(), item()...): a parameter carries no {t._interp.carries}; "
                "pass the value as an array argument, or compute with polyad.xp functions on the tensor"
            )
    new = None
    for i, a in enumerate(args):
        t = _tensor_of(a) if type(a) in _NUMBER_TYPES else None  # most arguments are arrays: one set lookup
        if t is not None:
            if new is None:
                new = list(args)
            new[i] = t
    if new is None:
        return None
    ref = next((a for a, n in zip(args, new) if a is n and hasattr(a, "dtype") and hasattr(a, "shape")), None)
    if ref is not None:
        for i, (a, n) in enumerate(zip(args, new)):
            if a is not n:
                new[i] = _weak_dtype(n, ref.dtype)
    return new


def _weak_dtype(t, dtype):
    """``t`` (the tensor of a Python number) cast to ``dtype`` of the array it meets where the standard's
    rule for Python scalars would give that dtype (a real number meeting any floating array, a complex one
    meeting a complex array)."""
    if t.dtype == dtype:
        return t
    xp = t.__array_namespace__()
    if xp.isdtype(dtype, "complex floating") or (
        xp.isdtype(dtype, "real floating") and xp.isdtype(t.dtype, "real floating")
    ):
        return xp.astype(t, dtype)
    return t


def _carries_derivative(t):
    """Whether tensor ``t`` carries a derivative at some level (a tape entry, a tangent)."""
    while isinstance(t, Tensor):
        interp = t._interp
        if interp is not None and interp.differentiates and t._aux is not None:
            return True
        t = t._value
    return False


def _note(tensor, what):
    """``[what, where, came_back, lossy]`` for a number handed out for ``tensor``: where the user's code
    converted it, and whether that use can lose a derivative (the value carries one and the code uses the
    number for more than a comparison, a branch, an integer or a message: ``call_sites.classify``)."""
    where, callee, control = classify(0, skip=_OWN_FILES)
    if callee is not None and what == "float()" and callee != "float":
        what = f"{callee}()"  # math.log(x) converts x by float(): name what the code called
    return [what, where, False, not control and _carries_derivative(tensor)]


def check_lost(interp, what, depends):
    """Warn, as the transform ends, for each number taken from one of its values that carried a
    derivative, was used for more than control flow, and never came back to polyad: its derivative was
    lost (``depends``: whether the outputs depend on the inputs at all, for the message)."""
    if not interp.numbers:
        return
    lost = [LIVE[i][2] for i in interp.numbers if i in LIVE and not LIVE[i][2][2] and LIVE[i][2][3]]
    if lost:
        kind, where = lost[0][:2]
        more = (
            f" (and {len(lost) - 1} more: {', '.join(f'{n[0]} at {n[1]}' for n in lost[1:4])})"
            if len(lost) > 1
            else ""
        )
        result = "the output does not depend on the inputs" if not depends else "the derivative misses it"
        warnings.warn(
            f"{what}: a derivative was lost: {kind} at {where}{more} turned a value carrying a derivative "
            f"into a Python number, which the code then computed with and which never came back to polyad "
            f"({result}). Compute with polyad.xp on the value instead (xp.log for math.log, ...), or hand "
            "the number itself back (return it, or pass it to an xp function). A number used only to compare "
            "or branch is fine and not reported",
            DerivativeLostWarning,
            stacklevel=4,
        )


def _warn_complex(t):
    """``complex()`` cannot keep a derivative: CPython builds a new number from the one returned. Warned
    where the value carries a derivative and the code computes with the number."""
    if not _note(t, "complex()")[3]:
        return
    interp = t._interp
    warnings.warn(
        f"complex() of a value inside {interp.transform} gives a plain number: CPython rebuilds it, so "
        "polyad cannot recognise it where it comes back and no derivative flows through it; use .item() (a "
        "TracedComplex, which keeps it) or polyad.xp functions",
        DerivativeLostWarning,
        stacklevel=3,
    )


def _python_number(t, what):
    """The Python number for ``item`` of a transform's floating tensor ``t``, and whether it is complex."""
    v = t._scalar(what)
    complex_ = t.__array_namespace__().isdtype(t.dtype, "complex floating")
    return complex(v) if complex_ else float(v), complex_


def handed_out(value, t, what):
    """``value`` (an exact float) as a fresh object polyad remembers as ``t``'s number."""
    value = value * 1.0  # a fresh object: no other use of an equal number is mistaken for it (keeps -0.0)
    _remember(value, t, what)
    return value


# ------------------------------------------------------------------------------ traced numbers


def _plain_operand(x):
    return x._plain() if isinstance(x, _TracedNumber) else x


def _operand(x):
    """What a traced number's arithmetic hands its tensor: numbers, tensors and arrays; else
    NotImplemented."""
    if isinstance(x, _TracedNumber):
        t = x._live()
        return x._plain() if t is None else t
    if isinstance(x, int | float | complex | Tensor) or hasattr(x, "__array_namespace__"):
        return x
    return NotImplemented


def _arithmetic(name):
    def method(self, other):
        t = self._live()
        if t is None:  # its transform has finished: a plain number
            if isinstance(other, _TracedNumber) and other._live() is not None:
                return NotImplemented  # the other one is traced: its reflected method keeps that
            return getattr(self._base, name)(self._plain(), _plain_operand(other))
        o = _operand(other)
        if o is NotImplemented:
            return NotImplemented
        out = getattr(t, name)(o)
        if isinstance(other, _TracedNumber) and other is not self:
            other._note[2] = True  # its derivative goes on in the result, which carries this one's note
        if out is NotImplemented or not isinstance(other, int | float | complex):
            if out is not NotImplemented:
                self._note[2] = True  # with an array: the array result carries the derivative on
            return out
        return _traced_result(out, self)

    method.__name__ = name
    return method


def _unary(name):
    def method(self):
        t = self._live()
        if t is None:
            return getattr(self._base, name)(self._plain())
        return _traced_result(getattr(t, name)(), self)

    method.__name__ = name
    return method


def _traced_result(out, origin):
    """A traced number for the 0-d result ``out`` of arithmetic on ``origin``, or a plain number where
    the result carries nothing (an integer result, or one the transform did not record)."""
    xp = origin._tensor.__array_namespace__()
    if not isinstance(out, Tensor) or out._interp is None:
        return _to_python(xp, out._scalar("item") if isinstance(out, Tensor) else out)
    if xp.isdtype(out.dtype, "complex floating"):
        cls = TracedComplex
    elif xp.isdtype(out.dtype, "real floating"):
        cls = TracedFloat
    else:
        return _to_python(xp, out._scalar("item"))
    value, _ = _python_number(out, "item")
    return cls._make(value, out, origin._note)


_UFUNC_OPERATORS = {
    "add": "__add__",
    "subtract": "__sub__",
    "multiply": "__mul__",
    "divide": "__truediv__",
    "true_divide": "__truediv__",
    "floor_divide": "__floordiv__",
    "remainder": "__mod__",
    "power": "__pow__",
}


class _TracedNumber:
    """What ``TracedFloat`` and ``TracedComplex`` share: while the transform of their tensor runs,
    arithmetic with numbers gives traced numbers and with arrays polyad tensors; polyad turns them back
    into their tensors where they reach an op or a transform's output. Comparisons, ``int()``, ``round()``
    and formatting are the plain number's (a branch, or an integer: no derivative lost). Once the
    transform has finished they are plain numbers."""

    __slots__ = ()
    _base = float

    @classmethod
    def _make(cls, value, tensor, note):
        n = cls._base.__new__(cls, value)
        n._tensor, n._note = tensor, note
        return n

    def _live(self):
        t = self._tensor
        i = t._interp
        return t if i is not None and i.active else None

    def _plain(self):
        return self.real if self._base is float else complex(self.real, self.imag)

    def __complex__(self):
        t = self._live()
        if t is not None:
            _warn_complex(t)
        return complex(self.real, self.imag)

    __add__, __radd__ = _arithmetic("__add__"), _arithmetic("__radd__")
    __sub__, __rsub__ = _arithmetic("__sub__"), _arithmetic("__rsub__")
    __mul__, __rmul__ = _arithmetic("__mul__"), _arithmetic("__rmul__")
    __truediv__, __rtruediv__ = _arithmetic("__truediv__"), _arithmetic("__rtruediv__")
    __floordiv__, __rfloordiv__ = _arithmetic("__floordiv__"), _arithmetic("__rfloordiv__")
    __mod__, __rmod__ = _arithmetic("__mod__"), _arithmetic("__rmod__")
    __rpow__ = _arithmetic("__rpow__")
    _pow = _arithmetic("__pow__")
    __neg__, __pos__, __abs__ = _unary("__neg__"), _unary("__pos__"), _unary("__abs__")

    def __pow__(self, other, mod=None):
        if mod is not None:
            return NotImplemented
        return self._pow(other)

    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # NumPy meets a traced number: arithmetic goes through polyad; other functions would compute on
        # the bare number and drop what it carries, so they are refused while the transform runs
        traced = [i for i in inputs if isinstance(i, _TracedNumber) and i._live() is not None]
        if not traced:
            return getattr(ufunc, method)(*(_plain_operand(i) for i in inputs), **kwargs)
        name = _UFUNC_OPERATORS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if name is None or len(inputs) != 2:
            interp = traced[0]._tensor._interp
            raise TypeError(
                f"NumPy's {ufunc.__name__} got a number taken (item(), tolist()) from a value inside "
                f"{interp.transform}: NumPy would drop the {interp.carries} it carries; use "
                f"polyad.xp.{ufunc.__name__} instead"
            )
        a, b = (_operand(i) for i in inputs)
        out = getattr(a, name)(b) if isinstance(a, Tensor) else getattr(b, "__r" + name[2:])(a)
        for i in traced[1:] if all(isinstance(i, int | float | complex) for i in inputs) else traced:
            i._note[2] = True  # carried on by the result (a tensor; a traced number keeps the first's note)
        return (
            _traced_result(out, traced[0])
            if all(isinstance(i, int | float | complex) for i in inputs)
            else out
        )

    def __reduce__(self):
        t = self._live()
        if t is not None:
            _refuse(t, "pickle")
        return (self._base, (self._plain(),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class TracedFloat(_TracedNumber, float):
    """A Python float from ``item()``/``tolist()`` of a real floating value inside a transform, which
    keeps its tensor (see ``_TracedNumber``).

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.grad(lambda x: 3.0 * x[0].item() ** 2)(np.array([2.0]))
        array([12.])
    """

    __slots__ = ("_tensor", "_note")
    _base = float

    def __float__(self):
        t = self._live()
        return self._plain() if t is None else handed_out(self._plain(), t, "float() of an item()")


class TracedComplex(_TracedNumber, complex):
    """A Python complex from ``item()``/``tolist()`` of a complex value inside a transform (see
    ``_TracedNumber``)."""

    __slots__ = ("_tensor", "_note")
    _base = complex  # type: ignore[assignment]


_NUMBER_TYPES = frozenset((float, TracedFloat, TracedComplex))  # what polyad hands out


# ------------------------------------------------------------------------------ the tensor


class Tensor:
    """A polyad tensor: a backend array (or a lower-level tensor) seen through one transform level.

    Every tensor has the same slots, so that an in-place update can turn a tensor into another kind
    (``__setitem__`` writing a batched value into an unbatched tensor changes its class):

    - ``_value``: the backend array, or the lower-level tensor, underneath;
    - ``_interp``: the interpreter of the level this tensor belongs to (None for a plain tensor);
    - ``_aux``: per-transform data (tape node, tangent, batch dimension);
    - ``_alias``: the views it has, or the base it is a view of (``polyad.ops.views``), else None.

    A plain ``Tensor(array)`` lives at level 0 and makes any backend array speak polyad's namespace.
    Conversions and copies (``float``, ``item``, ``np.asarray``, DLPack, pickle, ``deepcopy``...) are
    every way a value leaves a transform (see the module's docstring).

    Example:
        >>> import numpy as np, polyad as pa
        >>> t = pa.Tensor(np.arange(3.0))
        >>> (2.0 * t + 1).shape
        (3,)
    """

    # ``_alias``: what ``x`` shares memory with, as NumPy's views do (None for most tensors): a view's base
    # and how to reach it, or a base's live views (``polyad.ops.views``). ``_become`` keeps it: the object
    # is the same array after an in-place write.
    __slots__ = ("_value", "_interp", "_aux", "_alias", "__weakref__")
    # Results of level-0 ops on a plain tensor are plain tensors; on a FreshTensor (False), FreshTensors.
    _sticky = True
    _made_inside = False  # a FreshTensor may take a transform's value by a write (refusals.closed_over_write)
    # NumPy and CuPy must not swallow a tensor into an object array: until the namespace installs NumPy's
    # dispatch (polyad/interop/numpy: __array_ufunc__ computes NumPy's ufuncs and operators in polyad ops),
    # NumPy defers to our reflected operators.
    __array_ufunc__ = None
    __array_priority__ = 1000
    _namespace = None  # polyad.xp, once it is assembled (install_namespace)

    def __init__(self, value, interp=None, aux=None):
        if interp is None and not hasattr(value, "shape"):  # a user's pa.Tensor(...): say what it takes
            raise TypeError(
                f"pa.Tensor(value): value must be an array of a backend (numpy.ndarray, ...) or a polyad "
                f"tensor, got {type(value).__name__}; make one with pa.xp.asarray(value)"
            )
        self._value = value
        self._interp = interp
        self._aux = aux
        self._alias = None

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
        return math.prod(self.shape)

    @property
    def level(self):
        return 0 if self._interp is None else self._interp.level

    @property
    def mT(self):
        return self._namespace.matrix_transpose(self)

    @property
    def T(self):
        # NumPy's: the axes reversed, a 0-d or 1-d tensor itself (the standard defines only the 2-D case)
        if self.ndim < 2:
            return self
        return self._namespace.permute_dims(self, tuple(range(self.ndim - 1, -1, -1)))

    def __array_namespace__(self, *, api_version=None):
        if api_version is not None and api_version not in standard.SUPPORTED_VERSIONS:
            raise ValueError(
                f"polyad implements Array API {standard.API_VERSION} (and the revisions before it); "
                f"api_version={api_version!r} is unknown"
            )
        return Tensor._namespace  # also ShapeDtype's (an abstract array's namespace is polyad's)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # __getitem__, __setitem__ (functionalised: the updated tensor is computed out of place, then this
    # object becomes it), to_device and the Python operators come from install_namespace

    # -- leaving polyad: conversions, arrays, copies
    def _scalar(self, what):
        """The backend array underneath all levels, for ``what`` (a batched or abstract tensor overrides
        this: the common value of agreeing examples, or an error naming ``what``). No exit check."""
        v = self._value
        return v._scalar(what) if isinstance(v, Tensor) else v

    def concrete(self):
        """The backend array underneath (a plain tensor's array; refused for a transform's tensor, whose
        derivative or batch it would drop)."""
        _refuse(self, "concrete()")
        return self._scalar("concrete()")

    # -- Python scalars: plain for branches and integers, remembered for float and complex
    def __bool__(self):
        _owner_checked(self, "bool()")
        return bool(self._scalar("bool"))

    def __int__(self):
        _owner_checked(self, "int()")
        return int(self._scalar("int"))

    def __index__(self):
        _owner_checked(self, "operator.index()")
        v = self._scalar("index")
        if hasattr(v, "__index__"):
            return v.__index__()
        # CuPy's 0-d arrays have no __index__: an integer one converts by int(), as NumPy's would
        if not self.__array_namespace__().isdtype(self.dtype, "integral"):
            raise TypeError(f"only an integer array can be an index, got one of dtype {self.dtype}")
        return int(v)

    def __float__(self):
        interp = _owner_checked(self, "float()")
        if interp is not None and refusals.stores_into_array():  # buf[i] = x into a NumPy buffer
            _refuse_store(self, interp)
        value = float(self._scalar("float"))
        if interp is None or not self.__array_namespace__().isdtype(
            self.dtype, ("real floating", "complex floating")
        ):
            return value
        return handed_out(value, self, "float()")

    def __complex__(self):
        _owner_checked(self, "complex()")
        value = complex(self._scalar("complex"))
        _warn_complex(self)
        return value

    def item(self):
        """The single element as a Python number (bool, int, float or complex by dtype). Inside a
        transform a floating value gives a ``TracedFloat``/``TracedComplex``, which keeps its derivative
        through arithmetic and where it comes back to polyad (see this module).

        Example:
            >>> import numpy as np, polyad as pa
            >>> pa.Tensor(np.array([2.5])).item()
            2.5
        """
        interp = _owner_checked(self, "item()")
        xp = self.__array_namespace__()
        t = self if self.ndim == 0 else xp.reshape(self, ())  # one element, any shape (as NumPy's)
        if interp is None or not xp.isdtype(self.dtype, ("real floating", "complex floating")):
            return _to_python(xp, t._scalar("item") if isinstance(t, Tensor) else t)
        value, complex_ = _python_number(t, "item")
        n = (TracedComplex if complex_ else TracedFloat)._make(value, t, None)
        n._note = _remember(n, t, "item()")
        return n

    def tolist(self):
        """The values as nested Python lists of Python numbers (``item()`` of each element inside a
        transform, so that each keeps its derivative).

        Example:
            >>> import numpy as np, polyad as pa
            >>> pa.Tensor(np.array([[1.0, 2.0]])).tolist()
            [[1.0, 2.0]]
        """
        interp = _owner_checked(self, "tolist()")
        v = self._scalar("tolist")  # under vmap: the examples must agree (one check, one clear error)
        if interp is None:
            return v.tolist() if hasattr(v, "tolist") else _nested_list(v, self.__array_namespace__())
        return _nested_list(self, None)

    def __format__(self, spec):
        # formatting reads the value and carries no derivative anywhere: fine inside every transform
        _owner_checked(self, "format()")
        if not spec:
            return str(self)
        xp = self.__array_namespace__()
        return format(_to_python(xp, xp.reshape(self._scalar("format"), ())), spec)

    # -- arrays: refused for a transform's tensor
    def __array__(self, dtype=None, copy=None):
        if self._interp is not None:  # the frames are read only when refusing
            _refuse(self, "np.asarray()", refusals.array_hint())
        v = self._scalar("np.asarray")
        return v.__array__() if dtype is None else v.__array__(dtype)

    def __dlpack__(self, **kwargs):
        _refuse(self, "__dlpack__ (from_dlpack)")
        return self._scalar("__dlpack__").__dlpack__(**kwargs)

    def __dlpack_device__(self):
        _refuse(self, "__dlpack_device__ (from_dlpack)")
        return self._scalar("__dlpack_device__").__dlpack_device__()

    def __buffer__(self, flags):  # Python 3.12 on (PEP 688); 3.11 says only "a bytes-like object is required"
        _refuse(self, "memoryview() (the buffer protocol)")
        return memoryview(self._scalar("memoryview"))

    def __bytes__(self):  # before the buffer protocol: polyad's refusal on every Python
        _refuse(self, "bytes()")
        return bytes(self._scalar("bytes"))

    def __reduce__(self):
        _refuse(self, "pickle")
        return (type(self), (self._value,))

    def __reduce_ex__(self, protocol):
        return self.__reduce__()

    # -- copies: the same value (copy), or an op of the transform (deepcopy)
    def __copy__(self):
        _owner_checked(self, "copy.copy()")
        return type(self)(self._value, self._interp, self._aux)

    def __deepcopy__(self, memo):
        _owner_checked(self, "copy.deepcopy()")
        out = self.__array_namespace__().asarray(self, copy=True)
        return out if isinstance(out, Tensor) else type(self)(out)  # a FreshTensor's copy is one too

    def _become(self, other):
        if not isinstance(other, Tensor):
            other = Tensor(other)
        elif other._interp is not None and not self._made_inside and other.level > self.level:
            raise RuntimeError(refusals.closed_over_write(self, other._interp))
        self.__class__ = type(other)
        self._value, self._interp, self._aux = other._value, other._interp, other._aux
        return self

    def __repr__(self):
        kind = type(self).__name__
        return f"{kind}(level={self.level}, shape={self.shape}, dtype={self.dtype}, value={self._value!r})"

    __hash__ = None  # type: ignore[assignment]


def _on_backend(event, backend):
    """A backend that loads learns polyad's Tensor type, so that its operators defer to the tensor's
    reflected ones (``W @ x`` with a raw array ``W``)."""
    if event == "loaded" and backend.defer_to is not None:
        backend.defer_to(Tensor)


backends.subscribe(_on_backend)


def install_namespace(namespace, methods):
    """Give ``Tensor`` its namespace (``__array_namespace__``, ``.mT``, ``.T``, ``to_device``) and the
    methods that bind its ops (``methods``: the Python operators, ``__getitem__``, ``__setitem__``...):
    called once, by ``polyad.xp`` when it has assembled the namespace, which sits above this layer."""
    Tensor._namespace = namespace
    install_methods(methods)


def install_methods(methods):
    """Give ``Tensor`` the methods and properties ``methods`` (``{name: function or property}``): the
    namespace's operators, and NumPy's methods and dispatch protocols (``polyad.interop.numpy.install``)."""
    for name, method in methods.items():
        setattr(Tensor, name, method)


def _nested_list(t, xp):
    """Nested lists of ``item()`` of a tensor's elements (of Python numbers of a raw array's, given the
    namespace ``xp``)."""
    if t.ndim == 0:
        return t.item() if xp is None else _to_python(xp, t)
    return [_nested_list(t[i, ...], xp) for i in range(t.shape[0])]


def _to_python(xp, v):
    for kind, cast in (("bool", bool), ("integral", int), ("real floating", float)):
        if xp.isdtype(v.dtype, kind):
            return cast(v)
    return complex(v)

"""A toy backend for the contract tests (not shipped): NumPy behind its own array type ``ToyArray``, on its
own device ``TOY`` of device type "toy".

Its namespace wraps every function of the standard from array_api_compat.numpy: arguments are unwrapped
to NumPy, results wrapped back. Like array_api_strict, its operators refuse operands of other types, so
``W @ x`` with a raw ``ToyArray`` ``W`` and a polyad tensor ``x`` works only through the contract's
``defer_to`` hook. ``make_backend(**changes)`` builds the ``Backend``, with fields replaced for tests of
the contract checker.
"""

import types

import array_api_compat.numpy as compat_numpy
import numpy as np

from polyad.backends import Backend
from polyad.backends.numpy import extras as numpy_extras
from polyad.backends.numpy.random import Generator as _NumpyGenerator
from polyad.core import standard


class ToyDevice:
    """The one device of the toy backend."""

    def __eq__(self, other):
        return isinstance(other, ToyDevice)

    def __hash__(self):
        return hash("toy")

    def __repr__(self):
        return "ToyDevice()"


TOY = ToyDevice()
_DEFER = [()]  # the types the operators defer to (set by the defer_to hook)


def unwrap(x):
    """NumPy's view of an argument: ToyArrays unwrapped, the toy device as "cpu", containers recursed."""
    if isinstance(x, ToyArray):
        return x._a
    if isinstance(x, ToyDevice):
        return "cpu"
    if isinstance(x, list):
        return [unwrap(v) for v in x]
    if type(x) is tuple:
        return tuple(unwrap(v) for v in x)
    return x


def wrap(x):
    """A NumPy result as the toy sees it: arrays and NumPy scalars become ToyArrays."""
    if isinstance(x, np.ndarray):
        return ToyArray(x)
    if isinstance(x, np.generic):
        return ToyArray(np.asarray(x))
    if isinstance(x, list):
        return [wrap(v) for v in x]
    if isinstance(x, tuple):
        items = [wrap(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return x


def _wrapped(fn):
    def call(*args, **kwargs):
        return wrap(fn(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()}))

    call.__name__ = getattr(fn, "__name__", "toy_function")
    return call


class ToyArray:
    """A NumPy array in a toy costume."""

    __slots__ = ("_a",)
    __array_ufunc__ = None  # NumPy must not take a ToyArray apart
    __hash__ = None

    def __init__(self, a):
        self._a = a

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    device = property(lambda self: TOY)
    T = property(lambda self: ToyArray(self._a.T))
    mT = property(lambda self: ToyArray(np.matrix_transpose(self._a)))

    def __array_namespace__(self, *, api_version=None):
        return namespace

    def to_device(self, device, /, *, stream=None):
        if device != TOY:
            raise ValueError(f"ToyArray.to_device: the toy backend has one device, got {device!r}")
        return self

    def __getitem__(self, key):
        return wrap(self._a[unwrap(key)])

    def __setitem__(self, key, value):
        self._a[unwrap(key)] = unwrap(value)

    def __bool__(self):
        return bool(self._a)

    def __int__(self):
        return int(self._a)

    def __float__(self):
        return float(self._a)

    def __complex__(self):
        return complex(self._a)

    def __index__(self):
        return self._a.__index__()

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    def __repr__(self):
        return f"ToyArray({self._a!r})"


def _operand(other):
    if isinstance(other, ToyArray):
        return other._a
    if isinstance(other, bool | int | float | complex):
        return other
    raise TypeError(f"toy arrays do not mix with {type(other).__name__}")


def _binary(name):
    def method(self, other):
        if _DEFER[0] and isinstance(other, _DEFER[0]):
            return NotImplemented
        return wrap(getattr(self._a, name)(_operand(other)))

    return method


def _inplace(name):
    def method(self, other):  # into the NumPy array underneath, so that views see it, as NumPy's do
        if _DEFER[0] and isinstance(other, _DEFER[0]):
            return NotImplemented
        getattr(self._a, name)(_operand(other))
        return self

    return method


def _unary(name):
    return lambda self: wrap(getattr(self._a, name)())


for _n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
           "rshift"):  # fmt: skip
    setattr(ToyArray, f"__{_n}__", _binary(f"__{_n}__"))
    setattr(ToyArray, f"__r{_n}__", _binary(f"__r{_n}__"))
    setattr(ToyArray, f"__i{_n}__", _inplace(f"__i{_n}__"))
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(ToyArray, f"__{_n}__", _binary(f"__{_n}__"))
for _n in ("neg", "pos", "abs", "invert"):
    setattr(ToyArray, f"__{_n}__", _unary(f"__{_n}__"))


class _Info:
    """``__array_namespace_info__()`` of the toy: NumPy's, on the toy device."""

    def __init__(self):
        self._np = compat_numpy.__array_namespace_info__()

    def capabilities(self):
        return self._np.capabilities()

    def default_device(self):
        return TOY

    def devices(self):
        return [TOY]

    def default_dtypes(self, *, device=None):
        return self._np.default_dtypes(device=unwrap(device))

    def dtypes(self, *, device=None, kind=None):
        return self._np.dtypes(device=unwrap(device), kind=kind)


def _make_namespace():
    ns = types.ModuleType("toy_backend.namespace")
    for name in standard.FUNCTIONS:
        if name != "__array_namespace_info__":
            setattr(ns, name, _wrapped(getattr(compat_numpy, name)))
    for name in standard.CONSTANTS + standard.DTYPES:
        setattr(ns, name, getattr(compat_numpy, name))
    for ext, names in (("linalg", standard.LINALG), ("fft", standard.FFT)):
        sub = types.ModuleType(f"toy_backend.namespace.{ext}")
        for name in names:
            setattr(sub, name, _wrapped(getattr(getattr(compat_numpy, ext), name)))
        setattr(ns, ext, sub)
    ns.__array_namespace_info__ = _Info
    ns.__array_api_version__ = "2024.12"
    return ns


namespace = _make_namespace()

# the required extras, through NumPy's
extras = types.SimpleNamespace(
    scatter_add=_wrapped(numpy_extras.scatter_add),
    index_add=_wrapped(numpy_extras.index_add),
)


class Generator:
    """The toy's random numbers: NumPy's, wrapped."""

    def __init__(self, seed):
        self._np = _NumpyGenerator(seed)

    def normal(self, shape, dtype, device=None):
        return wrap(self._np.normal(shape, dtype))

    def uniform(self, shape, dtype, device=None):
        return wrap(self._np.uniform(shape, dtype))

    def integers(self, low, high, shape, dtype, device=None):
        return wrap(self._np.integers(low, high, shape, dtype))

    def get_state(self):
        return self._np.get_state()

    def set_state(self, state):
        self._np.set_state(state)


def defer_to(tensor_type):
    _DEFER[0] = tensor_type


SOFTPLUS_CALLS = []


def _softplus(xp, x):
    """The toy's device kernel for polyad::softplus (counts its calls)."""
    SOFTPLUS_CALLS.append(x.shape)
    return ToyArray(np.logaddexp(0.0, x._a))


def make_backend(name="toy", **changes):
    """The toy ``Backend`` named ``name``, with ``changes`` replacing fields (tests of the checker)."""
    fields = dict(
        name=name,
        compat=namespace,
        extras=extras,
        array_types=(ToyArray,),
        device_type=lambda array: "toy",
        device_types={"toy": "cpu"},
        devices=lambda: [TOY],
        generator=Generator,
        defer_to=defer_to,
        to_numpy=lambda array: np.array(array._a),
        kernels={"polyad::softplus": {"toy": _softplus}},
        version="0.0",
    )
    fields.update(changes)
    return Backend(**fields)

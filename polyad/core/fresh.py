"""``FreshTensor``: an array created inside a transform, a plain level-0 tensor that carries nothing and
leaves freely; ``fresh`` makes one while a transform is active, ``plain`` hands one back as its array."""

from polyad.core.levels import transform_active
from polyad.core.tensor import Tensor


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
    _made_inside = True

    def _become(self, other):
        return Tensor._become(self, other if isinstance(other, Tensor) else FreshTensor(other))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # a NumPy ufunc on an array made inside a transform (a constant): NumPy computes it on the array;
        # a write into it (out=, ufunc.at), or a transform's value among the arguments, is polyad's
        handler = Tensor.__array_ufunc__
        if handler is not None and (method == "at" or _polyad_values(inputs, kwargs)):
            return handler(self, ufunc, method, *inputs, **kwargs)
        inputs = tuple(i._value if type(i) is FreshTensor else i for i in inputs)
        return getattr(ufunc, method)(*inputs, **kwargs)


def _polyad_values(inputs, kwargs):
    """Whether a ufunc call has a transform's tensor among its inputs or ``where``, or a tensor as ``out``."""
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else (out,)
    traced = (
        i for i in (*inputs, kwargs.get("where")) if isinstance(i, Tensor) and type(i) is not FreshTensor
    )
    return any(isinstance(o, Tensor) for o in outs) or any(True for _ in traced)


def fresh(array):
    """``array`` as a ``FreshTensor`` while any transform is active (creation functions call this), so that
    ``x[key] = traced`` can rebind ``x``; unchanged outside transforms."""
    return FreshTensor(array) if transform_active() else array


def plain(value):
    """A transform's output as the caller sees it: a ``FreshTensor`` handed back as its raw array."""
    return value._value if type(value) is FreshTensor else value

"""``bind``: an op applied through the levels, and level 0, where kernels run.

Every namespace function ends in ``bind(op, *arrays, **metadata)``. ``bind`` finds the highest transform
level among the array arguments and hands the call to that level's interpreter; the interpreter unwraps
its own tensors, calls ``bind`` again on what is underneath (so lower levels see what it emits) and wraps
the result. When no tensor of any transform is among the arguments the call reaches ``eval_op``, which
picks a kernel (``dispatch.choose_kernel``) and runs it on raw backend arrays.

One hook may run first: pre-dispatch capture (``set_pre_dispatch_hook``), and, while numbers polyad handed
out are alive (``float(t)``, ``t.item()``), their reconnection to their tensors. With neither, ``bind``
calls nothing first: the eager path pays nothing.
"""

import threading

import polyad.core.dispatch as dispatch
import polyad.core.tensor as tensor
from polyad.core.dispatch import BY_TYPE
from polyad.core.fresh import FreshTensor, fresh
from polyad.core.tensor import Tensor, unusable

_get_ident = threading.get_ident
_LOCK = threading.Lock()
PASS = object()  # what a hook returns for a call it leaves to the levels
_pre_dispatch = None  # set while make_graph(pre_dispatch=True) captures: sees every call first
_hooks = []  # hooks of captures that must see every call (loop-body tracing), in installation order
_numbers_alive = False
_hook = None  # what bind calls first: None when nothing needs to (the eager path pays nothing)


def set_pre_dispatch_hook(hook):
    """Install ``hook(op, args, params) -> result | PASS`` at the top of the dispatcher (None removes it)."""
    global _pre_dispatch
    with _LOCK:
        _pre_dispatch = hook
        _update_hook()


def pre_dispatch_hook():
    """The pre-dispatch hook installed (None when no pre-dispatch capture runs)."""
    return _pre_dispatch


def add_hook(hook):
    """Install ``hook(op, args, params) -> result | PASS``, called for every op before the levels see it
    (after the reconnection of numbers and pre-dispatch capture), until ``remove_hook``. A hook acts in
    its own thread only (it sees every thread's calls) and is cheap when it passes."""
    with _LOCK:
        _hooks.append(hook)
        _update_hook()


def remove_hook(hook):
    """Remove a hook ``add_hook`` installed."""
    with _LOCK:
        _hooks.remove(hook)
        _update_hook()


def _numbers_changed(alive):
    global _numbers_alive
    with _LOCK:
        _numbers_alive = alive
        _update_hook()


def _update_hook():
    """Called under ``_LOCK`` when a hook is installed or removed, or polyad's numbers appear or go."""
    global _hook
    if not _numbers_alive and not _hooks:
        _hook = _pre_dispatch
    elif not _numbers_alive and _pre_dispatch is None and len(_hooks) == 1:
        _hook = _hooks[0]
    else:
        _hook = _all_hooks


def _all_hooks(op, args, params):
    """Every hook in turn: numbers polyad handed out (``float(t)``, ``t.item()``) reaching an op are their
    tensors again, so their derivative is kept (``polyad.core.tensor``); then pre-dispatch capture; then
    the others."""
    if _numbers_alive:
        new = tensor.reconnect_call(op, args, params)
        if new is not None:
            return bind(op, *new, **params)
    if _pre_dispatch is not None:
        out = _pre_dispatch(op, args, params)
        if out is not PASS:
            return out
    for hook in _hooks:
        out = hook(op, args, params)
        if out is not PASS:
            return out
    return PASS


tensor.on_live_change(_numbers_changed)


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
            kind = top.rule_kind
            if kind is None or kind.name not in op.rules:  # no rule of its own here: run its body
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
    backend = BY_TYPE.get(type(args[0])) if len(args) == 1 and args else None
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

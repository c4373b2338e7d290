"""Custom ops (torch.library's shape): a Python function becomes an op of the registry with kernels per
device type and a rule per transform, all methods on the op.

Example:
    >>> import numpy as np, polyad as pa
    >>> @pa.custom_op("demo::scaled_sin", mutates_args=())
    ... def scaled_sin(x, *, scale=1.0):
    ...     return pa.xp.sin(x) * scale          # the default kernel (runs on raw backend arrays)
    >>> def setup(ctx, inputs, output):
    ...     ctx.save_for_backward(inputs[0])
    ...     ctx.scale = inputs[1]
    >>> def backward(ctx, g):
    ...     (x,) = ctx.saved_tensors
    ...     return g * pa.xp.cos(x) * ctx.scale  # written in polyad ops: differentiable again
    >>> scaled_sin.register_autograd(backward, setup_context=setup)
    >>> pa.grad(lambda x: pa.xp.sum(scaled_sin(x, scale=2.0)))(np.zeros(2))
    array([2., 2.])
"""

import inspect
import re
from contextlib import contextmanager

from polyad import core, dispatch
from polyad.core import Op, bind
from polyad.ops.creation import zeros_like
from polyad.tracing import fake_abstract_eval

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_.]*$")
CUSTOM_OPS = {}  # "namespace::name" -> CustomOp


class _Context:
    """What ``setup_context`` keeps for ``backward``: attributes, or ``save_for_backward(*arrays)``."""

    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays


class CustomOp:
    """A user op: call it like the function it was made from; register kernels and rules on it."""

    def __init__(self, name, fn, mutates_args):
        self.name = name
        self._fn = fn
        self.mutates_args = tuple(mutates_args)
        sig = inspect.signature(fn)
        self._signature = sig
        self._positional = [
            p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        self._keyword = [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
        self._has_varargs = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
        self.op = Op(name, lambda xp, *args, **params: fn(*args, **params))
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def __repr__(self):
        return f"CustomOp({self.name!r})"

    # -- calling: arrays positional, metadata keyword
    def __call__(self, *args, **kwargs):
        if kwargs and not self._has_varargs:
            moved = [k for k in kwargs if k in self._positional]
            if moved:
                bound = self._signature.bind(*args, **kwargs)
                args = tuple(bound.arguments[n] for n in self._positional if n in bound.arguments)
                kwargs = {k: v for k, v in kwargs.items() if k not in self._positional}
        return bind(self.op, *args, **kwargs)

    # -- kernels
    def register_kernel(self, device_types, fn=None):
        """Register ``fn(*args, **kwargs)`` as this op's kernel for one or more device types ("cpu",
        "cuda", or a registered stand-in). Usable as a decorator."""
        types = (device_types,) if isinstance(device_types, str) else tuple(device_types)

        def register(kernel):
            for dt in types:
                dispatch.check_device_type(dt, f"{self.name}.register_kernel")
            for dt in types:
                self.op.kernels[dt] = lambda xp, *args, _k=kernel, **params: _k(*args, **params)
            return kernel

        return register(fn) if fn is not None else register

    # -- rules
    def register_autograd(self, backward, /, *, setup_context=None):
        """Register the reverse-mode rule, in torch.library's convention.

        Args:
            backward: ``backward(ctx, *grads)`` returns one gradient per input (a bare value for a
                one-input op, else a tuple; None where an input has no gradient).
            setup_context: ``setup_context(ctx, inputs, output)`` keeps what ``backward`` needs, as
                attributes of ``ctx`` or with ``ctx.save_for_backward(*arrays)`` (read as
                ``ctx.saved_tensors``). ``inputs`` are the positional then keyword arguments.
        """
        if not callable(backward):
            raise TypeError(f"{self.name}.register_autograd: backward must be callable, got {backward!r}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"{self.name}.register_autograd: setup_context must be callable or None")
        name = self.name
        keyword = self._keyword
        defaults = {k: self._signature.parameters[k].default for k in keyword}

        def vjp(g, out, *primals, **params):
            ctx = _Context()
            if setup_context is not None:
                inputs = tuple(primals) + tuple(params.get(k, defaults[k]) for k in keyword)
                setup_context(ctx, inputs, out)
            grads = backward(ctx, *g) if self.op.multiple_results else backward(ctx, g)
            if not isinstance(grads, tuple):
                grads = (grads,)
            if len(grads) < len(primals):
                raise ValueError(
                    f"custom op {name!r}: backward returned {len(grads)} gradient(s) for "
                    f"{len(primals)} positional input(s); return one per input (None for none)"
                )
            return grads[: len(primals)]

        self.register_rule("vjp", vjp)

    def register_jvp(self, rule):
        """Register the forward-mode rule ``rule(primals: tuple, tangents: tuple) -> (output, tangent)``.
        Zero tangents arrive as zeros of the primal's shape."""
        name = self.name

        def jvp(tangents, out, *primals, **params):
            ts = tuple(
                zeros_like(p) if t is None and hasattr(p, "shape") else t for t, p in zip(tangents, primals)
            )
            result = rule(primals, ts, **params)
            if not (isinstance(result, tuple) and len(result) == 2):
                raise TypeError(
                    f"custom op {name!r}: the jvp rule must return (output, tangent), "
                    f"got {type(result).__name__}"
                )
            return result[1]

        self.register_rule("jvp", jvp)

    def register_vmap(self, rule):
        """Register the batching rule ``rule(info, in_dims, *args, **kwargs) -> (output, out_dims)``.
        ``args`` are the underlying values with their batch dimension where ``in_dims`` says (None: not
        batched); ``info.batch_size`` and ``info.randomness`` describe the vmap level."""
        self.register_rule("batch", rule)

    def register_fake(self, fn):
        """Register the abstract evaluation ``fn(*fake_args, **kwargs)``: it receives abstract arrays
        (``shape``, ``dtype``, ``device``; their namespace, ``__array_namespace__()``, is ``polyad.xp``,
        whose functions on them compute shapes only, as ``xp.empty_like(x)``) and returns the abstract
        output (or a tuple of them; any object with ``shape`` and ``dtype`` will do)."""
        self.register_rule("abstract_eval", fake_abstract_eval(self.name, fn))
        return fn

    def register_rule(self, kind, rule):
        """Register ``rule`` for rule kind ``kind`` (a name in ``core.RULE_KINDS``: "vjp", "jvp", "batch",
        "abstract_eval", or the kind of a transform added later), with that kind's signature (see
        ``core.Op``). The ``register_autograd``/``register_jvp``/``register_vmap``/``register_fake``
        methods adapt torch.library's conventions to it."""
        _check_rule_kind(kind, f"{self.name}.register_rule")
        if not callable(rule):
            raise TypeError(f"{self.name}.register_rule({kind!r}, ...): rule must be callable, got {rule!r}")
        self.op.rules[kind] = rule


def custom_op(name, fn=None, /, *, mutates_args=()):
    """Turn a Python function into a polyad op named ``"namespace::name"``.

    The function body is the op's default kernel: it receives raw backend arrays (use ``pa.xp`` or the
    arrays' own namespace). Arrays are positional arguments, metadata keyword-only. Register per-device
    kernels with ``register_kernel`` and transform rules with ``register_autograd``, ``register_jvp``,
    ``register_vmap``, ``register_fake``. A transform that needs a rule the op lacks raises an error naming
    the op and the rule to register, except vmap, which loops over the batch with a warning.

    Args:
        name: ``"namespace::op"``; must be unique.
        mutates_args: names of arguments the function writes to; only ``()`` is supported under transforms.

    Returns:
        A ``CustomOp`` (or a decorator making one).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"custom_op: name must look like 'namespace::op_name', got {name!r}")
    if name in CUSTOM_OPS or name in core.OPS:
        raise ValueError(f"custom_op: an op named {name!r} is already registered")
    if isinstance(mutates_args, str):
        raise TypeError("custom_op: mutates_args must be a tuple of argument names, not a str")

    def make(f):
        if not callable(f):
            raise TypeError(f"custom_op({name!r}): expected a function, got {type(f).__name__}")
        op = CustomOp(name, f, mutates_args)
        CUSTOM_OPS[name] = op
        return op

    return make(fn) if fn is not None else make


def impl(name, device_types=("cpu", "cuda"), func=None):
    """Register ``func`` as the kernel of custom op ``name`` for ``device_types``; a decorator if ``func``
    is None (``pa.library.impl("mylib::f", "cuda")(kernel)``)."""
    op = CUSTOM_OPS.get(name)
    if op is None:
        raise ValueError(
            f"library.impl: no custom op named {name!r}; define it with pa.custom_op first "
            f"(known: {sorted(CUSTOM_OPS) or 'none'})"
        )
    return op.register_kernel(device_types, func)


def _check_rule_kind(kind, where):
    if kind not in core.RULE_KINDS:
        raise ValueError(
            f"{where}: unknown rule kind {kind!r}; the rule kinds are {', '.join(map(repr, core.RULE_KINDS))}"
        )


def _resolve_op(op):
    if isinstance(op, Op):
        return op
    if isinstance(op, CustomOp):
        return op.op
    if isinstance(op, str):
        if op in core.OPS:
            return core.OPS[op]
        raise ValueError(f"override: no op named {op!r}")
    inner = getattr(op, "op", None)  # a namespace function carries its op
    if isinstance(inner, Op):
        return inner
    raise TypeError(f"override: expected an op, its name or its namespace function, got {op!r}")


@contextmanager
def override(op, layer, impl):
    """Replace one layer of an op's implementation inside the block, restoring it on exit (even on error).

    The analogue of PyTorch's Python dispatcher: try a faster batching rule for ``matmul``, count calls
    of a kernel while debugging, swap a VJP. The replacement is process-wide while the block runs.

    Args:
        op: the op, its registry name ("matmul", "mylib::f") or its namespace function (``pa.xp.matmul``).
        layer: "vjp", "jvp", "batch" or "abstract_eval" (rules, with the signatures of ``core.Op``), or a
            device type ("cpu", "cuda") or "generic" (kernels, called as ``impl(*arrays, **params)``).
        impl: the replacement.

    Example:
        >>> import numpy as np, polyad as pa
        >>> calls = []
        >>> def counting_sin(x):
        ...     calls.append(x.shape)
        ...     return np.sin(x)
        >>> with pa.library.override(pa.xp.sin, "cpu", counting_sin):
        ...     _ = pa.grad(lambda x: pa.xp.sum(pa.xp.sin(x)))(np.zeros(3))
        >>> calls
        [(3,)]
    """
    target = _resolve_op(op)
    if not isinstance(layer, str):
        raise TypeError(
            f"override(layer={layer!r}): layer must be a str: a rule kind "
            f"({', '.join(map(repr, core.RULE_KINDS))}), 'generic' or a device type "
            f"({', '.join(map(repr, dispatch.DEVICE_PRIORITY))})"
        )
    if layer in core.RULE_KINDS:
        missing = object()
        previous = target.rules.get(layer, missing)
        target.rules[layer] = impl
        try:
            yield target
        finally:
            if previous is missing:
                del target.rules[layer]
            else:
                target.rules[layer] = previous
        return

    def kernel(xp, *args, **params):
        return impl(*args, **params)

    if layer == "generic":
        previous = target.generic
        target.generic = kernel
        try:
            yield target
        finally:
            target.generic = previous
        return
    dispatch.check_device_type(layer, "override(layer=...)")
    missing = object()
    previous = target.kernels.get(layer, missing)
    target.kernels[layer] = kernel
    try:
        yield target
    finally:
        if previous is missing:
            del target.kernels[layer]
        else:
            target.kernels[layer] = previous

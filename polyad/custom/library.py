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
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import polyad.config as config
import polyad.core as core
import polyad.core.dispatch as dispatch
from polyad.core import GENERATION, KERNELS_OVERRIDDEN, Op, Tensor, bind, rule_of
from polyad.core.avals import ShapeDtype, bottom, dtype_name, is_complex, is_floating
from polyad.ops.base import astype, unbroadcast
from polyad.ops.creation import zeros_like
from polyad.transforms.abstract import ABSTRACT_EVAL, fake_abstract_eval
from polyad.transforms.batching import BATCH
from polyad.transforms.forward import JVP
from polyad.transforms.reverse import VJP

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_.]*$")
CUSTOM_OPS = {}  # "namespace::name" -> CustomOp


class _Context:
    """What ``setup_context`` keeps for ``backward``: attributes, or ``save_for_backward(*arrays)``."""

    def save_for_backward(self, *arrays: Any) -> None:
        self.saved_tensors = arrays


class CustomOp:
    """A user op: call it like the function it was made from; register kernels and rules on it.

    What the user registers is checked where it meets polyad, since a wrong value there would come out of
    a transform as the answer: a kernel must return one array of its inputs' library; a rule's outputs
    are checked for count, array type, shape and dtype, with errors naming the op, the rule and the
    input (see ``register_autograd``, ``register_jvp``, ``register_vmap``). ``polyad.config`` has a debug
    switch that also compares the fake function with the kernel and catches undeclared writes.
    """

    def __init__(self, name, fn, mutates_args):
        self.name = name
        self._fn = fn
        sig = inspect.signature(fn)
        self._signature = sig
        params = sig.parameters.values()
        self._positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
        self._varargs = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
        self._has_varargs = self._varargs is not None
        self.mutates_args = _check_mutates_args(name, fn, mutates_args, self._positional, self._varargs)
        self.op = Op(name, self._checked_kernel(fn, "default kernel"))
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def __repr__(self):
        return f"CustomOp({self.name!r})"

    def _arg_name(self, i):
        """The parameter that receives positional argument ``i`` (None past the signature)."""
        return self._positional[i] if i < len(self._positional) else self._varargs

    def _input_name(self, i):
        """``input 1 (y)``: positional input ``i`` named for messages."""
        name = self._arg_name(i)
        return f"input {i} ({'*' if i >= len(self._positional) else ''}{name})" if name else f"input {i}"

    # -- calling: arrays positional, metadata keyword
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            if not self._has_varargs:
                moved = [k for k in kwargs if k in self._positional]
                if moved:
                    bound = self._signature.bind(*args, **kwargs)
                    args = tuple(bound.arguments[n] for n in self._positional if n in bound.arguments)
                    kwargs = {k: v for k, v in kwargs.items() if k not in self._positional}
            for k, v in kwargs.items():
                if isinstance(v, Tensor) and v._interp is not None:
                    raise TypeError(
                        f"custom op {self.name!r}: keyword argument {k} is a {type(v).__name__}, a value "
                        "inside a polyad transform; keyword-only arguments are metadata, handed to kernels "
                        "and rules as they are, so its derivative or batch would be lost: make "
                        f"{k} a positional parameter of {self.__name__} (arrays are positional)"
                    )
        if self.mutates_args:
            for a in args:
                if isinstance(a, Tensor) and a._interp is not None:
                    raise NotImplementedError(
                        f"custom op {self.name!r} declares mutates_args={self.mutates_args} and was called "
                        f"on a {type(a).__name__}: an op that writes to its arguments runs only on plain "
                        "arrays, outside transforms and captures (a written array would keep no derivative "
                        "or batch); return a new array instead and declare mutates_args=()"
                    )
        return bind(self.op, *args, **kwargs)

    # -- kernels
    def _checked_kernel(self, fn, label):
        """``fn(*args, **params)`` as a kernel ``kernel(xp, *args, **params)`` whose output is checked: one
        array of the library of ``xp`` (a list or a NumPy array for CuPy inputs would fail far away)."""

        def kernel(xp, *args, **params):
            if config.check_custom_ops:
                return self._debug_call(fn, label, xp, args, params)
            out = fn(*args, **params)
            owner = dispatch.backend_of_array(out)
            if owner is None or owner.xp is not xp:
                self._bad_kernel_output(out, label, xp)
            return out

        return kernel

    def _bad_kernel_output(self, out, label, xp):
        owner = dispatch.backend_of_array(out)
        got = f"a {owner.name} array" if owner is not None else f"a {type(out).__name__}"
        expected = next((b.name for b in dispatch.backends.loaded().values() if b.xp is xp), "the inputs'")
        raise TypeError(
            f"custom op {self.name!r}: its {label} returned {got}; a kernel returns one {expected} array, "
            "the library of its inputs"
        )

    def _debug_call(self, fn, label, xp, args, params):
        """The kernel under ``config.check_custom_ops``: no write to an argument ``mutates_args`` does not
        declare, and an output of the shape and dtype the fake function (if any) gives."""
        watched = [
            (i, a, xp.asarray(a, copy=True))
            for i, a in enumerate(args)
            if self._arg_name(i) not in self.mutates_args and dispatch.backend_of_array(a) is not None
        ]
        out = fn(*args, **params)
        owner = dispatch.backend_of_array(out)
        if owner is None or owner.xp is not xp:
            self._bad_kernel_output(out, label, xp)
        for i, a, before in watched:
            if not _unchanged(xp, a, before):
                raise ValueError(
                    f"custom op {self.name!r}: its {label} wrote to {self._input_name(i)}, which "
                    f"mutates_args does not declare; declare it (mutates_args=({self._arg_name(i)!r},)) or "
                    "write to a copy"
                )
        fake = rule_of(self.op, ABSTRACT_EVAL)
        if fake is not None:
            avals = [ShapeDtype.of(a) if dispatch.backend_of_array(a) is not None else a for a in args]
            expected = fake(xp, *avals, **params)
            for what, e, g in (("shape", tuple(expected.shape), tuple(out.shape)),
                               ("dtype", dtype_name(expected.dtype), dtype_name(out.dtype))):  # fmt: skip
                if e != g:
                    raise (ValueError if what == "shape" else TypeError)(
                        f"custom op {self.name!r}: its fake function gives {what} {e} for these inputs, "
                        f"but its {label} returned {what} {g}; make the function of register_fake agree "
                        "with the kernels"
                    )
        return out

    def register_kernel(self, device_types: str | Sequence[str], fn: Callable[..., Any] | None = None) -> Any:
        """Register ``fn(*args, **kwargs)`` as this op's kernel for one or more device types ("cpu",
        "cuda", or a registered stand-in). Usable as a decorator.

        Args:
            device_types: a device type (str) or a non-empty tuple of them.
            fn: the kernel; it returns one array of the library of its inputs (checked at each call).

        Returns:
            ``fn``, or a decorator registering its function, when ``fn`` is None.
        """
        where = f"{self.name}.register_kernel"
        types = _device_types(device_types, where)
        for dt in types:
            dispatch.check_device_type(dt, where)

        def register(kernel):
            if not callable(kernel):
                raise TypeError(f"{where}: the kernel must be callable, got {type(kernel).__name__}")
            for dt in types:
                self.op.kernels[dt] = self._checked_kernel(kernel, f"kernel for {dt!r}")
            return kernel

        return register(fn) if fn is not None else register

    # -- rules
    def register_autograd(
        self, backward: Callable[..., Any], /, *, setup_context: Callable[..., Any] | None = None
    ) -> None:
        """Register the reverse-mode rule, in torch.library's convention.

        Args:
            backward: ``backward(ctx, *grads)`` returns one gradient per positional input (a bare value
                for a one-input op, else a tuple; None where an input has no gradient; trailing Nones for
                the keyword-only inputs, torch's layout, are accepted). Each gradient is checked: an array
                of the input's library, of the input's shape (a shape the input broadcasts to is summed
                back to it, as torch does) and of its dtype (cast within real or complex floating, an
                error across them).
            setup_context: ``setup_context(ctx, inputs, output)`` keeps what ``backward`` needs, as
                attributes of ``ctx`` or with ``ctx.save_for_backward(*arrays)`` (read as
                ``ctx.saved_tensors``). ``inputs`` are the positional then keyword arguments.
        """
        if not callable(backward):
            raise TypeError(f"{self.name}.register_autograd: backward must be callable, got {backward!r}")
        if setup_context is not None and not callable(setup_context):
            raise TypeError(f"{self.name}.register_autograd: setup_context must be callable or None")
        keyword = self._keyword
        defaults = {k: self._signature.parameters[k].default for k in keyword}

        def vjp(g, out, *primals, **params):
            ctx = _Context()
            if setup_context is not None:
                inputs = tuple(primals) + tuple(params.get(k, defaults[k]) for k in keyword)
                setup_context(ctx, inputs, out)
            grads = backward(ctx, *g) if self.op.multiple_results else backward(ctx, g)
            return self._check_gradients(grads, primals)

        self.register_rule(VJP.name, vjp)

    def _check_gradients(self, grads, primals):
        n = len(primals)
        if not isinstance(grads, tuple) and not (n > 1 and isinstance(grads, list)):
            grads = (grads,)
        if len(grads) != n:
            keyword_nones = len(grads) == n + len(self._keyword) and all(g is None for g in grads[n:])
            if not keyword_nones:
                names = ", ".join(self._positional[:n]) or "none"
                raise ValueError(
                    f"custom op {self.name!r}: register_autograd's backward returned {len(grads)} "
                    f"gradient(s) for {n} positional input(s) ({names}); return one per input (None for none)"
                )
        return tuple(_conform(g, p, self, i) for i, (g, p) in enumerate(zip(grads, primals)))

    def register_jvp(self, rule: Callable[..., Any]) -> None:
        """Register the forward-mode rule ``rule(primals: tuple, tangents: tuple, **kwargs) ->
        (output, tangent)``. Zero tangents arrive as zeros of the primal's shape. The tangent is checked
        (an array of the output's library and shape; its dtype cast within real or complex floating to
        the output's, an error across them); the output it returns is not used (the kernel's is)."""
        if not callable(rule):
            raise TypeError(f"{self.name}.register_jvp: the rule must be callable, got {rule!r}")
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
            return _conform(result[1], out, self)

        self.register_rule(JVP.name, jvp)

    def register_vmap(self, rule: Callable[..., Any]) -> None:
        """Register the batching rule ``rule(info, in_dims, *args, **kwargs) -> (output, out_dim)``.
        ``args`` are the underlying values with their batch dimension where ``in_dims`` says (None: not
        batched); ``info.batch_size`` and ``info.randomness`` describe the vmap level. ``out_dim`` is an
        int (negative counts from the end) or None (the output is the same for every example); the
        output is checked: an array of the inputs' library with ``info.batch_size`` entries along
        ``out_dim``."""
        if not callable(rule):
            raise TypeError(f"{self.name}.register_vmap: the rule must be callable, got {rule!r}")

        def batch(info, dims, *values, **params):
            result = rule(info, dims, *values, **params)
            if result is NotImplemented:
                return result
            return self._check_batched(result, info.batch_size, dims, values)

        self.register_rule(BATCH.name, batch)

    def _check_batched(self, result, size, dims, values):
        where = f"custom op {self.name!r}: register_vmap's rule"
        if not (isinstance(result, tuple) and len(result) == 2):
            got = f"a tuple of {len(result)}" if isinstance(result, tuple) else f"a {type(result).__name__}"
            raise TypeError(f"{where} must return (output, out_dim), got {got}")
        out, out_dim = result
        ref = next(v for v, d in zip(values, dims) if d is not None)
        owner, expected = dispatch.backend_of_array(bottom(out)), dispatch.backend_of_array(bottom(ref))
        if owner is not expected:
            got = f"a {owner.name} array" if owner is not None else f"a {type(out).__name__}"
            raise TypeError(f"{where} returned {got} as the output; expected a {expected.name} array")
        if out_dim is None:
            return out, None
        shape = tuple(out.shape)
        if not isinstance(out_dim, int) or isinstance(out_dim, bool):
            raise TypeError(f"{where} returned out_dim={out_dim!r}; it must be an int or None")
        if not -len(shape) <= out_dim < len(shape):
            raise ValueError(
                f"{where} returned out_dim={out_dim}, out of range for an output of shape {shape}"
            )
        d = out_dim % len(shape)
        if shape[d] != size:
            raise ValueError(
                f"{where} returned an output of shape {shape} with out_dim={out_dim}, which has {shape[d]} "
                f"entries there; the batch has {size}"
            )
        return out, d

    def register_fake(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register the abstract evaluation ``fn(*fake_args, **kwargs)``: it receives abstract arrays
        (``shape``, ``dtype``, ``device``; their namespace, ``__array_namespace__()``, is ``polyad.xp``,
        whose functions on them compute shapes only, as ``xp.empty_like(x)``) and returns the abstract
        output (or a tuple of them; any object with ``shape`` and ``dtype`` will do). With
        ``polyad.config.check_custom_ops`` every kernel call is compared with it."""
        if not callable(fn):
            raise TypeError(f"{self.name}.register_fake: expected a function, got {fn!r}")
        self.register_rule(ABSTRACT_EVAL.name, fake_abstract_eval(self.name, fn))
        return fn

    def register_rule(self, kind: str, rule: Callable[..., Any]) -> None:
        """Register ``rule`` for rule kind ``kind`` (a name in ``core.RULE_KINDS``: "vjp", "jvp", "batch",
        "abstract_eval", or the kind of a transform added later), with that kind's signature (see
        ``core.Op``), as polyad's own ops have them: used as given, unchecked. The
        ``register_autograd``/``register_jvp``/``register_vmap``/``register_fake`` methods adapt
        torch.library's conventions to it and check what the rules return."""
        _check_rule_kind(kind, f"{self.name}.register_rule")
        if not callable(rule):
            raise TypeError(f"{self.name}.register_rule({kind!r}, ...): rule must be callable, got {rule!r}")
        self.op.register_rule(kind, rule)


def custom_op(
    name: str, fn: Callable[..., Any] | None = None, /, *, mutates_args: str | Sequence[str] = ()
) -> Any:
    """Turn a Python function into a polyad op named ``"namespace::name"``.

    The function body is the op's default kernel: it receives raw backend arrays (use ``pa.xp`` or the
    arrays' own namespace). Arrays are positional arguments, metadata keyword-only (a transform's tensor
    passed as a keyword is an error). Register per-device kernels with ``register_kernel`` and transform
    rules with ``register_autograd``, ``register_jvp``, ``register_vmap``, ``register_fake``. A transform
    that needs a rule the op lacks raises an error naming the op and the rule to register, except vmap,
    which loops over the batch with a warning.

    Args:
        name: ``"namespace::op"``; must be unique.
        mutates_args: a tuple of the names of the positional parameters the function writes to (checked
            against its signature). An op that declares any runs only on plain arrays: called on a
            transform's or a capture's tensor it raises NotImplementedError, since a written array would
            keep no derivative. ``polyad.config.check_custom_ops`` catches writes to undeclared ones.

    Returns:
        A ``CustomOp`` (or a decorator making one).
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"custom_op: name must look like 'namespace::op_name', got {name!r}")
    if name in CUSTOM_OPS or name in core.OPS:
        raise ValueError(f"custom_op: an op named {name!r} is already registered")
    if not isinstance(mutates_args, tuple | list) or not all(isinstance(a, str) for a in mutates_args):
        raise TypeError(
            f"custom_op({name!r}, mutates_args={mutates_args!r}): mutates_args must be a tuple of argument "
            "names (a str is not: write ('out',))"
        )

    def make(f):
        if not callable(f):
            raise TypeError(f"custom_op({name!r}): expected a function, got {type(f).__name__}")
        op = CustomOp(name, f, mutates_args)
        CUSTOM_OPS[name] = op
        return op

    return make(fn) if fn is not None else make


def _check_mutates_args(name, fn, mutates_args, positional, varargs):
    """``mutates_args`` as a tuple, each name a positional parameter of ``fn`` (arrays are positional)."""
    known = positional + ([varargs] if varargs else [])
    unknown = [a for a in mutates_args if a not in known]
    if unknown:
        raise ValueError(
            f"custom_op({name!r}, mutates_args={tuple(mutates_args)!r}): {', '.join(map(repr, unknown))} "
            f"is not a positional parameter of {getattr(fn, '__name__', 'the function')}"
            f"{inspect.signature(fn)}; name the parameters whose arrays the function writes to"
        )
    return tuple(mutates_args)


def _device_types(device_types, where):
    """``device_types`` (a str or a non-empty tuple/list of str) as a tuple."""
    if isinstance(device_types, str):
        return (device_types,)
    if (
        isinstance(device_types, tuple | list)
        and device_types
        and all(isinstance(d, str) for d in device_types)
    ):
        return tuple(device_types)
    raise TypeError(
        f"{where}(device_types={device_types!r}): device_types must be a device type such as 'cpu' or "
        "'cuda', or a non-empty tuple of them"
    )


def _broadcasts_to(shape, target):
    """Whether an array of ``shape`` broadcasts to ``target`` (so a ``target``-shaped cotangent sums back)."""
    if len(shape) > len(target):
        return False
    return all(s == t or s == 1 for s, t in zip(reversed(shape), reversed(target)))


def _conform(value, ref, op, index=None):
    """``value``, which custom op ``op``'s rule returned as the gradient of input ``index``
    (register_autograd) or, for ``index`` None, as the tangent of the output (register_jvp), made to match
    ``ref`` (that input, that output) or refused with an error naming the op, the rule and the input: an
    array of ``ref``'s library, of its shape (a gradient of a shape ``ref`` broadcasts to is summed back
    to it) and of its dtype (cast within real or complex floating, an error across them). None stays
    None; so does anything for a non-floating ``ref``, which carries no derivative."""
    if value is None or not hasattr(ref, "shape") or not is_floating(ref):
        return None
    array = bottom(value)
    if (
        type(array) is type(bottom(ref))
        and value.shape == ref.shape
        and value.dtype == ref.dtype
        and dispatch.backend_of_array(array) is not None
    ):
        return value  # the common case, checked without building any message
    reduce = index is not None
    rule = "register_autograd's backward" if reduce else "register_jvp's rule"
    slot = f"the gradient of {op._input_name(index)}" if reduce else "the tangent"
    ref_noun = "the input" if reduce else "the output"
    where = f"custom op {op.name!r}: {rule} returned"
    if not isinstance(value, Tensor) and dispatch.backend_of_array(value) is None:
        raise TypeError(
            f"{where} a {type(value).__name__} as {slot}; expected None or an array with {ref_noun}'s "
            f"shape {tuple(ref.shape)} and dtype {dtype_name(ref.dtype)}"
        )
    owner, ref_owner = dispatch.backend_of_array(array), dispatch.backend_of_array(bottom(ref))
    if owner is not ref_owner:
        raise TypeError(
            f"{where} a {getattr(owner, 'name', type(array).__name__)} array as {slot}, but {ref_noun} is a "
            f"{getattr(ref_owner, 'name', '')} array; compute it from the rule's arguments with polyad.xp"
        )
    shape, ref_shape = tuple(value.shape), tuple(ref.shape)
    if shape != ref_shape:
        if not (reduce and _broadcasts_to(ref_shape, shape)):
            also = " (or a shape it broadcasts to, which is summed back)" if reduce else ""
            raise ValueError(
                f"{where} an array of shape {shape} as {slot}; expected {ref_noun}'s shape {ref_shape}{also}"
            )
        value = unbroadcast(value, ref)
    if value.dtype != ref.dtype:
        if not is_floating(value) or is_complex(value) != is_complex(ref):
            raise TypeError(
                f"{where} dtype {dtype_name(value.dtype)} as {slot}, but {ref_noun} has dtype "
                f"{dtype_name(ref.dtype)}: a derivative has a floating dtype of its primal's kind (real or "
                "complex)"
            )
        value = astype(value, ref.dtype)
    return value


def _unchanged(xp, a, before):
    """Whether array ``a`` still equals its copy ``before`` (NaNs equal to NaNs)."""
    same = a == before
    if is_floating(a):
        same = same | ((a != a) & (before != before))
    return bool(xp.all(same))


def impl(
    name: str, device_types: str | Sequence[str] = ("cpu", "cuda"), func: Callable[..., Any] | None = None
) -> Any:
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
def override(op: Any, layer: str, impl: Callable[..., Any] | None) -> Any:
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
    GENERATION[0] += 1
    try:
        yield from _override(op, layer, impl)
    finally:
        GENERATION[0] += 1


def _override(op, layer, impl):
    # the body of ``override``, a generator: the layer swapped in until it resumes
    target = _resolve_op(op)
    if not callable(impl):
        raise TypeError(f"override(impl={impl!r}): impl must be callable (a rule or a kernel)")
    if not isinstance(layer, str):
        raise TypeError(
            f"override(layer={layer!r}): layer must be a str: a rule kind "
            f"({', '.join(map(repr, core.RULE_KINDS))}), 'generic' or a device type "
            f"({', '.join(map(repr, dispatch.DEVICE_PRIORITY))})"
        )
    if layer in core.RULE_KINDS:
        previous = target.rules.get(layer)
        target.register_rule(layer, impl)
        try:
            yield target
        finally:
            target.register_rule(layer, previous)
        return

    def kernel(xp, *args, **params):
        return impl(*args, **params)

    if layer != "generic":
        dispatch.check_device_type(layer, "override(layer=...)")
    missing = object()
    previous = target.generic if layer == "generic" else target.kernels.get(layer, missing)
    if layer == "generic":
        target.generic = kernel
    else:
        target.kernels[layer] = kernel
    KERNELS_OVERRIDDEN[target.name] = KERNELS_OVERRIDDEN.get(target.name, 0) + 1
    try:
        yield target
    finally:
        KERNELS_OVERRIDDEN[target.name] -= 1
        if not KERNELS_OVERRIDDEN[target.name]:
            del KERNELS_OVERRIDDEN[target.name]
        if layer == "generic":
            target.generic = previous
        elif previous is missing:
            del target.kernels[layer]
        else:
            target.kernels[layer] = previous

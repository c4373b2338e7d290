"""The op registry: ``Op`` (one array function: its kernels, its rules and its markers), ``OPS`` (every op by
name) and rule kinds (``rule_kind``, ``rule_of``).

Rules reach an op one way: given to ``Op`` (``define`` in ``polyad.ops.common``) when it is defined, or
later through ``Op.register_rule`` (families whose rule needs the op itself, a transform's own rule table
such as sparsity's, custom ops, ``library.override``). Interpreters read them one way: ``rule_of(op,
KIND)``, which falls back on the rule ``KIND.derive`` builds from the op's markers.
"""

import functools
from typing import NamedTuple

import polyad.backends as backends
from polyad.core.binding import bind

OPS = {}  # name -> Op: the one registry of every array function
# bumped when a kernel or rule of an op is swapped after its definition (library.override): compiled code
# that captured the old one (pa.jit) is then stale
GENERATION = [0]
# ops whose kernels an ``override`` block has swapped (name -> open blocks): code generated from an op's
# stock semantics, such as pa.jit's fused kernels, must not stand in for them
KERNELS_OVERRIDDEN: dict[str, int] = {}


class RuleKind:
    """One kind of per-op rule, declared by the transform module that reads it (``reverse.VJP``,
    ``forward.JVP``, ``batching.BATCH``, ``abstract.ABSTRACT_EVAL``, ``sparsity.SPARSITY``).

    ``name`` keys ``Op.rules``; ``signature`` documents the rule's one fixed signature; ``derive(op)``
    builds a rule from the op's markers when it has none (the linear and bilinear JVPs, sparsity's
    element-wise patterns), or returns None. Custom-op registration, ``library.override`` and
    pre-dispatch read ``RULE_KINDS``, so a new transform is one new module that declares its kind, plus
    the rules it needs.
    """

    __slots__ = ("name", "signature", "derive")

    def __init__(self, name, signature, derive=None):
        self.name = name
        self.signature = signature
        self.derive = derive

    def __repr__(self):
        return f"RuleKind({self.name!r})"


RULE_KINDS = {}  # name -> RuleKind, in declaration order


class RuleContext(NamedTuple):
    """What an interpreter knows about a rule's call beyond its arguments, handed to the rules that ask
    for it (``rule.takes_context = True``: they get ``context=`` among their params, and so does their
    ``forward``), so that no rule reads the level stack.

    - ``captured``: a capture (``pa.jit``'s trace, ``make_graph``) records below the rule's level, so what
      the rule leaves for later must be ops (no Python closure: a loop keeps states, not recordings);
    - ``last_use``: the interpreter never calls the rule for this entry again (``grad`` consumes its tape),
      so the rule may free its residuals as it goes;
    - ``transformed``: some transform is active while the rule runs, so its ops are recorded or
      transformed and must keep the values they read (False: eager evaluation, nothing records).

    Example:
        >>> ctx = RuleContext(captured=True)
        >>> ctx.captured, ctx.last_use, ctx.transformed
        (True, False, True)
    """

    captured: bool = False
    last_use: bool = False
    transformed: bool = True


def rule_kind(name, signature, derive=None):
    """Declare (or, on re-import, return) the rule kind ``name``; see ``RuleKind``."""
    kind = RULE_KINDS.get(name)
    if kind is None:
        kind = RULE_KINDS[name] = RuleKind(name, signature, derive)
    return kind


def rule_of(op, kind):
    """``op``'s rule of ``kind`` (a ``RuleKind``): the registered one, else the one ``kind.derive`` builds
    from the op's markers (cached), else None."""
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
      loops over the batch;
    - ``sparsity(patterns, *values, **params) -> pattern``: the Jacobian's non-zero pattern
      (``polyad.transforms.sparsity``).

    Markers replace rules that would be repeated: ``linear`` (the JVP is the op applied to the tangents),
    ``bilinear`` (linear in each of two arrays: the JVP is ``op(t1, x2) + op(x1, t2)``), ``nondiff`` (the
    output carries no derivative: comparisons, integer results, rounding), ``shape_only`` (the output
    depends only on the first argument's shape and dtype: ``shape_only(xp, shape, dtype, **params)``
    builds it without that argument, as compiled graphs do), ``from_device`` (a creation op: the backend
    comes from its ``device`` parameter), ``deferrable`` (cheap, total and free of side effects: eager
    ``grad`` may leave its output uncomputed until something reads it, and skip it if nothing does).
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
        "deferrable",
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
        from_device=False,
        shape_only=None,
        deferrable=False,
        decomposition=None,
        higher_order=None,
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
        self.from_device = from_device
        self.shape_only = shape_only
        self.deferrable = deferrable
        self.decomposition = decomposition
        self.higher_order = higher_order
        if register:
            OPS[name] = self
            for backend in backends.loaded().values():
                attach_kernels(self, backend)

    def register_rule(self, kind, rule):
        """Give this op its rule of ``kind`` (a ``RuleKind`` or its name), replacing any; None removes it.
        The one way a rule reaches an op after its definition."""
        name = kind.name if isinstance(kind, RuleKind) else kind
        if rule is None:
            self.rules.pop(name, None)
        else:
            self.rules[name] = rule
        self.derived.pop(name, None)

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


def attach_kernels(op, backend):
    """Give ``op`` the device kernels ``backend`` declares for it (a kernel registered explicitly wins)."""
    for dt, kernel in backend.kernels.get(op.name, {}).items():
        op.kernels.setdefault(dt, kernel)


def _on_backend(event, backend):
    """Keep the ops' device kernels in step with the backends loaded (``backends.subscribe``): a backend's
    kernels are attached to the ops they name when it loads, and detached if it goes."""
    for name, by_type in backend.kernels.items():
        op = OPS.get(name)
        if op is None:
            continue
        if event == "loaded":
            attach_kernels(op, backend)
        else:
            for dt, kernel in by_type.items():
                if op.kernels.get(dt) is kernel:
                    del op.kernels[dt]


backends.subscribe(_on_backend)

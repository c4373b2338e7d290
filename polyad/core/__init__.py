"""The core: the level stack, the tensor, the op registry and ``bind``.

- ``levels``: one integer level per active transform, pushed and popped in try/finally (``new_level``).
- ``tensor``: ``Tensor``, the one tensor type every transform subclasses, and every way a value leaves a
  transform (conversions, arrays, copies, the Python numbers polyad hands out); ``fresh``: ``FreshTensor``,
  an array made inside a transform.
- ``registry``: ``Op`` and ``OPS``, rule kinds (``rule_kind``, ``rule_of``).
- ``binding``: ``bind(op, *arrays, **metadata)`` (the highest level among the arrays handles the op) and
  level 0 (``eval_op``: a kernel on backend arrays).
- ``dispatch``: the default backend, which backend an array belongs to, the kernel chosen per device type;
  ``standard``: the standard's names; ``avals``: the array vocabulary (``ShapeDtype``, dtype kinds and
  names, shapes), which every layer above reads.

The names the layers above use are re-exported here.
"""

from polyad.core.binding import (
    PASS,
    add_hook,
    all_none,
    bind,
    eval_op,
    eval_raw,
    pre_dispatch_hook,
    remove_hook,
    set_pre_dispatch_hook,
    split_args,
)
from polyad.core.fresh import FreshTensor, fresh, plain
from polyad.core.levels import (
    Interpreter,
    active_interpreters,
    capture_below,
    current_level,
    new_level,
    no_grad_level,
    recording_off_up_to,
    transform_active,
)
from polyad.core.registry import (
    GENERATION,
    KERNELS_OVERRIDDEN,
    OPS,
    RULE_KINDS,
    Op,
    RuleContext,
    RuleKind,
    rule_kind,
    rule_of,
)
from polyad.core.tensor import (
    ConcretizationError,
    DerivativeLostWarning,
    Tensor,
    TracedComplex,
    TracedFloat,
    install_methods,
    install_namespace,
    unusable,
)

__all__ = [
    "ConcretizationError",
    "DerivativeLostWarning",
    "FreshTensor",
    "GENERATION",
    "Interpreter",
    "KERNELS_OVERRIDDEN",
    "OPS",
    "Op",
    "PASS",
    "RULE_KINDS",
    "RuleContext",
    "RuleKind",
    "Tensor",
    "TracedComplex",
    "TracedFloat",
    "active_interpreters",
    "add_hook",
    "all_none",
    "bind",
    "capture_below",
    "current_level",
    "eval_op",
    "eval_raw",
    "fresh",
    "install_methods",
    "install_namespace",
    "new_level",
    "no_grad_level",
    "plain",
    "pre_dispatch_hook",
    "recording_off_up_to",
    "remove_hook",
    "rule_kind",
    "rule_of",
    "set_pre_dispatch_hook",
    "split_args",
    "transform_active",
    "unusable",
]

"""Custom ops polyad ships, each made with ``polyad.custom_op`` as a user would make one:
``softplus`` (``softplus.py``), the example of an op with a kernel per device type and its own rules.
``pa.fused`` is this module's former name and still works."""

from polyad.custom.ops.softplus import softplus

__all__ = ["softplus"]

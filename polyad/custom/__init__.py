"""What users bring: their own ops and their own derivatives.

- ``library.py``: ``custom_op`` (torch.library's shape: kernels per device type, a rule per transform);
  ``ops/``: the custom ops polyad ships, made as a user would make them (``polyad.custom_ops``);
- ``derivatives.py``: ``custom_jvp``/``custom_vjp``, a plain function's call as one op whose rules are the
  user's; ``rule_calls.py``: those rules as ops an enclosing vmap can loop over;
- ``implicit.py``: ``custom_root``/``custom_linear_solve``, a solve differentiated by the implicit
  function theorem.
"""

"""Process-wide switches (read at each use; set them as attributes or through the environment).

``max_memory`` (environment: ``POLYAD_MAX_MEMORY``, default ``"1GiB"``): the memory budget of
``chunk_size="auto"`` in vmap, jacrev, jacfwd and hessian when the call gives no ``max_memory``; bytes
as an int or a string such as ``"512MiB"``, ``"2GB"``.

``check_custom_ops`` (environment: ``POLYAD_CHECK_CUSTOM_OPS=1``): every time a custom op's kernel runs,
polyad also runs the op's fake function (``register_fake``) on the same inputs and compares the output's
shape (ValueError) and dtype (TypeError) with the kernel's, and checks that the kernel wrote to no array
argument it did not declare in ``mutates_args`` (ValueError). Off by default: it costs a copy of each
array argument per call. Kernel outputs (one array of the inputs' library) and rule outputs (gradient,
tangent and batch counts, shapes, dtypes, array types) are checked always.

Example:
    >>> import numpy as np, polyad as pa
    >>> @pa.custom_op("demo::bad_fake")
    ... def twice(x):
    ...     return x * 2
    >>> _ = twice.register_fake(lambda x: x.__array_namespace__().empty((1,), dtype=x.dtype))
    >>> pa.config.check_custom_ops = True
    >>> try:
    ...     twice(np.ones(3))
    ... except ValueError as exc:
    ...     print(str(exc)[:62])
    ... finally:
    ...     pa.config.check_custom_ops = False
    custom op 'demo::bad_fake': its fake function gives shape (1,)
"""

import os


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


check_custom_ops = _env_flag("POLYAD_CHECK_CUSTOM_OPS")
max_memory = os.environ.get("POLYAD_MAX_MEMORY", "1GiB")

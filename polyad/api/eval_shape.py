"""eval_shape: a function's output shapes and dtypes, computing nothing (``polyad.transforms.abstract``)."""

from collections.abc import Callable
from typing import Any

from polyad.transforms.abstract import eval_abstract


def eval_shape(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Output shapes and dtypes of ``func(*args)`` without computing anything.

    Args:
        func: a function of arrays.
        *args: arrays or ShapeDtype objects (pytrees allowed).

    Returns:
        The output pytree with each array replaced by a ``ShapeDtype``.

    Example:
        >>> import numpy as np, polyad as pa
        >>> pa.eval_shape(lambda x: pa.xp.sum(x, axis=0), np.ones((3, 4)))
        ShapeDtype(shape=(4,), dtype=float64)
    """
    if not callable(func):
        raise TypeError(f"eval_shape(func, ...): func must be callable, got {type(func).__name__}")
    return eval_abstract(func, *args, **kwargs)

"""``saved_residuals`` and ``print_saved_residuals``: what reverse mode keeps alive between a function's
forward pass and its backward pass, array by array, with sizes: a debugging aid for memory, in the spirit
of JAX's ``print_saved_residuals``.

What reverse mode holds is its tape (``polyad.transforms.reverse``): each entry keeps its op's inputs
(the residuals its VJP reads) and, for a loop op, what the loop chose to keep (``residuals=``: the
checkpointed carries of a binomial schedule, or every step's recording for ``checkpoints=None``, each a
tape of its own). The walk below follows those, counting each array once.
"""

import math
from typing import Any, NamedTuple

import optree

from polyad.api.grad import run_vjp
from polyad.core import Tensor
from polyad.core.avals import bottom, dtype_name, itemsize
from polyad.core.dispatch import backend_of_array
from polyad.transforms.reverse import ReverseInterpreter


class Residual(NamedTuple):
    """One array reverse mode keeps: its shape, dtype, size in bytes, and what holds it (``where``: the op
    and argument, inside a loop's residuals the step or checkpoint too)."""

    shape: tuple
    dtype: Any
    nbytes: int
    where: str


def saved_residuals(func, *args, **kwargs) -> list[Residual]:
    """The arrays reverse mode keeps from ``func(*args, **kwargs)``'s forward pass for its backward pass.

    The positional arguments that are arrays (or pytrees of arrays) are differentiated, as ``vjp`` would;
    the others are passed as they are. Each array is listed once, where it is first held; the
    differentiated arguments are listed too, as ``argument i``, and the outputs are not (they are the
    caller's).

    Args:
        func: the function, as passed to ``vjp``.
        *args: its arguments (arrays, or pytrees of them).
        **kwargs: keyword arguments, passed through and not differentiated.

    Returns:
        A list of ``Residual(shape, dtype, nbytes, where)``, in tape order.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad import xp
        >>> res = pa.saved_residuals(lambda x: xp.sum(xp.sin(x) * x), np.ones(1000))
        >>> [(r.nbytes, r.where) for r in res]
        [(8000, 'argument 0'), (8000, "op 'multiply' argument 0"), (8000, "op 'sum' argument 0")]
    """
    name = getattr(func, "__name__", "func")
    if not callable(func):
        raise TypeError(f"saved_residuals(func, ...): func must be callable, got {type(func).__name__}")
    diff = [i for i, a in enumerate(args) if _is_arrays(a)]
    if not diff:
        raise TypeError(
            f"saved_residuals({name}, ...): no positional argument is an array (or a pytree of arrays), so "
            f"nothing is differentiated; got {', '.join(type(a).__name__ for a in args) or 'none'}"
        )

    def of_arrays(*arrays):
        full = list(args)
        for i, a in zip(diff, arrays):
            full[i] = a
        return func(*full, **kwargs)

    what = f"saved_residuals({name})"
    out, _backward, _aux, interp = run_vjp(of_arrays, tuple(args[i] for i in diff), False, what)
    walk = _Walk()
    for o in optree.tree_leaves(out):  # the outputs are the caller's, not residuals
        walk.skip(o)
    for i in diff:
        for a in optree.tree_leaves(args[i]):
            walk.array(a, f"argument {i}")
    walk.tape(interp, "")
    return walk.found


def _is_arrays(a):
    leaves = optree.tree_leaves(a)
    return bool(leaves) and all(isinstance(x, Tensor) or backend_of_array(x) is not None for x in leaves)


def print_saved_residuals(func, *args, **kwargs) -> None:
    """Print ``saved_residuals(func, *args, **kwargs)``: one line per array (size, shape and dtype, what
    holds it) and the total.

    Args:
        func: the function, as passed to ``vjp``.
        *args: its arguments.
        **kwargs: keyword arguments, not differentiated.

    Returns:
        None.

    Example:
        >>> import numpy as np, polyad as pa
        >>> from polyad import xp
        >>> pa.print_saved_residuals(lambda x: xp.sum(xp.exp(x)), np.ones(3))
              24 B  float64[3]  argument 0
              24 B  float64[3]  op 'sum' argument 0
        total 48 B in 2 arrays
    """
    found = saved_residuals(func, *args, **kwargs)
    for r in found:
        shape = ",".join(str(d) for d in r.shape)
        print(f"{_size(r.nbytes):>10}  {dtype_name(r.dtype)}[{shape}]  {r.where}")
    print(f"total {_size(sum(r.nbytes for r in found))} in {len(found)} arrays")


def _size(n):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


class _Walk:
    def __init__(self):
        self.found = []
        self._seen = set()  # ids of arrays and containers already visited

    def skip(self, a):
        self._seen.add(id(bottom(a) if isinstance(a, Tensor) else a))

    def array(self, a, where):
        """Record ``a`` (a backend array, or a tensor of one) once."""
        value = bottom(a) if isinstance(a, Tensor) else a
        backend = backend_of_array(value)
        if backend is None or id(value) in self._seen:
            return
        self._seen.add(id(value))
        nbytes = math.prod(value.shape) * itemsize(value.dtype, backend.xp)
        self.found.append(Residual(tuple(value.shape), value.dtype, nbytes, where))

    def tape(self, interp, prefix):
        for op, params, _parents, primals, _out, _ids in interp.tape:
            name = f"{prefix}op {op.name!r}"
            for k, p in enumerate(primals):
                self.array(p, f"{name} argument {k}")
            if "residuals" in params:
                self.held(params["residuals"], f"{name} residuals")
        # an op's output that no later op read is still held, by the tape's last entries
        for op, _params, _parents, _primals, out, _ids in interp.tape:
            for o in out if isinstance(out, tuple | list) else (out,):
                self.array(o, f"{prefix}op {op.name!r} output")

    def held(self, obj, where):
        """Arrays inside a loop's residuals: containers, recordings (the closures of step pullbacks
        over their reverse level) and checkpointed carries."""
        if id(obj) in self._seen:
            return
        if isinstance(obj, Tensor) or backend_of_array(obj) is not None:
            self.array(obj, where)
            return
        self._seen.add(id(obj))
        if isinstance(obj, tuple | list):
            steps = len(obj) > 1 and all(callable(o) for o in obj)
            for i, o in enumerate(obj):
                self.held(o, f"{where} step {i}" if steps else where)
        elif isinstance(obj, dict):
            for k, o in obj.items():
                self.held(o, f"{where} {k}")
        elif isinstance(obj, ReverseInterpreter):
            self.tape(obj, f"{where}: ")
        elif callable(obj) and getattr(obj, "__closure__", None):
            for cell in obj.__closure__:
                try:
                    self.held(cell.cell_contents, where)
                except ValueError:  # an empty cell
                    pass

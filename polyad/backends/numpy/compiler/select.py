"""``select(c, a, b)``: ``a`` where the boolean ``c`` holds, else ``b``, as one LLVM ``select`` for the
code ``graph_function.py`` writes. A conditional expression is a branch, and Numba's passes over a
function grow faster than its blocks (a 2,000-line pullback with its choices inline took 107 s to
compile, 9 s as calls of a jitted function, whose typing is most of that); an intrinsic is typed and
lowered by a few lines of Python per use. ``where``, ``zero_safe_multiply`` and ``zero_safe_divide``:
the same choices as ufuncs, for the array statements (``array_statements.py``). Imported by the
generated modules only (it imports Numba)."""

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic


@intrinsic
def select(typingctx, c, a, b):
    if not isinstance(c, types.Boolean):
        return None
    unified = typingctx.unify_types(a, b)
    if unified is None or not isinstance(unified, types.Number | types.Boolean):
        return None
    unified = types.unliteral(unified)

    def codegen(context, builder, signature, args):
        condition, first, second = args
        first = context.cast(builder, first, signature.args[1], unified)
        second = context.cast(builder, second, signature.args[2], unified)
        return builder.select(condition, first, second)

    return unified(c, a, b), codegen


# the same choices as ufuncs, for the array statements: Numba fuses a ufunc's call into the array
# expression around it (one loop), where ``np.where`` makes a loop and an array of its own
_FLOATS = ["float64(float64, float64)"]


@numba.vectorize(_FLOATS)
def zero_safe_multiply(g, d):
    return g * (d if (g != 0 or np.isfinite(d)) else 0.0)


@numba.vectorize(_FLOATS)
def zero_safe_divide(g, d):
    return g / (d if (g != 0 or (d != 0 and d == d)) else 1.0)


@numba.vectorize(
    [
        "float64(boolean, float64, float64)",
        "int64(boolean, int64, int64)",
        "boolean(boolean, boolean, boolean)",
    ]
)
def where(c, a, b):
    return a if c else b

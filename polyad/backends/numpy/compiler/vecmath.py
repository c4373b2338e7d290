"""Vectorisable math functions for the fused CPU kernels of ``pa.jit`` (``math="fast"``, the default).

The fused loop (``fusion.py``) is compiled by Numba. A call of a libm function in it (``np.sin``) is a
scalar call per element that also stops LLVM from vectorising the rest of the loop (the pip builds of
llvmlite have no vector math library). The functions here are written as branch-free float64 arithmetic
(selects, integer bit tricks through LLVM bitcasts, ``fma``), compiled once each and marked for LLVM
to inline (``prepare``): LLVM then vectorises the whole loop, 4 doubles per instruction with AVX2 or
AVX-512.

``FUNCTIONS`` maps a fusable op to its function here; ``expression(op, dtype, args)`` is the source text
the fused loop uses (``fusion.op_loop(op, dtype)`` runs one op that way over arrays). float32 is computed
in float64 and rounded once: at most half a float32 ulp plus a 2**-29 part of one, at half the float64
speed per element.

Accuracy, measured against mpmath by ``polyad.testing.vecmath_accuracy`` (the table in the documentation
of ``pa.jit`` is its output; ``tests/test_vecmath.py`` asserts the bounds, 1 ulp for exp and log, 2 for
the others): the largest float64 errors found were below 1 ulp for all but sinh, arcsinh, arccosh and
arctanh (1.1) and erf (1.7); float32 within half an ulp and a hair.
logaddexp loses relative accuracy where its result crosses zero, as NumPy's formula does. Special values
(NaN, infinities, signed zeros, overflow to infinity, underflow to subnormals and zero) are NumPy's. sin,
cos and tan reduce their argument exactly enough up to ``|x| = 2**30``; the fused loop counts larger
finite arguments (``range_check``) and, if there are any, computes the whole call again with libm's
functions for those three (``libm_expression``).

Numba is imported with this module: only the generated kernels and the tests import it.
"""

import re
import sys

import numba
import numpy as np

from .vecmath_base import always_inline, vector_function
from .vecmath_exp import arccosh, arcsinh, arctanh, cosh, exp, expm1, log, log1p, logaddexp, power, sinh, tanh
from .vecmath_names import FUNCTIONS, MODULE_NAME, REDUCED, expression, libm_expression, range_check
from .vecmath_trig import TRIG_LIMIT, arccos, arcsin, arctan, cos, erf, outside, sin, tan


@vector_function
def sqrt(x):
    """LLVM's square root (one instruction, correctly rounded, vectorised as it is)."""
    return np.sqrt(x)


_PREPARED = set()
_BINARY = ("power", "logaddexp")


def prepare(text):
    """Compile the functions of this module that loop source ``text`` calls (``vm.<name>(``) and mark them
    for LLVM to inline (``vecmath_base.always_inline``); done once per function and process (their
    machine code comes from Numba's cache after the first process)."""
    module = sys.modules[__name__]
    for name in set(re.findall(rf"\b{MODULE_NAME}\.(\w+)\(", text)) - _PREPARED:
        arity = 2 if name in _BINARY else 1
        result = numba.int64 if name == "outside" else numba.float64
        always_inline(getattr(module, name), result(*[numba.float64] * arity))
        _PREPARED.add(name)


@numba.njit(error_model="numpy", nogil=True, cache=True)
def _calibration_loop(n, x, out):
    for i in range(n):
        out[i] = sin(x[i]) * exp(-x[i])
    return 0


def calibration_loop():
    """The loop ``fusion_threads.calibrate`` times, ``loop(n, x, out)``: a vectorised ``sin(x) * exp(-x)``
    over the first ``n`` elements."""
    prepare(f"{MODULE_NAME}.sin( {MODULE_NAME}.exp(")
    return _calibration_loop


__all__ = [
    "FUNCTIONS", "REDUCED", "TRIG_LIMIT", "expression", "libm_expression", "prepare", "range_check",
    "calibration_loop",
    "sin", "cos", "tan", "exp", "expm1", "log", "log1p", "tanh", "sinh", "cosh", "arctan", "arcsin",
    "arccos", "arcsinh", "arccosh", "arctanh", "sqrt", "power", "logaddexp", "erf", "outside",
]  # fmt: skip

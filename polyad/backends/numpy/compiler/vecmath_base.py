"""The building blocks of the vectorised math library (``vecmath.py``): bit casts, fused multiply-add,
error-free sums and products (double-double arithmetic), exact powers of two and scaling by them.

Everything here is straight-line arithmetic on float64/int64 scalars that Numba inlines into the caller's
loop, where LLVM's loop vectoriser turns it into SIMD code: no branch (a conditional is an ``a if c else
b`` of two values already computed, which LLVM makes a select), no call to libm, no Python-level error
checks (``error_model="numpy"``). Integer bit tricks go through the LLVM bitcast of ``as_bits`` and
``from_bits`` (a NumPy ``view`` is not available on Numba scalars).

``fma`` is LLVM's ``llvm.fma.f64``: one instruction on every x86-64 CPU since 2013 (FMA3) and on ARM64; on a
CPU without it LLVM calls libm's ``fma``, correct but slow and not vectorised.
"""

import llvmlite.ir as llvm_ir
import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

# the decorator of every vecmath function: no Python error checks, cached on disk. Each public function
# is compiled once and marked for LLVM to inline wherever it is called (``always_inline``): Numba's own
# inlining (inline="always") would type its body again at every call site, about a second each
vector_function = numba.njit(error_model="numpy", nogil=True, cache=True)

SHIFTER = 6755399441055744.0  # 1.5 * 2**52: (x + SHIFTER) - SHIFTER rounds x to an integer, |x| < 2**51


@intrinsic
def as_bits(typingctx, x):
    """The IEEE bits of a float64 as an int64."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def from_bits(typingctx, n):
    """The float64 whose IEEE bits are the int64 ``n``."""
    if n != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding."""
    if not (a == b == c == types.float64):
        return None

    def codegen(context, builder, signature, args):
        double = llvm_ir.DoubleType()
        function_type = llvm_ir.FunctionType(double, [double, double, double])
        function = builder.module.declare_intrinsic("llvm.fma", [double], function_type)
        return builder.call(function, args)

    return types.float64(types.float64, types.float64, types.float64), codegen


def always_inline(dispatcher, signature):
    """Compile ``dispatcher`` for ``signature`` and mark every function of the code that callers link in
    (the function and the helpers it calls) "alwaysinline" for LLVM, so that a loop calling it is
    vectorised with it. Returns False if Numba's internals this needs are not there (the call then stays
    a call: correct, but it keeps the loop scalar; tests/test_vecmath.py checks that loops vectorise)."""
    dispatcher.compile(signature)
    try:
        for result in dispatcher.overloads.values():
            for function in result.library._get_module_for_linking().functions:
                if not function.is_declaration:
                    function.add_function_attribute("alwaysinline")
    except (AttributeError, TypeError, ValueError):
        return False
    return True


@vector_function
def two_sum(a, b):
    """``(s, e)``: ``s = a + b`` rounded and ``e`` its exact rounding error (Knuth's TwoSum)."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


@vector_function
def fast_two_sum(a, b):
    """``two_sum`` for ``|a| >= |b|`` (or ``a`` zero): three operations instead of six."""
    s = a + b
    return s, b - (s - a)


@vector_function
def two_prod(a, b):
    """``(p, e)``: ``p = a * b`` rounded and ``e`` its exact rounding error."""
    p = a * b
    return p, fma(a, b, -p)


@vector_function
def horner(z, coefficients):
    """``c0 + z * (c1 + z * (...))`` for the tuple ``coefficients``, one ``fma`` (one rounding) a step:
    half the instructions of a multiply and an add, and a little more accurate (the loop unrolls)."""
    p = coefficients[-1]
    for k in range(len(coefficients) - 2, -1, -1):
        p = fma(p, z, coefficients[k])
    return p


@vector_function
def rint(x):
    """``x`` rounded to the nearest integer (ties to even), for ``|x| < 2**51``."""
    return (x + SHIFTER) - SHIFTER


@vector_function
def pow2(k):
    """``2.0 ** k`` for an integer-valued float ``k`` in [-1022, 1023], built from its exponent bits."""
    return from_bits((np.int64(k) + 1023) << 52)


@vector_function
def scale(x, k):
    """``x * 2**k`` for an integer-valued float ``k`` in [-2044, 2046], rounded once (also to a subnormal
    or to infinity): two steps, the first never leaving the normal range for ``|x|`` in [0.5, 2]."""
    n = np.int64(k)
    half = n >> 1
    return x * from_bits((half + 1023) << 52) * from_bits((n - half + 1023) << 52)


@vector_function
def copysign(magnitude, sign):
    """``magnitude`` with the sign bit of ``sign`` (``-0.0`` and NaNs included)."""
    bits = (as_bits(magnitude) & 0x7FFFFFFFFFFFFFFF) | (as_bits(sign) & -0x8000000000000000)
    return from_bits(bits)


@vector_function
def is_nan(x):
    return x != x


@vector_function
def clamp(x, low, high):
    """``x`` limited to [low, high]; a NaN becomes ``low`` (callers select NaN results apart)."""
    y = x if x > low else low
    return y if y < high else high

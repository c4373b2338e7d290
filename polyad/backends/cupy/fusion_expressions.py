"""The CUDA code of each op that ``pa.jit`` may fuse (``polyad.graph.compiler.fusion.FUSABLE``), as the
generated ``ElementwiseKernel`` and ``ReductionKernel`` sources write it (``fusion.py``): ``{0}``, ``{1}``
are the arguments, ``T`` the group's dtype. Each computes what CuPy's eager kernel computes, in the same
dtype; the CuPy backend's ``fusion`` field hands this table to the compiler (``expressions``).

Example:
    >>> from polyad.backends.cupy.fusion_expressions import CUDA
    >>> CUDA["reciprocal"].format("x")
    '((T)1 / x)'
"""

CUDA = {
    "add": "({0} + {1})",
    "subtract": "({0} - {1})",
    "multiply": "({0} * {1})",
    "divide": "({0} / {1})",
    "pow": "pow({0}, {1})",
    "negative": "(-{0})",
    "positive": "{0}",
    "abs": "fabs({0})",
    "square": "({0} * {0})",
    "reciprocal": "((T)1 / {0})",
    "sign": "({0} > 0 ? (T)1 : ({0} < 0 ? (T)-1 : {0}))",
    "sqrt": "sqrt({0})",
    "exp": "exp({0})",
    "expm1": "expm1({0})",
    "log": "log({0})",
    "log1p": "log1p({0})",
    "sin": "sin({0})",
    "cos": "cos({0})",
    "tan": "tan({0})",
    "asin": "asin({0})",
    "acos": "acos({0})",
    "atan": "atan({0})",
    "sinh": "sinh({0})",
    "cosh": "cosh({0})",
    "tanh": "tanh({0})",
    "asinh": "asinh({0})",
    "acosh": "acosh({0})",
    "atanh": "atanh({0})",
    "logaddexp": "(fmax({0}, {1}) + log1p(exp(-fabs({0} - {1}))))",  # CuPy's
    "special.erf": "erf({0})",
    # the zero-safe products of the rules (polyad.ops.zero_safe): g * d, g / d, with a factor that would
    # make a zero g NaN taken as 0 (as 1 for the division)
    "zero_safe_multiply": "({0} * (({0} != (T)0 || isfinite({1})) ? {1} : (T)0))",
    "zero_safe_divide": "({0} / (({0} != (T)0 || ({1} != (T)0 && {1} == {1})) ? {1} : (T)1))",
    # shape ops that are the identity on the elements of a group of their output's shape
    "broadcast_to": "{0}",
    # a choice on a boolean condition (an input of the group: comparisons make no floating value)
    "where": "({0} ? {1} : {2})",
    # NumPy's: a NaN in either wins, and of equal values (0.0 and -0.0) the second
    "maximum": "(({0} > {1} || {0} != {0}) ? {0} : {1})",
    "minimum": "(({0} < {1} || {0} != {0}) ? {0} : {1})",
    # the identity when it runs (transforms of the group see the op itself, and stop there)
    "stop_gradient": "{0}",
}

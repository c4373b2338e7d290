"""The Numba code of each op that ``pa.jit`` may fuse (``polyad.graph.compiler.fusion.FUSABLE``), as the
fused CPU loop (``fusion.py``) writes it under ``math="exact"`` and for the ops ``vecmath`` has no fast
function for: ``{0}``, ``{1}`` are the arguments. Each computes what NumPy's eager kernel computes, in the
same dtype; the NumPy backend's ``fusion`` field hands this table to the compiler (``expressions``).

Example:
    >>> from polyad.backends.numpy.compiler.expressions import NUMBA
    >>> NUMBA["sign"].format("x")
    'np.sign(x)'
"""

NUMBA = {
    "add": "({0} + {1})",
    "subtract": "({0} - {1})",
    "multiply": "({0} * {1})",
    "divide": "({0} / {1})",
    "pow": "({0} ** {1})",
    "negative": "(-{0})",
    "positive": "{0}",
    "abs": "abs({0})",
    "square": "({0} * {0})",
    "reciprocal": "(1.0 / {0})",
    "sign": "np.sign({0})",
    "sqrt": "np.sqrt({0})",
    "exp": "np.exp({0})",
    "expm1": "np.expm1({0})",
    "log": "np.log({0})",
    "log1p": "np.log1p({0})",
    "sin": "np.sin({0})",
    "cos": "np.cos({0})",
    "tan": "np.tan({0})",
    "asin": "np.arcsin({0})",
    "acos": "np.arccos({0})",
    "atan": "np.arctan({0})",
    "sinh": "np.sinh({0})",
    "cosh": "np.cosh({0})",
    "tanh": "np.tanh({0})",
    "asinh": "np.arcsinh({0})",
    "acosh": "np.arccosh({0})",
    "atanh": "np.arctanh({0})",
    "logaddexp": "np.logaddexp({0}, {1})",
    "special.erf": "math.erf({0})",
    # the zero-safe products of the rules (polyad.ops.zero_safe): g * d, g / d, with a factor that would
    # make a zero g NaN taken as 0 (as 1 for the division)
    "zero_safe_multiply": "({0} * ({1} if ({0} != 0 or np.isfinite({1})) else 0.0))",
    "zero_safe_divide": "({0} / ({1} if ({0} != 0 or ({1} != 0 and {1} == {1})) else 1.0))",
    # shape ops that are the identity on the elements of a group of their output's shape
    "broadcast_to": "{0}",
    # a choice on a boolean condition (an input of the group: comparisons make no floating value)
    "where": "({1} if {0} else {2})",
    # NumPy's: a NaN in either wins, and of equal values (0.0 and -0.0) the second
    "maximum": "({0} if ({0} > {1} or {0} != {0}) else {1})",
    "minimum": "({0} if ({0} < {1} or {0} != {0}) else {1})",
    # the identity when it runs (transforms of the group see the op itself, and stop there)
    "stop_gradient": "{0}",
}

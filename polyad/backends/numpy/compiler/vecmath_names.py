"""The names and source text of the vectorised math functions (``vecmath.py``) as the fused loop's
generated code calls them. Kept apart from ``vecmath.py``, which imports Numba (most of a second): a
kernel's source is written when its graph is fused, on the caller's thread, while Numba is imported and
the kernel compiled in the background (``fusion_compile.py``)."""

# polyad op name -> function of vecmath.py
FUNCTIONS = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "exp": "exp",
    "expm1": "expm1",
    "log": "log",
    "log1p": "log1p",
    "tanh": "tanh",
    "sinh": "sinh",
    "cosh": "cosh",
    "atan": "arctan",
    "asin": "arcsin",
    "acos": "arccos",
    "asinh": "arcsinh",
    "acosh": "arccosh",
    "atanh": "arctanh",
    "sqrt": "sqrt",
    "pow": "power",
    "logaddexp": "logaddexp",
    "special.erf": "erf",
}
# ops whose large arguments fall back to libm (``outside``), and libm's function for each, in Numba
REDUCED = {"sin": "np.sin", "cos": "np.cos", "tan": "np.tan"}
MODULE_NAME = "vm"  # the name the generated source imports this module under


def expression(op, dtype, args):
    """The source text of ``op`` on the argument names ``args`` in a fused loop of ``dtype`` ("float32"
    or "float64"), or None if this module has no function for ``op``."""
    name = FUNCTIONS.get(op)
    if name is None:
        return None
    if dtype == "float64":
        return f"{MODULE_NAME}.{name}({', '.join(args)})"
    wide = ", ".join(f"np.float64({a})" for a in args)
    return f"np.{dtype}({MODULE_NAME}.{name}({wide}))"


def libm_expression(op, dtype, args):
    """``op``'s text with libm's function instead (for the arguments ``outside`` the fast reduction)."""
    return f"{REDUCED[op]}({', '.join(args)})"


def range_check(op, dtype, arg):
    """The text that counts an argument of ``op`` that needs libm, or None if ``op`` never does."""
    if op not in REDUCED:
        return None
    return (
        f"{MODULE_NAME}.outside(np.float64({arg}))" if dtype != "float64" else f"{MODULE_NAME}.outside({arg})"
    )


__all__ = ["FUNCTIONS", "MODULE_NAME", "REDUCED", "expression", "libm_expression", "range_check"]

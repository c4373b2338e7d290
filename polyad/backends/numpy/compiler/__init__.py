"""NumPy's compiler of the groups ``pa.jit`` fuses: Numba loops (``fusion.py``; compiled off the calling
thread by ``fusion_compile.py``, run on threads by ``fusion_threads.py``) over a vectorised math library
(``vecmath*.py``). This package is the NumPy backend's ``fusion`` field (``polyad.backends.contract``):
``kernels``, ``available``, ``exact_ops``, ``expressions`` and, for graphs of small values as one Numba
function of scalars (``graph_function.py``), ``graph_function``, ``while_function`` and
``sweep_function`` below are what the compiler asks it.

Example:
    >>> from polyad.backends.numpy import compiler
    >>> sorted(compiler.exact_ops)[:3], compiler.expressions["add"]
    (['abs', 'add', 'broadcast_to'], '({0} + {1})')
"""

from .expressions import NUMBA as expressions
from .fusion import EXACT as exact_ops
from .fusion import available, kernels
from .graph_function import graph_function, sweep_function, while_function

__all__ = [
    "available",
    "exact_ops",
    "expressions",
    "graph_function",
    "kernels",
    "sweep_function",
    "while_function",
]

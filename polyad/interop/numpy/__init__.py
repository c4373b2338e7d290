"""NumPy's API on polyad tensors: NumPy code, not only Array API code, under every transform.

Inside a transform, a user's values are polyad tensors. This package makes NumPy-style code run on them
unchanged:

- ``methods``: NumPy's array methods and attributes on every tensor (``x.sum()``, ``u.copy()``,
  ``A.dot(v)``, ``x.reshape(2, 3)``, ``x.real``, the in-place ``x.sort()``/``x.fill(v)``...);
- ``ufuncs``: NumPy's ufuncs (``__array_ufunc__``, NEP 13): ``np.exp(t)``, NumPy's operators with a
  NumPy array on the left (``W @ x``), ``out=`` into a tensor, ``where=``, ``reduce``/``accumulate``/
  ``outer``/``at``;
- ``protocol``: NumPy's other functions (``__array_function__``, NEP 18): ``np.diag``, ``np.einsum``,
  ``np.linalg.*``, ``np.fft.*``, ``np.interp``, ``np.cov``... implemented in ``shapes`` (metadata,
  creation like others, reshaping, joining, padding), ``indexing`` (indexing and in-place writers),
  ``maths`` (reductions, statistics, sorting, element-wise helpers), ``calculus`` (differences,
  integrals, interpolation, polynomials), ``linear`` (products, ``einsum``, convolution) and ``linalg``
  (``np.linalg``, ``np.fft``).

Each is a composition of polyad ops, so grad, jvp, vmap and pa.jit follow it. What is covered, with which
derivative, and what is refused and why: ``common.FUNCTIONS``, ``ufuncs.UFUNCS`` and ``methods.METHODS``
(the docs' coverage table is generated from them). ``np.asarray`` of a traced value stays refused: it is
an exit (``polyad/core/tensor.py``).

Example:
    >>> import numpy as np, polyad as pa
    >>> pa.grad(lambda x: np.exp(x).sum())(np.zeros(2))
    array([1., 1.])
"""

from polyad.core import install_methods
from polyad.interop.numpy import calculus, indexing, linalg, linear, maths, methods, protocol, shapes, ufuncs
from polyad.interop.numpy.common import EXACT, FUNCTIONS, NONE_DISCRETE, NONE_METADATA, ZERO, Entry
from polyad.interop.numpy.methods import METHODS
from polyad.interop.numpy.shapes import CONSTANT
from polyad.interop.numpy.ufuncs import UFUNCS

_FILES = (calculus, indexing, linalg, linear, maths, shapes)  # each registers its functions on import


def install():
    """Give ``Tensor`` NumPy's methods and attributes and its two dispatch protocols (called once, by
    ``polyad/__init__.py``, once the namespace is assembled)."""
    install_methods(
        {
            **methods.tensor_methods(),
            "__array_ufunc__": ufuncs.array_ufunc,
            "__array_function__": protocol.array_function,
        }
    )


__all__ = ["CONSTANT", "EXACT", "FUNCTIONS", "METHODS", "NONE_DISCRETE", "NONE_METADATA", "UFUNCS", "ZERO",
           "Entry", "install"]  # fmt: skip

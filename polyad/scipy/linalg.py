"""SciPy's structured dense solves as polyad ops: ``solve_triangular``, ``cho_factor``/``cho_solve`` and
``lu_factor``/``lu_solve``, with ``scipy.linalg``'s signatures, differentiable to every order and batched
by rule. The same functions are ``polyad.xp.linalg.<name>``, next to the standard's ``linalg``; this
module is the short import for code ported from ``scipy.linalg``.

Their conventions (what each reads, the zeros ``cho_factor`` puts in the other triangle, ``check_finite``
and ``overwrite_*``, the kernel per device) are in the functions' docstrings and in
``polyad/ops/linalg/structured.py``.

Example:
    >>> import numpy as np
    >>> import polyad as pa
    >>> from polyad.scipy import linalg
    >>> from polyad import xp
    >>> def nll(log_scale, k, y):  # a Gaussian model's negative log-likelihood, up to a constant
    ...     c, lower = linalg.cho_factor(xp.exp(log_scale) * k)
    ...     return 0.5 * xp.sum(y * linalg.cho_solve((c, lower), y)) + xp.sum(xp.log(xp.linalg.diagonal(c)))
    >>> k, y = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([1.0, -1.0])
    >>> round(float(pa.grad(nll)(np.float64(0.0), k, y)), 12)  # n / 2 - y^T k^-1 y / 2 = 1 - 8 / 7
    -0.142857142857
"""

from polyad.ops.linalg import cho_factor, cho_solve, lu_factor, lu_solve, solve_triangular

__all__ = ["cho_factor", "cho_solve", "lu_factor", "lu_solve", "solve_triangular"]

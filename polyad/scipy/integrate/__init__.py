"""Differentiable integration of ordinary differential equations: ``solve_ivp`` with SciPy's signature,
written in polyad ops (``common``: the ``Method`` protocol and what the methods share; ``explicit``: the
Runge-Kutta steps; ``radau`` and ``bdf``: the stiff methods; ``methods``: the table by name; ``driver``:
the loop; ``sensitivity``: reverse mode by forward sensitivities or the adjoint)."""

from polyad.scipy.integrate.dense import OdeSolution
from polyad.scipy.integrate.driver import OdeResult
from polyad.scipy.integrate.solve_ivp import solve_ivp

__all__ = ["OdeResult", "OdeSolution", "solve_ivp"]

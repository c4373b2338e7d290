"""Differentiable integration of ordinary differential equations: ``solve_ivp`` with SciPy's signature,
written in polyad ops (``polyad.integrate.explicit``: the Runge-Kutta steps; ``polyad.integrate.solve_ivp``:
the driver)."""

from polyad.integrate.solve_ivp import OdeResult, solve_ivp

__all__ = ["OdeResult", "solve_ivp"]

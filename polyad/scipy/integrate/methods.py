"""The methods of ``solve_ivp`` by name: each a ``common.Method`` (the driver calls nothing else), so a new
method is one module and one entry here."""

from polyad.scipy.integrate import bdf, explicit, radau

METHODS = {method.name: method for method in (*explicit.METHODS, radau.RADAU, bdf.BDF)}

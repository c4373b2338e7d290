"""SciPy's functions, differentiable, with SciPy's signatures (as ``jax.scipy`` mirrors SciPy): ``optimize``,
``linalg`` (the structured dense solves), ``sparse.linalg``, ``integrate`` (``solve_ivp``), and
``solver_support`` (what the solvers share: host copies, convergence records, tangent solves). Users import
them by their public names, ``polyad.optimize``, ``polyad.linalg``, ``polyad.sparse.linalg`` and
``polyad.integrate`` (``polyad/moved.py`` keeps those paths)."""

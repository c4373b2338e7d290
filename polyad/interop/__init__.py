"""Other libraries' protocols on polyad's tensors, built on the namespace ``polyad.xp`` (so above the ops):
``numpy/`` (NumPy's functions, ufuncs and array methods on every tensor: ``__array_function__``,
``__array_ufunc__``) and ``scipy_fft.py`` (a backend for ``scipy.fft``'s uarray multimethods)."""

"""polyad's ops: one file per family of the standard, each op's whole contract on one screen (kernel,
``abstract_eval``, ``vjp``, ``jvp``, ``batch``, markers).

The files import each other at module level only, in this fixed order; a file imports only files before
it (so there is no import circle, and ``polyad.xp`` can load them in any order):

1. ``common``: ``define``, abstract values and the abstract-evaluation rules families share, dtype kinds;
   it binds no op by name. ``known_ones``: the marks of reverse mode's symbolic ones.
2. ``fills``: ``zeros``, ``arange``, ``zeros_like``, ``ones_like`` (they read no array's values).
3. ``base``: the ops the transforms and the shared rules are made of (``add``, ``where``, ``reshape``,
   ``broadcast_to``, ``sum``, ``stack``, ``take_index``...) with those rules (``unbroadcast``,
   ``move_to_front``, the reduction rules), closed under their own rules (``broadcast_to`` and ``sum`` are
   each other's transpose, ``stack`` and ``unstack`` too). Each family re-exports its ops that live here.
4. ``zero_safe``: ``zero_safe_multiply`` and ``zero_safe_divide``, the products of rules whose derivative
   can be infinite (a zero cotangent stays zero). ``families``: ``unary`` and ``binary``, which define
   element-wise ops from their derivatives.
5. ``elementwise``
6. ``dtypes``
7. ``creation`` (``to_device`` asks ``dtypes`` which backend owns a dtype)
8. ``indexing``: ``getitem``, functional updates, ``take``/``scatter_add`` (each other's transpose)
9. ``manipulation`` (``repeat``'s VJP scatters with ``indexing.scatter_add``)
10. ``reductions`` (their rules slice, concatenate and fill)
11. ``searching`` (``sort``'s rules gather with ``take_along_axis``)
12. ``linalg``, a package in the same way: ``shared``, ``products``, ``diagonals``, ``solves``,
    ``decompositions``, ``eig``, ``norms``
13. ``fft``
14. ``special``, a package like ``linalg``: ``shared``, ``elementary``, ``errors``, ``gammas``,
    ``bessels``, ``reductions``, ``numerics``, ``trigonometric``, ``boxcox``, ``elliptic``, ``integrals``,
    ``orthogonal``, ``gamma_zeta``, ``incomplete``, ``continuous``, ``discrete`` (the special functions
    of ``polyad.xp.special``)
15. ``dct``: SciPy's discrete cosine and sine transforms, added to ``polyad.xp.fft`` (its "cpu" kernel
    calls SciPy through ``special.shared.host_call``)
16. ``sets``: ``isin`` (the ``unique_*`` functions are in ``searching``)
17. ``views``: the namespace functions that make views (``reshape``, ``permute_dims``, ...), indexing
    and in-place writes through views, as NumPy's alias (``polyad.xp`` installs them)
18. ``numpy``: NumPy's API on polyad tensors (its functions, ufuncs and array methods), no ops of its own:
    each NumPy function is a composition of the namespace's, so it imports ``polyad.xp`` (assembled from
    the families above); ``polyad/__init__.py`` installs it on ``Tensor``

Ops whose derivatives need each other live in the same file.
"""

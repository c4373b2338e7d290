"""polyad's ops: one file per family of the standard, each op's whole contract on one screen (kernel,
``abstract_eval``, ``vjp``, ``jvp``, ``batch``, markers).

The files import each other at module level only, in this fixed order; a file imports only files before
it (so there is no import circle, and ``polyad.xp`` can load them in any order):

1. ``common``: ``define``, abstract values and the abstract-evaluation rules families share, dtype kinds;
   it binds no op by name.
2. ``base``: the ops the transforms are made of (``zeros_like``, ``ones_like``, ``add``, ``stack``,
   ``take_index``) and those the shared rules need (``unbroadcast``: ``sum``, ``real``, ``reshape``;
   ``move_to_front``: ``moveaxis``), closed under their own rules (``broadcast_to`` and ``sum`` are each
   other's transpose, ``stack`` and ``unstack`` too). Each family re-exports its ops that live here.
3. ``elementwise``
4. ``dtypes``
5. ``creation`` (``to_device`` asks ``dtypes`` which backend owns a dtype)
6. ``indexing``: ``getitem``, functional updates, ``take``/``scatter_add`` (each other's transpose)
7. ``manipulation`` (``repeat``'s VJP scatters with ``indexing.scatter_add``)
8. ``reductions`` (their rules slice, concatenate and fill)
9. ``searching`` (``sort``'s rules gather with ``take_along_axis``)
10. ``linalg``, a package in the same way: ``shared``, ``products``, ``diagonals``, ``solves``,
    ``decompositions``, ``eig``, ``norms``
11. ``fft``
12. ``special``, a package like ``linalg``: ``shared``, ``elementary``, ``errors``, ``gammas``,
    ``bessels``, ``reductions`` (the special functions of ``polyad.xp.special``)
13. ``dct``: SciPy's discrete cosine and sine transforms, added to ``polyad.xp.fft`` (its "cpu" kernel
    calls SciPy through ``special.shared.host_call``)
14. ``sets``: ``isin`` (the ``unique_*`` functions are in ``searching``)

Ops whose derivatives need each other live in the same file.
"""

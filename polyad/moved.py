"""Import paths that moved when the tree was reorganised: each either still works (``ALIASES``: the module
is the new one) or raises a ModuleNotFoundError that names the new path (``MOVED``), never a bare
"no module named".

Example:
    >>> import importlib
    >>> importlib.import_module("polyad.fused").softplus.__name__
    'softplus'
    >>> try:
    ...     importlib.import_module("polyad.reverse")
    ... except ModuleNotFoundError as e:
    ...     print(e)
    polyad.reverse moved to polyad.transforms.reverse (see ARCHITECTURE.md)
"""

import importlib
import importlib.abc
import importlib.machinery
import sys

# former name -> the module it names now (public paths users may have imported: they keep working, their
# submodules too: polyad.compiler.optimize is polyad.graph.compiler.optimize). polyad.optimize,
# polyad.linalg, polyad.sparse.linalg and polyad.integrate are SciPy's names, polyad's public paths.
ALIASES = {
    "polyad.fused": "polyad.custom.ops",
    "polyad.compiler": "polyad.graph.compiler",
    "polyad.custom_ops": "polyad.custom.ops",
    "polyad.library": "polyad.custom.library",
    "polyad.optimize": "polyad.scipy.optimize",
    "polyad.linalg": "polyad.scipy.linalg",
    "polyad.sparse": "polyad.scipy.sparse",
    "polyad.integrate": "polyad.scipy.integrate",
    "polyad.dispatch": "polyad.core.dispatch",
    "polyad.scipy_fft": "polyad.interop.scipy_fft",
    # the NumPy backend's compiler, now in its own folder (scripts and notebooks import these)
    "polyad.backends.numpy.fusion": "polyad.backends.numpy.compiler.fusion",
    "polyad.backends.numpy.fusion_compile": "polyad.backends.numpy.compiler.fusion_compile",
    "polyad.backends.numpy.fusion_threads": "polyad.backends.numpy.compiler.fusion_threads",
    "polyad.backends.numpy.vecmath": "polyad.backends.numpy.compiler.vecmath",
    "polyad.backends.numpy.vecmath_base": "polyad.backends.numpy.compiler.vecmath_base",
    "polyad.backends.numpy.vecmath_coefficients": "polyad.backends.numpy.compiler.vecmath_coefficients",
    "polyad.backends.numpy.vecmath_exp": "polyad.backends.numpy.compiler.vecmath_exp",
    "polyad.backends.numpy.vecmath_names": "polyad.backends.numpy.compiler.vecmath_names",
    "polyad.backends.numpy.vecmath_trig": "polyad.backends.numpy.compiler.vecmath_trig",
}
# former name -> where its contents went (internal paths: the error says where to look)
MOVED = {
    "polyad.exits": "polyad.core.tensor",
    "polyad.reverse": "polyad.transforms.reverse",
    "polyad.forward": "polyad.transforms.forward",
    "polyad.batching": "polyad.transforms.batching",
    "polyad.tracing": "polyad.transforms.abstract (eval_shape: polyad.api.eval_shape)",
    "polyad.predispatch": "polyad.graph.predispatch",
    "polyad.api.reverse_mode": "polyad.api.grad",
    "polyad.api.forward_mode": "polyad.api.jvp (linearize: polyad.api.grad)",
    "polyad.api.vectorize": "polyad.api.vmap",
    "polyad.api.capture": "polyad.api.graphs",
    "polyad.api.chunking": "polyad.parallel.plan",
    "polyad.api.cluster": "polyad.parallel.cluster",
    # issue 37: one folder per kind of thing
    "polyad.standard": "polyad.core.standard",
    "polyad.ops.numpy": "polyad.interop.numpy",
    "polyad.control.custom_derivatives": "polyad.custom.derivatives",
    "polyad.control.rule_calls": "polyad.custom.rule_calls",
    "polyad.control.implicit": "polyad.custom.implicit",
    "polyad.chunking": "polyad.parallel",
    "polyad.chunking.plan": "polyad.parallel.plan",
    "polyad.chunking.cluster": "polyad.parallel.cluster",
    "polyad.api.solver_support": "polyad.scipy.solver_support",
    "polyad.api.arguments": "polyad.api._arguments (private)",
    "polyad.api.closed_over": "polyad.api._closed_over (private)",
    "polyad.api.coloring": "polyad.api._coloring (private)",
    "polyad.api.complex_jacobians": "polyad.api._complex_jacobians (private)",
    "polyad.api.weak_floats": "polyad.api._weak_floats (private)",
}


class _Alias(importlib.abc.Loader):
    """Loads a former name as the module it names now: the very module object, not a second copy."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec  # the import system set the former name's spec: the module keeps its own


class _MovedPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        for old, new in ALIASES.items():
            if name == old or name.startswith(old + "."):
                return importlib.machinery.ModuleSpec(name, _Alias(new + name[len(old) :]))
        if name in MOVED:
            raise ModuleNotFoundError(f"{name} moved to {MOVED[name]} (see ARCHITECTURE.md)", name=name)
        return None


_FINDER = _MovedPaths()


def install_moved_paths():
    """Put the finder of moved paths on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)  # before the path finder, which would load a second copy

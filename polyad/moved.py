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

# former name -> the module it names now (public paths users may have imported: they keep working)
ALIASES = {"polyad.fused": "polyad.custom_ops"}
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
    "polyad.api.chunking": "polyad.chunking.plan",
    "polyad.api.cluster": "polyad.chunking.cluster",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        pass


class _MovedPaths(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ALIASES:
            return importlib.machinery.ModuleSpec(name, _Alias(ALIASES[name]))
        if name in MOVED:
            raise ModuleNotFoundError(f"{name} moved to {MOVED[name]} (see ARCHITECTURE.md)", name=name)
        return None


_FINDER = _MovedPaths()


def install_moved_paths():
    """Put the finder of moved paths on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)

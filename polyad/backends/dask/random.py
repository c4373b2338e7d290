"""Random numbers for the Dask backend: lazy draws, each chunk from its own NumPy ``SeedSequence``.

A stream is a ``numpy.random.SeedSequence``; every draw spawns one child sequence and hands it to
``dask.array.random.default_rng``, which spawns one more per chunk. Nothing is drawn until the array is
computed, and computing it twice gives the same numbers. The state is the sequence's entropy, spawn key
and count of children spawned: restoring it replays the same draws.
"""

import dask.array as da
import numpy as np


class Generator:
    """One seeded stream. ``dtype`` is a NumPy dtype; ``device`` is Dask's (ignored: Dask has one)."""

    def __init__(self, seed):
        self._seq = np.random.SeedSequence(seed)

    def _next(self):
        (child,) = self._seq.spawn(1)
        return da.random.default_rng(np.random.PCG64(child))

    def normal(self, shape, dtype, device=None):
        return self._next().standard_normal(shape, dtype=dtype)

    def uniform(self, shape, dtype, device=None):
        return self._next().random(shape, dtype=dtype)

    def integers(self, low, high, shape, dtype, device=None):
        return self._next().integers(low, high, size=shape, dtype=dtype)

    def get_state(self):
        return (self._seq.entropy, self._seq.spawn_key, self._seq.n_children_spawned)

    def set_state(self, state):
        entropy, spawn_key, spawned = state
        self._seq = np.random.SeedSequence(entropy, spawn_key=spawn_key, n_children_spawned=spawned)

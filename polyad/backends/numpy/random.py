"""Random numbers for the NumPy backend: ``numpy.random.Generator`` (PCG64)."""

import copy

import numpy as np


class Generator:
    """One seeded stream. ``shape`` is a tuple, ``dtype`` a NumPy dtype; ``device`` is always the CPU."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def normal(self, shape, dtype, device=None):
        return np.asarray(self._rng.standard_normal(shape, dtype=dtype))

    def uniform(self, shape, dtype, device=None):
        return np.asarray(self._rng.random(shape, dtype=dtype))

    def integers(self, low, high, shape, dtype, device=None):
        return np.asarray(self._rng.integers(low, high, size=shape, dtype=dtype))

    def get_state(self):
        return copy.deepcopy(self._rng.bit_generator.state)

    def set_state(self, state):
        self._rng.bit_generator.state = copy.deepcopy(state)

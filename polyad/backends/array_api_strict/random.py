"""Random numbers for array_api_strict: drawn with ``numpy.random.Generator``, then converted (the
standard has no random numbers; only backends may import NumPy)."""

import copy

import array_api_strict
import numpy as np


def _np_dtype(dtype):
    return np.dtype(str(dtype).rsplit(".", 1)[-1])


class Generator:
    """One seeded stream. ``dtype`` is an array_api_strict dtype; ``device`` one of its devices."""

    def __init__(self, seed):
        self._rng = np.random.default_rng(seed)

    def _out(self, a, dtype, device):
        return array_api_strict.asarray(np.asarray(a), dtype=dtype, device=device)

    def normal(self, shape, dtype, device=None):
        return self._out(self._rng.standard_normal(shape, dtype=_np_dtype(dtype)), dtype, device)

    def uniform(self, shape, dtype, device=None):
        return self._out(self._rng.random(shape, dtype=_np_dtype(dtype)), dtype, device)

    def integers(self, low, high, shape, dtype, device=None):
        return self._out(self._rng.integers(low, high, size=shape, dtype=_np_dtype(dtype)), dtype, device)

    def get_state(self):
        return copy.deepcopy(self._rng.bit_generator.state)

    def set_state(self, state):
        self._rng.bit_generator.state = copy.deepcopy(state)

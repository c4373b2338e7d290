"""Random numbers for the CuPy backend: ``cupy.random.RandomState`` (cuRAND), drawn on ``device``.

CuPy's generators expose no copyable state, so ``get_state`` draws a new seed from the stream, reseeds
with it and returns it; ``set_state(seed)`` reseeds: restoring replays the same numbers (what vmap's
randomness="same" needs across chunks).
"""

import contextlib

import cupy


class Generator:
    """One seeded stream. ``dtype`` is a CuPy (NumPy) dtype; ``device`` a ``cupy.cuda.Device`` or None."""

    def __init__(self, seed):
        self._rs = cupy.random.RandomState(seed)

    @staticmethod
    def _on(device):
        return device if device is not None else contextlib.nullcontext()

    def normal(self, shape, dtype, device=None):
        with self._on(device):
            return self._rs.standard_normal(size=shape, dtype=dtype)

    def uniform(self, shape, dtype, device=None):
        with self._on(device):
            return self._rs.random_sample(size=shape, dtype=dtype)

    def integers(self, low, high, shape, dtype, device=None):
        with self._on(device):
            return self._rs.randint(low, high, size=shape, dtype=dtype)

    def get_state(self):
        seed = int(self._rs.randint(0, 2**31 - 1, size=()).get())
        self._rs.seed(seed)
        return seed

    def set_state(self, state):
        self._rs.seed(state)

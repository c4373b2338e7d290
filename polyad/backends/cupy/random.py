"""Random numbers for the CuPy backend: cuRAND through ``cupy.random.RandomState``, drawn on ``device``.

CuPy's generators expose no copyable state, so a stream here is counter-based: its state is ``(key,
count)``, and draw number ``count`` comes from a generator seeded by both (NumPy's ``SeedSequence`` mixes
them). Reading the state changes nothing, and restoring it replays the same numbers (vmap's
randomness="same" across chunks, a checkpoint's recomputation).
"""

import contextlib

import cupy
import numpy


class Generator:
    """One seeded stream. ``dtype`` is a CuPy (NumPy) dtype; ``device`` a ``cupy.cuda.Device`` or None."""

    def __init__(self, seed):
        # None: fresh entropy, as NumPy's default_rng(None)
        self._key = numpy.random.SeedSequence().entropy if seed is None else int(seed)
        self._count = 0

    def _next(self):
        seed = numpy.random.SeedSequence((self._key, self._count)).generate_state(1)[0]
        self._count += 1
        return cupy.random.RandomState(int(seed))

    @staticmethod
    def _on(device):
        return device if device is not None else contextlib.nullcontext()

    def normal(self, shape, dtype, device=None):
        with self._on(device):
            return self._next().standard_normal(size=shape, dtype=dtype)

    def uniform(self, shape, dtype, device=None):
        with self._on(device):
            return self._next().random_sample(size=shape, dtype=dtype)

    def integers(self, low, high, shape, dtype, device=None):
        with self._on(device):
            return self._next().randint(low, high, size=shape, dtype=dtype)

    def get_state(self):
        return (self._key, self._count)

    def set_state(self, state):
        self._key, self._count = (int(state), 0) if isinstance(state, int) else state

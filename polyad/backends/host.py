"""NumPy on the host: the one door through which polyad's own bookkeeping reaches NumPy (the index sets of
sparsity patterns and colourings, which live on the CPU as SciPy's sparse matrices do). The arrays of a
user's computation never pass here: they go through their backend (``polyad.backends.<name>``).

Example:
    >>> from polyad.backends.host import np
    >>> np.arange(3).tolist()
    [0, 1, 2]
"""

import numpy as np

__all__ = ["np"]

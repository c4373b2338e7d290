"""Op table rows: ``isin`` (standard 2025.12), against the backend library's own ``isin``.

Integer arrays as the standard asks, with the cases it names: a Python int on either side (a 0-d result
for an int ``x1``), ``invert``, empty arrays, and ``x2`` of any shape; floats in a row of their own
(compared by ``==``, NaN in nothing: polyad's choice where the standard leaves them open). Boolean
results: no derivative; vmap batches ``x1`` element-wise and a batched ``x2`` by its own rule. The
reference inverts with ``logical_not``: array_api_strict 2.6.1's ``isin`` ignores ``invert``.
"""

from polyad.testing.op_table import OpInfo, Sample


def _ref(xp, x1, x2, invert=False):
    found = xp.isin(x1, x2)
    return xp.logical_not(found) if invert else found


def _ref_equal(xp, x1, x2, invert=False):
    """For floats (array_api_strict's ``isin`` takes integers only): any ``==`` along a new last axis."""
    found = xp.any(xp.reshape(x1, tuple(x1.shape) + (1,)) == xp.reshape(x2, (-1,)), axis=-1)
    return xp.logical_not(found) if invert else found


def isin_samples(s):
    return [
        Sample((s.int(2, 3), s.int(4)), name="2-d in 1-d"),
        Sample((s.int(5), s.int(2, 2)), name="x2 2-d"),
        Sample((s.int(2, 3), s.int(3)), {"invert": True}, name="invert"),
        Sample((3, s.int(4)), name="python int x1"),
        Sample((s.int(2, 3), 2), name="python int x2"),
        Sample((s.int(0, 3), s.int(4)), name="empty x1"),
        Sample((s.int(4), s.int(0)), name="empty x2"),
        Sample((s.int(), s.int(3)), name="0-d x1"),
    ]


def float_samples(s):
    xp = s.xp
    nan_row = xp.asarray([0.5, float("nan"), 2.0], dtype=xp.float64)
    return [
        Sample((nan_row, xp.asarray([float("nan"), 2.0], dtype=xp.float64)), name="floats, nan"),
        Sample((s.float(2, 3), s.float(4)), {"invert": True}, name="floats invert"),
    ]


ROWS = [
    OpInfo("isin", isin_samples, ref=_ref, differentiable=False),
    OpInfo("isin", float_samples, ref=_ref_equal, differentiable=False),
]

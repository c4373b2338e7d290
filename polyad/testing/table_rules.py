"""Op table rows: ops that rules are made of, not namespace functions (each row a ``program`` calling
it, with an independent reference on the backend's namespace).

- ``zero_safe_multiply`` / ``zero_safe_divide`` (``polyad.ops.zero_safe``): ``g * d`` and ``g / d``, 0
  where ``g`` is 0; their samples include that case, the reference builds the mask itself;
- ``last_occurrence`` (``polyad.ops.indexing``): where an integer is the last of its value along the last
  axis; the reference compares every pair of elements.
"""

from polyad.ops.indexing import last_occurrence
from polyad.ops.zero_safe import zero_safe_divide, zero_safe_multiply
from polyad.testing.op_table import OpInfo, Sample


def _with_zeros(s, *shape):
    """Floats with every other element exactly zero (the case the mask is for)."""
    x = s.float(*shape)
    if not shape:
        return x
    xp = s.xp
    n = 1
    for d in shape:
        n *= d
    keep = xp.reshape(xp.arange(n) % 2 == 1, shape)
    return xp.where(keep, x, xp.zeros_like(x))


def zero_safe_samples(s):
    return [
        Sample((_with_zeros(s, 4), s.float(4, low=0.5, high=2.0)), name="1-d, zero cotangents"),
        Sample((_with_zeros(s, 2, 3), s.float(3, low=0.5, high=2.0)), name="broadcast"),
        Sample((s.float(), s.float(low=0.5, high=2.0)), name="0-d"),
        Sample((s.float(3), 1.5), name="python scalar"),
    ]


def _zero_safe_ref(divide):
    def ref(xp, g, d):
        out = g / d if divide else g * d
        return xp.where(g == 0, xp.zeros_like(out), out) if hasattr(out, "shape") else out

    return ref


def last_occurrence_samples(s):
    return [
        Sample((s.int(7, low=0, high=3),), name="1-d, repeats"),
        Sample((s.int(3, 5, low=0, high=4),), name="rows apart"),
        Sample((s.int(0, low=0, high=3),), name="empty"),
    ]


def _last_occurrence_ref(xp, p):
    n = p.shape[-1]
    i = xp.arange(n)
    later = xp.reshape(i, (n, 1)) < xp.reshape(i, (1, n))  # [j, k]: k comes after j
    same = xp.expand_dims(p, axis=-1) == xp.expand_dims(p, axis=-2)
    return ~xp.any(same & later, axis=-1)


ROWS = [
    OpInfo("zero_safe_multiply", zero_safe_samples, program=lambda xp, g, d: zero_safe_multiply(g, d),
           ref=_zero_safe_ref(False)),
    OpInfo("zero_safe_divide", zero_safe_samples, program=lambda xp, g, d: zero_safe_divide(g, d),
           ref=_zero_safe_ref(True)),
    OpInfo("last_occurrence", last_occurrence_samples, program=lambda xp, p: last_occurrence(p),
           ref=_last_occurrence_ref, differentiable=False),
]  # fmt: skip

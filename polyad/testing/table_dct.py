"""Op table rows: the discrete cosine and sine transforms of ``polyad.xp.fft`` (``polyad/ops/dct.py``),
with ``scipy.fft``'s functions on host copies of the same arrays as the reference (SciPy is a test
dependency).

Every type (1-4), norm (None, "backward", "ortho", "forward") and ``orthogonalize`` setting appears, with
padding and truncation (``n``/``s``), other axes, complex input, empty and non-contiguous arrays. The
inverse transforms share the ops of the forward ones (the inverse type, the mirrored norm): their rows
check that identity against SciPy's own ``idct``/``idst``. One deliberate difference: for complex input
SciPy 1.17 ignores a non-default ``orthogonalize`` (its complex branch transforms the real and imaginary
parts without passing it on), while polyad transforms both parts with the variant asked for; the reference
is SciPy applied to the two parts.
"""

from polyad.ops.special.shared import host_call
from polyad.testing.op_table import OpInfo, Sample


def _scipy(name):
    """``scipy.fft.<name>`` on NumPy copies (complex input: on its real and imaginary parts, see the
    module notes), the result back in the arrays' library."""

    def ref(xp, x, **kwargs):
        import scipy.fft

        f = getattr(scipy.fft, name)

        def on_host(a):
            if a.dtype.kind == "c":
                return f(a.real, **kwargs) + 1j * f(a.imag, **kwargs)
            return f(a, **kwargs)

        return host_call(on_host, (x,))

    return ref


def samples_1d(s):
    return [
        Sample((s.float(5),), {"type": 1}, name="type 1"),
        Sample((s.float(6),), name="type 2 default"),
        Sample((s.float(2, 5),), {"type": 3, "norm": "ortho"}, name="type 3 ortho"),
        Sample((s.float(4, 3),), {"type": 4, "norm": "forward", "axis": 0}, name="type 4 forward axis 0"),
        Sample((s.float(7),), {"n": 4, "norm": "backward"}, name="n smaller"),
        Sample((s.float(2, 4),), {"type": 3, "n": 6, "orthogonalize": True}, name="n larger orthogonalized"),
        Sample(
            (s.float(5),), {"type": 1, "norm": "ortho", "orthogonalize": False}, name="type 1 ortho plain"
        ),
        Sample(
            (s.float(5),), {"type": 2, "norm": "forward", "orthogonalize": True}, name="type 2 forward orth"
        ),
        Sample(
            (s.float(4),), {"type": 4, "norm": "ortho", "orthogonalize": False}, name="type 4 ortho plain"
        ),
        Sample((s.complex(5),), {"type": 2, "norm": "ortho"}, name="complex"),
        Sample((s.complex(4),), {"type": 3, "orthogonalize": True}, name="complex orthogonalized"),
        Sample((s.float(1),), {"type": 2}, name="length 1"),
        Sample((s.float(0, 4),), {"type": 4}, name="empty"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
    ]


def samples_nd(s):
    return [
        Sample((s.float(3, 4),), name="2-d default"),
        Sample((s.float(2, 3, 4),), {"type": 1, "axes": (0, 2), "norm": "ortho"}, name="type 1 axes ortho"),
        Sample((s.float(3, 4),), {"type": 3, "s": (5, 2), "axes": (1, 0)}, name="type 3 pad and truncate"),
        Sample((s.float(2, 3, 4),), {"type": 4, "s": (4, 3), "norm": "forward"}, name="s without axes"),
        Sample((s.float(3, 4),), {"s": (-1, 6), "axes": (0, 1)}, name="s with -1"),
        Sample((s.float(3, 4),), {"type": 1, "orthogonalize": True}, name="type 1 orthogonalized"),
        Sample((s.float(3, 4),), {"type": 2, "norm": "ortho", "orthogonalize": False}, name="ortho plain"),
        Sample((s.float(4, 3),), {"type": 3, "s": 5, "axes": 0}, name="int s and axes"),
        Sample((s.complex(3, 4),), {"type": 2, "norm": "forward"}, name="complex"),
        Sample((s.float(0, 3),), {"axes": (1,)}, name="empty"),
        Sample((s.noncontiguous(2, 3),), {"type": 4}, name="non-contiguous"),
    ]


ROWS = [
    OpInfo(f"fft.{name}", samples_1d if not name.endswith("n") else samples_nd, ref=_scipy(name))
    for name in ("dct", "idct", "dst", "idst", "dctn", "idctn", "dstn", "idstn")
]

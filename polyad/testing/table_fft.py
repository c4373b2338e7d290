"""Op table rows: the fft extension (transforms, sample frequencies, shifts).

References are the backend library's own functions. Where polyad accepts more than the standard (real
input to the complex-input transforms, which NumPy accepts and array_api_strict rejects), the reference
casts the input to complex first; where the standard fixes a default that NumPy 2 deprecates (``s`` given
without ``axes`` means the last ``len(s)`` axes), the reference passes those axes explicitly.
"""

from polyad.testing.op_table import OpInfo, Sample


def _as_complex(xp, x):
    if "complex" in str(x.dtype):
        return x
    return xp.astype(x, xp.complex64 if x.dtype == xp.float32 else xp.complex128)


def _ref(name, cast):
    def ref(xp, x, **kw):
        if cast:
            x = _as_complex(xp, x)
        if kw.get("s") is not None and kw.get("axes") is None:
            kw = {**kw, "axes": tuple(range(x.ndim - len(kw["s"]), x.ndim))}
        if kw.get("s") is not None and -1 in kw["s"]:  # the standard's "the input's length": CuPy's fftn
            # reads -1 as a length (a (2, 3) result for s=(-1, 3) of a (3, 4) input)
            kw = {**kw, "s": tuple(x.shape[a] if n == -1 else n for n, a in zip(kw["s"], kw["axes"]))}
        return getattr(xp.fft, name)(x, **kw)

    return ref


# ------------------------------------------------------------------------------ samples


def c2c_1d(s):
    return [
        Sample((s.float(6),), name="1-d real"),
        Sample((s.complex(5),), name="1-d complex"),
        Sample((s.complex(2, 3, 4),), name="batched leading dims"),
        Sample((s.complex(4, 3),), {"axis": 0}, name="axis 0"),
        Sample((s.complex(6),), {"n": 4}, name="n smaller"),
        Sample((s.float(2, 5),), {"n": 8, "norm": "ortho"}, name="n larger real ortho"),
        Sample((s.complex(3, 4),), {"n": 5, "axis": 0, "norm": "forward"}, name="n larger forward"),
        Sample((s.complex(0, 4),), name="empty"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
    ]


def c2c_nd(s):
    return [
        Sample((s.float(3, 4),), name="2-d real"),
        Sample((s.complex(2, 3, 4),), name="3-d complex"),
        Sample((s.complex(2, 3, 4),), {"axes": (0, 2), "norm": "ortho"}, name="axes ortho"),
        Sample((s.complex(3, 4),), {"s": (6, 2), "axes": (1, 0)}, name="s pad and truncate"),
        Sample((s.complex(2, 3, 4),), {"s": (2, 5), "norm": "forward"}, name="s without axes"),
        Sample((s.float(3, 4),), {"s": (-1, 3), "axes": (0, 1)}, name="s with -1"),
        Sample((s.complex(0, 3),), {"axes": (1,)}, name="empty"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
    ]


def r2c_1d(s):
    return [
        Sample((s.float(6),), name="1-d even"),
        Sample((s.float(5),), name="1-d odd"),
        Sample((s.float(2, 3, 4),), name="batched leading dims"),
        Sample((s.float(5, 2),), {"axis": 0, "norm": "ortho"}, name="axis 0 ortho"),
        Sample((s.float(7),), {"n": 4}, name="n smaller"),
        Sample((s.float(2, 4),), {"n": 7, "norm": "forward"}, name="n larger forward"),
        Sample((s.float(1),), name="length 1"),
        Sample((s.float(0, 4),), name="empty"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
    ]


def c2r_1d(s):
    return [
        Sample((s.complex(4),), name="1-d complex"),
        Sample((s.float(4),), name="1-d real"),
        Sample((s.complex(2, 3, 4),), name="batched leading dims"),
        Sample((s.complex(3, 2),), {"axis": 0, "n": 5, "norm": "ortho"}, name="axis 0 odd n ortho"),
        Sample((s.complex(5),), {"n": 4}, name="n smaller"),
        Sample((s.complex(2, 3),), {"n": 9, "norm": "forward"}, name="n larger forward"),
        Sample((s.complex(3),), {"n": 1}, name="n 1"),
        Sample((s.complex(0, 3),), name="empty"),
    ]


def r2c_nd(s):
    return [
        Sample((s.float(3, 4),), name="2-d"),
        Sample((s.float(2, 3, 5),), {"axes": (0, 2), "norm": "ortho"}, name="axes ortho"),
        Sample((s.float(3, 4),), {"s": (2, 7), "axes": (1, 0)}, name="s pad and truncate"),
        Sample((s.float(2, 3, 4),), {"s": (4, 3), "norm": "forward"}, name="s without axes"),
        Sample((s.float(0, 3),), {"axes": (1,)}, name="empty"),
        Sample((s.noncontiguous(2, 3),), name="non-contiguous"),
    ]


def c2r_nd(s):
    return [
        Sample((s.complex(3, 3),), name="2-d"),
        Sample((s.float(3, 3),), name="2-d real"),
        Sample((s.complex(2, 3, 3),), {"axes": (0, 2), "norm": "ortho"}, name="axes ortho"),
        Sample((s.complex(3, 4),), {"s": (5, 2), "axes": (1, 0)}, name="s pad and truncate"),
        Sample((s.complex(2, 3, 4),), {"s": (4, 5), "norm": "forward"}, name="s without axes odd"),
        Sample((s.complex(0, 3),), {"axes": (1,)}, name="empty"),
    ]


def freq_samples(s):
    return [
        Sample((5,), name="odd"),
        Sample((6,), {"d": 0.1}, name="even spacing"),
        Sample((1,), name="length 1"),
        Sample((4,), {"dtype": s.xp.float32}, name="float32"),
    ]


def shift_samples(s):
    return [
        Sample((s.float(6),), name="1-d even"),
        Sample((s.complex(5),), name="1-d odd complex"),
        Sample((s.float(3, 4),), name="2-d all axes"),
        Sample((s.float(3, 5),), {"axes": 0}, name="axis 0"),
        Sample((s.float(2, 3, 5),), {"axes": (2, 0)}, name="axes tuple"),
        Sample((s.float(0, 3),), name="empty"),
        Sample((s.noncontiguous(3, 3),), {"axes": (-1,)}, name="non-contiguous"),
    ]


# ------------------------------------------------------------------------------ rows

ROWS = [
    OpInfo("fft.fft", c2c_1d, ref=_ref("fft", True)),
    OpInfo("fft.ifft", c2c_1d, ref=_ref("ifft", True)),
    OpInfo("fft.fftn", c2c_nd, ref=_ref("fftn", True)),
    OpInfo("fft.ifftn", c2c_nd, ref=_ref("ifftn", True)),
    OpInfo("fft.rfft", r2c_1d),
    OpInfo("fft.irfft", c2r_1d, ref=_ref("irfft", True)),
    OpInfo("fft.rfftn", r2c_nd, ref=_ref("rfftn", False)),
    OpInfo("fft.irfftn", c2r_nd, ref=_ref("irfftn", True)),
    OpInfo("fft.hfft", c2r_1d, ref=_ref("hfft", True)),
    OpInfo("fft.ihfft", r2c_1d),
    OpInfo("fft.fftfreq", freq_samples, differentiable=False),
    OpInfo("fft.rfftfreq", freq_samples, differentiable=False),
    OpInfo("fft.fftshift", shift_samples),
    OpInfo("fft.ifftshift", shift_samples),
]

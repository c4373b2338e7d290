"""Op table rows: element-wise functions (incl. ``where`` and ``clip``)."""

from polyad.testing.op_table import OpInfo, Sample


def unary_samples(low=-1.0, high=1.0, complex_ok=False):
    def gen(s):
        out = [
            Sample((s.float(low=low, high=high),), name="0-d"),
            Sample((s.float(0, low=low, high=high),), name="empty"),
            Sample((s.float(4, low=low, high=high),), name="1-d"),
            Sample((s.float(2, 3, low=low, high=high),), name="2-d"),
            Sample((s.noncontiguous(2, 3, low=low, high=high),), name="non-contiguous"),
        ]
        if complex_ok:
            out.append(Sample((s.complex(3),), name="complex"))
        return out

    return gen


def binary_samples(low=-1.0, high=1.0, low2=None, high2=None, scalar=1.5):
    low2 = low if low2 is None else low2
    high2 = high if high2 is None else high2

    def gen(s):
        return [
            Sample((s.float(low=low, high=high), s.float(low=low2, high=high2)), name="0-d"),
            Sample((s.float(0, low=low, high=high), s.float(0, low=low2, high=high2)), name="empty"),
            Sample((s.float(2, 3, low=low, high=high), s.float(3, low=low2, high=high2)), name="broadcast"),
            Sample((s.float(2, 1, low=low, high=high), s.float(1, 3, low=low2, high=high2)), name="outer"),
            Sample((s.noncontiguous(2, 3, low=low, high=high), s.float(2, 3, low=low2, high=high2)),
                   name="non-contiguous"),
            Sample((s.float(3, low=low, high=high), scalar), name="python scalar"),
        ]  # fmt: skip

    return gen


def int_samples(s):
    return [Sample((s.int(2, 3, low=1, high=7), s.int(3, low=1, high=4)), name="int")]


def bool_unary(s):
    return [Sample((s.bool(2, 3),), name="bool")]


def bool_binary(s):
    return [Sample((s.bool(2, 3), s.bool(3)), name="bool")]


U = unary_samples
ROWS = [
    OpInfo("sin", U(complex_ok=True)),
    OpInfo("cos", U(complex_ok=True)),
    OpInfo("tan", U(complex_ok=True)),
    OpInfo("asin", U(-0.9, 0.9)),
    OpInfo("acos", U(-0.9, 0.9)),
    OpInfo("atan", U(complex_ok=False)),
    OpInfo("sinh", U(complex_ok=True)),
    OpInfo("cosh", U(complex_ok=True)),
    OpInfo("tanh", U(complex_ok=True)),
    OpInfo("asinh", U()),
    OpInfo("acosh", U(1.2, 3.0)),
    OpInfo("atanh", U(-0.9, 0.9)),
    OpInfo("exp", U(complex_ok=True)),
    OpInfo("expm1", U()),
    OpInfo("log", U(0.3, 2.0)),
    OpInfo("log1p", U(-0.5, 2.0)),
    OpInfo("log2", U(0.3, 2.0)),
    OpInfo("log10", U(0.3, 2.0)),
    OpInfo("sqrt", U(0.3, 2.0)),
    OpInfo("square", U(complex_ok=True)),
    OpInfo("reciprocal", U(0.3, 2.0)),
    OpInfo("negative", U(complex_ok=True)),
    OpInfo("positive", U(complex_ok=True)),
    OpInfo("conj", U(complex_ok=True)),
    OpInfo("real", U(complex_ok=True)),
    OpInfo("imag", lambda s: [Sample((s.complex(3),), name="complex"),
                              Sample((s.complex(2, 0),), name="empty")]),
    OpInfo("abs", U(complex_ok=True)),
    OpInfo("ceil", U(), differentiable=False),
    OpInfo("floor", U(), differentiable=False),
    OpInfo("round", U(), differentiable=False),
    OpInfo("trunc", U(), differentiable=False),
    OpInfo("sign", U(), differentiable=False),
    OpInfo("signbit", U(), differentiable=False),
    OpInfo("isfinite", U(), differentiable=False),
    OpInfo("isinf", U(), differentiable=False),
    OpInfo("isnan", U(), differentiable=False),
    OpInfo("logical_not", bool_unary, differentiable=False),
    OpInfo("bitwise_invert", lambda s: [Sample((s.int(2, 3),))], differentiable=False),
    OpInfo("add", binary_samples()),
    OpInfo("subtract", binary_samples()),
    OpInfo("multiply", binary_samples()),
    OpInfo("divide", binary_samples(low2=0.5, high2=2.0)),
    OpInfo("pow", binary_samples(0.3, 2.0, -1.5, 1.5)),
    OpInfo("maximum", binary_samples()),
    OpInfo("minimum", binary_samples()),
    OpInfo("atan2", binary_samples(0.2, 1.0)),
    OpInfo("hypot", binary_samples(0.2, 1.0)),
    OpInfo("logaddexp", binary_samples()),
    OpInfo("copysign", binary_samples(0.2, 1.0)),
    OpInfo("remainder", binary_samples(0.1, 3.0, 0.7, 1.3, scalar=0.7)),
    OpInfo("floor_divide", binary_samples(0.1, 3.0, 0.7, 1.3), differentiable=False),
    OpInfo("nextafter", binary_samples(), differentiable=False),
    *[OpInfo(n, binary_samples(), differentiable=False)
      for n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")],
    *[OpInfo(n, bool_binary, differentiable=False) for n in ("logical_and", "logical_or", "logical_xor")],
    *[OpInfo(n, int_samples, differentiable=False)
      for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift")],
    OpInfo("where", lambda s: [
        Sample((s.bool(2, 3), s.float(2, 3), s.float(3)), name="broadcast"),
        Sample((s.bool(), s.float(), s.float()), name="0-d"),
        Sample((s.bool(3), s.float(3), 0.5), name="python scalar"),
    ]),
    OpInfo("clip", lambda s: [
        Sample((s.float(2, 3, low=-2, high=2),), {"min": -0.5, "max": 0.5}, name="scalars"),
        Sample((s.float(2, 3, low=-2, high=2), s.float(3, low=-1.0, high=-0.5),
                s.float(3, low=0.5, high=1.0)),
               name="arrays"),
        Sample((s.float(4, low=-2, high=2), None, s.float(4)), name="max only"),
    ]),
]  # fmt: skip

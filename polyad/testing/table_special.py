"""Op table rows: the special functions of ``polyad.xp.special``, each sampled inside its domain, with
``scipy.special`` on host copies of the same arrays as the reference (SciPy is a test dependency)."""

from polyad.ops.special.shared import host_call, scipy_function
from polyad.testing.op_table import OpInfo, Sample, on_backend

DEVICE_KERNELS = ("cpu", "cuda")  # SciPy on CPU, cupyx on CUDA: no generic kernel


def _scipy(name):
    """The reference: ``scipy.special.<name>`` on NumPy copies, the result back in the arrays' library."""

    def ref(xp, *args, **kwargs):
        f = scipy_function(name)
        return host_call(lambda *a: f(*a, **kwargs), args)

    return ref


def unary(low, high, extra=None):
    """0-d, empty, 2-d and non-contiguous samples in ``[low, high)``, plus ``extra(s)`` (edge values)."""

    def gen(s):
        f = lambda *shape: s.float(*shape, low=low, high=high)  # noqa: E731
        out = [
            Sample((f(),), name="0-d"),
            Sample((f(0),), name="empty"),
            Sample((f(2, 3),), name="2-d"),
            Sample((s.noncontiguous(2, 3, low=low, high=high),), name="non-contiguous"),
        ]
        return out + (extra(s) if extra else [])

    return gen


def nary(*ranges, diff=None, scalar=None, extra=None):
    """Samples of a function of ``len(ranges)`` arrays, each in its ``(low, high)``: 0-d, empty, broadcast
    (the last argument of shape (3,) against (2, 3)), non-contiguous, and, with ``scalar``, the first
    argument a Python float. ``diff``: the positions to differentiate (None: every floating array)."""

    def gen(s):
        def args(*shapes):
            return tuple(s.float(*shape, low=lo, high=hi) for shape, (lo, hi) in zip(shapes, ranges))

        n = len(ranges)
        out = [
            Sample(args(*[()] * n), name="0-d", diff_argnums=diff),
            Sample(args(*[(0,)] * n), name="empty", diff_argnums=diff),
            Sample(args(*[(2, 3)] * (n - 1), (3,)), name="broadcast", diff_argnums=diff),
            Sample(
                (*args(*[(2, 3)] * (n - 1)), s.noncontiguous(2, 3, low=ranges[-1][0], high=ranges[-1][1])),
                name="non-contiguous",
                diff_argnums=diff,
            ),
        ]
        if scalar is not None:
            rest = args(*[(4,)] * (n - 1))
            d = None if diff is None else tuple(i for i in diff if i)
            out.append(Sample((scalar, *rest[1:], s.float(4, low=ranges[-1][0], high=ranges[-1][1]))[:n],
                              name="python scalar", diff_argnums=d))  # fmt: skip
        return out + (extra(s) if extra else [])

    return gen


def sample_values(*columns, diff=()):
    """One sample of explicit values (edges of a domain), not differentiated unless ``diff`` says."""

    def gen(s):
        return [Sample(tuple(s.xp.asarray(c, dtype=s.xp.float64) for c in columns), name="edges",
                       diff_argnums=diff)]  # fmt: skip

    return gen


def cupyx_edges(name, kernel=None):
    """The CuPy lane's known failure of ``name``'s edge values (tests/test_special*.py): the CUDA kernel
    (cupyx.scipy.special's, or ``kernel``) gives other values than SciPy's at some of them (seen on an
    H200, CuPy 14.2); polyad's generic kernel, checked at the same points, agrees with SciPy."""
    kernel = kernel or f"cupyx.scipy.special.{name}"
    return on_backend("cupy", f"{kernel} differs from SciPy at edge values (inf, nan, exact points)", "edges")


def row(name, samples, generic=False, **kw):
    kw.setdefault("device_types", None if generic else DEVICE_KERNELS)
    return OpInfo(f"special.{name}", samples, ref=_scipy(name), **kw)


def _polygamma(s):
    x = s.float(3, low=0.5, high=3.0)
    return [
        Sample((s.int(3, low=0, high=3), x), name="int orders"),
        Sample((2, s.float(2, 3, low=0.5, high=3.0)), name="python int order"),
        Sample((s.int(2, 1, low=0, high=3), s.noncontiguous(2, 3, low=0.5, high=3.0)), name="broadcast"),
        Sample((1, s.float(low=0.5, high=3.0)), name="0-d"),
    ]


def _multigammaln(s):
    return [
        Sample((s.float(2, 3, low=2.0, high=4.0), 3), name="d=3"),
        Sample((s.float(low=1.0, high=3.0), 1), name="0-d, d=1"),
        Sample((s.float(0, low=2.0, high=4.0), 2), name="empty"),
    ]


def _zeta(s):
    return nary((1.5, 4.0), (0.5, 2.0))(s) + [
        Sample((s.float(2, 3, low=1.5, high=4.0),), name="riemann"),
        Sample((s.float(3, low=0.2, high=0.9),), name="riemann below 1"),
    ]


def _reduction(positive_weights=True):
    """Samples of ``f(a, axis, b, keepdims, return_sign)`` (logsumexp)."""

    def gen(s):
        f = lambda *shape: s.float(*shape, low=-2.0, high=2.0)  # noqa: E731
        b_low = 0.2 if positive_weights else -1.0
        return [
            Sample((f(),), name="0-d"),
            Sample((f(2, 3),), name="all axes"),
            Sample((f(2, 3),), {"axis": 0, "keepdims": True}, name="axis 0 keepdims"),
            Sample((f(2, 3, 2),), {"axis": (0, 2)}, name="axis tuple"),
            Sample((s.noncontiguous(2, 3),), {"axis": -1}, name="non-contiguous"),
            Sample((f(0, 3),), {"axis": 1}, name="empty"),
            Sample((f(2, 3), 1, s.float(3, low=b_low, high=2.0)), name="weights"),
            Sample((f(2, 3), None, s.float(2, 1, low=-1.0, high=1.0)), {"return_sign": True},
                   name="signed weights"),
            Sample((s.xp.asarray([[0.0, -800.0, 700.0], [-1e9, -1e9, -1e9]]),), {"axis": 1},
                   name="large", diff_argnums=()),
            Sample((s.xp.asarray([[0.0, -30.0, 20.0], [-50.0, -50.0, -49.0]]),), {"axis": 1},
                   name="spread"),
        ]  # fmt: skip

    return gen


def _softmax(s):
    f = lambda *shape: s.float(*shape, low=-2.0, high=2.0)  # noqa: E731
    return [
        Sample((f(),), name="0-d"),
        Sample((f(2, 3),), name="all axes"),
        Sample((f(2, 3),), {"axis": 0}, name="axis 0"),
        Sample((f(2, 3, 2),), {"axis": (0, 2)}, name="axis tuple"),
        Sample((s.noncontiguous(2, 3),), {"axis": -1}, name="non-contiguous"),
        Sample((f(0, 3),), {"axis": 1}, name="empty"),
        Sample(
            (s.xp.asarray([[0.0, -800.0, 700.0], [3.0, 3.0, -1e9]]),),
            {"axis": 1},
            name="large",
            diff_argnums=(),
        ),
        Sample((s.xp.asarray([[0.0, -30.0, 20.0], [3.0, 3.0, -40.0]]),), {"axis": 1}, name="spread"),
    ]


# both algorithms of the shape derivatives: the series (x <= max(a, 1)) and the continued fraction, and for
# betainc both sides of the switch x = (a + 1) / (a + b + 2)
_GAMMA_REGIONS = sample_values([0.3, 4.0, 12.0, 0.7], [0.9, 1.5, 9.0, 20.0], diff=(0, 1))
_BETA_REGIONS = sample_values(
    [0.4, 5.0, 2.0, 30.0], [1.5, 0.7, 2.0, 20.0], [0.05, 0.95, 0.5, 0.58], diff=(0, 1, 2)
)
_LEFT_TAIL = sample_values([-40.0, -20.0, -8.0], diff=(0,))
_AT_ZERO = sample_values([0.0, 1e-300, -0.3, 0.49, 0.5, 0.51], diff=(0,))
_LARGE = sample_values([-50.0, -1e-3, 40.0], diff=(0,))

ROWS = [
    # errors: erf and relatives, the normal distribution, exponential integrals
    row("erf", unary(-2.0, 2.0)),
    row("erfc", unary(-2.0, 2.0)),
    row("erfinv", unary(-0.9, 0.9)),
    row("erfcx", unary(-1.0, 3.0)),
    row("ndtr", unary(-3.0, 3.0)),
    row("ndtri", unary(0.05, 0.95)),
    row("log_ndtr", unary(-5.0, 3.0, extra=_LEFT_TAIL)),
    row("expi", unary(0.2, 2.0)),
    row("exp1", unary(0.2, 2.0)),
    # gammas
    row("gammaln", unary(0.5, 3.0)),
    row("gamma", unary(0.5, 3.0)),
    row("loggamma", unary(0.5, 3.0)),
    row("rgamma", unary(0.5, 3.0)),
    row("digamma", unary(0.5, 3.0)),
    row("polygamma", _polygamma),
    row("gammainc", nary((0.5, 3.0), (0.1, 3.0), scalar=2.0, extra=_GAMMA_REGIONS)),
    row("gammaincc", nary((0.5, 3.0), (0.1, 3.0), scalar=2.0, extra=_GAMMA_REGIONS)),
    row("gammaincinv", nary((0.5, 3.0), (0.1, 0.9), scalar=2.0)),
    row("gammainccinv", nary((0.5, 3.0), (0.1, 0.9), scalar=2.0)),
    row("betaln", nary((0.5, 3.0), (0.5, 3.0), scalar=1.5)),
    row("betainc", nary((0.5, 3.0), (0.5, 3.0), (0.1, 0.9), scalar=2.0, extra=_BETA_REGIONS)),
    row("zeta", _zeta),
    row("multigammaln", _multigammaln),
    row("binom", nary((3.0, 6.0), (0.5, 2.5), scalar=5.0)),
    row("poch", nary((0.5, 2.0), (0.5, 2.0), scalar=1.5)),
    # Bessel functions
    *[row(n, unary(-2.0, 2.0, extra=_AT_ZERO)) for n in ("i0", "i1", "j0", "j1")],
    *[row(n, unary(-2.0, 2.0)) for n in ("i0e", "i1e")],
    *[row(n, unary(0.3, 3.0)) for n in ("y0", "y1", "k0", "k0e", "k1", "k1e")],
    # generic kernels
    row("expit", unary(-3.0, 3.0, extra=_LARGE), generic=True),
    row("logit", unary(0.05, 0.95), generic=True),
    row("log_expit", unary(-3.0, 3.0, extra=_LARGE), generic=True),
    row("softplus", unary(-3.0, 3.0, extra=_LARGE), generic=True),
    row(
        "xlogy",
        nary((-1.0, 1.0), (0.3, 2.0), scalar=2.0, extra=sample_values([0.0, 0.0], [0.5, 2.0])),
        generic=True,
    ),
    row(
        "xlog1py",
        nary((-1.0, 1.0), (-0.5, 2.0), scalar=2.0, extra=sample_values([0.0, 0.0], [-0.5, 2.0])),
        generic=True,
        backend_failures=cupyx_edges("xlog1py"),
    ),
    row("entr", unary(0.1, 2.0), generic=True),
    row("rel_entr", nary((0.2, 2.0), (0.2, 2.0), scalar=0.5), generic=True),
    row("kl_div", nary((0.2, 2.0), (0.2, 2.0), scalar=0.5), generic=True),
    row("huber", nary((0.5, 1.5), (-2.0, 2.0), scalar=1.0), generic=True),
    row(
        "pseudo_huber",
        nary(
            (0.5, 1.5), (-2.0, 2.0), scalar=1.0, extra=sample_values([1.0, 0.5], [1e-9, -1e-5], diff=(0, 1))
        ),
        generic=True,
        backend_failures=cupyx_edges("pseudo_huber"),
    ),  # fmt: skip
    row(
        "sinc",
        unary(-2.0, 2.0, extra=_AT_ZERO),
        generic=True,
        backend_failures=cupyx_edges("sinc", "cupy.sinc"),
    ),
    row("exp2", unary(-1.0, 1.0), generic=True),
    row("exp10", unary(-1.0, 1.0), generic=True),
    row("cbrt", unary(0.2, 2.0, extra=sample_values([-8.0, -0.5, 27.0], diff=(0,))), generic=True),
    # reductions
    row("logsumexp", _reduction(), generic=True),
    row("softmax", _softmax, generic=True),
    row("log_softmax", _softmax, generic=True),
]

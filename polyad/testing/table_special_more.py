"""Op table rows: the special functions added for the rest of the names SciPy looks up as
``xp.special.<name>`` (degrees, Box-Cox, elliptic integrals, ``expn``, ``spence``, ``yn``, ``lpmv``,
``hyp1f1``, ``gammasgn``, ``zetac``, the distribution functions and their inverses), each sampled inside its
domain, with ``scipy.special`` as the reference; ``sample_values`` samples add the edges of each domain
and the points where a derivative switches to a series."""

from polyad.testing.op_table import Sample, on_backend
from polyad.testing.table_special import cupyx_edges, nary, row, sample_values, unary

# seen on an H100 (CuPy 14.2): cupyx's kernels for these give NaN or other values than SciPy's at some of the
# rows' orders and arguments, so values and the derivatives built on them differ
_CUPYX_DIFFERS = on_backend("cupy", "cupyx.scipy.special's kernel differs from SciPy's (NaN at some orders)")

_DEGREES = [0.0, 90.0, 180.0, 270.0, -90.0, 360.0, 45.0, 1e3]  # exact at multiples of 90


def orders(*ranges, floats, diff=None):
    """Samples of ``f(*integers, *floats)``: integer arguments in ``ranges`` (``(low, high)``, high
    excluded), floating ones in ``floats`` (``(low, high)`` each); 2-d, broadcast against a 0-d integer,
    empty, a Python int and 0-d. ``diff``: positions differentiated (None: every floating array)."""

    def gen(s):
        def ints(*shape):
            return tuple(s.int(*shape, low=lo, high=hi) for lo, hi in ranges)

        def reals(*shape):
            return tuple(s.float(*shape, low=lo, high=hi) for lo, hi in floats)

        first = ranges[0][0] + (ranges[0][1] - ranges[0][0]) // 2
        return [
            Sample((*ints(2, 3), *reals(2, 3)), name="2-d", diff_argnums=diff),
            Sample((*ints(), *reals(2, 3)), name="broadcast", diff_argnums=diff),
            Sample((*ints(0), *reals(0)), name="empty", diff_argnums=diff),
            Sample((first, *ints(4)[1:], *reals(4)), name="python int", diff_argnums=diff),
            Sample((*ints(), *reals()), name="0-d", diff_argnums=diff),
        ]  # fmt: skip

    return gen


# lmbda exactly 0 and near it: the series branch of the derivatives
_LMBDA_AT_ZERO = sample_values([0.5, 2.0, 1.2, 0.7], [0.0, 1e-9, -1e-7, 0.3], diff=(0, 1))


# m = 0 and near it (the series branch of the derivatives), far below 0
_M_AT_ZERO = sample_values([0.0, 0.1, -0.2, 0.26, 0.9, -1e6], diff=(0,))


def _gen(*generators):
    return lambda s: [sample for g in generators for sample in g(s)]


ROWS = [
    # degrees and cos(x) - 1
    row("sindg", unary(-170.0, 170.0, extra=sample_values(_DEGREES)), generic=True,
        backend_failures=cupyx_edges("sindg")),
    row("cosdg", unary(-170.0, 170.0, extra=sample_values(_DEGREES)), generic=True,
        backend_failures=cupyx_edges("cosdg")),
    row("tandg", unary(-80.0, 80.0, extra=sample_values([0.0, 45.0, 180.0, -135.0, 360.0])), generic=True),
    row("cotdg", unary(10.0, 170.0, extra=sample_values([45.0, 90.0, -45.0, 270.0])), generic=True),
    row("radian", nary((-180.0, 180.0), (-60.0, 60.0), (-60.0, 60.0), scalar=30.0), generic=True),
    row("cosm1", unary(-3.0, 3.0, extra=sample_values([1e-10, -1e-5, 0.0, 6.0], diff=(0,))), generic=True),
    # exprel and Box-Cox: lmbda == 0 exactly and near it (the series branch of the derivative)
    row("exprel", unary(-3.0, 3.0, extra=sample_values([0.0, 1e-12, -1e-6, 0.3, -0.6, 20.0], diff=(0,))),
        generic=True, backend_failures=cupyx_edges("exprel")),
    row("boxcox", nary((0.3, 3.0), (-1.0, 1.0), scalar=2.0, extra=_LMBDA_AT_ZERO), generic=True),
    row("boxcox1p", nary((-0.5, 2.0), (-1.0, 1.0), scalar=1.0, extra=_LMBDA_AT_ZERO), generic=True),
    row("inv_boxcox", nary((-1.0, 1.5), (-0.5, 0.5), scalar=0.5, extra=_LMBDA_AT_ZERO), generic=True),
    row("inv_boxcox1p", nary((-1.0, 1.5), (-0.5, 0.5), scalar=0.5, extra=_LMBDA_AT_ZERO), generic=True),
    # elliptic integrals
    row("ellipk", unary(-2.0, 0.9, extra=_M_AT_ZERO), generic=True),
    row(
        "ellipkm1", unary(0.1, 3.0, extra=sample_values([1.0, 0.9, 1.1, 0.74, 1.26], diff=(0,))), generic=True
    ),
    row("ellipe", unary(-2.0, 0.9, extra=_M_AT_ZERO), generic=True),
    # exponential integral of order n (orders 0 and 1: the derivative's incomplete gamma branch), Spence
    row("expn", orders((0, 4), floats=[(0.3, 3.0)])),
    row("spence",
        _gen(unary(0.1, 3.0, extra=sample_values([1.0, 0.9, 1.1, 0.8, 1.3, 0.5, 2.0], diff=(0,))),
             sample_values([0.06, 1e300])),
        generic=True),
    # orders and degrees
    row("yn", orders((-2, 4), floats=[(0.5, 3.0)]), backend_failures=_CUPYX_DIFFERS),
    row("lpmv", orders((0, 3), floats=[(0.5, 3.0), (-0.8, 0.8)], diff=(2,)), backend_failures=_CUPYX_DIFFERS),
    row("hyp1f1", nary((0.2, 2.0), (0.5, 3.0), (-2.0, 2.0), diff=(2,)), device_types=("cpu",)),  # no cupyx
    # gamma's sign, zeta - 1
    row(
        "gammasgn",
        unary(0.3, 3.0, extra=sample_values([-0.5, -1.5, -2.5, 0.7, 0.0, -0.0])),
        generic=True,
        backend_failures=on_backend(
            "cupy", "cupyx's gammasgn differs from SciPy's at 0 and -0", "value", "edges"
        ),
    ),
    row("zetac", unary(1.5, 6.0, extra=sample_values([0.5, 0.9, 30.0], diff=(0,)))),
    # continuous distributions: derivatives in the degrees of freedom and shapes too
    row("chdtr", nary((1.0, 6.0), (0.3, 6.0), scalar=3.0)),
    row("chdtrc", nary((1.0, 6.0), (0.3, 6.0), scalar=3.0)),
    row("chdtri", nary((1.0, 6.0), (0.1, 0.9), scalar=3.0)),
    row("gdtr", nary((0.5, 2.0), (0.5, 4.0), (0.2, 4.0), scalar=1.5)),
    row("gdtrc", nary((0.5, 2.0), (0.5, 4.0), (0.2, 4.0), scalar=1.5)),
    row("fdtr", nary((1.0, 8.0), (2.0, 10.0), (0.2, 3.0), scalar=3.0)),
    row("fdtrc", nary((1.0, 8.0), (2.0, 10.0), (0.2, 3.0), scalar=3.0)),
    row("fdtri", nary((1.0, 8.0), (2.0, 10.0), (0.1, 0.9), scalar=3.0)),
    row("stdtr", nary((1.5, 10.0), (-3.0, 3.0), scalar=4.0)),
    row("stdtrit", nary((1.5, 10.0), (0.1, 0.9), scalar=4.0)),
    row("betaincc", nary((0.5, 3.0), (0.5, 3.0), (0.1, 0.9), scalar=2.0)),
    row("betaincinv", nary((0.5, 3.0), (0.5, 3.0), (0.1, 0.9), scalar=2.0)),
    # discrete distributions: integer counts, derivatives in the probability or mean
    row("bdtr", orders((0, 3), (4, 7), floats=[(0.1, 0.9)])),
    row("bdtrc", orders((0, 3), (4, 7), floats=[(0.1, 0.9)])),
    row("bdtri", orders((0, 3), (4, 7), floats=[(0.1, 0.9)])),
    row("nbdtr", orders((0, 3), (1, 4), floats=[(0.1, 0.9)])),
    row("nbdtrc", orders((0, 3), (1, 4), floats=[(0.1, 0.9)])),
    row("nbdtri", orders((0, 3), (1, 4), floats=[(0.1, 0.9)])),
    row("pdtr", orders((0, 4), floats=[(0.2, 4.0)])),
    row("pdtrc", orders((0, 4), floats=[(0.2, 4.0)])),
    row("pdtri", orders((0, 4), floats=[(0.1, 0.9)])),
]  # fmt: skip

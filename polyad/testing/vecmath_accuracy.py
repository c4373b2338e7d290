"""How accurate the fused CPU kernels' math functions are (``math="fast"``:
``polyad/backends/numpy/compiler/vecmath.py``): errors in ulps against mpmath, per function, dtype and range,
next to NumPy's own (or SciPy's, for erf).

``measure(op, dtype, n)`` samples each range of ``CASES`` and returns one ``Row`` per range; the tests
(``tests/test_vecmath.py``) assert the bounds of ``BOUNDS`` on it, and ``scripts/vecmath_accuracy.py``
writes the documentation's table from it with larger samples. ``special_values(op, dtype)`` compares NaN,
infinities and signed zeros with NumPy's.

The error of a result ``y`` for an exact value ``v`` is ``|y - v| / ulp(v)``, ``ulp(v)`` the spacing of
the dtype's numbers at ``|v|`` (the smallest subnormal below the normal range); ``v`` comes from mpmath
at 40 digits, on the exact value of each sampled input. Needs Numba and mpmath.

Example:
    >>> from polyad.testing.vecmath_accuracy import measure
    >>> [row.label for row in measure("exp", "float64", 10)]  # doctest: +SKIP
    ['[-745.1, 709.8]', '[-1, 1]', 'subnormal results [-745.1, -708.4]']
"""

import collections
import math

from polyad.backends.host import np
from polyad.backends.numpy.compiler import fusion

# ops and their bound in ulps (the targets: 1 for exp and log, 2 for the rest)
BOUNDS = {
    "exp": 1.0, "log": 1.0, "expm1": 2.0, "log1p": 2.0, "sin": 2.0, "cos": 2.0, "tan": 2.0, "tanh": 2.0,
    "sinh": 2.0, "cosh": 2.0, "atan": 2.0, "asin": 2.0, "acos": 2.0, "special.erf": 2.0, "pow": 2.0,
    "sqrt": 0.5, "logaddexp": 2.0, "asinh": 2.0, "acosh": 2.0, "atanh": 2.0,
}  # fmt: skip
Row = collections.namedtuple("Row", "op dtype label count fast numpy worst")
Case = collections.namedtuple("Case", "label sample where absolute", defaults=(None, None))


def _mp():
    import mpmath

    return mpmath


def _references():
    mp = _mp()
    return {
        "sin": mp.sin, "cos": mp.cos, "tan": mp.tan, "exp": mp.exp, "expm1": mp.expm1, "log": mp.log,
        "log1p": mp.log1p, "tanh": mp.tanh, "sinh": mp.sinh, "cosh": mp.cosh, "atan": mp.atan,
        "asin": mp.asin, "acos": mp.acos, "sqrt": mp.sqrt, "pow": mp.power, "special.erf": mp.erf,
        "logaddexp": lambda a, b: mp.log(mp.exp(a) + mp.exp(b)),
        "asinh": mp.asinh, "acosh": mp.acosh, "atanh": mp.atanh,
    }  # fmt: skip


def numpy_function(op):
    """NumPy's function for ``op`` (SciPy's ``erf``: NumPy has none; None without SciPy)."""
    names = {"atan": "arctan", "asin": "arcsin", "acos": "arccos", "pow": "power", "asinh": "arcsinh",
             "acosh": "arccosh", "atanh": "arctanh"}  # fmt: skip
    if op == "special.erf":
        try:
            import scipy.special
        except ImportError:
            return None
        return scipy.special.erf
    return getattr(np, names.get(op, op))


# ------------------------------------------------------------------------------------------ sampling


def _uniform(lo, hi):
    return lambda rng, n, dt: (rng.uniform(lo, hi, n).astype(dt),)


def _log_uniform(lo, hi, signed=False):
    def sample(rng, n, dt):
        x = np.exp(rng.uniform(math.log(lo), math.log(hi), n)).astype(dt)
        return (x * rng.choice(np.array([-1, 1], dt), n) if signed else x,)

    return sample


def _near_one(rng, n, dt):
    """``+-(1 - 2**-u)``: arguments of asin and acos close to the ends of their domain."""
    bits = np.finfo(dt).nmant + 1
    x = (1 - np.exp2(-rng.uniform(1, bits, n))).astype(dt)
    return (x * rng.choice(np.array([-1, 1], dt), n),)


def _near_pio2_multiples(top):
    def sample(rng, n, dt):
        k = rng.integers(1, top, n).astype(np.float64)
        return ((k * (np.pi / 2)).astype(dt) * rng.choice(np.array([-1, 1], dt), n),)

    return sample


def _pow_sample(x_lo, x_hi, y_lo, y_hi, negative=False, integer=False):
    def sample(rng, n, dt):
        x = np.exp(rng.uniform(math.log(x_lo), math.log(x_hi), n)).astype(dt)
        y = rng.uniform(y_lo, y_hi, n)
        y = (np.round(y) if integer else y).astype(dt)
        return (-x if negative else x), y

    return sample


def _pow_extremes(rng, n, dt):
    """``x ** y`` with results near the overflow and underflow thresholds (subnormals included)."""
    f = np.finfo(dt)
    x = np.exp(rng.uniform(math.log(1.5), math.log(1e4), n))
    top, bottom = math.log(float(f.max)), math.log(float(f.smallest_subnormal))
    target = np.where(rng.random(n) < 0.5, rng.uniform(top - 5, top, n), rng.uniform(bottom, bottom + 40, n))
    return x.astype(dt), (target / np.log(x)).astype(dt)


def _pair_uniform(lo, hi):
    return lambda rng, n, dt: (rng.uniform(lo, hi, n).astype(dt), rng.uniform(lo, hi, n).astype(dt))


def cases(op, dtype):
    """The sampled ranges of ``op`` in ``dtype``: a list of ``Case(label, sample, where, absolute)``."""
    f = np.finfo(dtype)
    wide = dtype == "float64"
    tiny, big = float(f.smallest_subnormal), float(f.max)
    ln_max, ln_min = math.log(big), math.log(tiny)
    ln_normal = math.log(float(f.smallest_normal))
    small = 1e-300 if wide else 1e-38
    trig = [
        Case("[-pi/4, pi/4]", _uniform(-math.pi / 4, math.pi / 4)),
        Case("[-1e4, 1e4]", _uniform(-1e4, 1e4)),
        Case(f"|x| in [{small:g}, 2**30], log-uniform", _log_uniform(small, 2.0**30, signed=True)),
        Case("near multiples of pi/2 up to 2**28", _near_pio2_multiples(2**28 if wide else 2**20)),
    ]
    sinh_top = ln_max + math.log(2) - 1e-6
    table = {
        "sin": trig,
        "cos": trig,
        "tan": trig,
        "exp": [
            Case(f"[{ln_min:.1f}, {ln_max:.1f}]", _uniform(ln_min, ln_max)),
            Case("[-1, 1]", _uniform(-1, 1)),
            Case(f"subnormal results [{ln_min:.1f}, {ln_normal:.1f}]", _uniform(ln_min, ln_normal)),
        ],
        "expm1": [
            Case(f"[-40, {ln_max:.1f}]", _uniform(-40 if wide else -20, ln_max)),
            Case("[-1, 1]", _uniform(-1, 1)),
            Case(f"|x| in [{small:g}, 1e-5], log-uniform", _log_uniform(small, 1e-5, signed=True)),
        ],
        "log": [
            Case("all positive numbers, log-uniform", _log_uniform(tiny, big)),
            Case("[0.5, 2]", _uniform(0.5, 2)),
        ],
        "log1p": [
            Case("(-1, 1]", _uniform(-1 + 2 * float(f.eps), 1)),
            Case(f"[{small:g}, {big:.1e}], log-uniform", _log_uniform(small, big / 2)),
            Case("-1 + 2**-u, close to -1", lambda rng, n, dt: (abs(_near_one(rng, n, dt)[0]) - 1,)),
        ],
        "tanh": [
            Case("[-20, 20]", _uniform(-20, 20)),
            Case("[-1, 1]", _uniform(-1, 1)),
            Case(f"|x| in [{small:g}, 1e-5], log-uniform", _log_uniform(small, 1e-5, signed=True)),
        ],
        "sinh": [
            Case(f"[-{sinh_top:.1f}, {sinh_top:.1f}]", _uniform(-sinh_top, sinh_top)),
            Case("[-1, 1]", _uniform(-1, 1)),
            Case(f"|x| in [{small:g}, 1e-5], log-uniform", _log_uniform(small, 1e-5, signed=True)),
        ],
        "cosh": [
            Case(f"[-{sinh_top:.1f}, {sinh_top:.1f}]", _uniform(-sinh_top, sinh_top)),
            Case("[-1, 1]", _uniform(-1, 1)),
        ],
        "atan": [
            Case(f"|x| in [{small:g}, {big:.1e}], log-uniform", _log_uniform(small, big, signed=True)),
            Case("[-3, 3]", _uniform(-3, 3)),
        ],
        "asin": [
            Case("[-1, 1]", _uniform(-1, 1)),
            Case("+-(1 - 2**-u), close to +-1", _near_one),
            Case(f"|x| in [{small:g}, 1e-5], log-uniform", _log_uniform(small, 1e-5, signed=True)),
        ],
        "acos": [Case("[-1, 1]", _uniform(-1, 1)), Case("+-(1 - 2**-u), close to +-1", _near_one)],
        "special.erf": [
            Case("[-6, 6]", _uniform(-6, 6)),
            Case("[-1.5, 1.5]", _uniform(-1.5, 1.5)),
            Case(f"|x| in [{small:g}, 1e-5], log-uniform", _log_uniform(small, 1e-5, signed=True)),
        ],
        "sqrt": [Case("all positive numbers, log-uniform", _log_uniform(tiny, big))],
        "asinh": [
            Case(f"|x| in [{small:g}, {big:.1e}], log-uniform", _log_uniform(small, big, signed=True)),
            Case("[-3, 3]", _uniform(-3, 3)),
        ],
        "acosh": [
            Case(
                f"[1, {big:.1e}], log-uniform",
                lambda rng, n, dt: (1 + _log_uniform(small, big / 2)(rng, n, dt)[0],),
            ),
            Case("[1, 3]", _uniform(1, 3)),
            Case("1 + 2**-u, close to 1", lambda rng, n, dt: (2 - abs(_near_one(rng, n, dt)[0]),)),
        ],
        "atanh": [
            Case("(-1, 1)", _uniform(-1 + float(f.epsneg), 1 - float(f.epsneg))),
            Case("+-(1 - 2**-u), close to +-1", _near_one),
            Case(f"|x| in [{small:g}, 1e-5], log-uniform", _log_uniform(small, 1e-5, signed=True)),
        ],
        "pow": [
            Case("x in [1e-3, 1e3], y in [-10, 10]", _pow_sample(1e-3, 1e3, -10, 10)),
            Case(
                "x in [0.5, 2], y in [-1000, 1000]",
                _pow_sample(0.5, 2, -1000, 1000) if wide else _pow_sample(0.5, 2, -120, 120),
            ),
            Case("x in [-1e3, -1e-3], integer y in [-20, 20]", _pow_sample(1e-3, 1e3, -20, 20, True, True)),
            Case("results near overflow and underflow", _pow_extremes),
        ],  # fmt: skip
        "logaddexp": [
            Case("a, b in [-100, 100], |result| >= 1/2", _pair_uniform(-100, 100), _far_from_zero),
            Case("a, b in [-1, 1]", _pair_uniform(-1, 1), _far_from_zero),
            Case("a, b in [-1, 0], |result| < 1/2: in ulps of 1/2", _pair_uniform(-1, 0), _near_zero, 0.5),
        ],
    }
    return table[op]


def _far_from_zero(ref):
    return abs(ref) >= 0.5


def _near_zero(ref):
    return abs(ref) < 0.5


# ------------------------------------------------------------------------------------------ measuring


def ulps(got, exact, dtype, absolute=None):
    """``|got - exact| / ulp(exact)`` for a float ``got`` of ``dtype`` and an mpmath ``exact`` (0 where both
    are the same infinity, infinite where only one overflows); with ``absolute``, in ulps of that number."""
    mp = _mp()
    f = np.finfo(dtype)
    if mp.isnan(exact) or math.isnan(got):
        return 0.0 if mp.isnan(exact) and math.isnan(got) else math.inf
    if abs(exact) > float(f.max) * (1 + float(f.eps) / 2):  # beyond the largest finite number: overflow
        return 0.0 if math.isinf(got) and (got > 0) == (exact > 0) else math.inf
    if math.isinf(got):
        return math.inf
    scale = absolute if absolute is not None else exact
    step = float(f.smallest_subnormal)
    if scale != 0:
        step = max(step, 2.0 ** (int(mp.floor(mp.log(abs(mp.mpf(scale)), 2))) - f.nmant))
    return float(abs(mp.mpf(got) - exact) / step)


def measure(op, dtype, n, seed=0):
    """One ``Row`` per range of ``op`` in ``dtype``: ``n`` sampled arguments, the largest error of the
    fused kernel's function (``fast``) and of NumPy's (``numpy``; None without it), and the arguments of
    the fast function's largest error (``worst``)."""
    mp = _mp()
    fast = fusion.op_loop(op, dtype)
    reference = _references()[op]
    library = numpy_function(op)
    rows = []
    rng = np.random.default_rng(seed)
    with mp.workdps(40):
        for case in cases(op, dtype):
            args = case.sample(rng, n, np.dtype(dtype))
            got = fast(*args)
            with np.errstate(all="ignore"):
                theirs = library(*args).astype(dtype) if library is not None else None
            worst_fast, worst_numpy, worst_args, count = 0.0, 0.0, None, 0
            for i in range(n):
                point = [float(a[i]) for a in args]
                exact = reference(*[mp.mpf(p) for p in point])
                if case.where is not None and not case.where(exact):
                    continue
                count += 1
                e = ulps(float(got[i]), exact, dtype, case.absolute)
                if e > worst_fast or worst_args is None:
                    worst_fast, worst_args = max(e, worst_fast), tuple(point)
                if theirs is not None:
                    worst_numpy = max(worst_numpy, ulps(float(theirs[i]), exact, dtype, case.absolute))
            numpy_worst = worst_numpy if theirs is not None else None
            rows.append(Row(op, dtype, case.label, count, worst_fast, numpy_worst, worst_args))
    return rows


def special_arguments(op, dtype):
    """The edge cases of ``op``: tuples of argument arrays (every pair, for a function of two)."""
    f = np.finfo(dtype)
    sub = float(f.smallest_subnormal)
    values = [math.nan, math.inf, -math.inf, 0.0, -0.0, sub, -sub,
              float(f.smallest_normal), -float(f.smallest_normal), 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
              float(f.max), -float(f.max), 1e-20, -1e-20, 0.7, 1.5, 30.0, -30.0, 100.0, -100.0, 800.0, -800.0,
              709.8, -745.2, 88.8, -103.9, 2.0**31, -(2.0**31), 1e300, -1e300, 1 - float(f.epsneg),
              -1 + float(f.epsneg), 6.0, -6.0]  # fmt: skip
    with np.errstate(over="ignore"):
        base = np.array(values, dtype=np.float64).astype(dtype)
    if op in ("pow", "logaddexp"):
        x, y = np.meshgrid(base, base)
        return x.reshape(-1), y.reshape(-1)
    return (base,)


def special_values(op, dtype):
    """The edge cases where the fast function and NumPy's disagree on the class of the result (NaN,
    +-inf, +-0, finite non-zero), or, both finite and non-zero, differ by more than a relative 1e-6
    (around a subnormal underflow, by more than 2 ulps): a list of ``(arguments, fast, numpy)``. For
    float32 NumPy's float64 function rounded to float32 is the reference, as the fast function computes
    that way (NumPy's own float32 functions round a tiny result's sign or an underflow differently)."""
    args = special_arguments(op, dtype)
    got = fusion.op_loop(op, dtype)(*args)
    library = numpy_function(op)
    if library is None:
        return []
    with np.errstate(all="ignore"):
        expected = library(*[a.astype(np.float64) for a in args]).astype(dtype)
    tiny = float(np.finfo(dtype).smallest_normal)
    bad = []
    for i in range(expected.size):
        g, e = float(got[i]), float(expected[i])
        same = (
            (math.isnan(g) and math.isnan(e))
            or (g == e and math.copysign(1, g) == math.copysign(1, e))
            or (g != 0 and e != 0 and math.isfinite(g) and math.isfinite(e) and
                (abs(g - e) <= 1e-6 * abs(e) or abs(g - e) <= 2 * float(np.finfo(dtype).smallest_subnormal)
                 and abs(e) < tiny))
        )  # fmt: skip
        if not same:
            bad.append((tuple(float(a[i]) for a in args), g, e))
    return bad


__all__ = [
    "BOUNDS",
    "Row",
    "cases",
    "measure",
    "numpy_function",
    "special_arguments",
    "special_values",
    "ulps",
]

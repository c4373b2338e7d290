"""Fit the polynomials of the vectorised math library (backends/numpy/compiler/vecmath*.py) and write them,
with the constants the reductions need, to polyad/backends/numpy/compiler/vecmath_coefficients.py.

Each polynomial is a minimax fit (Remez exchange, in mpmath at 50 digits, on a dense Chebyshev-spaced grid)
of the part of a function that a short closed form leaves over, e.g. ``sin(r) = r + r**3 * S(r**2)``: the
error minimised is the relative error of the whole function (the absolute error of ``erf`` for the erfc
tail, which only needs to be accurate relative to ``erf``, close to 1 there). The degrees were chosen so
that the fitted error is below 2**-57 (2**-56 for the erfc tail), a small part of a double's rounding,
and below 2**-70 for pow's double-double log.

    .venv/bin/python scripts/vecmath_fit.py  # rewrites backends/numpy/compiler/vecmath_coefficients.py
    .venv/bin/python scripts/vecmath_fit.py --check    # prints each fit's error only

Numba caches each compiled function against its own source file only, and the coefficients are baked into
the machine code: so the script also writes the coefficients' digest into every file that reads them
(the ``# coefficients:`` line, ``stamp_users``), which changes those files, and their caches, whenever the
coefficients change (tests/test_vecmath.py checks that the lines agree).
"""

import argparse
import hashlib
import pathlib
import re
import sys

import mpmath as mp

mp.mp.dps = 50
OUT = (
    pathlib.Path(__file__).resolve().parent.parent
    / "polyad"
    / "backends"
    / "numpy"
    / "compiler"
    / "vecmath_coefficients.py"
)
TINY = mp.mpf("1e-30")  # the fits' lower end instead of 0, where the leftover part is 0/0


def remez(target, weight, z_of, powers, a, b, grid=1500, iterations=14):
    """Coefficients ``c`` of ``P(z) = sum c_k z**p_k`` (``p_k`` in ``powers``) minimising
    ``max |weight(t) * (target(t) - P(z_of(t)))|`` over ``t`` in ``[a, b]``, and that maximum.

    Remez's exchange: solve for the coefficients and a levelled error at ``len(powers) + 1`` reference
    points, move the references to the extrema of the error between its sign changes, repeat."""
    ts = [a + (b - a) * (1 - mp.cos(mp.pi * (i + mp.mpf(1) / 2) / grid)) / 2 for i in range(grid)]
    tv, wv, zv = [target(t) for t in ts], [weight(t) for t in ts], [z_of(t) for t in ts]
    n = len(powers)
    refs = [int(round((grid - 1) * (1 - mp.cos(mp.pi * i / n)) / 2)) for i in range(n + 1)]
    best = None
    for _ in range(iterations):
        m, rhs = mp.matrix(n + 1, n + 1), mp.matrix(n + 1, 1)
        for row, i in enumerate(refs):
            for col, p in enumerate(powers):
                m[row, col] = zv[i] ** p
            m[row, n] = (-1) ** row / wv[i]
            rhs[row] = tv[i]
        solution = mp.lu_solve(m, rhs)
        coefs = [solution[k] for k in range(n)]
        err = [wv[i] * (tv[i] - sum(c * zv[i] ** p for c, p in zip(coefs, powers))) for i in range(grid)]
        worst = max(abs(e) for e in err)
        if best is None or worst < best[1]:
            best = (coefs, worst)
        extrema, start = [], 0
        for i in range(1, grid + 1):
            if i == grid or (err[i] > 0) != (err[start] > 0):
                extrema.append(max(range(start, i), key=lambda k: abs(err[k])))
                start = i
        while len(extrema) > n + 1:
            extrema.pop(0 if abs(err[extrema[0]]) < abs(err[extrema[-1]]) else -1)
        if len(extrema) < n + 1:
            break
        refs = extrema
    return best


def rounded_error(target, weight, z_of, powers, coefs, a, b, points=3000):
    """The fit's maximum weighted error once its coefficients are rounded to doubles (evaluated exactly)."""
    doubles = [mp.mpf(float(c)) for c in coefs]
    worst = mp.mpf(0)
    for i in range(points):
        t = a + (b - a) * mp.mpf(i) / (points - 1)
        p = sum(c * z_of(t) ** k for c, k in zip(doubles, powers))
        worst = max(worst, abs(weight(t) * (target(t) - p)))
    return worst


def relative(f, head, scale):
    """``(target, weight)`` for ``f(t) = head(t) + scale(t) * P``: the relative error of ``f``."""
    return (lambda t: (f(t) - head(t)) / scale(t)), (lambda t: scale(t) / f(t))


def _erfc_scaled(u):
    x = 1 / u
    return x * mp.erfc(x) * mp.exp(x * x)


ERF_SPLIT = mp.mpf("1.5")  # erf: the series below, 1 - erfc above
ERF_ONE = mp.mpf(6)  # erf(x) rounds to 1 in double from 5.93
FITS = {
    # name: (target, weight, z_of, powers, a, b, comment)
    "EXPM1": (
        *relative(mp.expm1, lambda r: r, lambda r: r * r),
        lambda r: r,
        range(11),
        -mp.mpf("0.3466"),
        mp.mpf("0.3466"),
        "expm1(r) = r + r**2 * P(r), |r| <= log(2)/2",
    ),
    "LOG": (
        *relative(lambda s: 2 * mp.atanh(s), lambda s: 2 * s, lambda s: s),
        lambda s: s * s,
        range(1, 8),
        TINY,
        mp.mpf("0.1716"),
        "log1p(f) = 2 atanh(s) = 2 s + s * R(s**2), s = f / (2 + f), |s| <= 0.1716",
    ),
    "LOG5": (
        *relative(lambda s: 2 * mp.atanh(s), lambda s: 2 * s + 2 * s**3 / 3, lambda s: s**5),
        lambda s: s * s,
        range(8),
        TINY,
        mp.mpf("0.1716"),
        "2 atanh(s) = 2 s + 2 s**3 / 3 + s**5 * R5(s**2), the double-double log of pow",
    ),
    "SIN": (
        *relative(mp.sin, lambda r: r, lambda r: r**3),
        lambda r: r * r,
        range(6),
        TINY,
        mp.pi / 4 + mp.mpf("1e-3"),
        "sin(r) = r + r**3 * S(r**2), |r| <= pi/4",
    ),
    "COS": (
        *relative(mp.cos, lambda r: 1 - r * r / 2, lambda r: r**4),
        lambda r: r * r,
        range(6),
        TINY,
        mp.pi / 4 + mp.mpf("1e-3"),
        "cos(r) = 1 - r**2 / 2 + r**4 * C(r**2), |r| <= pi/4",
    ),
    "TAN": (
        *relative(mp.tan, lambda r: r, lambda r: r**3),
        lambda r: r * r,
        range(15),
        TINY,
        mp.pi / 4 + mp.mpf("1e-3"),
        "tan(r) = r + r**3 * T(r**2), |r| <= pi/4",
    ),
    "ATAN": (
        *relative(mp.atan, lambda t: t, lambda t: t**3),
        lambda t: t * t,
        range(11),
        TINY,
        mp.mpf("0.4143"),
        "atan(t) = t + t**3 * A(t**2), |t| <= tan(pi/8)",
    ),
    "ASIN": (
        *relative(mp.asin, lambda x: x, lambda x: x**3),
        lambda x: x * x,
        range(13),
        TINY,
        mp.mpf("0.5"),
        "asin(x) = x + x**3 * B(x**2), |x| <= 1/2",
    ),
    "ERF": (
        *relative(mp.erf, lambda x: x, lambda x: x),
        lambda x: x * x,
        range(15),
        TINY,
        ERF_SPLIT,
        "erf(x) = x + x * E(x**2), |x| <= 1.5",
    ),
    "ERFC": (
        _erfc_scaled,
        lambda u: mp.exp(-1 / u**2) * u,
        lambda u: u,
        range(14),
        1 / ERF_ONE,
        1 / ERF_SPLIT,
        "erfc(x) = exp(-x**2) / x * G(1/x), 1.5 <= x <= 6, absolute error of erf",
    ),
}


def constants():
    """Constants of the reductions, each a sum of doubles where one double is not enough."""
    d = lambda v: float(v)  # noqa: E731
    ln2, pio2 = mp.log(2), mp.pi / 2
    ln2_hi42 = mp.mpf(int(ln2 * 2**42)) / 2**42  # 42 bits: e * LN2_HI42 is exact for |e| < 2**11
    p1 = mp.mpf(d(pio2))
    p2 = mp.mpf(d(pio2 - p1))
    return {
        "LN2_A": (d(ln2), "log(2) as a double"),
        "LN2_B": (d(ln2 - mp.mpf(d(ln2))), "log(2) - LN2_A"),
        "LN2_HI42": (d(ln2_hi42), "log(2) to 42 bits: its product by an exponent is exact"),
        "LN2_LO42": (d(ln2 - ln2_hi42), "log(2) - LN2_HI42"),
        "LN2_LO42B": (d(ln2 - ln2_hi42 - mp.mpf(d(ln2 - ln2_hi42))), "log(2) - LN2_HI42 - LN2_LO42"),
        "INV_LN2": (d(1 / ln2), "1 / log(2)"),
        "PIO2_1": (d(p1), "pi/2 = PIO2_1 + PIO2_2 + PIO2_3 to 159 bits"),
        "PIO2_2": (d(p2), ""),
        "PIO2_3": (d(pio2 - p1 - p2), ""),
        "TWO_OVER_PI": (d(2 / mp.pi), "2 / pi"),
        "PIO2_HI": (d(pio2), "pi/2 = PIO2_HI + PIO2_LO"),
        "PIO2_LO": (d(pio2 - mp.mpf(d(pio2))), ""),
        "PIO4_HI": (d(pio2 / 2), "pi/4 = PIO4_HI + PIO4_LO"),
        "PIO4_LO": (d(pio2 / 2 - mp.mpf(d(pio2 / 2))), ""),
        "PI_HI": (d(mp.pi), "pi = PI_HI + PI_LO"),
        "PI_LO": (d(mp.pi - mp.mpf(d(mp.pi))), ""),
        "TWO_THIRDS_HI": (d(mp.mpf(2) / 3), "2/3 = TWO_THIRDS_HI + TWO_THIRDS_LO"),
        "TWO_THIRDS_LO": (d(mp.mpf(2) / 3 - mp.mpf(d(mp.mpf(2) / 3))), ""),
        "TAN_PI_8": (d(mp.tan(mp.pi / 8)), "tan(pi/8): where atan's reductions change"),
        "TAN_3PI_8": (d(mp.tan(3 * mp.pi / 8)), "tan(3 pi/8)"),
        "ERF_SPLIT": (d(ERF_SPLIT), "erf: the series below, 1 - erfc above"),
        "ERF_ONE": (d(ERF_ONE), "erf rounds to 1 beyond"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print the fits' errors, write nothing")
    args = parser.parse_args()
    lines = [
        '"""Coefficients and constants of the vectorised math library (backends/numpy/compiler/vecmath*.py).',
        "",
        "Generated by scripts/vecmath_fit.py (minimax fits in mpmath): do not edit by hand. Each polynomial",
        "is a tuple ``(c0, c1, ...)``, ``c0 + z * (c1 + z * (...))`` in the variable its comment names (the",
        "library evaluates it with ``vecmath_base.horner``); the comment also gives the fit's largest error",
        'with the coefficients rounded to doubles, as a power of two."""',
        "",
    ]
    for name, (value, comment) in constants().items():
        lines.append(f"{name} = {value!r}" + (f"  # {comment}" if comment else ""))
    for name, (target, weight, z_of, powers, a, b, comment) in FITS.items():
        powers = list(powers)
        coefs, worst = remez(target, weight, z_of, powers, a, b)
        rounded = rounded_error(target, weight, z_of, powers, coefs, a, b)
        exponent = float(mp.log(rounded, 2))
        print(f"{name:6} {len(powers):2} coefficients: error 2**{float(mp.log(worst, 2)):.1f}, "
              f"rounded to doubles 2**{exponent:.1f}", file=sys.stderr)  # fmt: skip
        lines += ["", f"# {comment}; z**{powers[0]} first; error 2**{exponent:.1f}", f"{name} = ("]
        lines += [f"    {float(c)!r}," for c in coefs]
        lines.append(")")
    if not args.check:
        OUT.write_text("\n".join(lines) + "\n")
        print(f"wrote {OUT}", file=sys.stderr)
        stamp_users()


def digest(path=OUT):
    """The digest of the coefficients file's text."""
    return hashlib.sha1(path.read_bytes()).hexdigest()[:16]


STAMP = re.compile(r"^# coefficients: \w+$", re.M)


def stamp_users():
    """Write the coefficients' digest into the ``# coefficients:`` line of each file that has one."""
    line = f"# coefficients: {digest()}"
    for path in sorted(OUT.parent.glob("vecmath*.py")):
        text = path.read_text()
        if STAMP.search(text) and STAMP.sub(line, text) != text:
            path.write_text(STAMP.sub(line, text))
            print(f"stamped {path.name}", file=sys.stderr)


if __name__ == "__main__":
    main()

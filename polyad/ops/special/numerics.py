"""Numerical building blocks of the special functions added after the first families: Bernoulli numbers,
power series with an exact branch (derivatives of every order at a removable singularity), second-order
jets for the kernels that differentiate an algorithm forward (``incomplete``), kernels that run on host
copies, and kernels that call other special functions.

The family files that follow (``trigonometric``, ``boxcox``, ``elliptic``, ``integrals``, ``orthogonal``,
``gamma_zeta``, ``incomplete``, ``continuous``, ``discrete``) use it; ``derivative_op`` defines the
internal ops that compute a derivative of a special function (its order a parameter).
"""

import fractions
import itertools
import math

from polyad.core import Op, dispatch, eval_raw
from polyad.ops.base import broadcast_batch, where
from polyad.ops.elementwise import abs
from polyad.ops.special.shared import PREFIX, abstract_float, derivative_rules, host_call

# --------------------------------------------------------------------------------------------- constants


def bernoulli_numbers(n):
    """``B_0 .. B_n`` as exact fractions (``B_1 = -1/2``), by the Akiyama-Tanigawa recurrence."""
    out = []
    row = []
    for m in range(n + 1):
        row.append(fractions.Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    out[1] = -out[1] if n >= 1 else None  # the recurrence gives B_1 = +1/2
    return out[: n + 1]


# --------------------------------------------------------------------------------------------- series


def series_or_exact(x, coeffs, exact, cutoff):
    """``sum(coeffs[k] * x**k)`` where ``|x| < cutoff``, else ``exact(x)``, in polyad ops: a function
    with a removable singularity at 0 (``(exp(x) - 1 - x) / x**2``) whose derivatives of every order
    are right there too. Each branch runs at a safe point where the other is taken (the exact one inside
    the cutoff, the series at 0), so no 0/0 and no overflow reaches any derivative. ``series_or``
    (shared) is the same for series in ``x**2``."""
    small = abs(x) < cutoff
    return where(small, power_series(where(small, x, 0.0), coeffs), exact(where(small, cutoff, x)))


def power_series(x, coeffs):
    """``sum(coeffs[k] * x**k)`` by Horner's rule (polyad ops or backend arrays alike)."""
    s = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        s = s * x + c
    return s


# --------------------------------------------------------------------------------------------- kernels


def at_level_0(fn, *args):
    """A special function ``fn`` (public, with ``.op``) on raw backend arrays inside a kernel: its own
    kernel for their device type, outside every transform and hook (a kernel's inner calls are not the
    user's ops)."""
    return eval_raw(fn.op, args, {})


def host_kernel(kernel):
    """The ``"cpu"`` kernel that runs ``kernel(xp, *args, **params)`` on host copies with NumPy's
    namespace (Dask: chunk by chunk, lazily): for a kernel that loops until its values converge, which
    on a lazy array would compute the graph at every test."""

    def cpu(xp, *args, **params):
        return host_call(
            lambda *host: kernel(dispatch.backend_of(host).xp, *host, **params), args, elementwise=True
        )

    return cpu


def float_eps(xp, x):
    """The machine epsilon of ``x``'s dtype."""
    return float(xp.finfo(x.dtype).eps)


def derivative_op(name, fname, argnames, partials, generic, cpu=None):
    """The internal op ``special.<name>``: a derivative of the special function ``fname`` (which errors
    name), element-wise in ``argnames``, the derivative's order given by keyword parameters.
    ``partials(**params)`` gives its own partial derivatives (``p(*args, y)`` or ``NoDerivative``), so
    its VJP, JVP and batching are those of ``special_op``'s functions. Kernels: ``generic`` (Array API),
    ``cpu`` where given."""

    def vjp(g, y, *args, **params):
        return derivative_rules(fname, argnames, partials(**params))[0](g, y, *args)

    def jvp(ts, y, *args, **params):
        return derivative_rules(fname, argnames, partials(**params))[1](ts, y, *args)

    op = Op(PREFIX + name, generic, abstract_eval=abstract_float, vjp=vjp, jvp=jvp)
    op.rules["batch"] = broadcast_batch(op)
    if cpu is not None:
        op.kernels["cpu"] = cpu
    return op


# --------------------------------------------------------------------------------------------- jets


def _pairs(n):
    return [(i, j) for i in range(n) for j in range(i, n)]


class Jet:
    """A value with its derivatives of orders 1 and 2 in ``n`` parameters, on backend arrays: ``v``;
    ``d[i]``; ``h[k]`` for the ``k``-th pair ``i <= j`` of ``_pairs(n)``. Arithmetic with jets and with
    plain arrays (constants) follows the product and quotient rules, so a recurrence written on jets
    carries its own derivatives (forward-mode differentiation of an algorithm)."""

    __slots__ = ("v", "d", "h")
    __array_ufunc__ = None  # ``array * jet``: NumPy defers to the jet's reflected method

    def __init__(self, v, d, h):
        self.v, self.d, self.h = v, tuple(d), tuple(h)

    @classmethod
    def variable(cls, xp, value, index, n):
        """Parameter ``index`` of ``n``: derivative 1 in itself, 0 elsewhere."""
        zero = xp.zeros_like(value)
        one = xp.ones_like(value)
        return cls(value, [one if i == index else zero for i in range(n)], [zero] * len(_pairs(n)))

    @classmethod
    def constant(cls, xp, value, n):
        zero = xp.zeros_like(value)
        return cls(value, [zero] * n, [zero] * len(_pairs(n)))

    @property
    def n(self):
        return len(self.d)

    def __add__(self, o):
        if isinstance(o, Jet):
            return Jet(
                self.v + o.v, [a + b for a, b in zip(self.d, o.d)], [a + b for a, b in zip(self.h, o.h)]
            )
        return Jet(self.v + o, self.d, self.h)

    __radd__ = __add__

    def __neg__(self):
        return Jet(-self.v, [-a for a in self.d], [-a for a in self.h])

    def __sub__(self, o):
        return self + (-o)

    def __rsub__(self, o):
        return (-self) + o

    def scale(self, c):
        """``self * c`` for a constant ``c`` (array or number)."""
        return Jet(self.v * c, [a * c for a in self.d], [a * c for a in self.h])

    def __mul__(self, o):
        if not isinstance(o, Jet):
            return self.scale(o)
        h = [
            fh * o.v + self.d[i] * o.d[j] + self.d[j] * o.d[i] + self.v * gh
            for (i, j), fh, gh in zip(_pairs(self.n), self.h, o.h)
        ]
        return Jet(self.v * o.v, [fd * o.v + self.v * gd for fd, gd in zip(self.d, o.d)], h)

    __rmul__ = __mul__

    def reciprocal(self):
        r = 1.0 / self.v
        r2 = r * r
        h = [(2.0 * self.d[i] * self.d[j] * r - hh) * r2 for (i, j), hh in zip(_pairs(self.n), self.h)]
        return Jet(r, [-a * r2 for a in self.d], h)

    def __truediv__(self, o):
        if not isinstance(o, Jet):
            return self.scale(1.0 / o)
        return self * o.reciprocal()

    def __rtruediv__(self, o):
        return self.reciprocal().scale(o)

    def apply(self, f0, f1, f2):
        """``f(self)`` from ``f``'s value ``f0``, first ``f1`` and second ``f2`` derivatives at ``self.v``
        (the chain rule to second order)."""
        h = [f2 * self.d[i] * self.d[j] + f1 * hh for (i, j), hh in zip(_pairs(self.n), self.h)]
        return Jet(f0, [f1 * a for a in self.d], h)

    def exp(self, xp):
        e = xp.exp(self.v)
        return self.apply(e, e, e)

    def log(self, xp):
        r = 1.0 / self.v
        return self.apply(xp.log(self.v), r, -r * r)

    def derivative(self, wrt):
        """The derivative named by the sorted index tuple ``wrt``: ``()`` the value, ``(i,)`` or
        ``(i, j)``."""
        if not wrt:
            return self.v
        if len(wrt) == 1:
            return self.d[wrt[0]]
        return self.h[_pairs(self.n).index(tuple(wrt))]

    def components(self):
        return (self.v, *self.d, *self.h)

    @staticmethod
    def where(xp, cond, a, b):
        """Element-wise choice between jets (or a jet and an array constant)."""
        n = (a if isinstance(a, Jet) else b).n
        a = a if isinstance(a, Jet) else Jet.constant(xp, a, n)
        b = b if isinstance(b, Jet) else Jet.constant(xp, b, n)
        return Jet(*_where_parts(xp, cond, a, b))


def _where_parts(xp, cond, a, b):
    v = xp.where(cond, a.v, b.v)
    return (
        v,
        [xp.where(cond, p, q) for p, q in zip(a.d, b.d)],
        [xp.where(cond, p, q) for p, q in zip(a.h, b.h)],
    )


def converged(xp, new, old, eps):
    """Whether every component of jet ``new`` is within ``eps`` (relative) of ``old``, element-wise."""
    ok = None
    for p, q in zip(new.components(), old.components()):
        c = xp.abs(p - q) <= eps * xp.abs(p)
        ok = c if ok is None else ok & c
    return ok


def check_points(limit, every):
    """The iteration numbers at which a kernel tests convergence: every ``every``-th up to ``limit``."""
    return set(itertools.islice(itertools.count(every, every), limit // every))


EULER = 0.5772156649015329
PI2_6 = math.pi**2 / 6.0

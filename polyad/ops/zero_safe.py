"""Products that keep a zero cotangent zero: ``zero_safe_multiply(g, d)`` and ``zero_safe_divide(g, d)``.

A rule multiplies a cotangent (or a tangent) ``g`` by the op's local derivative ``d``. Where ``d`` is
infinite or NaN at a finite input (sqrt and fractional powers at 0, log at 0, a division by 0, asin and
acos at ±1, exp on overflow) and ``g`` is exactly 0 there, ``g * d`` is NaN, although the element does not
influence the result at all: the branch ``xp.where`` did not select, a term the code overwrites (``x[m] =
1`` after a ``sqrt``), a row of ``jacrev``'s basis. These products are 0 there instead, and ``g * d``
everywhere else, so that a derivative is never NaN unless the function itself is (docs/conventions.rst).

Definition: ``g * where(m, d, 0)`` with ``m = (g != 0) | isfinite(d)`` (``g / where(m, d, 1)`` with
``m = (g != 0) | (d is neither 0 nor NaN)`` for the division). Masking the factor rather than the product
keeps the derivative in ``g`` exact wherever ``d`` is finite, so second derivatives through a rule stay
right where a cotangent happens to be zero. Only the rules whose derivative can be infinite at a finite
input use these ops. On NumPy the kernel forms the plain product and builds the mask only when that
product holds a NaN (the backend's ``product_without_nan``: one sum, of the factor where it is much
smaller than the product, as an unbatched factor against vmap's tangents), so the cost elsewhere is that sum.
"""

import cmath
import math

from polyad.core import bind
from polyad.ops.base import broadcast_batch, broadcast_to_out, conj_if_complex, unbroadcast
from polyad.ops.common import ABSTRACT_SAME, define


def masked_factor(xp, g, d, divide):
    """``where(m, d, 0)`` (``where(m, d, 1)`` for a division): the factor with the elements whose product
    with a zero ``g`` would be NaN replaced (the generic kernels' formula, on backend arrays)."""
    if divide:
        usable = (d != 0) & (d == d)
        fill = 1
    else:
        usable = xp.isfinite(d)
        fill = 0
    m = (g != 0) | usable
    return xp.where(m, d, xp.asarray(fill, dtype=d.dtype, device=d.device))


def _kernel(divide):
    def kernel(xp, g, d):
        """``g * d`` (``g / d``) with the factor masked where ``g`` is 0; where the backend can tell
        cheaply that the plain product holds no NaN (``product_without_nan``), that product, which then
        equals it."""
        if not hasattr(d, "shape"):  # a Python number keeps its weak type: no array of it
            if divide:
                out = g / d if d != 0 else g * math.copysign(math.inf, d.real)
            else:
                out = g * d
            if cmath.isfinite(d) and not (divide and d == 0):
                return out
            return xp.where(g != 0, out, xp.zeros_like(out))
        plain = getattr(xp, "product_without_nan", None)
        if plain is not None:
            out = plain(g, d, divide)
            if out is not None:
                return out
        f = masked_factor(xp, g, d, divide)
        return g / f if divide else g * f

    return kernel


def _multiply_vjp(ct, y, g, d):
    return (
        lambda: unbroadcast(zero_safe_multiply(ct, conj_if_complex(d)), g),
        lambda: unbroadcast(ct * conj_if_complex(g), d),  # where the mask took d, g is 0
    )


def _multiply_jvp(ts, y, g, d):
    tg, td = ts
    out = None if tg is None else zero_safe_multiply(tg, d)
    if td is not None:  # where g is 0 the factor was masked: no change of it counts (0, not 0 * inf)
        dd = zero_safe_multiply(g, td)
        out = dd if out is None else out + dd
    return broadcast_to_out(out, y)


def _divide_vjp(ct, y, g, d):
    # y = g / d: dy/dg = 1 / d, dy/dd = -y / d, each zero where the mask took the element
    return (
        lambda: unbroadcast(zero_safe_divide(ct, conj_if_complex(d)), g),
        lambda: unbroadcast(-zero_safe_divide(ct * conj_if_complex(y), conj_if_complex(d)), d),
    )


def _divide_jvp(ts, y, g, d):
    tg, td = ts
    out = None if tg is None else zero_safe_divide(tg, d)
    if td is not None:
        dd = -zero_safe_divide(zero_safe_multiply(y, td), d)
        out = dd if out is None else out + dd
    return broadcast_to_out(out, y)


_multiply = define(
    "zero_safe_multiply", _kernel(False), abstract_eval=ABSTRACT_SAME, vjp=_multiply_vjp, jvp=_multiply_jvp
)
_multiply.register_rule("batch", broadcast_batch(_multiply))
_divide = define(
    "zero_safe_divide", _kernel(True), abstract_eval=ABSTRACT_SAME, vjp=_divide_vjp, jvp=_divide_jvp
)
_divide.register_rule("batch", broadcast_batch(_divide))


def zero_safe_multiply(g, d):
    """``g * d``, exactly 0 where ``g`` is 0 even where ``d`` is infinite or NaN (see the module)."""
    return bind(_multiply, g, d)


def zero_safe_divide(g, d):
    """``g / d``, exactly 0 where ``g`` is 0 even where ``d`` is 0 or NaN (see the module)."""
    return bind(_divide, g, d)


zero_safe_multiply.op = _multiply
zero_safe_divide.op = _divide

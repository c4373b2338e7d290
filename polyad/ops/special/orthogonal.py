"""Functions of an order or degree: the Bessel function of the second kind of integer order ``yn``, the
associated Legendre function ``lpmv`` of integer order and real degree, and Kummer's confluent
hypergeometric function ``hyp1f1``. SciPy on CPU arrays; cupyx on CUDA arrays (``yn``, ``lpmv``; cupyx has
no ``hyp1f1``, so CUDA arrays are refused for it, naming the op).

Derivatives in the argument ``x`` close over each family, so every order is there: ``yn' = (y_{n-1} -
y_{n+1}) / 2``; ``(x**2 - 1) P' = v x P_v^m - (v + m) P_{v-1}^m`` (SciPy's convention, Condon-Shortley
phase included); ``hyp1f1' = (a/b) hyp1f1(a+1, b+1, x)``. None in an integer order, and none in a real
degree or parameter (``lpmv`` in ``v``, ``hyp1f1`` in ``a`` and ``b``: no closed form polyad can write):
asking for one raises ``NotImplementedError`` naming the function and argument.
"""

from polyad.ops.special.shared import ELEMENTWISE, REAL, NoDerivative, docstring, special_function

_INTEGER_ORDER = NoDerivative("n is an integer order")

yn = special_function(
    "yn",
    ("n", "x"),
    (_INTEGER_ORDER, lambda n, x, y: 0.5 * (yn(n - 1.0, x) - yn(n + 1.0, x))),
    doc=docstring(
        "The Bessel function of the second kind of integer order ``n``.",
        (("n", "integer orders (an int or an array)"), ("x", "a real array, positive")),
        ELEMENTWISE,
        ("yn(2, np.array([0.5, 2.0]))", "array([-5.44137084, -0.6174081 ])"),
        "Derivative: ``(yn(n - 1, x) - yn(n + 1, x)) / 2`` in ``x``; none in ``n``.",
    ),
)

lpmv = special_function(
    "lpmv",
    ("m", "v", "x"),
    (
        NoDerivative("m is an integer order"),
        NoDerivative("the derivative in the degree has no closed form in polyad"),
        lambda m, v, x, y: (v * x * y - (v + m) * lpmv(m, v - 1.0, x)) / (x * x - 1.0),
    ),
    doc=docstring(
        "The associated Legendre function ``P_v^m(x)`` of integer order ``m`` and real degree ``v``, on "
        "``[-1, 1]`` (with the Condon-Shortley phase, as SciPy's).",
        (("m", "integer orders (an int or an array)"), ("v", REAL), ("x", "a real array in [-1, 1]")),
        ELEMENTWISE,
        ("lpmv(1, 2.0, np.array([0.0, 0.5]))", "array([ 0.        , -1.29903811])"),
        "Derivative: ``(v x P_v^m(x) - (v + m) P_{v-1}^m(x)) / (x**2 - 1)`` in ``x``; none in ``m`` or "
        "``v`` (NotImplementedError).",
    ),
)

hyp1f1 = special_function(
    "hyp1f1",
    ("a", "b", "x"),
    (
        NoDerivative("the derivative in a parameter has no closed form in polyad"),
        NoDerivative("the derivative in a parameter has no closed form in polyad"),
        lambda a, b, x, y: a / b * hyp1f1(a + 1.0, b + 1.0, x),
    ),
    doc=docstring(
        "Kummer's confluent hypergeometric function ``M(a, b, x) = sum((a)_k / (b)_k x**k / k!)``.",
        (("a", REAL), ("b", REAL), ("x", REAL)),
        ELEMENTWISE,
        ("hyp1f1(1.0, 2.0, np.array([0.0, 1.0]))", "array([1.        , 1.71828183])"),
        "Derivative: ``(a / b) hyp1f1(a + 1, b + 1, x)`` in ``x``; none in ``a`` or ``b`` "
        "(NotImplementedError).",
    ),
)

__all__ = ["hyp1f1", "lpmv", "yn"]

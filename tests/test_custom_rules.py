"""pa.custom_jvp and pa.custom_vjp on plain functions (polyad/custom/derivatives.py): the rules
are what every transform uses (each rule deliberately differs from the function's true derivative, so a
transform that differentiated the function itself would fail), they nest (hessian, vmap of grad, grad of
vmap), vmap batches them (a per-example loop with LoopFallbackWarning where a rule needs concrete
values), what they return is checked, and a derivative with respect to a closed-over value is refused."""

import warnings

import numpy as np
import pytest
from helpers import assert_close, raises_cleanly, to_numpy

import polyad as pa
from polyad.transforms.batching import LoopFallbackWarning

xp = pa.xp
TOL = dict(rtol=1e-12, atol=1e-12)


def arr(values):
    return xp.asarray(np.asarray(values, dtype=np.float64).tolist(), dtype=xp.float64)


X = arr([0.3, -0.7, 1.1])


# sin with a JVP rule of 2 cos: the factor 2 shows the rule, not the function, was differentiated
@pa.custom_jvp
def sin2(x):
    return xp.sin(x)


@sin2.defjvp
def _sin2_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin2(x), 2.0 * xp.cos(x) * t


def test_custom_jvp_forward_reverse_and_second_order():
    expected = 2.0 * np.cos(to_numpy(X))
    assert_close(pa.jvp(sin2, (X,), (arr([1.0, 1.0, 1.0]),))[1], arr(expected), **TOL)
    assert_close(pa.grad(lambda x: xp.sum(sin2(x)))(X), arr(expected), **TOL)  # the rule, transposed
    assert_close(pa.jacrev(sin2)(X), arr(np.diag(expected)), **TOL)
    assert_close(pa.jacfwd(sin2)(X), arr(np.diag(expected)), **TOL)
    # second order: d/dx of the rule 2 cos x t is -2 sin x (both orders of nesting)
    h = arr(np.diag(-2.0 * np.sin(to_numpy(X))))
    assert_close(pa.hessian(lambda x: xp.sum(sin2(x)))(X), h, **TOL)
    assert_close(pa.jacrev(pa.jacrev(lambda x: xp.sum(sin2(x))))(X), h, **TOL)
    assert_close(pa.jacfwd(pa.jacfwd(lambda x: xp.sum(sin2(x))))(X), h, **TOL)
    assert_close(sin2(X), xp.sin(X), **TOL)  # outside transforms: the function itself


def test_custom_jvp_vmap_both_orders():
    xs = arr([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]])
    expected = arr(2.0 * np.cos(to_numpy(xs)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)  # the rules batch: no loop
        assert_close(pa.vmap(pa.grad(lambda x: xp.sum(sin2(x))))(xs), expected, **TOL)
        assert_close(pa.grad(lambda x: xp.sum(pa.vmap(sin2)(x)))(xs), expected, **TOL)
        assert_close(pa.jvp(pa.vmap(sin2), (xs,), (xp.ones_like(xs),))[1], expected, **TOL)


# x * y with a VJP rule that triples the cotangent of x
@pa.custom_vjp
def mul3(x, y):
    return x * y


def _mul3_fwd(x, y):
    return mul3(x, y), (x, y)


def _mul3_bwd(res, g):
    x, y = res
    return 3.0 * g * y, g * x


mul3.defvjp(_mul3_fwd, _mul3_bwd)


def test_custom_vjp_reverse_second_order_and_vmap():
    y = arr([2.0, -1.0, 0.5])
    gx, gy = pa.grad(lambda x, y: xp.sum(mul3(x, y)), argnums=(0, 1))(X, y)
    assert_close(gx, 3.0 * y, **TOL)
    assert_close(gy, X, **TOL)
    # grad of grad differentiates bwd: d/dy of sum(3 y) is 3 (per entry)
    assert_close(
        pa.grad(lambda y: xp.sum(pa.grad(lambda x: xp.sum(mul3(x, y)))(X)))(y), arr([3.0] * 3), **TOL
    )
    xs = arr([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", LoopFallbackWarning)
        per = pa.vmap(pa.grad(lambda x, y: xp.sum(mul3(x, y))), in_dims=(0, None))(xs, y)
        assert_close(per, xp.stack([3.0 * y, 3.0 * y]), **TOL)
        # grad of vmap: the unbatched y's cotangent adds up over the batch
        gx, gy = pa.grad(lambda x, y: xp.sum(pa.vmap(mul3, in_dims=(0, None))(x, y)), argnums=(0, 1))(xs, y)
        assert_close(gx, xp.stack([3.0 * y, 3.0 * y]), **TOL)
        assert_close(gy, xp.sum(xs, axis=0), **TOL)
    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_vjp(mul3)", "defjvp"):
        pa.jvp(lambda x: mul3(x, x), (X,), (X,))


def test_function_with_both_rules_uses_each_where_it_belongs():
    @pa.custom_jvp
    def f(x):
        return x * x

    f.defjvp(lambda p, t: (f(p[0]), 10.0 * t[0]))  # forward: 10
    f.defvjp(lambda x: (f(x), None), lambda res, g: (20.0 * g,))  # reverse: 20
    one = arr([1.0])
    assert_close(pa.jvp(f, (one,), (one,))[1], arr([10.0]), **TOL)
    assert_close(pa.grad(lambda x: xp.sum(f(x)))(one), arr([20.0]), **TOL)
    assert_close(pa.jacfwd(f)(one), arr([[10.0]]), **TOL)
    assert_close(pa.jacrev(f)(one), arr([[20.0]]), **TOL)


def test_nondiff_argnums_and_pytrees():
    def scaled(power, xs):
        return {"a": xs[0] ** power, "b": xs[1] * power}

    scaled_fn = pa.custom_vjp(scaled, nondiff_argnums=(0,))

    def fwd(power, xs):
        return scaled_fn(power, xs), xs

    def bwd(power, res, g):
        a, b = res
        return ((power * a ** (power - 1) * g["a"], power * g["b"]),)

    scaled_fn.defvjp(fwd, bwd)
    a, b = arr([1.5, 2.0]), arr([0.5, -1.0])
    g = pa.grad(lambda xs: xp.sum(scaled_fn(3, xs)["a"]) + xp.sum(scaled_fn(3, xs)["b"]))((a, b))
    assert_close(g[0], 3.0 * a**2, **TOL)
    assert_close(g[1], arr([3.0, 3.0]), **TOL)

    powered_nd = pa.custom_jvp(lambda n, x: x**n, nondiff_argnums=(0,))
    powered_nd.defjvp(lambda n, p, t: (powered_nd(n, p[0]), n * p[0] ** (n - 1) * t[0]))
    assert_close(pa.grad(lambda x: xp.sum(powered_nd(4, x)))(a), 4.0 * a**3, **TOL)
    with raises_cleanly(TypeError, "nondiff_argnums", "traced value"):
        pa.grad(lambda x: xp.sum(powered_nd(x, x)))(a)


def test_closed_over_traced_value_is_refused_not_lost():
    def loss(k):
        @pa.custom_jvp
        def f(x):
            return x * k

        f.defjvp(lambda p, t: (f(p[0]), t[0] * k))
        return xp.sum(f(X))

    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_jvp(f)", "closes over", "argument"):
        pa.grad(loss)(xp.asarray(2.0))
    with raises_cleanly(pa.CustomDerivativeError, "closes over"):
        pa.jvp(loss, (xp.asarray(2.0),), (xp.asarray(1.0),))

    # a closed-over value that is only batched (not differentiated) is fine: it stands in for each example
    def per_k(k):
        @pa.custom_vjp
        def f(x):
            return x * k

        f.defvjp(lambda x: (f(x), None), lambda res, g: (g * k,))
        return pa.grad(lambda x: xp.sum(f(x)))(X)

    ks = arr([1.0, 2.0])
    assert_close(pa.vmap(per_k)(ks), xp.stack([xp.ones_like(X), 2.0 * xp.ones_like(X)]), **TOL)


def test_rule_outputs_are_checked_naming_the_function():
    def with_rule(tangent):
        @pa.custom_jvp
        def bad(x):
            return x * 2.0

        bad.defjvp(lambda p, t: (bad(p[0]), tangent(p[0])))
        return bad

    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_jvp(bad)'s jvp rule", "shape (2,)", "(3,)"):
        pa.jvp(with_rule(lambda x: x[:2]), (X,), (X,))
    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_jvp(bad)'s jvp rule", "int"):
        pa.jvp(with_rule(lambda x: xp.astype(x, xp.int64)), (X,), (X,))
    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_jvp(bad)'s jvp rule", "structure"):
        pa.jvp(with_rule(lambda x: [1.0, 2.0, 3.0]), (X,), (X,))
    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_jvp(bad)'s jvp rule", "a str"):
        pa.jvp(with_rule(lambda x: "x"), (X,), (X,))
    got = pa.jvp(with_rule(lambda x: xp.astype(x, xp.float32)), (X,), (X,))[1]  # cast to the output's
    assert got.dtype == xp.float64

    @pa.custom_vjp
    def two(x, y):
        return x + y

    two.defvjp(lambda x, y: (two(x, y), None), lambda res, g: (g,))  # one cotangent for two arguments
    with raises_cleanly(pa.CustomDerivativeError, "pa.custom_vjp(two)'s bwd", "one cotangent per"):
        pa.grad(lambda x: xp.sum(two(x, x)))(X)

    @pa.custom_jvp
    def no_rule(x):
        return x

    with raises_cleanly(pa.CustomDerivativeError, "no derivative rule"):
        pa.grad(lambda x: xp.sum(no_rule(x)))(X)


def test_rules_needing_concrete_values_run_per_example_under_vmap():
    pytest.importorskip("scipy")

    @pa.custom_vjp
    def host_sqrt(a):  # the primal on host values: the function is not traceable
        import math

        return xp.asarray(math.sqrt(float(a)), dtype=xp.float64)

    def fwd(a):
        r = host_sqrt(a)
        return r, r

    def bwd(r, g):
        return (g / (2.0 * float(r)),)  # a concrete value in the rule too

    host_sqrt.defvjp(fwd, bwd)
    assert_close(pa.grad(host_sqrt)(xp.asarray(4.0)), xp.asarray(0.25), **TOL)
    a = arr([4.0, 9.0, 16.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoopFallbackWarning)  # (warned once per process and op)
        got = pa.vmap(pa.grad(host_sqrt))(a)
        assert_close(got, arr([0.25, 1 / 6, 0.125]), **TOL)
        got = pa.grad(lambda a: xp.sum(pa.vmap(host_sqrt)(a)))(a)
        assert_close(got, arr([0.25, 1 / 6, 0.125]), **TOL)


def test_under_jit_the_call_is_one_node_with_its_rules():
    f = pa.jit(pa.grad(lambda x: xp.sum(sin2(x))))
    assert_close(f(X), arr(2.0 * np.cos(to_numpy(X))), **TOL)
    g = pa.jit(lambda x: sin2(x) * 2.0)
    assert_close(g(X), 2.0 * xp.sin(X), **TOL)


def test_custom_vjp_under_jit():
    h = pa.jit(pa.grad(lambda x, y: xp.sum(mul3(x, y))))
    y = arr([2.0, -1.0, 0.5])
    assert_close(h(X, y), 3.0 * y, **TOL)
    assert_close(h(y, X), 3.0 * X, **TOL)  # a second call of the compiled function


def test_rules_needing_concrete_values_under_an_enclosing_vmap():
    import math

    def host_sqrt_value(a):
        return xp.asarray(math.sqrt(float(a)), dtype=xp.float64)

    @pa.custom_vjp
    def root_v(a):
        return host_sqrt_value(a)

    # fwd and bwd both read concrete values: vmap(grad) reaches them with the examples batched
    root_v.defvjp(lambda a: (host_sqrt_value(a), float(a)), lambda a, g: (g / (2.0 * math.sqrt(a)),))

    @pa.custom_jvp
    def root_j(a):
        return host_sqrt_value(a)

    root_j.defjvp(lambda p, t: (host_sqrt_value(p[0]), t[0] / (2.0 * math.sqrt(float(p[0])))))
    a = arr([4.0, 9.0, 16.0])
    expected = arr([0.25, 1 / 6, 0.125])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoopFallbackWarning)
        assert_close(pa.vmap(pa.grad(root_v))(a), expected, **TOL)
        assert_close(pa.vmap(lambda a: pa.jvp(root_j, (a,), (xp.ones_like(a),))[1])(a), expected, **TOL)
        assert_close(pa.vmap(pa.grad(root_j))(a), expected, **TOL)
        assert_close(pa.jacfwd(lambda a: pa.vmap(root_j)(a))(a), arr(np.diag(to_numpy(expected))), **TOL)


def test_a_rule_closing_over_a_traced_value_the_function_does_not_is_refused():
    class Holder:
        pass

    holder = Holder()

    @pa.custom_jvp
    def f(x):
        return x * 2.0

    f.defjvp(lambda p, t: (f(p[0]), t[0] * holder.k))  # holder.k: reached by the rule only

    def g(x, k):
        holder.k = k
        return xp.sum(f(x))

    one = xp.asarray(1.0, dtype=xp.float64)
    with raises_cleanly(pa.CustomDerivativeError, "not handed", "closes"):
        pa.jvp(g, (X, xp.asarray(3.0, dtype=xp.float64)), (xp.ones_like(X), one))

    def returns_closure(k):
        @pa.custom_vjp
        def h(x):
            return x * k, k

        h.defvjp(lambda x: (h(x), k), lambda k_, g: (g[0] * k_,))
        out, kk = h(X)
        return xp.sum(out) + xp.sum(kk)

    # a closed-over value returned as it is comes out as the value it stands for (each example's own)
    got = pa.vmap(returns_closure)(arr([1.0, 2.0]))
    assert_close(got, arr([float(xp.sum(X)) + 1.0, 2.0 * float(xp.sum(X)) + 2.0]), **TOL)


def test_defjvps_one_rule_per_argument():
    @pa.custom_jvp
    def f(x, y):
        return xp.sin(x) * y

    # deliberately 2x on x's term: the rules, not the function, are differentiated
    f.defjvps(lambda tx, ans, x, y: 2.0 * xp.cos(x) * y * tx, lambda ty, ans, x, y: xp.sin(x) * ty)
    y = arr([2.0, -1.0, 0.5])
    gx, gy = pa.grad(lambda x, y: xp.sum(f(x, y)), argnums=(0, 1))(X, y)
    assert_close(gx, 2.0 * xp.cos(X) * y, **TOL)
    assert_close(gy, xp.sin(X), **TOL)
    _, t = pa.jvp(f, (X, y), (xp.ones_like(X), xp.zeros_like(y)))
    assert_close(t, 2.0 * xp.cos(X) * y, **TOL)

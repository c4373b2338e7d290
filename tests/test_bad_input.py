"""Wrong arguments to every public function end in a clear exception, never in a deep internal one.

Each call site below passes one argument a value Hypothesis draws from a pool of wrong ones (the rest of
the call is valid), directly or from inside a running transform (grad, vmap, jvp). The call must raise
TypeError, ValueError or NotImplementedError with a message that names the argument, and leave polyad's
state as it was: no level on the stack, no no_grad, no vmap level, no pre-dispatch capture, the same
default backend.
"""

import importlib.util
import itertools

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import polyad as pa
from polyad import core, xp
from polyad.core import dispatch
from polyad.graph import predispatch
from polyad.transforms import batching

BX = dispatch.default_backend().xp
START_BACKEND = pa.get_backend()
X = BX.asarray([0.5, -1.0, 2.0], dtype=BX.float64)
XB = BX.reshape(BX.arange(6, dtype=BX.float64), (2, 3)) / 7
INTS = BX.asarray([1, 2, 3], dtype=BX.int64)
BOOLS = BX.asarray([True, False, True])
F32 = BX.asarray([0.5, -1.0, 2.0], dtype=BX.float32)
SHORT = BX.asarray([1.0, 2.0], dtype=BX.float64)

_names = (f"badinput::op{i}" for i in itertools.count())


def f_scalar(v):
    return xp.sum(xp.sin(v))


def f_vec(v):
    return xp.sin(v)


# ------------------------------------------------------------------------------ pools of wrong values

NOT_CALLABLE = [None, "f", 3, 2.5, [1], {"a": 1}, b"x", X]
NOT_BOOL = [None, "yes", 1, 0, 2.5, [True], X]
NOT_ARGNUMS = ["0", 2.5, (), [], (0, 0), (0, "1"), None, True, {0: 1}, 1j, 5, -6]
NOT_CHUNK = [0, -1, 2.5, "3", True, [2]]
NOT_RANDOMNESS = ["sometimes", None, 1, "ERROR"]
NOT_MEMORY = [0, -5, "lots", "12 parsecs", True, 2.5, [1]]
NOT_CLIENT = ["tcp://127.0.0.1:8786", 3, object(), [None]]
NOT_LAYOUT = ["polar", 3, True, "REAL"]
NOT_INPUT = [1, "s", object(), b"x", 1j, INTS, BOOLS, {"w": "s"}, (1, X)]  # a Python float is accepted
NOT_MAPPABLE = [1.0, "s", object(), b"x", 1j, BX.asarray(1.0, dtype=BX.float64)]
BAD_IN_DIMS = ["0", 2.5, {"a": 0}, (0, 0), 5, -9, (b"x",), (1j,), [None]]
BAD_OUT_DIMS = ["x", 2.5, {"a": 0}, (0, 0), 7, b"x"]
BAD_TANGENTS = [X, (SHORT,), (INTS,), ("s",), (X, X), (1.0,), (F32,)]
BAD_COTANGENT = [SHORT, INTS, BOOLS, "s", 1.0, (X,)]
BAD_TANGENT = [SHORT, INTS, "s", 1.0, F32]
BAD_GRAPH_INPUT = [SHORT, INTS, 1.0, "s", {"x": X}, [X, X]]
BAD_OUTPUT = ["s", object(), b"x", [X, "s"]]
BAD_BACKEND = [3, "nope", "", b"numpy", 2.5]
BAD_DEVICE_TYPES = [3, None, (), ["cpu", 3], "tpu", b"cpu"]
BAD_OP_NAMES = [3, None, "noseparator", "a::", "::b", "a::b c", "", "polyad::softplus"]
BAD_MUTATES = ["out", (3,), ("nope",), None, 5, ("scale",)]
BAD_SIZE = ["a", -1, 2.5, (2, 1.5), True, (None,), (-2,), {"n": 2}]
BAD_FLOAT_DTYPE = [BX.int64, BX.bool, 3, "nope", None.__class__]
BAD_INT_DTYPE = [BX.float64, BX.bool, 3, "nope"]
BAD_DEVICE = ["gpu", 3, object(), "cuda:7"]
BAD_SEED = ["x", 1.5, -1, True, [1]]
BAD_STATE = [3, "x", None, [1], {"nope": 1}, {3: 1}]
BAD_PARAM = ["a", None, [1.0], object(), b"x"]
BAD_SPARSITY = [[[True]], "s", 3, object(), X, INTS, XB, {"a": 1}]
BAD_COLORING = ["random", 3, None, "DSATUR", [1]]


def _graph():
    return pa.make_graph(f_vec, X)


def _custom():
    @pa.custom_op(next(_names))
    def op(x, *, scale=1.0):
        return x * scale

    return op


def _with(cm):
    with cm:
        pass


# ------------------------------------------------------------------------------ the call sites

# name -> (call of the bad value, pool, fragments: the message names one of them)
SITES = {}


def site(name, pool, *fragments):
    def register(call):
        SITES[name] = (call, pool, fragments)
        return call

    return register


GRAD_FAMILY = {"grad": pa.grad, "value_and_grad": pa.value_and_grad, "grad_and_value": pa.grad_and_value}
JACOBIANS = {"jacrev": pa.jacrev, "jacfwd": pa.jacfwd}

for _n, _t in {**GRAD_FAMILY, "hessian": pa.hessian}.items():
    site(f"{_n}.func", NOT_CALLABLE, "func")(lambda b, t=_t: t(b)(X))
    site(f"{_n}.argnums", NOT_ARGNUMS, "argnum")(lambda b, t=_t: t(f_scalar, argnums=b)(X))
    site(f"{_n}.input", NOT_INPUT, "argument 0")(lambda b, t=_t: t(f_scalar)(b))
for _n, _t in GRAD_FAMILY.items():
    site(f"{_n}.has_aux", NOT_BOOL, "has_aux")(lambda b, t=_t: t(f_scalar, has_aux=b)(X))
    site(f"{_n}.output", BAD_OUTPUT, "func")(lambda b, t=_t: t(lambda v: b)(X))
for _n, _t in JACOBIANS.items():
    site(f"{_n}.func", NOT_CALLABLE, "func")(lambda b, t=_t: t(b)(X))
    site(f"{_n}.argnums", NOT_ARGNUMS, "argnum")(lambda b, t=_t: t(f_vec, argnums=b)(X))
    site(f"{_n}.has_aux", NOT_BOOL, "has_aux")(lambda b, t=_t: t(f_vec, has_aux=b)(X))
    site(f"{_n}.input", NOT_INPUT, "argument 0")(lambda b, t=_t: t(f_vec)(b))
    site(f"{_n}.output", BAD_OUTPUT, "func")(lambda b, t=_t: t(lambda v: b)(X))
site("jacrev.chunk_size", NOT_CHUNK, "chunk_size")(lambda b: pa.jacrev(f_vec, chunk_size=b)(X))
for _n, _t in {
    "saved_residuals": pa.saved_residuals,
    "print_saved_residuals": pa.print_saved_residuals,
}.items():
    site(f"{_n}.func", NOT_CALLABLE, "func")(lambda b, t=_t: t(b, X))
    site(f"{_n}.output", BAD_OUTPUT, "func")(lambda b, t=_t: t(lambda v: b, X))
    site(f"{_n}.args", [None, "x", 3], "array")(lambda b, t=_t: t(f_scalar, b))

SPARSE = {
    "jacobian_sparsity": pa.jacobian_sparsity,
    "sparse_jacfwd": pa.sparse_jacfwd,
    "sparse_jacrev": pa.sparse_jacrev,
    "sparse_jacobian": pa.sparse_jacobian,
}
SPARSE_HESSIANS = {"hessian_sparsity": pa.hessian_sparsity, "sparse_hessian": pa.sparse_hessian}
for _n, _t in {**SPARSE, **SPARSE_HESSIANS}.items():
    _f = f_scalar if _n in SPARSE_HESSIANS else f_vec
    site(f"{_n}.func", NOT_CALLABLE, "func")(lambda b, t=_t: t(b)(X))
    site(f"{_n}.argnums", NOT_ARGNUMS, "argnum")(lambda b, t=_t, f=_f: t(f, argnums=b)(X))
    site(f"{_n}.input", NOT_INPUT, "argument 0")(lambda b, t=_t, f=_f: t(f)(b))
for _n, _t in SPARSE.items():
    site(f"{_n}.output", BAD_OUTPUT, "func")(lambda b, t=_t: t(lambda v: b)(X))
for _n in ("sparse_jacfwd", "sparse_jacrev", "sparse_jacobian", "sparse_hessian"):
    _t, _f = getattr(pa, _n), f_scalar if _n == "sparse_hessian" else f_vec
    site(f"{_n}.sparsity", BAD_SPARSITY, "sparsity")(lambda b, t=_t, f=_f: t(f, sparsity=b)(X))
    site(f"{_n}.coloring", BAD_COLORING, "coloring")(lambda b, t=_t, f=_f: t(f, coloring=b)(X))
site("sparse_jacobian.mode", ["sideways", None, 3, "Forward"], "mode")(
    lambda b: pa.sparse_jacobian(f_vec, mode=b)(X)
)
for _n, _t in {**JACOBIANS, "hessian": pa.hessian, "vmap": pa.vmap}.items():  # chunks, memory, cluster
    _x = XB if _n == "vmap" else X
    _f = f_scalar if _n == "hessian" else f_vec
    if _n in ("jacfwd", "hessian"):
        site(f"{_n}.chunk_size", NOT_CHUNK, "chunk_size")(lambda b, t=_t, f=_f: t(f, chunk_size=b)(X))
    site(f"{_n}.max_memory", NOT_MEMORY, "max_memory")(lambda b, t=_t, f=_f, x=_x: t(f, max_memory=b)(x))
    site(f"{_n}.progress", NOT_BOOL, "progress")(lambda b, t=_t, f=_f, x=_x: t(f, progress=b)(x))
    site(f"{_n}.client", NOT_CLIENT, "client")(lambda b, t=_t, f=_f, x=_x: t(f, client=b)(x))
    if _n != "vmap":
        site(f"{_n}.holomorphic", NOT_BOOL, "holomorphic")(lambda b, t=_t, f=_f: t(f, holomorphic=b)(X))
        site(f"{_n}.complex_layout", NOT_LAYOUT, "complex_layout")(
            lambda b, t=_t, f=_f: t(f, complex_layout=b)(X)
        )
site("distributed.client", NOT_CLIENT, "client")(lambda b: pa.distributed(b))
site("distributed.output", ["numpy", None, 3, "Dask"], "output")(lambda b: pa.distributed(None, output=b))
site("distributed.timeout", [0, -1, "10s", True, [1]], "timeout")(lambda b: pa.distributed(None, timeout=b))
site("jacfwd.randomness", NOT_RANDOMNESS, "randomness")(lambda b: pa.jacfwd(f_vec, randomness=b)(X))

site("vjp.func", NOT_CALLABLE, "func")(lambda b: pa.vjp(b, X))
site("vjp.primals", NOT_INPUT, "primals")(lambda b: pa.vjp(f_vec, b))
site("vjp.has_aux", NOT_BOOL, "has_aux")(lambda b: pa.vjp(f_vec, X, has_aux=b))
site("vjp.output", BAD_OUTPUT, "func")(lambda b: pa.vjp(lambda v: b, X))
site("vjp_fn.cotangents", BAD_COTANGENT, "cotangent")(lambda b: pa.vjp(f_vec, X)[1](b))
site("jvp.func", NOT_CALLABLE, "func")(lambda b: pa.jvp(b, (X,), (X,)))
site("jvp.primals", NOT_INPUT + [X, [X]], "primals")(
    lambda b: pa.jvp(f_vec, b if isinstance(b, list) or b is X else (b,), (X,))
)
site("jvp.tangents", BAD_TANGENTS, "tangent")(lambda b: pa.jvp(f_vec, (X,), b))
site("jvp.has_aux", NOT_BOOL, "has_aux")(lambda b: pa.jvp(f_vec, (X,), (X,), has_aux=b))
site("jvp.strict", NOT_BOOL, "strict")(lambda b: pa.jvp(f_vec, (X,), (X,), strict=b))
site("jvp.output", BAD_OUTPUT, "func")(lambda b: pa.jvp(lambda v: b, (X,), (X,)))
site("linearize.func", NOT_CALLABLE, "func")(lambda b: pa.linearize(b, X))
site("linearize.primals", NOT_INPUT, "primals")(lambda b: pa.linearize(f_vec, b))
site("linearize.jvp_fn", BAD_TANGENT, "tangent")(lambda b: pa.linearize(f_vec, X)[1](b))

site("vmap.func", NOT_CALLABLE, "func")(lambda b: pa.vmap(b)(XB))
site("vmap.in_dims", BAD_IN_DIMS, "in_dim")(lambda b: pa.vmap(f_vec, in_dims=b)(XB))
site("vmap.out_dims", BAD_OUT_DIMS, "out_dim")(lambda b: pa.vmap(f_vec, out_dims=b)(XB))
site("vmap.randomness", NOT_RANDOMNESS, "randomness")(lambda b: pa.vmap(f_vec, randomness=b)(XB))
site("vmap.chunk_size", NOT_CHUNK, "chunk_size")(lambda b: pa.vmap(f_vec, chunk_size=b)(XB))
site("vmap.input", NOT_MAPPABLE, "input")(lambda b: pa.vmap(f_vec)(b))
site("vmap.output", BAD_OUTPUT, "func")(lambda b: pa.vmap(lambda v: b)(XB))

site("Tensor.value", [None, "s", 2.5, [1.0], (1.0, 2.0), object()], "pa.Tensor(value)", "pa.xp.asarray")(
    lambda b: pa.Tensor(b)
)
site("jit.func", NOT_CALLABLE, "func")(lambda b: pa.jit(b)(X))
NOT_STATIC_NUMS = ["0", 2.5, (0, "1"), None, True, {0: 1}, 1j, 5, -6]
site("jit.static_argnums", NOT_STATIC_NUMS, "static_argnums")(lambda b: pa.jit(f_vec, static_argnums=b)(X))
site("jit.static_argnames", [3, None, ("v", 1), "w", b"v"], "static_argnames")(
    lambda b: pa.jit(f_vec, static_argnames=b)(X)
)
site("jit.donate_argnums", NOT_STATIC_NUMS, "donate_argnums")(lambda b: pa.jit(f_vec, donate_argnums=b)(X))
site("jit.static_value", [[1], {"a": 1}, {2}], "static argument 1")(
    lambda b: pa.jit(lambda v, n: v, static_argnums=1)(X, b)
)

site("make_graph.func", NOT_CALLABLE, "func")(lambda b: pa.make_graph(b, X))
site("make_graph.input", NOT_INPUT[:5] + [{"w": 2.0}], "argument 0")(lambda b: pa.make_graph(f_vec, b))
site("make_graph.pre_dispatch", NOT_BOOL, "pre_dispatch")(lambda b: pa.make_graph(f_vec, X, pre_dispatch=b))
site("graph.call", BAD_GRAPH_INPUT, "input", "array(s)")(lambda b: _graph()(b))
site("pre_dispatch_graph.call", BAD_GRAPH_INPUT, "input", "array(s)")(
    lambda b: pa.make_graph(f_vec, X, pre_dispatch=True)(b)
)
site("compiled_graph.call", BAD_GRAPH_INPUT + [pa.Tensor(X)], "input", "array(s)")(
    lambda b: _graph().compile()(b)
)
site("graph.compile", BAD_BACKEND, "backend")(lambda b: _graph().compile(b))
site("graph.lower", BAD_BACKEND, "backend")(lambda b: _graph().lower(b))
site("call_delegate.lowered", NOT_CALLABLE + [f_vec], "lowered")(lambda b: pa.call_delegate(b, X))
site("call_delegate.input", BAD_GRAPH_INPUT[:4], "input")(lambda b: pa.call_delegate(_graph().lower(), b))
site("eval_shape.func", NOT_CALLABLE, "func")(lambda b: pa.eval_shape(b, X))
site("eval_shape.output", BAD_OUTPUT[:3], "func")(lambda b: pa.eval_shape(lambda v: b, X))

site("custom_op.name", BAD_OP_NAMES, "name", "already registered")(lambda b: pa.custom_op(b)(lambda x: x))
site("custom_op.mutates_args", BAD_MUTATES, "mutates_args")(
    lambda b: pa.custom_op(next(_names), mutates_args=b)(lambda x, out, *, scale=1.0: x)
)
site("custom_op.fn", [v for v in NOT_CALLABLE if v is not None], "function")(
    lambda b: pa.custom_op(next(_names))(b)
)
site("register_kernel.device_types", BAD_DEVICE_TYPES, "device")(
    lambda b: _custom().register_kernel(b, lambda x: x)
)
site("register_kernel.fn", NOT_CALLABLE[1:], "kernel")(lambda b: _custom().register_kernel("cpu", b))
for _m in ("register_autograd", "register_jvp", "register_vmap", "register_fake"):
    site(f"{_m}.rule", NOT_CALLABLE, _m)(lambda b, m=_m: getattr(_custom(), m)(b))
site("register_autograd.setup_context", NOT_CALLABLE[1:], "setup_context")(
    lambda b: _custom().register_autograd(lambda ctx, g: g, setup_context=b)
)
site("register_rule.kind", [3, None, "grad", "VJP"], "rule kind")(
    lambda b: _custom().register_rule(b, lambda *a: None)
)
site("register_rule.rule", NOT_CALLABLE, "rule")(lambda b: _custom().register_rule("vjp", b))
site("library.impl.name", [3, None, "nope::x"], "custom op")(lambda b: pa.library.impl(b, "cpu", lambda x: x))
site("library.impl.device_types", BAD_DEVICE_TYPES, "device")(
    lambda b: pa.library.impl(_custom().name, b, lambda x: x)
)
site("override.op", [3, None, "nope", 2.5], "op")(
    lambda b: _with(pa.library.override(b, "vjp", lambda *a: a))
)
site("override.layer", [3, None, "nope"], "layer")(
    lambda b: _with(pa.library.override(xp.sin, b, lambda *a: a))
)
site("override.impl", NOT_CALLABLE, "impl")(lambda b: _with(pa.library.override(xp.sin, "vjp", b)))

for _n, _fn in {
    "normal": pa.random.normal,
    "uniform": pa.random.uniform,
    "integers": lambda **k: pa.random.integers(5, **k),
}.items():
    site(f"random.{_n}.size", BAD_SIZE, "size")(lambda b, fn=_fn: fn(size=b))
    site(f"random.{_n}.device", BAD_DEVICE, "device")(lambda b, fn=_fn: fn(device=b))
    bad_dtypes = BAD_INT_DTYPE if _n == "integers" else BAD_FLOAT_DTYPE
    site(f"random.{_n}.dtype", bad_dtypes, "dtype")(lambda b, fn=_fn: fn(dtype=b))
for _p in ("loc", "scale"):
    site(f"random.normal.{_p}", BAD_PARAM, _p)(lambda b, p=_p: pa.random.normal(**{p: b}))
for _p in ("low", "high"):
    site(f"random.uniform.{_p}", BAD_PARAM, _p)(lambda b, p=_p: pa.random.uniform(**{p: b}))
site("random.integers.bounds", [1.5, "a", None, [1], -3], "low", "high")(lambda b: pa.random.integers(b))
site("random.seed", BAD_SEED, "seed")(lambda b: pa.random.seed(b))
site("random.Generator", BAD_SEED, "seed")(lambda b: pa.random.Generator(b))
site("random.set_state", BAD_STATE, "state")(lambda b: pa.random.Generator(0).set_state(b))

site("set_backend", BAD_BACKEND + [None], "backend")(lambda b: pa.set_backend(b))
site("backend", BAD_BACKEND + [None], "backend")(lambda b: _with(pa.backend(b)))
site("register_device_type.name", [3, None, "", b"xpu"], "name")(
    lambda b: pa.register_device_type(b, lambda a: False)
)
site("register_device_type.predicate", NOT_CALLABLE[1:], "predicate")(
    lambda b: pa.register_device_type("badinput_xpu", b)
)
site("register_device_type.above", [5, "nope", 2.5], "above")(
    lambda b: pa.register_device_type("badinput_xpu", lambda a: False, above=b)
)
site("array_namespace", ["s", object(), [1], b"x"], "array_namespace")(lambda b: pa.array_namespace(b))

# the structured solves of polyad.linalg (SciPy's signatures)
EYE3 = BX.eye(3, dtype=BX.float64) * 2.0
PIV3 = BX.asarray([0, 1, 2], dtype=BX.int32)
NOT_SQUARE = [X, XB, BX.ones((2, 2, 3), dtype=BX.float64)]
BAD_RHS = [SHORT, XB, BX.asarray(1.0, dtype=BX.float64)]
BAD_TRANS = [3, -1, "X", "t", None, 2.5, [0], True + 2]
NOT_FINITE = [BX.asarray([1.0, float("inf"), 2.0]), BX.asarray([float("nan"), 0.0, 1.0])]
for _n, _call in {
    "solve_triangular": lambda a, b, **k: pa.linalg.solve_triangular(a, b, **k),
    "cho_solve": lambda a, b, **k: pa.linalg.cho_solve((a, True), b, **k),
    "lu_solve": lambda a, b, **k: pa.linalg.lu_solve((a, PIV3), b, **k),
}.items():
    _a = "a" if _n == "solve_triangular" else "c" if _n == "cho_solve" else "lu"
    site(f"linalg.{_n}.{_a}", NOT_SQUARE, f"{_a} must be a square")(lambda b, c=_call: c(b, X))
    site(f"linalg.{_n}.b", BAD_RHS, "b needs", "of b", "b must")(lambda b, c=_call: c(EYE3, b))
    site(f"linalg.{_n}.check_finite", NOT_FINITE, "infs or NaNs")(lambda b, c=_call: c(EYE3, b))
    if _n != "cho_solve":
        site(f"linalg.{_n}.trans", BAD_TRANS, "trans")(lambda b, c=_call: c(EYE3, X, trans=b))
for _n in ("cho_factor", "lu_factor"):
    site(f"linalg.{_n}.a", NOT_SQUARE, "a must be a square")(lambda b, n=_n: getattr(pa.linalg, n)(b))
site("linalg.cho_solve.c_and_lower", [X, None, 3, (X,), (EYE3, True, 1)], "c_and_lower")(
    lambda b: pa.linalg.cho_solve(b, X)
)
site("linalg.lu_solve.lu_and_piv", [X, None, 3, (X,)], "lu_and_piv")(lambda b: pa.linalg.lu_solve(b, X))
site("linalg.lu_solve.piv", [X, BX.asarray([0, 1], dtype=BX.int32), BOOLS, "s"], "piv")(
    lambda b: pa.linalg.lu_solve((EYE3, b), X)
)


# ------------------------------------------------------------------------------ loops and conditionals

NOT_CARRY = ["s", object(), b"x", {"w": "s"}, (1.0, "s")]
NOT_XS = [BX.asarray(1.0, dtype=BX.float64), "s", object(), (X, SHORT), [X, "s"]]
NOT_LENGTH = [-1, 2.5, "3", True, 5]
NOT_CHECKPOINTS = [0, -1, 2.5, "fast", True, [1]]
NOT_STEP_OUTPUT = [None, "s", (1.0,), (X, X, X), 1.0]
NOT_PREDICATE = [X, "s", INTS, BX.asarray(1.0, dtype=BX.float64)]
NOT_BOUND = [2.5, "1", None, X]

site("scan.f", NOT_CALLABLE, "f")(lambda b: pa.scan(b, 0.0, X))
site("scan.init", NOT_CARRY, "init")(lambda b: pa.scan(lambda c, x: (c, x), b, X))
site("scan.xs", NOT_XS, "xs")(lambda b: pa.scan(lambda c, x: (c, None), 0.0, b))
site("scan.length", NOT_LENGTH, "length")(lambda b: pa.scan(lambda c, x: (c, None), 0.0, X, length=b))
site("scan.reverse", NOT_BOOL, "reverse")(lambda b: pa.scan(lambda c, x: (c, None), 0.0, X, reverse=b))
site("scan.checkpoints", NOT_CHECKPOINTS, "checkpoints")(
    lambda b: pa.scan(lambda c, x: (c, None), 0.0, X, checkpoints=b)
)
site("scan.max_memory", NOT_MEMORY, "max_memory")(
    lambda b: pa.scan(lambda c, x: (c, None), 0.0, X, checkpoints="auto", max_memory=b)
)
site("scan.body_output", NOT_STEP_OUTPUT, "body")(lambda b: pa.scan(lambda c, x: b, 0.0, X))
site("fori_loop.lower", NOT_BOUND, "lower")(lambda b: pa.fori_loop(b, 3, lambda i, v: v, 0.0))
site("fori_loop.upper", NOT_BOUND, "upper")(lambda b: pa.fori_loop(0, b, lambda i, v: v, 0.0))
site("fori_loop.body", NOT_CALLABLE, "body")(lambda b: pa.fori_loop(0, 3, b, 0.0))
site("map.f", NOT_CALLABLE, "f")(lambda b: pa.map(b, X))
site("map.batch_size", NOT_CHUNK, "batch_size")(lambda b: pa.map(f_vec, XB, batch_size=b))
site("while_loop.cond_fun", NOT_CALLABLE, "cond_fun")(lambda b: pa.while_loop(b, lambda v: v, X))
site("while_loop.body_fun", NOT_CALLABLE, "body_fun")(lambda b: pa.while_loop(lambda v: False, b, X))
site("while_loop.predicate", NOT_PREDICATE, "cond_fun")(lambda b: pa.while_loop(lambda v: b, lambda v: v, X))
site("while_loop.checkpoints", NOT_CHECKPOINTS, "checkpoints")(
    lambda b: pa.while_loop(lambda v: False, lambda v: v, X, checkpoints=b)
)
NOT_INDEX = [2.5, "1", None, X, BOOLS, BX.asarray(1.5, dtype=BX.float64), True]
NOT_BRANCHES = [[], (), None, [f_vec, 3], "f", f_vec]
NOT_PRED = [X, 1, "s", INTS, BX.asarray(1.0, dtype=BX.float64), None]
site("switch.index", NOT_INDEX, "index")(lambda b: pa.switch(b, [f_vec, f_vec], X))
site("switch.branches", NOT_BRANCHES, "branches")(lambda b: pa.switch(0, b, X))
site("cond.pred", NOT_PRED, "pred")(lambda b: pa.cond(b, f_vec, f_vec, X))
site("cond.true_fun", NOT_CALLABLE, "true_fun")(lambda b: pa.cond(True, b, f_vec, X))
site("checkpoint.f", NOT_CALLABLE, "f")(lambda b: pa.checkpoint(b))
site("checkpoint.policy", ["all", 3, True, "dots"], "policy")(lambda b: pa.checkpoint(f_vec, policy=b))


# ------------------------------------------------------------------------------ solvers and custom rules

NOT_NONDIFF = ["0", 2.5, (-1,), (None,), ("a",), True, [1.5]]
NOT_FLAG = [None, "yes", 1, 0, 2.5, [True]]
NOT_SOLVER_CHOICE = ["lu", 3, None, "DENSE", ["cg"]]
NOT_FAILURE_CHOICE = ["ignore", 3, None, True]
NOT_OPERATOR = ["A", 3, [[1.0]], object()]


def _solve(mv, b):
    return b


site("custom_jvp.fun", NOT_CALLABLE, "fun")(lambda b: pa.custom_jvp(b))
site("custom_vjp.fun", NOT_CALLABLE, "fun")(lambda b: pa.custom_vjp(b))
site("custom_jvp.nondiff_argnums", NOT_NONDIFF, "nondiff_argnums")(
    lambda b: pa.custom_jvp(f_vec, nondiff_argnums=b)
)
site("custom_jvp.defjvp", NOT_CALLABLE, "defjvp")(lambda b: pa.custom_jvp(f_vec).defjvp(b))
site("custom_vjp.defvjp", NOT_CALLABLE, "fwd", "bwd")(lambda b: pa.custom_vjp(f_vec).defvjp(b, b))
site("custom_root.f", NOT_CALLABLE, "f")(lambda b: pa.custom_root(b, X, _solve, _solve))
site("custom_root.solve", NOT_CALLABLE, "solve")(lambda b: pa.custom_root(f_vec, X, b, _solve))
site("custom_root.tangent_solve", NOT_CALLABLE, "tangent_solve")(
    lambda b: pa.custom_root(f_vec, X, _solve, b)
)
site("custom_root.initial_guess", NOT_CARRY, "initial_guess")(
    lambda b: pa.custom_root(f_vec, b, _solve, _solve)
)
site("custom_root.has_aux", NOT_FLAG, "has_aux")(
    lambda b: pa.custom_root(f_vec, X, _solve, _solve, has_aux=b)
)
site("custom_linear_solve.matvec", NOT_CALLABLE, "matvec")(lambda b: pa.custom_linear_solve(b, X, _solve))
site("custom_linear_solve.solve", NOT_CALLABLE, "solve")(lambda b: pa.custom_linear_solve(f_vec, X, b))
site("custom_linear_solve.b", NOT_CARRY, "b")(lambda b: pa.custom_linear_solve(f_vec, b, _solve))
site("custom_linear_solve.transpose_solve", NOT_CALLABLE[1:], "transpose_solve")(
    lambda b: pa.custom_linear_solve(f_vec, X, _solve, transpose_solve=b)
)
site("custom_linear_solve.symmetric", NOT_FLAG, "symmetric")(
    lambda b: pa.custom_linear_solve(f_vec, X, _solve, symmetric=b)
)
site("optimize.root_scalar.f", NOT_CALLABLE, "f")(
    lambda b: pa.optimize.root_scalar(b, bracket=(0.0, 1.0), method="brentq")
)
site("optimize.root.fun", NOT_CALLABLE, "fun")(lambda b: pa.optimize.root(b, X))
site("optimize.fixed_point.func", NOT_CALLABLE, "func")(lambda b: pa.optimize.fixed_point(b, X))
site("optimize.minimize.fun", NOT_CALLABLE, "fun")(lambda b: pa.optimize.minimize(b, X))
site("optimize.least_squares.fun", NOT_CALLABLE, "fun")(lambda b: pa.optimize.least_squares(b, X))
site("optimize.minimize.linear_solver", NOT_SOLVER_CHOICE, "linear_solver")(
    lambda b: pa.optimize.minimize(f_scalar, X, linear_solver=b)
)
site("optimize.root.on_failure", NOT_FAILURE_CHOICE, "on_failure")(
    lambda b: pa.optimize.root(f_vec, X, on_failure=b)
)
site("sparse.linalg.cg.A", NOT_OPERATOR, "A must be")(lambda b: pa.sparse.linalg.cg(b, X))
site("sparse.linalg.gmres.on_failure", NOT_FAILURE_CHOICE, "on_failure")(
    lambda b: pa.sparse.linalg.gmres(f_vec, X, on_failure=b)
)


# ------------------------------------------------------------------------------ the test

CONTEXTS = {
    "direct": lambda call: call(),
    "inside grad": lambda call: pa.grad(lambda y: (call(), xp.sum(y))[1])(X),
    "inside vmap": lambda call: pa.vmap(lambda y: (call(), y)[1])(XB),
    "inside jvp": lambda call: pa.jvp(lambda y: (call(), y)[1], (X,), (X,)),
}


def _assert_state_intact():
    assert core.current_level() == 0
    assert core.no_grad_level() == 0
    assert batching.batch_levels() == []
    assert core.pre_dispatch_hook() is None
    assert not predispatch._state.frames and predispatch._state.depth == 0
    assert pa.get_backend() == START_BACKEND


# a client= argument is checked once dask and distributed import: without them the error is that they are
# missing (an ImportError naming the extra to install), whatever the argument
_NO_DISTRIBUTED = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("dask", "distributed")),
    reason="client= arguments are checked with dask and distributed, which are not installed here",
)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=_NO_DISTRIBUTED) if n.endswith(".client") else n for n in sorted(SITES)]
)
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_bad_argument_raises_a_clear_error(name, data):
    call, pool, fragments = SITES[name]
    bad = data.draw(st.sampled_from(pool), label="bad value")
    context = data.draw(st.sampled_from(sorted(CONTEXTS)), label="context")
    try:
        CONTEXTS[context](lambda: call(bad))
    except (TypeError, ValueError, NotImplementedError) as exc:
        msg = str(exc)
        assert any(f in msg for f in fragments), (
            f"{name}({bad!r}) {context}: {msg!r} names none of {fragments}"
        )
    else:
        pytest.fail(f"{name}: the bad value {bad!r} was accepted ({context})")
    finally:
        _assert_state_intact()


def test_every_public_function_has_a_site():
    """The suite covers the public API: each name of ``polyad.__all__`` that takes arguments."""
    covered = {name.split(".")[0] for name in SITES}
    takes_no_bad_input = {
        "no_grad",
        "enable_grad",
        "get_backend",
        "xp",
        "library",
        "random",
        "integrate",  # a module: tests/test_integrate.py has its bad input
        "custom_ops",
        "config",
        "use_scipy_fft_backend",  # takes no argument
    }
    types = {"ConcretizationError", "ShapeDtype", "Tensor", "Graph", "DEVICE_PRIORITY", "stop_gradient"}
    types |= {"TracedFloat", "TracedComplex", "DerivativeLostWarning"}  # made by transforms, not by users
    types |= {"SparseJacobian", "SparsityFallbackWarning"}  # made by sparse_jacfwd, ... and by a transform
    types |= {"SpecializedGraphWarning"}  # warned by make_graph
    types |= {"ChunkPlan", "DistributedError"}  # made by chunk_plan, raised by a cluster
    types |= {"ScipyFFTBackend", "scipy_fft_backend"}  # called by SciPy (tests/test_scipy_fft_backend.py)
    types |= {"CustomDerivativeError", "ImplicitError"}  # raised by polyad
    missing = set(pa.__all__) - covered - takes_no_bad_input - types
    assert not missing, missing


def test_the_hint_for_python_numbers_names_a_function_that_exists():
    # a Python float is accepted (tests/test_refusals.py); an int carries no derivative: the hint's call runs
    with pytest.raises(TypeError, match=r"pa\.xp\.asarray") as info:
        pa.grad(f_scalar)(1)
    hint = str(info.value).split("or ")[-1].split(":")[0]
    assert hint == "pa.xp.asarray(1, dtype=pa.xp.float64)"
    np.testing.assert_allclose(float(pa.grad(f_scalar)(eval(hint, {"pa": pa}))), np.cos(1.0))
    np.testing.assert_allclose(float(pa.grad(f_scalar)(pa.xp.asarray(1.0))), np.cos(1.0))

"""scipy.fft's functions on polyad's tensors through polyad's uarray backend (polyad/interop/scipy_fft.py),
and the DCT/DST ops behind them (polyad/ops/dct.py), on the backend under test.

- adjointness ``<A x, y> = <x, A^T y>`` (``A^T y`` from ``pa.vjp``) for every family, type, norm and
  ``orthogonalize``, with padding and truncation, and Jacobians equal to SciPy's own matrices;
- ``scipy.fft.dct`` & co. under ``grad``, ``jvp``, ``vmap`` and ``jit`` against central differences and
  loops of SciPy on NumPy copies; the FFT multimethods the backend also takes;
- the generic Array API kernel against SciPy (dtypes kept), which the op table does not reach on CPU;
- the three ways to activate the backend (each in a subprocess: SciPy's registrations last for the
  process), NumPy input left to SciPy, and bad input.
"""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from helpers import cupy_kernels_on_stand_ins, to_numpy

scipy_fft = pytest.importorskip("scipy.fft")

import polyad as pa  # noqa: E402
from polyad.core import dispatch  # noqa: E402
from polyad.ops import dct as dct_ops  # noqa: E402

NORMS = (None, "backward", "ortho", "forward")
ORTHS = (None, True, False)
ONE_D = ("dct", "idct", "dst", "idst")
N_D = ("dctn", "idctn", "dstn", "idstn")
EPS = 1e-6


def _b(a):
    """A NumPy array on the backend under test."""
    return dispatch.default_backend().xp.asarray(np.asarray(a))


def _rng(*key):
    return np.random.default_rng(abs(hash(key)) % 2**32)


def _ref(name, x, **kwargs):
    """SciPy's own function on a NumPy array (complex input part by part: polyad's definition, which
    SciPy 1.17 keeps except for a non-default ``orthogonalize``; see polyad/testing/table_dct.py)."""
    f = getattr(scipy_fft, name)
    if np.iscomplexobj(x):
        return f(x.real, **kwargs) + 1j * f(x.imag, **kwargs)
    return f(x, **kwargs)


def _close(got, expected, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(to_numpy(got), expected, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------ adjointness


@pytest.mark.parametrize("name,t,norm,orth", list(itertools.product(ONE_D, (1, 2, 3, 4), NORMS, ORTHS)))
def test_vjp_is_the_adjoint_1d(name, t, norm, orth):
    """``<A x, y> = <x, A^T y>`` with ``A^T y`` from the VJP; the length changes (odd types truncate 6 -> 5,
    even types pad 6 -> 8), so the resize's transpose is in it too."""
    rng = _rng(name, t, norm, orth)
    n_out = 5 if t % 2 else 8
    x, y = rng.standard_normal((3, 6)), rng.standard_normal((3, n_out))
    kwargs = {"type": t, "n": n_out, "norm": norm, "orthogonalize": orth}
    ax, vjp_fn = pa.vjp(lambda v: getattr(pa.xp.fft, name)(v, **kwargs), _b(x))
    (aty,) = vjp_fn(_b(y))
    _close(ax, _ref(name, x, **kwargs))
    np.testing.assert_allclose(np.sum(to_numpy(ax) * y), np.sum(x * to_numpy(aty)), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize(
    "name,t,norm,orth", list(itertools.product(N_D, (1, 2, 3, 4), ("ortho", "forward"), ORTHS))
)
def test_vjp_is_the_adjoint_nd_complex(name, t, norm, orth):
    """The same over two axes of complex input: ``Re<A x, y> = Re<x, A^H y>`` (A is real)."""
    rng = _rng(name, t, norm, orth)
    shape, s, axes = (3, 4, 5), (6, 3), (2, 0)
    x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    y = rng.standard_normal((3, 4, 6)) + 1j * rng.standard_normal((3, 4, 6))  # the result's shape
    kwargs = {"type": t, "s": s, "axes": axes, "norm": norm, "orthogonalize": orth}
    ax, vjp_fn = pa.vjp(lambda v: getattr(pa.xp.fft, name)(v, **kwargs), _b(x))
    (aty,) = vjp_fn(_b(y))
    _close(ax, _ref(name, x, **kwargs))
    lhs = np.sum(np.conj(to_numpy(ax)) * y).real
    rhs = np.sum(np.conj(x) * to_numpy(aty)).real
    np.testing.assert_allclose(lhs, rhs, rtol=1e-11, atol=1e-11)


def _scipy_matrix(name, n_in, **kwargs):
    """The matrix of ``scipy.fft.<name>`` on length-``n_in`` vectors: its columns are the images of the unit
    vectors."""
    eye = np.eye(n_in)
    return np.stack([getattr(scipy_fft, name)(eye[j], **kwargs) for j in range(n_in)], axis=1)


@pytest.mark.parametrize("name,t,norm", list(itertools.product(ONE_D, (1, 2, 3, 4), ("backward", "ortho"))))
def test_jacobians_are_scipys_matrix(name, t, norm):
    kwargs = {"type": t, "norm": norm, "n": 6}
    matrix = _scipy_matrix(name, 5, **kwargs)
    f = lambda v: getattr(pa.xp.fft, name)(v, **kwargs)  # noqa: E731
    x = _b(_rng(name, t, norm).standard_normal(5))
    _close(pa.jacrev(f)(x), matrix, atol=1e-12)
    _close(pa.jacfwd(f)(x), matrix, atol=1e-12)


def test_orthonormal_variants_are_orthogonal():
    """With norm="ortho" (orthogonalized by default) every type is an orthogonal matrix: A^T A = I, A^T
    computed by reverse mode."""
    for name, t in itertools.product(("dct", "dst"), (1, 2, 3, 4)):
        f = lambda v, name=name, t=t: getattr(pa.xp.fft, name)(v, type=t, norm="ortho")  # noqa: E731
        jac = to_numpy(pa.jacrev(f)(_b(np.zeros(5))))
        np.testing.assert_allclose(jac.T @ jac, np.eye(5), atol=1e-12, err_msg=f"{name} type {t}")


# ------------------------------------------------------------------------------ scipy.fft under transforms

CALLS = [
    ("dct", (2,), {"norm": "ortho"}),  # type as SciPy's second positional argument
    ("idct", (), {"type": 1, "n": 7}),
    ("dst", (), {"type": 4, "norm": "forward"}),
    ("idst", (3,), {"orthogonalize": True}),
    ("dctn", (), {"type": 3, "s": (4, 6)}),
    ("idctn", (), {"type": 2, "axes": 0, "norm": "ortho", "orthogonalize": False}),
    ("dstn", (1,), {"axes": (1, 0)}),
    ("idstn", (), {"type": 4, "s": 3, "axes": -1, "workers": 2, "overwrite_x": True}),
]


def _weights(name, args, kwargs, shape=(4, 5)):
    out = getattr(scipy_fft, name)(np.ones(shape), *args, **kwargs)
    return _rng(name, "weights").standard_normal(out.shape)


def _loss(name, args, kwargs, w, xp):
    """A nonlinear scalar of ``scipy.fft.<name>``: ``sum(w * sin(out))``."""
    return lambda x: xp.sum(xp.asarray(w) * xp.sin(getattr(scipy_fft, name)(x, *args, **kwargs)))


def _fd_grad(f, x):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = EPS
        g[idx] = (f(x + e) - f(x - e)) / (2 * EPS)
    return g


@pytest.mark.parametrize("name,args,kwargs", CALLS, ids=[c[0] for c in CALLS])
def test_scipy_fft_under_grad_jvp_vmap_jit(name, args, kwargs):
    rng = _rng(name, "call")
    x = rng.standard_normal((4, 5))
    w = _weights(name, args, kwargs)
    loss_np = _loss(name, args, kwargs, w, np)
    with pa.use_scipy_fft_backend():
        loss = _loss(name, args, kwargs, _b(w), pa.xp)
        # grad against central differences of SciPy on NumPy values
        _close(pa.grad(loss)(_b(x)), _fd_grad(loss_np, x), rtol=1e-6, atol=1e-7)
        # jvp: the primal is SciPy's, the tangent central differences
        t = rng.standard_normal(x.shape)
        out, tangent = pa.jvp(lambda v: getattr(scipy_fft, name)(v, *args, **kwargs), (_b(x),), (_b(t),))
        f_np = lambda v: getattr(scipy_fft, name)(v, *args, **kwargs)  # noqa: E731
        _close(out, f_np(x))
        _close(tangent, (f_np(x + EPS * t) - f_np(x - EPS * t)) / (2 * EPS), rtol=1e-6, atol=1e-7)
        # vmap over a leading batch equals a loop of SciPy
        batch = rng.standard_normal((3, 4, 5))
        got = pa.vmap(lambda v: getattr(scipy_fft, name)(v, *args, **kwargs))(_b(batch))
        _close(got, np.stack([f_np(b) for b in batch]))
        # jit, and grad of jit
        _close(pa.jit(lambda v: getattr(scipy_fft, name)(v, *args, **kwargs))(_b(x)), f_np(x))
        _close(pa.grad(pa.jit(loss))(_b(x)), _fd_grad(loss_np, x), rtol=1e-6, atol=1e-7)


def test_second_derivative_through_scipy_dct():
    """The Hessian of a nonlinear function of ``scipy.fft.dct`` against differences of its gradient."""
    rng = _rng("hessian")
    x = rng.standard_normal(5)

    def loss(v):
        return pa.xp.sum(pa.xp.exp(scipy_fft.dct(v, type=3, norm="ortho") * 0.3))

    with pa.use_scipy_fft_backend():
        hess = to_numpy(pa.hessian(loss)(_b(x)))
        grad = lambda v: to_numpy(pa.grad(loss)(_b(v)))  # noqa: E731
        fd = np.stack([(grad(x + EPS * e) - grad(x - EPS * e)) / (2 * EPS) for e in np.eye(5)])
    np.testing.assert_allclose(hess, fd, rtol=1e-6, atol=1e-7)


# the FFT multimethods the backend also takes, each with an input of the kind it expects
FFT_CALLS = [
    ("fft", "real", {"n": 7}),
    ("ifft", "complex", {"axis": 0, "norm": "ortho"}),
    ("rfft", "real", {}),
    ("irfft", "complex", {"n": 8}),
    ("hfft", "complex", {"norm": "forward"}),
    ("ihfft", "real", {}),
    ("fftn", "complex", {"s": (3, 4)}),
    ("ifftn", "complex", {"axes": (0,)}),
    ("rfftn", "real", {"norm": "ortho"}),
    ("irfftn", "complex", {"s": (4, 6)}),
    ("fft2", "real", {}),
    ("ifft2", "complex", {"norm": "forward"}),
    ("rfft2", "real", {}),
    ("irfft2", "complex", {}),
    ("hfftn", "complex", {"s": (4, 6)}),
    ("hfft2", "complex", {"norm": "ortho"}),
    ("ihfftn", "real", {"axes": (1, 0)}),
    ("ihfft2", "real", {"norm": "forward"}),
]


@pytest.mark.parametrize("name,kind,kwargs", FFT_CALLS, ids=[c[0] for c in FFT_CALLS])
def test_fft_multimethods_through_the_backend(name, kind, kwargs):
    """Values equal SciPy's; grad of ``sum(w * |out|^2)`` equals central differences (in each real
    coordinate of a complex input: polyad's gradient is ``dL/dRe + i dL/dIm``)."""
    rng = _rng(name, "fft")
    x = rng.standard_normal((4, 5))
    if kind == "complex":
        x = x + 1j * rng.standard_normal((4, 5))
    f_np = lambda v: getattr(scipy_fft, name)(v, **kwargs)  # noqa: E731
    w = rng.standard_normal(f_np(x).shape)
    loss_np = lambda v: float(np.sum(w * np.abs(f_np(v)) ** 2))  # noqa: E731
    with pa.use_scipy_fft_backend():
        _close(getattr(scipy_fft, name)(_b(x), **kwargs), f_np(x), atol=1e-9)
        g = to_numpy(
            pa.grad(lambda v: pa.xp.sum(_b(w) * pa.xp.abs(getattr(scipy_fft, name)(v, **kwargs)) ** 2))(_b(x))
        )
    expected = _fd_grad(loss_np, x.real if kind == "real" else x)
    if kind == "complex":
        expected = expected + 1j * _fd_grad(lambda im: loss_np(x.real + 1j * im), x.imag)
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------ the generic kernel


@pytest.mark.parametrize("family,t", list(itertools.product(dct_ops.FAMILIES, dct_ops.TYPES)))
def test_generic_kernel_matches_scipy(family, t):
    """The Array API kernel (what runs on Dask, on devices without a kernel, and without SciPy), on the
    backend's own arrays: every norm, padding and truncation, float64, float32 and complex128 (dtypes
    kept)."""
    backend = dispatch.default_backend()
    op = dct_ops.OPS[family, t]
    rng = _rng(family, t, "generic")
    for norm, s, dtype in itertools.product(
        ("backward", "ortho", "forward"), ((3, 4), (5, 2), (2, 7)), (np.float64, np.float32, np.complex128)
    ):
        x = rng.standard_normal((3, 4))
        if dtype is np.complex128:
            x = x + 1j * rng.standard_normal((3, 4))
        x = x.astype(dtype)
        got = op.generic(backend.xp, _b(x), s=s, axes=(0, 1), norm=norm)
        expected = _ref(family + "n", x, type=t, s=s, axes=(0, 1), norm=norm)
        assert to_numpy(got).dtype == expected.dtype
        tol = 1e-5 if dtype is np.float32 else 1e-11
        np.testing.assert_allclose(to_numpy(got), expected, rtol=tol, atol=tol, err_msg=f"{norm} {s} {dtype}")


def test_cupy_backend_declares_cupyx_kernels_for_types_2_and_3(monkeypatch):
    """backends/cupy/kernels.py's DCT/DST kernels, loaded against stand-in cupy modules (no GPU here):
    declared for existing ops only, each calls cupyx.scipy.fft's dctn/dstn with cupyx's arguments
    (no ``orthogonalize``: cupyx orthogonalizes for "ortho", as the ops compute) and gives SciPy's result."""
    kernels, calls = cupy_kernels_on_stand_ins(monkeypatch)
    declared = {n for n in kernels if n.startswith("fft.")}
    assert declared == {f"fft.{f}n_type{t}" for f in ("dct", "dst") for t in (2, 3)}
    assert declared <= {op.name for op in dct_ops.OPS.values()}
    x = _rng("cupy").standard_normal((3, 4))
    for name in sorted(declared):
        family, t = name[4:7], int(name[-1])
        for norm in ("backward", "ortho", "forward"):
            del calls[:]
            got = kernels[name]["cuda"](None, x, s=(5, 4), axes=(0, 1), norm=norm)
            assert calls == [(family + "n", t)]
            np.testing.assert_allclose(got, _ref(family + "n", x, type=t, s=(5, 4), axes=(0, 1), norm=norm))


# ------------------------------------------------------------------------------ activation, NumPy input


def test_numpy_input_is_left_to_scipy():
    x = np.linspace(0.0, 1.0, 6)
    assert pa.scipy_fft_backend.__ua_function__(scipy_fft.dct, (x,), {}) is NotImplemented
    assert pa.scipy_fft_backend.__ua_function__(scipy_fft.fht, (x, 0.1, 0.0), {}) is NotImplemented
    with pa.use_scipy_fft_backend():
        out = scipy_fft.dct(x, type=4)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, scipy_fft.dct(x, type=4))


_ROUTES = """
import json, numpy as np, scipy.fft as sf, polyad as pa
from polyad import dispatch
route = {route!r}
if route == "register":
    sf.register_backend(pa.scipy_fft_backend)
elif route == "global+scipy":
    sf.set_global_backend(pa.scipy_fft_backend)
    sf.register_backend("scipy")
elif route == "global only":
    sf.set_global_backend(pa.scipy_fft_backend)
x = np.linspace(0.5, 1.5, 5)
g = pa.grad(lambda v: pa.xp.sum(sf.dst(v, type=2, norm="ortho") ** 2))(pa.xp.asarray(x))
result = {{"grad": dispatch.backend_of_array(g).to_numpy(g).tolist()}}
try:
    result["numpy"] = sf.dst(x, type=2, norm="ortho").tolist()
except Exception as exc:
    result["numpy_error"] = type(exc).__name__
print("RESULTS" + json.dumps(result))
"""


def _run_route(route):
    script = _ROUTES.format(route=route)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS"))
    return json.loads(line[len("RESULTS") :])


@pytest.mark.parametrize("route", ["register", "global+scipy"])
def test_process_wide_activation(route):
    """``register_backend`` and ``set_global_backend`` (with SciPy's backend registered behind it): tensors
    differentiate (the DST with norm="ortho" is orthogonal, so the gradient of ``|A x|^2`` is ``2 x``) and
    NumPy input still gets SciPy's result."""
    x = np.linspace(0.5, 1.5, 5)
    result = _run_route(route)
    np.testing.assert_allclose(result["grad"], 2 * x, rtol=1e-12)
    np.testing.assert_allclose(result["numpy"], scipy_fft.dst(x, type=2, norm="ortho"), rtol=1e-12)


def test_global_backend_alone_leaves_numpy_without_a_backend():
    """The README's warning: replacing SciPy's global backend without registering SciPy's leaves NumPy
    input with no backend (uarray's BackendNotImplementedError); tensors still work."""
    result = _run_route("global only")
    np.testing.assert_allclose(result["grad"], 2 * np.linspace(0.5, 1.5, 5), rtol=1e-12)
    assert result["numpy_error"] == "BackendNotImplementedError"


def test_scipy_kernel_ignores_the_users_scipy_fft_backends():
    """The ops' SciPy kernel asks for SciPy's own backend: with polyad's backend as the only one
    (``only=True``), which declines NumPy arrays, the kernel still runs."""
    x = np.linspace(0.0, 1.0, 5)
    value, matrix = scipy_fft.dct(x, type=2), _scipy_matrix("dct", 5)
    with scipy_fft.set_backend(pa.scipy_fft_backend, only=True):
        got = pa.xp.fft.dct(_b(x), type=2)
        grad = pa.grad(lambda v: pa.xp.sum(scipy_fft.dct(v) ** 2))(_b(x))
    _close(got, value)
    _close(grad, 2 * matrix.T @ value)


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda x: pa.xp.fft.dct(x, type=5), ValueError, "type must be 1, 2, 3 or 4"),
        (lambda x: pa.xp.fft.dst(x, type=True), ValueError, "type must be"),
        (lambda x: pa.xp.fft.dct(x, norm="unitary"), ValueError, "norm must be"),
        (lambda x: pa.xp.fft.dct(x, type=1, n=1), ValueError, "DCT-I needs at least 2 points"),
        (lambda x: pa.xp.fft.idct(x, n=0), ValueError, "invalid number of data points 0"),
        (lambda x: pa.xp.fft.dctn(x, axes=(0, -2)), ValueError, "axes must be unique"),
        (lambda x: pa.xp.fft.dstn(x, axes=(2,)), ValueError, "axis 2 is out of bounds"),
        (
            lambda x: pa.xp.fft.dctn(x, s=(3, 4), axes=(0,)),
            ValueError,
            "s and axes must have the same length",
        ),
        (lambda x: pa.xp.fft.dctn(x, s=(1, 2, 3)), ValueError, "s has 3 entries for a 2-d array"),
        (lambda x: pa.xp.fft.dctn(x, s=(2.5,)), TypeError, "s must be an int or a sequence of ints"),
        (lambda x: pa.xp.fft.dct(x, axis=(0,)), TypeError, "axis must be an int"),
        (lambda x: pa.xp.fft.dct(x[0, 0]), ValueError, "at least one dimension"),
        (lambda x: pa.xp.fft.dct([1.0, 2.0]), TypeError, "x must be an array"),
    ],
)
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error, match=words):
        call(_b(np.ones((3, 4))))


def test_plan_is_refused_for_tensors():
    with pa.use_scipy_fft_backend(), pytest.raises(ValueError, match="plan= is a pocketfft plan"):
        pa.grad(lambda v: pa.xp.sum(pa.xp.real(scipy_fft.fft(v, plan=object()))))(_b(np.ones(4)))


def test_integer_input_is_transformed_in_the_default_float():
    x = np.arange(5)
    out = pa.xp.fft.dct(_b(x), type=2)
    assert to_numpy(out).dtype == np.float64
    _close(out, scipy_fft.dct(x, type=2))

"""What the special-function files share: how an element-wise special function becomes an op from its
partial derivatives, the SciPy kernel for CPU arrays, argument dtypes, the lazily raised error for a
derivative polyad does not have, docstrings, and a series helper for removable singularities.

Kernels, chosen per call by the dispatcher. ``"cpu"``: ``scipy.special``'s ufunc (imported on first
call: SciPy is an optional extra) on host copies of the arrays (NumPy arrays go straight in; other CPU
libraries, array_api_strict among them, through their backend's ``to_numpy`` and back with
``xp.asarray`` on the input's device). ``"cuda"``: ``cupyx.scipy.special``, declared by the CuPy backend
(``polyad/backends/cupy/kernels.py``). Generic: an Array API formula, where the function has one, for every
other device type and for CPU arrays without SciPy. On a device type with no kernel, a function without
a formula is refused by the dispatcher, naming the op, rather than copied to the host.
"""

import inspect
import math

import polyad.core.dispatch as dispatch
from polyad.core import Op, bind
from polyad.core.avals import ShapeDtype, broadcast_shape, dtype_kind, xp_of
from polyad.ops.base import astype, broadcast_batch, broadcast_to_out, unbroadcast, where
from polyad.ops.common import unary_batch
from polyad.ops.creation import asarray
from polyad.ops.elementwise import abs
from polyad.ops.zero_safe import zero_safe_multiply

SCIPY_EXTRA = "pip install polyad[scipy]"
PREFIX = "special."  # op names: "special.erf"

# --------------------------------------------------------------------------------------------- kernels


def scipy_function(name):
    """``scipy.special.<name>``, imported on first use; an ImportError that names the fix without SciPy."""
    try:
        import scipy.special
    except ImportError as exc:
        raise ImportError(
            f"polyad.xp.special.{name} computes with SciPy on CPU arrays, and SciPy is not installed: "
            f"{SCIPY_EXTRA} (or pip install scipy)"
        ) from exc
    return getattr(scipy.special, name)


def host_call(f, args, elementwise=False):
    """``f`` (a NumPy function) on host copies of the backend arrays among ``args``; the result in the
    arrays' own library and device. NumPy arrays pass through untouched, and so does the result. An
    ``elementwise`` ``f`` runs chunk by chunk on a backend that declares ``map_host`` (Dask: no copy, no
    computation)."""
    backend = dispatch.backend_of(args)
    if elementwise and backend.map_host is not None:
        return backend.map_host(f, args)
    host = [backend.to_numpy(a) if hasattr(a, "shape") else a for a in args]
    out = f(*host)
    if isinstance(out, backend.array_types):
        return out
    device = next((a.device for a in args if hasattr(a, "device")), None)
    if isinstance(out, tuple):
        return tuple(backend.xp.asarray(o, device=device) for o in out)
    return backend.xp.asarray(out, device=device)


def scipy_kernel(name, fallback=None):
    """The ``"cpu"`` kernel of ``special.<name>``: ``scipy.special.<name>`` through ``host_call`` (one
    fused ufunc: faster than a chain of Array API calls). Without SciPy (or with a SciPy too old to
    have ``name``) the generic kernel ``fallback`` runs instead, where there is one."""
    found = []  # the SciPy function (None: the fallback), decided on the first call

    def kernel(xp, *args):
        if not found:
            if fallback is None:
                found.append(scipy_function(name))
            else:
                try:
                    found.append(scipy_function(name))
                except (ImportError, AttributeError):
                    found.append(None)
        if found[0] is None:
            return fallback(xp, *args)
        return host_call(found[0], args, elementwise=True)

    kernel.scipy_name = name
    return kernel


def keeping_dtype(kernel):
    """``kernel`` with its result cast to the arguments' floating dtype, for a SciPy function that
    computes in float64 whatever it is given (``polygamma``), as abstract evaluation promises."""

    def kept(xp, *args):
        out = kernel(xp, *args)
        dtype = xp.result_type(*[a.dtype for a in args if hasattr(a, "dtype")])
        return out if out.dtype == dtype else xp.astype(out, dtype)

    kept.scipy_name = kernel.scipy_name
    return kept


def kernel_arrays(xp, args):
    """A generic kernel's arguments with Python floats made arrays of the first array's dtype and device
    (the standard's functions take arrays)."""
    like = next(a for a in args if hasattr(a, "shape"))
    return [a if hasattr(a, "shape") else xp.asarray(a, dtype=like.dtype, device=like.device) for a in args]


# --------------------------------------------------------------------------------------------- arguments


def _default_float(x):
    return xp_of(x).__array_namespace_info__().default_dtypes()["real floating"]


def float_arg(fname, argname, x):
    """Argument ``argname`` of ``special.<fname>`` as a real floating array or Python float: integer and
    bool arrays become the backend's default floating dtype (as SciPy's ufuncs compute them); complex
    values are refused."""
    if not hasattr(x, "dtype"):
        if isinstance(x, bool | int | float):
            return float(x)
        x = asarray(x)
    kind = dtype_kind(x.dtype)
    if kind == "f":
        return x
    if kind == "c":
        raise TypeError(
            f"polyad.xp.special.{fname}: {argname} must be a real array (integers are promoted), "
            f"got {x.dtype}"
        )
    return astype(x, _default_float(x))


def float_args(fname, argnames, args):
    """Every argument through ``float_arg``; at least one comes back an array (a Python float first
    argument becomes one on the default backend when all are scalars)."""
    if len(args) != len(argnames):
        raise TypeError(
            f"polyad.xp.special.{fname}({', '.join(argnames)}) takes {len(argnames)} positional "
            f"arguments, got {len(args)}"
        )
    out = [float_arg(fname, n, a) for n, a in zip(argnames, args)]
    if not any(hasattr(a, "shape") for a in out):
        out[0] = asarray(out[0])
    return out


# --------------------------------------------------------------------------------------------- rules


class NoDerivative:
    """Marks an argument in which polyad has no derivative of a function (``polygamma`` in its order
    ``n``, ``hyp1f1`` in ``a``, a third derivative of ``gammainc`` in ``a``). The VJP hands back a
    cotangent that raises when evaluated, which reverse mode does only for an argument that needs a
    gradient; the JVP raises for a nonzero tangent. ``why`` says why."""

    def __init__(self, why):
        self.why = why

    def fail(self, fname, argname):
        raise NotImplementedError(
            f"polyad.xp.special.{fname} has no derivative with respect to its argument {argname!r} "
            f"({self.why}); differentiate with respect to the other arguments, or pass {argname} through "
            "pa.stop_gradient"
        )


LATER = {}  # partial derivatives that a family file imported after the function's own defines, by key


def later(key):
    """A partial derivative ``partial(*args, y)`` written in a family file imported after the one that
    defines the function, because it needs that file's functions (``gammainc`` in ``a`` needs
    ``digamma``): ``LATER[key]``, which the later file sets, looked up when the derivative is taken."""
    return lambda *args: LATER[key](*args)


def _cotangent(fname, argname, partial, g, y, args, i):
    if isinstance(partial, NoDerivative):
        return lambda: partial.fail(fname, argname)
    return lambda: unbroadcast(zero_safe_multiply(g, partial(*args, y)), args[i])


def _as_arrays(args, y):
    """Python float arguments as 0-d arrays like ``y``, so that partial derivatives see arrays only."""
    if all(hasattr(a, "shape") for a in args):
        return args
    return tuple(a if hasattr(a, "shape") else asarray(a, dtype=y.dtype, device=y.device) for a in args)


def derivative_rules(fname, argnames, partials):
    """VJP and JVP of an element-wise function of real arguments from its partial derivatives, each
    ``partial(*args, y)`` in polyad ops (so the rules differentiate and batch again). The products are
    zero-safe: many of these derivatives are infinite somewhere finite (erfinv at ±1, logit at 0 and 1,
    entr at 0, gammaln at its poles), and a zero cotangent or tangent must stay zero there."""

    def vjp(g, y, *args):
        args = _as_arrays(args, y)
        return tuple(_cotangent(fname, argnames[i], p, g, y, args, i) for i, p in enumerate(partials))

    def jvp(ts, y, *args):
        args = _as_arrays(args, y)
        out = None
        for i, (t, p) in enumerate(zip(ts, partials)):
            if t is None:
                continue
            if isinstance(p, NoDerivative):
                p.fail(fname, argnames[i])
            d = zero_safe_multiply(t, p(*args, y))
            out = d if out is None else out + d
        return broadcast_to_out(out, y)

    return vjp, jvp


def abstract_float(xp, *avals, **params):
    """Element-wise abstract evaluation: the broadcast shape, the floating dtype of the array arguments
    (Python floats do not widen an array's dtype); ``params`` (a derivative's order) change neither."""
    arrays = [a for a in avals if hasattr(a, "shape")]
    dtype = xp.result_type(*[a.dtype for a in arrays])
    return ShapeDtype(broadcast_shape(*[a.shape for a in arrays]), dtype, arrays[0].device)


def special_op(name, argnames, partials, generic=None, scipy_name=None):
    """The op ``special.<name>``: an element-wise function of real arrays with the partial derivative in
    each argument (``partial(*args, y)`` or a ``NoDerivative``). Its kernels: SciPy's function
    ``scipy_name`` (default: the same name, which is also the public name errors give) for CPU arrays;
    ``generic(xp, *args)``, its Array API kernel if it has one, for other device types (and for CPU
    arrays without SciPy); CUDA kernels come from the CuPy backend."""
    vjp, jvp = derivative_rules(scipy_name or name, argnames, partials)
    op = Op(PREFIX + name, generic, abstract_eval=abstract_float, vjp=vjp, jvp=jvp)
    op.register_rule("batch", unary_batch(op) if len(argnames) == 1 else broadcast_batch(op))
    op.kernels.setdefault("cpu", scipy_kernel(scipy_name or name, generic))
    return op


# --------------------------------------------------------------------------------------------- functions

PUBLIC = {}  # name -> public function, in definition order (polyad.xp.special's contents)


def public(name, fn, doc):
    """Register ``fn`` as ``polyad.xp.special.<name>`` with docstring ``doc``."""
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    PUBLIC[name] = fn
    return fn


def special_function(name, argnames, partials, *, generic=None, doc):
    """``special_op`` plus its public function ``polyad.xp.special.<name>(*argnames)``: arguments are
    positional, integer arrays promoted to floating."""
    op = special_op(name, argnames, partials, generic)
    if len(argnames) == 1:
        argname = argnames[0]

        def f(x, /):
            if hasattr(x, "dtype") and dtype_kind(x.dtype) == "f":  # the common case, kept cheap
                return bind(op, x)
            return bind(op, *float_args(name, argnames, (x,)))

        f.__signature__ = inspect.Signature([inspect.Parameter(argname, inspect.Parameter.POSITIONAL_ONLY)])
    else:

        def f(*args):  # type: ignore[misc]
            return bind(op, *float_args(name, argnames, args))

        f.__signature__ = inspect.Signature(
            [inspect.Parameter(a, inspect.Parameter.POSITIONAL_ONLY) for a in argnames]
        )
    f.op = op
    return public(name, f, doc)


_KERNELS = {
    "scipy": f"SciPy on CPU arrays ({SCIPY_EXTRA}) and cupyx.scipy.special on CUDA arrays",
    "both": "SciPy on CPU arrays and cupyx.scipy.special on CUDA arrays where they are installed, else "
    "a generic Array API kernel (every backend and device)",
    "generic": "a generic Array API kernel (every backend and device)",
}


def unary_function(name, partial, summary, example, derivative, *, generic=None, args=None):
    """``special_function`` of one array ``x`` with its docstring: ``example`` is ``(input, printed
    output)``, the input a list literal; ``args`` describes the argument (default: a real array)."""
    call = (f"{name}(np.array({example[0]}))", example[1])
    kernels = "scipy" if generic is None else "both"
    doc = docstring(summary, args or (("x", REAL),), ELEMENTWISE, call, derivative, kernels)
    return special_function(name, (args[0][0] if args else "x",), (partial,), generic=generic, doc=doc)


def docstring(summary, args, returns, example, derivative=None, kernels="scipy"):
    """A public function's docstring: summary, derivative, kernels (a key of ``_KERNELS``), Args, Returns
    and a doctest example (``example``: the call after ``special.`` and its printed result)."""
    kernels = _KERNELS[kernels]
    lines = [summary, ""]
    if derivative:
        lines += [derivative, ""]
    lines += [f"Computed by {kernels}.", "", "Args:"]
    lines += [f"    {n}: {d}" for n, d in args]
    lines += ["", "Returns:", f"    {returns}", "", "Example:"]
    lines += ["    >>> import numpy as np", "    >>> from polyad.xp import special"]
    call, result = example
    lines += [f"    >>> special.{call}"] + [f"    {r}" for r in result.splitlines()]
    return "\n".join(lines) + "\n"


REAL = "a real array (integer arrays are promoted to the default floating dtype)"
ELEMENTWISE = "The values, an array of the arguments' broadcast shape and floating dtype."

# --------------------------------------------------------------------------------------------- series


def series_or(x, coeffs, exact, cutoff=0.5, scale=None):
    """``sum(coeffs[k] * x**(2k))`` (times ``scale(x)`` if given) where ``|x| < cutoff``, else
    ``exact(x)``: a function with a removable singularity at 0 (``i1(x) / x``, ``sinc'``) whose
    derivatives of every order stay right there. The exact branch is evaluated at a safe point inside the
    cutoff, so no 0/0 reaches any derivative."""
    small = abs(x) < cutoff
    x2 = x * x
    s = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        s = s * x2 + c
    if scale is not None:
        s = scale(x) * s
    return where(small, s, exact(where(small, cutoff, x)))


def bessel_ratio_coeffs(sign, n=9):
    """Coefficients of ``i1(x) / x`` (``sign`` +1) or ``j1(x) / x`` (-1) in powers of ``x**2``:
    ``sign**k / (2**(2k+1) k! (k+1)!)``, enough terms for double precision below 0.5."""
    return [sign**k / (2 ** (2 * k + 1) * math.factorial(k) * math.factorial(k + 1)) for k in range(n)]

"""Reverse mode of ``solve_ivp`` by forward sensitivities or by the continuous adjoint.

The whole solve is one op, ``ODE_SOLVE``, over its flat inputs (``y0``, ``t0``, ``t1``, ``t_eval`` if
given, the leaves of ``args``, then what ``fun`` closes over, lifted by ``polyad.control.closure``). Every
transform but reverse mode runs the op's body, the discrete solve (so jvp, jacfwd and vmap are "discrete"
whatever ``sensitivity`` says); reverse mode runs it at the levels below, recording nothing, and its
backward pass is the op's VJP rule:

- "forward": for each floating input that needs a cotangent, the Jacobian of the outputs with respect
  to it by ``pa.jacfwd`` of the discrete solve (its tangents integrated alongside the state, one loop),
  contracted with the cotangent. Exact (the derivative of the numerical solution); memory of the state
  times the input's size.
- "adjoint": the adjoint equation ``a' = -(df/dy)^T a`` and the quadratures ``q' = -(df/dp)^T a``
  integrated backwards from the last output time to ``t0``, with the same method and tolerances, the
  state ``y`` integrated backwards alongside and reset to the forward solution at each output time, the
  output cotangents added to ``a`` there. Its error is of the order of the tolerances (it is the
  derivative of the exact solution, computed numerically, not of the numerical one); memory of one state.
"""

import optree

import polyad.xp as xp
from polyad.api.grad import vjp as pa_vjp
from polyad.api.jacobians import jacfwd
from polyad.control.closure import Body, trace
from polyad.control.loops import as_array
from polyad.core import Op, bind, transform_active
from polyad.core.avals import ShapeDtype, is_floating
from polyad.scipy.integrate.driver import OdeResult, integrate


def _flat_inputs(y0, t0, t1, t_eval, args):
    leaves, tree = optree.tree_flatten((y0, t0, t1, t_eval, tuple(args)), none_is_leaf=False)
    return [as_array(v, "solve_ivp", "y0, t_span, t_eval and args") for v in leaves], tree


def solve(fun, t0, t1, y0, t_eval, args, sensitivity, **options):
    """``solve_ivp`` with ``sensitivity`` "forward" or "adjoint": the op above, or the discrete solve
    where nothing is differentiated."""
    if not transform_active():
        return integrate(fun, t0, t1, y0, t_eval, args, **options)
    flat, tree = _flat_inputs(y0, t0, t1, t_eval, args)
    options = dict(options, progress=False, ends_only=True)

    def solve_flat(*leaves):
        y0_, t0_, t1_, t_eval_, args_ = optree.tree_unflatten(tree, list(leaves))
        sol = integrate(fun, t0_, t1_, y0_, t_eval_, args_, **options)
        counts = [xp.asarray(sol[k], dtype=xp.int64) for k in ("status", "nfev", "njev", "nlu")]
        return (sol.t, sol.y, *counts)

    body = trace(solve_flat, flat, "solve_ivp")
    rhs = _rhs_body(fun, tree, body.closures)
    t_out, y_out, status, nfev, njev, nlu = bind(
        ODE_SOLVE, *flat, *body.closures, body=body, rhs=rhs, tree=tree, sensitivity=sensitivity,
        n_inputs=len(flat), options=tuple(sorted(options.items())),
    )  # fmt: skip
    return OdeResult(
        t=t_out, y=y_out, sol=None, t_events=None, y_events=None, nfev=nfev, njev=njev, nlu=nlu,
        status=status, message="see status: 0 reached the end, -1 failed", success=status >= 0,
    )  # fmt: skip


def _rhs_body(fun, tree, closures):
    """``fun(t, y, *args)`` as a ``Body`` of ``(t, y, *args leaves)`` and the solve's closure values: the
    closed-over objects stand for the values a rule hands them, as in a loop's body."""
    args_tree = optree.treespec_children(tree)[4]

    def rhs(t, y, *arg_leaves):
        return (fun(t, y, *optree.tree_unflatten(args_tree, list(arg_leaves))),)

    in_tree = optree.tree_structure(tuple(range(2 + args_tree.num_leaves)))
    return Body(rhs, in_tree, closures, optree.tree_structure((0,)), None, None, "solve_ivp(fun)")


def _split_inputs(primals, tree, n_inputs):
    inputs, closure_values = list(primals[:n_inputs]), list(primals[n_inputs:])
    has_t_eval = optree.treespec_children(tree)[3].num_leaves == 1
    y0, t0, t1 = inputs[:3]
    t_eval = inputs[3] if has_t_eval else None
    arg_leaves = inputs[4:] if has_t_eval else inputs[3:]
    return y0, t0, t1, t_eval, arg_leaves, closure_values


def _kernel(xp_, *args, body, **params):
    return tuple(body(*args))


def _abstract(xp_, *avals, body, **params):
    device = next((a.device for a in avals if isinstance(a, ShapeDtype)), None)
    return tuple(ShapeDtype(a.shape, a.dtype, device) for a in body.out_avals)


def _vjp(g, out, *primals, body, rhs, tree, sensitivity, n_inputs, options, **params):
    g_t, g_y = g[0], g[1]
    if sensitivity == "forward":
        return _forward_cotangents(g_t, g_y, out, primals, body)
    return _adjoint_cotangents(g_t, g_y, out, primals, rhs, tree, n_inputs, dict(options))


def _forward_cotangents(g_t, g_y, out, primals, body):
    """Each floating input's cotangent from the Jacobian of ``(t, y)`` with respect to it by forward mode
    (one loop carrying its tangents), computed only for the inputs that need one (a zero-argument
    function per input: grad with respect to ``args`` alone does not carry ``y0``'s ``n`` tangents)."""
    g_flat = xp.concat([xp.reshape(_or_zeros(g_t, out[0]), (-1,)), xp.reshape(_or_zeros(g_y, out[1]), (-1,))])

    def cotangent(k):
        def outputs(value):
            args = list(primals)
            args[k] = value
            t_out, y_out = body(*args)[:2]
            return xp.concat([xp.reshape(t_out, (-1,)), xp.reshape(y_out, (-1,))])

        return lambda: xp.tensordot(g_flat, jacfwd(outputs)(primals[k]), axes=1)

    return tuple(cotangent(k) if is_floating(p) else None for k, p in enumerate(primals))


def _or_zeros(g, like):
    return xp.zeros_like(like) if g is None else g


def _adjoint_cotangents(g_t, g_y, out, primals, rhs, tree, n_inputs, options):
    """The continuous adjoint, integrated backwards between the output times (see the module's note)."""
    y0, t0, t1, t_eval, arg_leaves, closure_values = _split_inputs(primals, tree, n_inputs)
    t_out, y_out = out[0], out[1]
    g_y = _or_zeros(g_y, y_out)
    thetas = [*arg_leaves, *closure_values]
    diff = [k for k, v in enumerate(thetas) if is_floating(v)]
    dtype = y0.dtype
    n = y0.shape[0]
    sizes = [int(_size(thetas[k])) for k in diff]

    def f(t, y, ths):
        return rhs(t, y, *ths)[0]

    def augmented(t, z, *ths):
        y, a = z[:n], z[n : 2 * n]
        ths = list(ths)

        def of_y_theta(y_, *chosen):
            full = list(ths)
            for k, v in zip(diff, chosen):
                full[k] = v
            return f(t, y_, full)

        dy, pullback = pa_vjp(of_y_theta, y, *[ths[k] for k in diff])
        cts = pullback(a)
        parts = [dy, -cts[0]] + [-xp.reshape(xp.astype(c, dtype), (-1,)) for c in cts[1:]]
        return xp.concat(parts)

    m = t_out.shape[0]
    a = xp.zeros_like(y0)
    q = xp.zeros((sum(sizes),), dtype=dtype, device=y0.device)
    ct_t_out = [None] * m
    solver = {k: options[k] for k in ("method", "rtol", "atol", "max_step", "max_steps")}
    for i in range(m - 1, -1, -1):
        t_i, y_i = t_out[i], y_out[:, i]
        a = a + g_y[:, i]
        ct_t_out[i] = xp.sum(g_y[:, i] * f(t_i, y_i, thetas))
        t_prev = t_out[i - 1] if i > 0 else t0
        z = xp.concat([y_i, a, q])
        sol = integrate(augmented, t_i, t_prev, z, None, tuple(thetas), first_step=None, checkpoints=None,
                        max_memory=None, progress=False, ends_only=True, **solver)  # fmt: skip
        z = sol.y[:, -1]
        a, q = z[n : 2 * n], z[2 * n :]
        _check_backward_state(z[:n], y_out[:, i - 1] if i > 0 else y0, t_i, t_prev, solver, sol.status)
    ct_t0 = -xp.sum(a * f(t0, y0, thetas))
    ct_theta = [None] * len(thetas)
    offset = 0
    for k, size in zip(diff, sizes):
        ct_theta[k] = xp.astype(xp.reshape(q[offset : offset + size], thetas[k].shape), thetas[k].dtype)
        offset += size
    ct_t_out = xp.stack(ct_t_out)
    if g_t is not None:
        ct_t_out = ct_t_out + g_t
    if t_eval is not None:
        cts_times = [ct_t0, None, ct_t_out]
    else:  # the outputs are at t0 and t1
        cts_times = [ct_t0 + ct_t_out[0], ct_t_out[-1]]
    return (a, *cts_times, *ct_theta)


BACKWARD_LIMIT = 1e3  # the backward state's error, in units of the tolerance (atol + rtol |y|)


def _check_backward_state(y_back, y_ref, t_from, t_to, solver, status):
    """Refuse an adjoint whose state, integrated backwards, left the forward solution: an equation
    unstable backwards (stiff, or dissipative as diffusion) loses it, and the adjoint integrated along
    it is then wrong with no sign of it. Checked where the values are concrete (outside transforms)."""
    if transform_active():
        return
    scale = solver["atol"] + solver["rtol"] * xp.abs(y_ref)
    error = float(xp.max(xp.abs(y_back - y_ref) / scale))
    if not error <= BACKWARD_LIMIT or int(status) != 0:
        raise ValueError(
            f"solve_ivp(sensitivity='adjoint'): integrating the state backwards from t={float(t_from):g} to "
            f"t={float(t_to):g} left the forward solution (error {error:.3g} times the tolerance; "
            f"status {int(status)}): the equation is unstable backwards (stiff or dissipative), so the "
            "adjoint would be wrong; use sensitivity='discrete' or 'forward'"
        )


def _size(x):
    size = 1
    for d in x.shape:
        size *= d
    return size


ODE_SOLVE = Op(
    "solve_ivp",
    _kernel,
    multiple_results=True,
    higher_order=lambda *args, body, **params: tuple(body(*args)),
    abstract_eval=_abstract,
    vjp=_vjp,
)

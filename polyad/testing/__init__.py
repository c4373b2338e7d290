"""Checks shipped with the library: derivatives against finite differences, forward against reverse mode,
vmap against a loop. They work on any backend and are what the op table's tests call.

Example:
    >>> import numpy as np, polyad as pa
    >>> from polyad.testing import check_grads
    >>> check_grads(lambda x: pa.xp.sin(x) * x, (np.array([0.3, 1.2]),), order=2)
"""

import random
from collections.abc import Callable, Sequence
from typing import Any

import optree

import polyad as pa
import polyad.core.dispatch as dispatch
from polyad.core.avals import is_complex, is_floating


def _xp_of(x):
    return dispatch.backend_of_array(x).xp


def _leaves(tree):
    return optree.tree_leaves(tree, none_is_leaf=False)


def random_like(x, rng):
    """A random array with the shape, dtype and library of ``x`` (complex for complex ``x``)."""
    xp = _xp_of(x)
    n = 1
    for s in x.shape:
        n *= s
    vals = [rng.uniform(-1, 1) for _ in range(n)]
    if is_complex(x):
        vals = [complex(v, rng.uniform(-1, 1)) for v in vals]
    return xp.reshape(xp.asarray(vals, dtype=x.dtype, device=x.device), tuple(x.shape))


def inner(a, b):
    """Real inner product ``Re sum(conj(a) * b)`` over two pytrees of arrays."""
    total = 0.0
    for x, y in zip(_leaves(a), _leaves(b)):
        xp = _xp_of(x)
        if is_complex(x) or is_complex(y):
            cx = xp.conj(x) if is_complex(x) else x
            total += float(xp.sum(xp.real(cx * y))) if is_complex(cx * y) else float(xp.sum(cx * y))
        else:
            total += float(xp.sum(x * y))
    return total


def _axpy(a, x, y):
    return optree.tree_map(lambda xi, yi: yi + a * xi, x, y)


def numerical_jvp(f, args, tangents, eps):
    """Central finite difference of ``f`` at ``args`` along ``tangents`` (integer and boolean outputs get
    a zero tangent of their own dtype, as ``jvp`` gives them)."""
    plus = f(*_axpy(eps, tangents, args))
    minus = f(*_axpy(-eps, tangents, args))
    return optree.tree_map(
        lambda p, m: (p - m) / (2 * eps) if is_floating(p) else _xp_of(p).zeros_like(p), plus, minus
    )


def _close(a, b, atol, rtol, what):
    for x, y in zip(_leaves(a), _leaves(b)):
        xp = _xp_of(x) if dispatch.backend_of_array(x) is not None else _xp_of(y)
        x = xp.asarray(x)
        y = xp.asarray(y)
        if x.shape != y.shape:
            raise AssertionError(f"{what}: shapes differ, {x.shape} vs {y.shape}")
        if x.dtype != y.dtype:
            raise AssertionError(f"{what}: dtypes differ, {x.dtype} vs {y.dtype}")
        if x.size == 0:
            continue
        if not is_floating(x):
            if not bool(xp.all(x == y)):
                raise AssertionError(f"{what}: values differ\n got {x!r}\n expected {y!r}")
            continue
        err = xp.abs(x - y)
        bound = atol + rtol * xp.abs(y)
        if not bool(xp.all(err <= bound)):
            raise AssertionError(
                f"{what}: max abs error {float(xp.max(err)):.3g} exceeds tolerance "
                f"(atol={atol}, rtol={rtol})\n got {x!r}\n expected {y!r}"
            )


def _scalar_close(a, b, atol, rtol, what):
    if not abs(a - b) <= atol + rtol * max(abs(a), abs(b)):
        raise AssertionError(f"{what}: {a!r} vs {b!r} (atol={atol}, rtol={rtol})")


def check_jvp(
    f: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    eps: float = 1e-6,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    rng: Any = None,
) -> None:
    """``jvp`` of ``f`` at ``args`` matches central finite differences in a random direction."""
    rng = rng or random.Random(0)
    tangents = optree.tree_map(lambda x: random_like(x, rng), args)
    _, t_out = pa.jvp(f, tuple(args), tuple(tangents))
    _close(t_out, numerical_jvp(f, args, tangents, eps), atol, rtol, "jvp vs finite differences")


def check_vjp(
    f: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    eps: float = 1e-6,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    rng: Any = None,
    against_jvp: bool = True,
) -> None:
    """``vjp`` of ``f`` at ``args`` satisfies ``<u, J v> = <J^T u, v>`` with ``J v`` from finite differences
    (and, if ``against_jvp``, from ``jvp``: forward and reverse mode agree)."""
    rng = rng or random.Random(1)
    out, vjp_fn = pa.vjp(f, *args)
    u = optree.tree_map(lambda o: random_like(o, rng), out)
    v = optree.tree_map(lambda x: random_like(x, rng), tuple(args))
    grads = vjp_fn(u)
    for i, (gr, x) in enumerate(zip(_leaves(grads), _leaves(tuple(args)))):
        if tuple(gr.shape) != tuple(x.shape) or gr.dtype != x.dtype:
            raise AssertionError(
                f"vjp: cotangent {i} has shape {tuple(gr.shape)} and dtype {gr.dtype}; its primal has "
                f"shape {tuple(x.shape)} and dtype {x.dtype}"
            )
    lhs = inner(grads, v)
    fd = inner(u, numerical_jvp(f, args, v, eps))
    scale = max(1.0, abs(fd))
    _scalar_close(lhs, fd, atol * scale, rtol, "vjp vs finite differences (<J^T u, v> vs <u, J v>)")
    if against_jvp:
        _, jv = pa.jvp(f, tuple(args), tuple(v))
        _scalar_close(lhs, inner(u, jv), atol * scale, rtol, "vjp vs jvp (<J^T u, v> vs <u, J v>)")


def check_grads(
    f: Callable[..., Any],
    args: tuple[Any, ...],
    order: int = 1,
    modes: Sequence[str] = ("fwd", "rev"),
    *,
    eps: float = 1e-6,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Check derivatives of ``f`` at ``args`` up to ``order`` in the given modes.

    At each order, forward mode (``jvp``) and reverse mode (``vjp``) are compared with central finite
    differences in random directions and with each other; the next order checks the derivative
    functions themselves. Only outputs of floating dtype are differentiated.

    Args:
        f: function of the arrays in ``args`` returning an array or a pytree of arrays.
        args: tuple of floating arrays.
        order: highest derivative order to check.
        modes: any of "fwd" and "rev".
    """
    rng = random.Random(seed)
    args = tuple(args)
    if "fwd" in modes:
        check_jvp(f, args, eps=eps, atol=atol, rtol=rtol, rng=rng)
    if "rev" in modes:
        check_vjp(f, args, eps=eps, atol=atol, rtol=rtol, rng=rng, against_jvp="fwd" in modes)
    if order > 1:
        if "fwd" in modes:
            v = tuple(optree.tree_map(lambda x: random_like(x, rng), args))
            check_grads(
                lambda *a: pa.jvp(f, a, v)[1], args, order - 1, modes, eps=eps, atol=atol * 10,
                rtol=rtol * 10, seed=seed + 1,
            )  # fmt: skip
        if "rev" in modes:
            out = f(*args)
            u = optree.tree_map(lambda o: random_like(o, rng), out)
            check_grads(
                lambda *a: pa.vjp(f, *a)[1](u), args, order - 1, modes, eps=eps, atol=atol * 10,
                rtol=rtol * 10, seed=seed + 2,
            )  # fmt: skip


def check_vmap(
    f: Callable[..., Any],
    batched_args: tuple[Any, ...],
    in_dims: Any,
    *,
    out_dims: Any = 0,
    atol: float = 1e-12,
    rtol: float = 1e-10,
) -> None:
    """``vmap(f, in_dims, out_dims)`` equals a Python loop of ``f`` over the batch, stacked at out_dims."""
    flat, tree = optree.tree_flatten(tuple(batched_args), none_is_leaf=True)
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(batched_args)
    size = next(a.shape[d] for a, d in zip(batched_args, dims) if d is not None)
    got = pa.vmap(f, in_dims=in_dims, out_dims=out_dims)(*batched_args)
    per = []
    for i in range(size):
        args = [a if d is None else _take(a, i, d) for a, d in zip(batched_args, dims)]
        per.append(f(*args))
    expected = optree.tree_map(lambda *xs: _stack(xs, out_dims), *per)
    _close(got, expected, atol, rtol, f"vmap(in_dims={in_dims}, out_dims={out_dims}) vs loop")


def _take(a, i, d):
    return a[(slice(None),) * (d % len(a.shape)) + (i, ...)]


def _stack(xs, axis):
    xp = _xp_of(xs[0]) if dispatch.backend_of_array(xs[0]) is not None else None
    xs = [xp.asarray(x) for x in xs]
    return xp.stack(xs, axis=axis)


__all__ = ["check_grads", "check_jvp", "check_vjp", "check_vmap", "inner", "numerical_jvp", "random_like"]

"""Jacobians of complex functions that need not be holomorphic (``complex_layout=`` of jacrev, jacfwd and
hessian). Both layouts are computed as the real Jacobian of the realified map, where every complex input
or output leaf of shape S is a real leaf of shape S + (2,) holding (real, imaginary) parts:

- ``"real"``: that real Jacobian itself. For a complex output leaf of shape O and a complex input of
  shape I the block has shape O + (2,) + I + (2,), with ``J[o, a, i, b]`` the derivative of part ``a``
  of ``f(z)[o]`` with respect to part ``b`` of ``z[i]`` (0: real, 1: imaginary); a real leaf has no
  trailing 2.
- ``"wirtinger"``: the pair ``(df/dz, df/dz̄)``, each laid out as the holomorphic Jacobian (shape O + I,
  complex), with ``df/dz = (df/dx - i df/dy) / 2`` and ``df/dz̄ = (df/dx + i df/dy) / 2`` for
  ``z = x + iy``, so that ``df = df/dz dz + df/dz̄ dz̄``. A holomorphic f has ``df/dz̄ = 0``; a real f
  has ``df/dz̄ = conj(df/dz)``. Every differentiated input must be complex.
"""

import optree

from polyad.api._arguments import (
    check_has_aux,
    check_inputs,
    diff_args,
    flatten,
    func_name,
    leaf_name,
    split_aux,
)
from polyad.core.avals import dtype_name, is_complex
from polyad.ops.elementwise import imag, real
from polyad.ops.manipulation import stack
from polyad.transforms.abstract import eval_abstract

LAYOUTS = ("real", "wirtinger")


def check_complex_options(holomorphic, complex_layout, transform):
    check_has_aux(holomorphic, transform, "holomorphic")
    if complex_layout is not None and complex_layout not in LAYOUTS:
        raise ValueError(
            f"{transform}(complex_layout={complex_layout!r}): complex_layout must be None, 'real' or "
            "'wirtinger'"
        )
    if holomorphic and complex_layout is not None:
        raise ValueError(
            f"{transform}(holomorphic=True, complex_layout={complex_layout!r}): holomorphic=True gives "
            "the complex Jacobian of a holomorphic function; complex_layout is for any function: give one"
        )


def as_real_pairs(x):
    """A complex array of shape S as a real one of shape S + (2,): (real, imaginary) parts."""
    return stack([real(x), imag(x)], axis=-1)


def from_real_pairs(u):
    """The inverse of ``as_real_pairs``: the complex array of the precision of ``u``."""
    return u[..., 0] + 1j * u[..., 1]


def complex_layout_jacobian(transform, name, func, argnums, has_aux, layout, options):
    """``func``'s Jacobian in ``layout`` ("real" or "wirtinger") by ``transform`` (jacrev or jacfwd, with
    the other ``options`` passed on) applied to func's realified map."""

    def realify(args, kwargs):
        """The Jacobian transform of the realified map, the differentiated arguments as real pairs, their
        ranks and the list the map fills with its outputs' kinds when it runs in this process."""
        what, single, nums, diff = diff_args(name, func, argnums, args)
        in_flat, in_tree = flatten(diff)
        check_inputs(in_flat, in_tree, what, "argument", nums)
        kinds, out_kinds = [is_complex(x) for x in in_flat], []
        if layout == "wirtinger" and not all(kinds):
            i = kinds.index(False)
            raise TypeError(
                f"{what} with complex_layout='wirtinger': {leaf_name(in_tree, i, 'argument', nums)} is real "
                f"({dtype_name(in_flat[i].dtype)}); Wirtinger derivatives are taken with respect to complex "
                "inputs: differentiate real ones with complex_layout='real'"
            )

        def realified(*u_diff):
            leaves = flatten(u_diff)[0]
            z = optree.tree_unflatten(
                in_tree, [from_real_pairs(u) if c else u for u, c in zip(leaves, kinds)]
            )
            full = list(args)
            for n, d in zip(nums, z):
                full[n] = d
            out, aux = split_aux(func(*full, **kwargs), has_aux, what)
            o_flat, o_tree = flatten(out)
            out_kinds[:] = [_is_complex_array(o) for o in o_flat]
            out = optree.tree_unflatten(
                o_tree, [as_real_pairs(o) if c else o for o, c in zip(o_flat, out_kinds)]
            )
            return (out, aux) if has_aux else out

        realified.__name__ = func_name(func)
        u_diff = optree.tree_unflatten(
            in_tree, [as_real_pairs(x) if c else x for x, c in zip(in_flat, kinds)]
        )
        inner = transform(realified, 0 if single else tuple(range(len(nums))), has_aux=has_aux, **options)
        return inner, u_diff, [len(x.shape) for x in in_flat], out_kinds

    def jac_f(*args, **kwargs):
        inner, u_diff, in_ranks, out_kinds = realify(args, kwargs)
        res = inner(*u_diff)
        if layout == "real":
            return res
        jac, aux = res if has_aux else (res, None)
        if not out_kinds:  # the map ran on Dask workers: find the output kinds from shapes alone
            out_kinds[:] = _output_kinds(func, args, kwargs, has_aux)
        pair = _wirtinger(jac, out_kinds, in_ranks)
        return (pair, aux) if has_aux else pair

    def chunk_plan(*args, **kwargs):
        """The ChunkPlan of the Jacobian of the realified map for these arguments."""
        inner, u_diff, _, _ = realify(args, kwargs)
        return inner.chunk_plan(*u_diff)

    jac_f.chunk_plan = chunk_plan
    return jac_f


def _is_complex_array(x):
    return hasattr(x, "dtype") and is_complex(x)


def _output_kinds(func, args, kwargs, has_aux):
    """Which output leaves of ``func(*args)`` are complex: by eval_shape, else by one call."""
    try:
        out = eval_abstract(lambda *a: func(*a, **kwargs), *args)
    except Exception:
        out = func(*args, **kwargs)
    out = out[0] if has_aux else out
    return [_is_complex_array(o) for o in flatten(out)[0]]


def _wirtinger(jac, out_kinds, in_ranks):
    """``(df/dz, df/dz̄)`` from the real-layout Jacobian ``jac``: its leaves come output by output, each
    with one block per input leaf, of shape O (+ (2,) for a complex output) + I + (2,)."""
    flat, tree = optree.tree_flatten(jac, none_is_leaf=False)
    dz, dzbar = [], []
    for j, block in enumerate(flat):
        dx, dy = block[..., 0], block[..., 1]
        if out_kinds[j // len(in_ranks)]:
            at = (slice(None),) * (
                len(dx.shape) - in_ranks[j % len(in_ranks)] - 1
            )  # the output's (re, im) axis
            dx = dx[at + (0, ...)] + 1j * dx[at + (1, ...)]
            dy = dy[at + (0, ...)] + 1j * dy[at + (1, ...)]
        dz.append(0.5 * (dx - 1j * dy))
        dzbar.append(0.5 * (dx + 1j * dy))
    return optree.tree_unflatten(tree, dz), optree.tree_unflatten(tree, dzbar)


__all__ = ["LAYOUTS", "as_real_pairs", "check_complex_options", "complex_layout_jacobian", "from_real_pairs"]

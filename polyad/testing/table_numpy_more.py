"""More rows of the NumPy table (see ``table_numpy.py``): reductions and statistics, calculus and
polynomials, products, ``np.linalg``, ``np.fft``, the ufuncs (with the samples of the op table's row for
the same function) and the ndarray methods. ``NUMPY_TABLE`` is every row of both files."""

import warnings

from polyad.backends.host import np
from polyad.interop.numpy import UFUNCS
from polyad.testing import table_numpy
from polyad.testing.op_table import BY_NAME, on_backend
from polyad.testing.table_numpy import S, inplace, row


def _numpy_takes_2d_cross():
    """Whether the installed NumPy computes cross products of 2-element vectors (deprecated in NumPy 2.0,
    refused since 2.5: "Both input arrays must be (arrays of) 3-dimensional vectors")."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            np.cross([1.0, 0.0], [0.0, 1.0])
        except ValueError:
            return False
    return True


_CROSS_2D = _numpy_takes_2d_cross()

NO_VMAP_DATA = {"vmap": "the length of the result depends on the data"}

ROWS = [
    row(
        "sum",
        lambda s: [
            S((s.float(2, 3),)),
            S((s.float(2, 3),), {"axis": 0, "keepdims": True}),
            S((s.float(2, 3),), {"where": s.bool(2, 3), "initial": 1.0}),
        ],
    ),
    row("prod", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), 1))]),
    row(
        "mean",
        lambda s: [
            S((s.float(2, 3),)),
            S((s.float(2, 3),), {"axis": (0, 1)}),
            S((s.float(2, 3),), {"axis": 1, "where": s.xp.asarray([[True, False, True]] * 2)}),
        ],
    ),
    row(
        "var",
        lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": 0, "ddof": 1}), S((s.complex(4),))],
    ),
    row(
        "std", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": 1, "ddof": 1, "keepdims": True})]
    ),
    row("max", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": 1})]),
    row("amin", lambda s: [S((s.float(2, 3), 0))]),
    row("amax", lambda s: [S((s.float(2, 3),), {"initial": 0.0})]),
    row("min", lambda s: [S((s.float(2, 3),), {"axis": 0, "keepdims": True})]),
    row("ptp", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), 1))]),
    row("argmax", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), 1))]),
    row("argmin", lambda s: [S((s.float(2, 3), 0))]),
    row("any", lambda s: [S((s.bool(2, 3),)), S((s.float(2, 3) > 0.5, 1))]),
    row("all", lambda s: [S((s.bool(2, 3), 0))]),
    row("count_nonzero", lambda s: [S((s.bool(2, 3),)), S((s.bool(2, 3),), {"axis": 1})]),
    row("cumsum", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": 1})]),
    row("cumprod", lambda s: [S((s.float(2, 3),), {"axis": 0})]),
    row("cumulative_sum", lambda s: [S((s.float(4),)), S((s.float(4),), {"include_initial": True})]),
    row("cumulative_prod", lambda s: [S((s.float(2, 3),), {"axis": 1})]),
]


def _nan(s, *shape):
    """Floats of ``shape`` with every third element nan (at most one a row of 2 x 4)."""
    n = 1
    for d in shape:
        n *= d
    mask = s.xp.reshape(s.xp.asarray([k % 3 == 1 for k in range(n)]), shape)
    return s.xp.where(mask, float("nan"), s.float(*shape))


ROWS += [
    row(name, lambda s: [S((_nan(s, 2, 4),)), S((_nan(s, 2, 4),), {"axis": 1})])
    for name in (
        "nansum",
        "nanprod",
        "nanmean",
        "nanvar",
        "nanstd",
        "nanmax",
        "nanmin",
        "nancumsum",
        "nancumprod",
        "nanargmax",
        "nanargmin",
        "nanmedian",
    )
]
ROWS += [
    row(
        "median",
        lambda s: [
            S((s.float(5),)),
            S((s.float(2, 4),), {"axis": 1}),
            S((s.float(2, 3),), {"keepdims": True}),
        ],
    ),
    # q off the sample points: at a sample point the derivative in q has a kink (one-sided values differ)
    row(
        "quantile",
        lambda s: [S((s.float(7), 0.3)), S((s.float(2, 5), s.xp.asarray([0.3, 0.7])), {"axis": 1})],
    ),
    row(
        "percentile",
        lambda s: [S((s.float(6), 40.0)), S((s.float(3, 4), 90.0), {"axis": 0, "keepdims": True})],
    ),
    row("nanquantile", lambda s: [S((_nan(s, 2, 5), 0.4), {"axis": 1})]),
    row("nanpercentile", lambda s: [S((_nan(s, 6), 30.0))]),
    row(
        "average",
        lambda s: [
            S((s.float(2, 3),)),
            S((s.float(2, 3),), {"axis": 1, "weights": s.positive(3)}),
            S((s.float(4),), {"weights": s.positive(4), "returned": True}),
        ],
    ),
    row(
        "sort",
        lambda s: [S((s.float(5),)), S((s.float(2, 3),), {"axis": 0}), S((s.float(2, 3),), {"axis": None})],
    ),
    row("argsort", lambda s: [S((s.float(5),)), S((s.float(2, 3), 0))]),
    row("partition", lambda s: [S((s.float(5), 2))]),
    row("argpartition", lambda s: [S((s.float(5), 2))]),
    row(
        "searchsorted",
        lambda s: [
            S((s.xp.sort(s.float(5)), s.float(3))),
            S((s.xp.sort(s.float(5)), 0.1), {"side": "right"}),
        ],
    ),
    row(
        "digitize",
        lambda s: [
            S((s.float(4), s.xp.asarray([-0.5, 0.0, 0.5]))),
            S((s.float(4), s.xp.asarray([0.5, 0.0, -0.5]), True)),
        ],
    ),
    row(
        "unique:distinct",
        lambda s: [S((s.float(4),), {"return_index": True})],
        call=lambda np_, x, **k: np_.unique(x, **k)[0],
        known_failures=NO_VMAP_DATA,
    ),
    row(
        "unique",
        lambda s: [
            S((s.xp.asarray([3.0, 1.0, 2.0, 1.0]),)),
            S((s.xp.asarray([3.0, 1.0, 2.0, 1.0]),), {"return_counts": True, "return_inverse": True}),
        ],
        known_failures=NO_VMAP_DATA,
    ),
    row("unique_values", lambda s: [S((s.xp.asarray([3.0, 1.0, 3.0]),))], known_failures=NO_VMAP_DATA),
    row("unique_counts", lambda s: [S((s.xp.asarray([3.0, 1.0, 3.0]),))], known_failures=NO_VMAP_DATA),
    row("unique_inverse", lambda s: [S((s.xp.asarray([3.0, 1.0, 3.0]),))], known_failures=NO_VMAP_DATA),
    row("unique_all", lambda s: [S((s.xp.asarray([3.0, 1.0, 3.0]),))], known_failures=NO_VMAP_DATA),
    row("isin", lambda s: [S((s.int(2, 3), s.int(3))), S((s.int(4), s.int(2)), {"invert": True})]),
    row(
        "intersect1d",
        lambda s: [S((s.xp.asarray([1.0, 2.0, 3.0, 2.0]), s.xp.asarray([2.0, 3.0, 5.0])))],
        known_failures=NO_VMAP_DATA,
    ),
    row(
        "setdiff1d",
        lambda s: [S((s.xp.asarray([1.0, 2.0, 3.0, 2.0]), s.xp.asarray([2.0, 5.0])))],
        known_failures=NO_VMAP_DATA,
    ),
    row(
        "union1d",
        lambda s: [S((s.xp.asarray([1.0, 2.0]), s.xp.asarray([2.0, 5.0])))],
        known_failures=NO_VMAP_DATA,
    ),
    row(
        "bincount",
        lambda s: [
            S((s.xp.asarray([0, 2, 2, 3]),)),
            S((s.xp.asarray([0, 2, 2, 3]), s.float(4))),
            S((s.xp.asarray([1, 1]),), {"minlength": 4}),
        ],
    ),
    row(
        "lexsort",
        lambda s: [S((s.int(5, high=3), s.int(5, high=3)))],
        call=lambda np_, a, b: np_.lexsort((a, b)),
    ),
    row(
        "trim_zeros",
        lambda s: [S((s.xp.asarray([0.0, 0.0, 1.5, 0.0, 2.0, 0.0]),))],
        known_failures={
            **NO_VMAP_DATA,
            **dict.fromkeys(("vjp", "jvp", "grad2"), "finite differences move the zeros it trims off zero"),
        },
    ),
    row(
        "clip",
        lambda s: [
            S((s.float(5), -0.3, 0.4)),
            S((s.float(5), s.float(5) - 0.5, None)),
            S((s.float(5),), {"min": -0.2, "max": 0.2}),
        ],
    ),
    row("round", lambda s: [S((s.float(5),)), S((s.float(5) * 100, -1)), S((s.float(5), 2))]),
    row("around", lambda s: [S((s.float(5), 1))]),
    row("fix", lambda s: [S((s.float(5) * 3,))]),
    row("real", lambda s: [S((s.complex(3),)), S((s.float(3),))]),
    row("imag", lambda s: [S((s.complex(3),)), S((s.float(3),))]),
    row("angle", lambda s: [S((s.complex(3),)), S((s.complex(3), True))]),
    row("sinc", lambda s: [S((s.float(5) * 3,))]),
    row("i0", lambda s: [S((s.float(5) * 2,))]),
    row(
        "nan_to_num",
        lambda s: [
            S((s.xp.asarray([1.0, float("nan"), float("inf"), -float("inf")]),)),
            S((s.xp.asarray([1.0, float("nan"), float("inf")]),), {"nan": 2.0, "posinf": 9.0}),
        ],
    ),
    row("isposinf", lambda s: [S((s.xp.asarray([1.0, float("inf"), -float("inf")]),))]),
    row("isneginf", lambda s: [S((s.xp.asarray([1.0, float("inf"), -float("inf")]),))]),
    row("iscomplex", lambda s: [S((s.complex(3),)), S((s.float(3),))]),
    row("isreal", lambda s: [S((s.complex(3),)), S((s.float(3),))]),
    row("real_if_close", lambda s: [S((s.complex(3),))]),
    row(
        "isclose",
        lambda s: [
            S((s.float(4), s.float(4))),
            S((s.xp.asarray([1.0, float("nan")]),) * 2, {"equal_nan": True}),
        ],
    ),
    row(
        "allclose",
        lambda s: [S((s.float(4), s.float(4))), S((s.float(4),) * 2)],
        known_failures={"vmap": "one Python bool cannot hold a batch (examples differ)"},
    ),
    row(
        "array_equal",
        lambda s: [S((s.int(4), s.int(4))), S((s.float(2), s.float(3)))],
        known_failures={"vmap": "one Python bool cannot hold a batch (examples differ)"},
    ),
    row(
        "array_equiv",
        lambda s: [S((s.int(2, 1), s.int(1)))],
        known_failures={"vmap": "one Python bool cannot hold a batch (examples differ)"},
    ),
]

# ------------------------------------------------------------------------------ calculus, polynomials

ROWS += [
    row(
        "diff",
        lambda s: [
            S((s.float(5),)),
            S((s.float(2, 4),), {"axis": 0}),
            S((s.float(5), 2)),
            S((s.float(4),), {"prepend": 0.0, "append": s.float(1)}),
        ],
    ),
    row("ediff1d", lambda s: [S((s.float(2, 3),)), S((s.float(4),), {"to_begin": s.float(), "to_end": 0.5})]),
    row(
        "gradient",
        lambda s: [
            S((s.float(5),)),
            S((s.float(5), 0.5), {"edge_order": 2}),
            S((s.float(3, 4),)),
            S((s.float(5), s.xp.cumulative_sum(s.positive(5)))),
        ],
    ),
    row(
        "trapezoid",
        lambda s: [
            S((s.float(5),)),
            S((s.float(5), s.xp.cumulative_sum(s.positive(5)))),
            S((s.float(2, 4),), {"dx": 0.5, "axis": 0}),
        ],
    ),
    row(
        "cov",
        lambda s: [
            S((s.float(3, 6),)),
            S((s.float(6), s.float(6))),
            S((s.float(6, 2),), {"rowvar": False, "ddof": 0}),
            S((s.float(2, 5),), {"aweights": s.positive(5)}),
        ],
    ),
    row("corrcoef", lambda s: [S((s.float(3, 6),)), S((s.float(6), s.float(6)))]),
    row(
        "interp",
        lambda s: [
            S((s.float(4) * 1.2, s.xp.asarray([-1.0, -0.2, 0.3, 1.0]), s.float(4))),
            S((s.float(4) * 2, s.xp.asarray([-1.0, 0.0, 1.0]), s.float(3)), {"left": 0.0, "right": 1.0}),
        ],
    ),
    row("polyval", lambda s: [S((s.float(3), s.float(4))), S((s.float(4), s.float()))]),
    row("polyadd", lambda s: [S((s.float(3), s.float(2)))]),
    row("polysub", lambda s: [S((s.float(2), s.float(4)))]),
    row("unwrap", lambda s: [S((s.float(6) * 6,)), S((s.float(2, 5) * 6,), {"axis": 0})]),
    row("vander", lambda s: [S((s.float(4),)), S((s.float(3), 4), {"increasing": True})]),
    row("polyfit", lambda s: [S((s.xp.linspace(0.0, 1.0, 8), s.float(8), 2), diff_argnums=(1,))], rtol=1e-6),
    row(
        "apply_along_axis",
        lambda s: [S((s.float(3, 4),))],
        call=lambda np_, x: np_.apply_along_axis(lambda r: np_.cumsum(r) * r[0], 1, x),
    ),
    row(
        "piecewise",
        lambda s: [S((s.float(6),))],
        call=lambda np_, x: np_.piecewise(x, [x < 0, x >= 0], [lambda v: v**2, lambda v: np_.sqrt(v + 1.0)]),
        known_failures={
            "vmap": "each function sees the elements its condition selects: a data-dependent length"
        },
    ),
]

# ------------------------------------------------------------------------------ products

ROWS += [
    row(
        "dot",
        lambda s: [
            S((s.float(3), s.float(3))),
            S((s.float(2, 3), s.float(3, 4))),
            S((s.float(2, 3), s.float(3))),
            S((s.float(3), s.float(2, 3, 4))),
            S((s.float(2, 2, 3), s.float(4, 3, 2))),
            S((s.float(), s.float(3))),
        ],
    ),
    row("vdot", lambda s: [S((s.complex(2, 2), s.complex(4))), S((s.float(3), s.float(3)))]),
    row("inner", lambda s: [S((s.float(3), s.float(3))), S((s.float(2, 3), s.float(4, 3)))]),
    row("outer", lambda s: [S((s.float(3), s.float(2))), S((s.float(2, 2), s.float(3)))]),
    row("kron", lambda s: [S((s.float(2, 2), s.float(3, 2))), S((s.float(2), s.float(2, 3)))]),
    row(
        "tensordot",
        lambda s: [
            S((s.float(2, 3, 4), s.float(3, 4, 2))),
            S((s.float(2, 3), s.float(3, 2), 1)),
            S((s.float(2, 3), s.float(4, 2)), {"axes": ([0], [1])}),
        ],
    ),
    row(
        "cross",
        lambda s: [
            S((s.float(3), s.float(3))),
            S((s.float(2, 3), s.float(3))),
            # 2-element vectors only where the reference, the installed NumPy, still takes them
            *(
                [S((s.float(2), s.float(2))), S((s.float(2, 3), s.float(2, 3)), {"axis": 0})]
                if _CROSS_2D
                else []
            ),
        ],
    ),
    row(
        "einsum",
        lambda s: [
            S(("ij,jk->ik", s.float(2, 3), s.float(3, 4))),
            S(("ii", s.float(3, 3))),
            S(("ij->j", s.float(2, 3))),
            S(("i,i", s.float(3), s.float(3))),
            S(("bij,bjk->bik", s.float(2, 2, 3), s.float(2, 3, 2))),
            S(("...ij,...j->...i", s.float(2, 3, 3), s.float(3))),
            S(("ij,jk,kl", s.float(2, 3), s.float(3, 2), s.float(2, 2))),
            S(("i,j", s.float(2), s.float(3))),
            S(("iij->ij", s.float(3, 3, 2))),
        ],
    ),
    row(
        "convolve",
        lambda s: [
            S((s.float(5), s.float(3))),
            S((s.float(3), s.float(5), "same")),
            S((s.float(5), s.float(2), "valid")),
        ],
    ),
    row("correlate", lambda s: [S((s.float(5), s.float(3))), S((s.float(4), s.float(2), "full"))]),
    row("polymul", lambda s: [S((s.float(3), s.float(2)))]),
]

# ------------------------------------------------------------------------------ linalg and fft

ROWS += [
    row(
        "linalg.solve",
        lambda s: [S((s.well_conditioned(3), s.float(3))), S((s.well_conditioned(3), s.float(3, 2)))],
    ),
    row("linalg.inv", lambda s: [S((s.well_conditioned(3),))]),
    row("linalg.det", lambda s: [S((s.well_conditioned(3),))]),
    row("linalg.slogdet", lambda s: [S((s.well_conditioned(3),))]),
    row(
        "linalg.cholesky", lambda s: [S((s.spd(3),))], call=lambda np_, a: np_.linalg.cholesky((a + a.T) / 2)
    ),
    row(
        "linalg.eigh",
        lambda s: [S((s.spd(3),)), S((s.spd(3), "U"))],
        call=lambda np_, a, *u: tuple(v for v in np_.linalg.eigh(a, *u)[:1]),
    ),
    row(
        "linalg.eigh:vectors",
        lambda s: [S((s.spd(3),))],
        call=lambda np_, a: np_.abs(np_.linalg.eigh(a).eigenvectors),
    ),  # each vector up to its sign
    row("linalg.eigvalsh", lambda s: [S((s.float(3, 3),)), S((s.float(3, 3), "U"))]),
    # general eigenvalues are complex in polyad (NumPy's real where all are): compared by their real parts,
    # at symmetric matrices (distinct real eigenvalues, real vectors up to sign)
    row("linalg.eigvals", lambda s: [S((s.spd(3),))], call=lambda np_, a: np_.real(np_.linalg.eigvals(a))),
    row("linalg.eig", lambda s: [S((s.spd(3),))], call=lambda np_, a: np_.real(np_.linalg.eig(a)[0])),
    row(
        "linalg.eig:vectors",
        lambda s: [S((s.spd(3),))],
        call=lambda np_, a: np_.abs(np_.real(np_.linalg.eig(a)[1])),
    ),
    row("roots", lambda s: [S((s.float(4),))], call=lambda np_, p: np_.real(np_.roots(p))),
    row(
        "linalg.svd", lambda s: [S((s.float(3, 2),))], call=lambda np_, a: np_.linalg.svd(a, compute_uv=False)
    ),
    row(
        "linalg.svd:vectors",
        lambda s: [S((s.float(3, 2),))],
        call=lambda np_, a: (lambda r: np_.abs(r.U))(np_.linalg.svd(a, full_matrices=False)),
    ),
    row("linalg.svdvals", lambda s: [S((s.float(3, 4),))]),
    row(
        "linalg.qr", lambda s: [S((s.float(4, 3),))], call=lambda np_, a: np_.abs(np_.linalg.qr(a, mode="r"))
    ),
    row("linalg.pinv", lambda s: [S((s.float(3, 2),))]),
    row("linalg.matrix_rank", lambda s: [S((s.float(3, 3),)), S((s.float(3, 2),), {"tol": 1e-3})]),
    row("linalg.matrix_power", lambda s: [S((s.float(3, 3), 3)), S((s.well_conditioned(3), -2))]),
    row("linalg.multi_dot", lambda s: [S((s.float(3), s.float(3, 2), s.float(2, 2)))], sequence_arg=True),
    row(
        "linalg.lstsq",
        lambda s: [S((s.float(5, 2), s.float(5)))],
        call=lambda np_, a, b: np_.linalg.lstsq(a, b)[:2],
    ),
    row("linalg.cond", lambda s: [S((s.well_conditioned(3),)), S((s.well_conditioned(3), 1))]),
    row(
        "linalg.norm",
        lambda s: [
            S((s.float(4),)),
            S((s.float(3, 3),)),
            S((s.float(4), 1)),
            S((s.float(4), np.inf)),
            S((s.float(3, 3), "nuc")),
            S((s.float(3, 3), 1)),
            S((s.float(2, 3), None, 1)),
            S((s.float(2, 3, 3), None, (1, 2))),
            S((s.float(3, 3),), {"keepdims": True}),
        ],
    ),
    row("linalg.vector_norm", lambda s: [S((s.float(4),))]),
    row("linalg.matrix_norm", lambda s: [S((s.float(3, 3),))]),
    row("linalg.outer", lambda s: [S((s.float(3), s.float(2)))]),
    row("linalg.cross", lambda s: [S((s.float(2, 3), s.float(2, 3)))]),
    row("linalg.vecdot", lambda s: [S((s.float(2, 3), s.float(3)))]),
    row("linalg.matmul", lambda s: [S((s.float(2, 3), s.float(3)))]),
    row("linalg.tensordot", lambda s: [S((s.float(2, 3), s.float(3, 2)), {"axes": 1})]),
    row("linalg.diagonal", lambda s: [S((s.float(2, 3, 3),))]),
    row("linalg.trace", lambda s: [S((s.float(2, 3, 3),))]),
    row("linalg.matrix_transpose", lambda s: [S((s.float(2, 3),))]),
]
ROWS += [
    row(f"fft.{name}", lambda s: [S((s.float(6),)), S((s.complex(2, 4),), {"axis": 0, "norm": "ortho"})])
    for name in ("fft", "ifft")
]
ROWS += [
    row("fft.rfft", lambda s: [S((s.float(6),)), S((s.float(5), 8))]),
    row("fft.irfft", lambda s: [S((s.complex(4),)), S((s.complex(4), 7))]),
    row("fft.hfft", lambda s: [S((s.complex(4),))]),
    row("fft.ihfft", lambda s: [S((s.float(6),))]),
    row("fft.fft2", lambda s: [S((s.complex(3, 4),))]),
    row("fft.ifft2", lambda s: [S((s.complex(3, 4),))]),
    row("fft.rfft2", lambda s: [S((s.float(3, 4),))]),
    row("fft.irfft2", lambda s: [S((s.complex(3, 3),))]),
    row("fft.fftn", lambda s: [S((s.complex(2, 3),))]),
    row("fft.ifftn", lambda s: [S((s.complex(2, 3),), {"axes": (0,)})]),
    row("fft.rfftn", lambda s: [S((s.float(2, 4),))]),
    row("fft.irfftn", lambda s: [S((s.complex(2, 3),))]),
    row("fft.fftshift", lambda s: [S((s.float(5),))]),
    row("fft.ifftshift", lambda s: [S((s.float(2, 4),), {"axes": 1})]),
]

# ------------------------------------------------------------------------------ ufuncs

# the op table's row whose samples fit each ufunc (the same function, or one with the same domain)
_SAMPLES_OF = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh",
    "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh", "conjugate": "conj", "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift", "right_shift": "bitwise_right_shift", "power": "pow", "rint": "round",
    "fabs": "sin", "cbrt": "sin", "deg2rad": "sin", "radians": "sin", "rad2deg": "sin", "degrees": "sin",
    "exp2": "exp", "logaddexp2": "logaddexp", "fmax": "maximum", "fmin": "minimum", "fmod": "remainder",
    "float_power": "pow", "heaviside": "copysign", "spacing": "sin", "ldexp": "multiply", "matvec": "matmul",
    "vecmat": "matmul", "modf": "sin", "divmod": "remainder",
}  # fmt: skip
_BY_HAND = {
    "matvec": lambda s: [S((s.float(2, 3), s.float(3))), S((s.float(2, 3), s.float(4, 3)))],
    "vecmat": lambda s: [S((s.float(3), s.float(3, 2)))],
    "vecdot": lambda s: [S((s.float(2, 3), s.float(3)))],
    "matmul": lambda s: [S((s.float(2, 3), s.float(3, 2))), S((s.float(3), s.float(2, 3, 4)))],
    "ldexp": lambda s: [S((s.float(4), s.xp.asarray([0, 1, -2, 3])))],
    # the step's derivative in x1 is zero but at 0, where finite differences see the jump: x2 only
    "heaviside": lambda s: [S((s.xp.asarray([-1.0, 0.0, 2.0]), s.float(3)), diff_argnums=(1,))],
    "exp": lambda s: [S((s.float(4),)), S((s.int(4),))],  # integers: computed in float64, as NumPy
    "sqrt": lambda s: [S((s.positive(4),)), S((s.int(4, low=1),))],
    "divide": lambda s: [S((s.float(4), s.positive(4))), S((s.int(4), s.int(4, low=1)))],
}


def _ufunc_samples(name):
    if name in _BY_HAND:
        return _BY_HAND[name]
    source = BY_NAME[_SAMPLES_OF.get(name, name)]
    return lambda s: source.samples(s)[:3]


_SAME_OP = {name for name, entry in UFUNCS.items() if entry.how == f"xp.{_SAMPLES_OF.get(name, name)}"}
_UFUNC_ROWS = [
    row(name, _ufunc_samples(name)) for name, entry in sorted(UFUNCS.items()) if entry.impl is not None
]
for _r in _UFUNC_ROWS:
    _source = BY_NAME.get(_SAMPLES_OF.get(_r.name, _r.name))
    if (
        _source is not None and _r.name not in _BY_HAND and _r.name in _SAME_OP
    ):  # the same function's failures
        _r.differentiable = _r.differentiable and _source.differentiable
        _r.known_failures = dict(_source.known_failures)
        _r.backend_failures = dict(_source.backend_failures)
        _r.grad_rtol, _r.grad_atol, _r.eps = _source.grad_rtol, _source.grad_atol, _source.eps
ROWS += _UFUNC_ROWS
ROWS += [
    row(
        "add:out",
        lambda s: [S((s.float(3), s.float(3), s.float(3)))],
        call=inplace(lambda np_, o, a, b: np_.add(a, b, out=o)),
    ),
    row(
        "multiply:where",
        lambda s: [S((s.float(3), s.float(3), s.float(3), s.bool(3)))],
        call=inplace(lambda np_, o, a, b, m: np_.multiply(a, b, out=o, where=m)),
        vmap_dims=(0, 1, 2),
    ),
    row(
        "exp:dtype",
        lambda s: [S((s.float(3),))],
        call=lambda np_, a: np_.exp(a, dtype=np.float32),
        rtol=1e-6,  # float32 results: two libraries' expf may differ by an ulp or two (CUDA's from NumPy's)
        eps=1e-3,
        grad_rtol=1e-2,
        grad_atol=1e-3,
        backend_failures=on_backend("array_api_strict", "float32 from a NumPy dtype", "all"),
    ),
    row(
        "add.reduce",
        lambda s: [S((s.float(2, 3),)), S((s.float(2, 3),), {"axis": None})],
        call=lambda np_, a, **k: np_.add.reduce(a, **k),
    ),
    row(
        "maximum.reduce",
        lambda s: [S((s.float(2, 3),), {"axis": 1})],
        call=lambda np_, a, **k: np_.maximum.reduce(a, **k),
    ),
    row(
        "multiply.accumulate", lambda s: [S((s.float(2, 3),))], call=lambda np_, a: np_.multiply.accumulate(a)
    ),
    row(
        "subtract.outer",
        lambda s: [S((s.float(3), s.float(2, 2)))],
        call=lambda np_, a, b: np_.subtract.outer(a, b),
    ),
    row(
        "add.at",
        lambda s: [S((s.float(4), s.xp.asarray([0, 2, 2]), s.float(3)))],
        call=inplace(lambda np_, x, i, v: np_.add.at(x, i, v)),
    ),
]

# ------------------------------------------------------------------------------ ndarray methods

_M = "ndarray."
ROWS += [
    row(_M + "copy", lambda s: [S((s.float(2, 3),))]),
    row(_M + "sum", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), 1))]),
    row(_M + "mean", lambda s: [S((s.float(2, 3),), {"axis": 0})]),
    row(_M + "std", lambda s: [S((s.float(2, 3),), {"ddof": 1})]),
    row(_M + "var", lambda s: [S((s.float(2, 3), 1))]),
    row(_M + "prod", lambda s: [S((s.float(2, 3),))]),
    row(_M + "min", lambda s: [S((s.float(2, 3),))]),
    row(_M + "max", lambda s: [S((s.float(2, 3), 0))]),
    row(_M + "argmin", lambda s: [S((s.float(2, 3),))]),
    row(_M + "argmax", lambda s: [S((s.float(2, 3), 1))]),
    row(_M + "cumsum", lambda s: [S((s.float(2, 3),))]),
    row(_M + "cumprod", lambda s: [S((s.float(2, 3), 1))]),
    row(_M + "any", lambda s: [S((s.bool(2, 3),))]),
    row(_M + "all", lambda s: [S((s.bool(2, 3), 1))]),
    row(
        _M + "reshape",
        lambda s: [
            S((s.float(2, 3), 3, 2)),
            S((s.float(2, 3), (6,))),
            S((s.float(2, 3), -1), {"order": "F"}),
        ],
    ),
    row(_M + "ravel", lambda s: [S((s.float(2, 3),))]),
    row(_M + "flatten", lambda s: [S((s.float(2, 3),)), S((s.float(2, 3), "F"))]),
    row(
        _M + "transpose",
        lambda s: [S((s.float(2, 3, 4),)), S((s.float(2, 3, 4), 1, 0, 2)), S((s.float(2, 3, 4), (2, 0, 1)))],
    ),
    row(_M + "swapaxes", lambda s: [S((s.float(2, 3), 0, 1))]),
    row(_M + "squeeze", lambda s: [S((s.float(1, 3),))]),
    row(_M + "astype:int", lambda s: [S((s.float(3) * 3, int)), S((s.int(3), float))], differentiable=False),
    row(
        _M + "astype",
        lambda s: [S((s.float(3), "float32")), S((s.float(3), np.float64))],
        eps=1e-3,
        grad_rtol=1e-2,
        grad_atol=1e-3,
        backend_failures=on_backend(
            "array_api_strict", "a float to integer cast of a negative value", "vmap"
        ),
    ),
    row(_M + "dot", lambda s: [S((s.float(2, 3), s.float(3))), S((s.float(3), s.float(3)))], vmap_dims=(0,)),
    row(_M + "clip", lambda s: [S((s.float(4), -0.2, 0.3))]),
    row(_M + "round", lambda s: [S((s.float(4), 1))]),
    row(_M + "conj", lambda s: [S((s.complex(3),))]),
    row(_M + "conjugate", lambda s: [S((s.complex(3),))]),
    row(_M + "diagonal", lambda s: [S((s.float(3, 3),))]),
    row(_M + "trace", lambda s: [S((s.float(3, 3),))]),
    row(_M + "repeat", lambda s: [S((s.float(3), 2))]),
    row(_M + "take", lambda s: [S((s.float(4), s.xp.asarray([0, 3])))], vmap_dims=(0,)),
    row(_M + "nonzero", lambda s: [S((s.bool(4),))], known_failures=NO_VMAP_DATA),
    row(
        _M + "compress",
        lambda s: [S((s.float(3), s.xp.asarray([True, False, True])))],
        known_failures=NO_VMAP_DATA,
        vmap_dims=(0,),
    ),
    row(_M + "argsort", lambda s: [S((s.float(4),))]),
    row(_M + "argpartition", lambda s: [S((s.float(4), 1))]),
    row(_M + "searchsorted", lambda s: [S((s.xp.sort(s.float(4)), s.float(2)))], vmap_dims=(0,)),
    row(
        _M + "sort",
        lambda s: [S((s.float(4),)), S((s.float(2, 3), 0))],
        call=inplace(lambda np_, x, *a: x.sort(*a)),
    ),
    row(_M + "partition", lambda s: [S((s.float(4), 1))], call=inplace(lambda np_, x, k: x.partition(k))),
    row(_M + "fill", lambda s: [S((s.float(4), s.float()))], call=inplace(lambda np_, x, v: x.fill(v))),
    row(
        _M + "put",
        lambda s: [S((s.float(2, 3), s.xp.asarray([0, 4]), s.float(2)))],
        call=inplace(lambda np_, x, i, v: x.put(i, v)),
    ),
    row(_M + "real", lambda s: [S((s.complex(3),)), S((s.float(3),))], call=lambda np_, x: x.real),
    row(_M + "imag", lambda s: [S((s.complex(3),)), S((s.float(3),))], call=lambda np_, x: x.imag),
    row(_M + "T", lambda s: [S((s.float(2, 3, 4),)), S((s.float(3),))], call=lambda np_, x: x.T),
    row(_M + "mT", lambda s: [S((s.float(2, 3, 4),))], call=lambda np_, x: x.mT),
    row(_M + "itemsize", lambda s: [S((s.float(3),))], call=lambda np_, x: x.itemsize),
    row(_M + "nbytes", lambda s: [S((s.float(2, 3),))], call=lambda np_, x: x.nbytes),
    row(
        _M + "__contains__",
        lambda s: [S((s.int(4), 2))],
        call=lambda np_, x, v: v in x,
        known_failures={"vmap": "one Python bool cannot hold a batch (examples differ)"},
    ),
]

NUMPY_TABLE = table_numpy.ROWS + ROWS

# Abstract evaluation (eval_shape, pa.jit's tracing) has shapes and dtypes, no values: these functions
# return a Python value, have a shape that depends on the data, or read values to decide their result
_PYTHON_VALUE = "returns a Python value (an int, bool, tuple or dtype), not an array"
_DATA_SHAPE = "the result's shape depends on the data"
_READS_VALUES = "reads values (int() or bool() of an array) to decide the result"
_NOT_ABSTRACT = {
    **dict.fromkeys(("shape", "ndim", "size", "result_type", "can_cast", "iscomplexobj", "isrealobj",
                     "may_share_memory",
                     "shares_memory", "allclose", "array_equal", "array_equiv", "ndarray.itemsize",
                     "ndarray.nbytes", "ndarray.__contains__"), _PYTHON_VALUE),
    **dict.fromkeys(("where:nonzero", "nonzero", "flatnonzero", "argwhere", "compress", "extract", "unique",
                     "unique:distinct", "unique_values", "unique_counts", "unique_inverse", "unique_all",
                     "intersect1d", "setdiff1d", "union1d", "ndarray.nonzero", "ndarray.compress"),
                    _DATA_SHAPE),
    **dict.fromkeys(("place", "digitize", "bincount", "trim_zeros", "real_if_close", "linalg.lstsq"),
                    _READS_VALUES),
}  # fmt: skip
# finite differences of a repeated value move its copies apart: the result's length changes
_SPLIT = "finite differences split the repeated values (the result's length changes)"
for _name in ("unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "intersect1d",
              "setdiff1d", "union1d"):  # fmt: skip
    _row = next(r for r in NUMPY_TABLE if r.name == _name)
    _row.known_failures = {**_row.known_failures, "vjp": _SPLIT, "jvp": _SPLIT, "grad2": _SPLIT}
for _row in NUMPY_TABLE:
    if _row.name in _NOT_ABSTRACT:
        _row.known_failures = {**_row.known_failures, "abstract": _NOT_ABSTRACT[_row.name]}
        if _NOT_ABSTRACT[_row.name] is _PYTHON_VALUE:  # vmap's outputs are arrays
            _row.known_failures.setdefault("vmap", _PYTHON_VALUE)

"""The names of the Python Array API standard, revision 2025.12, that polyad's namespace provides.

The namespace (polyad/xp.py) and the op table's coverage test both read these lists. polyad reports
2025.12 (``polyad.xp.__array_api_version__``): it has the revision's additions (``broadcast_shapes``,
``isin``, ``linalg.eig``, ``linalg.eigvals``) and its changes (``broadcast_arrays``, ``meshgrid`` and
``__array_namespace_info__().devices()`` return tuples; ``expand_dims`` takes a tuple of axes,
``permute_dims`` negative axes, ``searchsorted`` a scalar). ``__array_namespace__(api_version=...)``
accepts every revision up to it and returns the same namespace (each revision's behaviour is a subset of
the next one's, but for the list-to-tuple change, where a tuple serves a caller written for a list).
"""

API_VERSION = "2025.12"
SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")

CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")

DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
)  # fmt: skip

FUNCTIONS = (
    # creation
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace",
    "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    # data types
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
    # element-wise
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_left_shift", "bitwise_invert", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil",
    "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide",
    "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal", "log",
    "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "maximum", "minimum", "multiply", "negative", "nextafter", "not_equal", "positive", "pow", "real",
    "reciprocal", "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract",
    "tan", "tanh", "trunc",
    # indexing
    "take", "take_along_axis",
    # linear algebra (main namespace)
    "matmul", "matrix_transpose", "tensordot", "vecdot",
    # manipulation
    "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    # searching
    "argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where",
    # sets
    "isin", "unique_all", "unique_counts", "unique_inverse", "unique_values",
    # sorting
    "argsort", "sort",
    # statistical
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
    # utility
    "all", "any", "diff",
    # inspection
    "__array_namespace_info__",
)  # fmt: skip

LINALG = (
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet",
    "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
)  # fmt: skip

FFT = (
    "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
    "rfftfreq", "fftshift", "ifftshift",
)  # fmt: skip

"""Op table rows: data type functions.

``astype`` is an op (differentiable between floating dtypes). The others answer Python values, checked
against references written from the standard's tables, independent of any library: the type promotion
lattice (``result_type``, ``can_cast``), the dtype kinds (``isdtype``) and the IEEE 754 / two's
complement limits (``finfo``, ``iinfo``). ``finfo``/``iinfo`` return tuples of their numbers, so the value
check compares them field by field; a dtype result is compared as a dtype (tests/helpers.py). They return
no arrays, so neither abstract evaluation nor vmap applies to them.
"""

from polyad.testing.op_table import OpInfo, Sample

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_FLOATS = {"float32": 32, "float64": 64}
_COMPLEX = {"complex64": 64, "complex128": 128}


def _name(dtype):
    if isinstance(dtype, type):  # NumPy's scalar types stand for dtypes
        return dtype.__name__
    return str(dtype).rsplit(".", 1)[-1]


def _dtype_of(a):
    # an array's dtype; a dtype itself (NumPy's scalar types have a ``dtype`` descriptor: not arrays)
    return a.dtype if not isinstance(a, type) and hasattr(a, "device") else a


def _promote(a, b):
    """The standard's promotion of two dtype names (None where it defines none)."""
    if a == b:
        return a
    for table in (_INTS, _UINTS, _FLOATS):
        if a in table and b in table:
            return a if table[a] >= table[b] else b
    if a in _UINTS and b in _INTS or a in _INTS and b in _UINTS:
        u, i = (a, b) if a in _UINTS else (b, a)
        if _INTS[i] > _UINTS[u]:
            return i
        return {8: "int16", 16: "int32", 32: "int64"}.get(_UINTS[u])
    if (a in _FLOATS or a in _COMPLEX) and (b in _FLOATS or b in _COMPLEX):
        bits = max(_FLOATS.get(a, 0), _COMPLEX.get(a, 0) // 2, _FLOATS.get(b, 0), _COMPLEX.get(b, 0) // 2)
        return f"complex{2 * bits}"
    return None


def _result_type_ref(xp, *args):
    names = [_name(_dtype_of(a)) for a in args if not isinstance(a, bool | int | float | complex)]
    out = names[0]
    for n in names[1:]:
        out = _promote(out, n)
    scalars = [a for a in args if isinstance(a, bool | int | float | complex)]
    if any(isinstance(v, complex) for v in scalars) and out in _FLOATS:
        out = f"complex{2 * _FLOATS[out]}"
    return getattr(xp, out)


def _can_cast_ref(xp, from_, to):
    a, b = _name(_dtype_of(from_)), _name(to)
    return _promote(a, b) == b


_KINDS = {
    "bool": lambda n: n == "bool",
    "signed integer": lambda n: n in _INTS,
    "unsigned integer": lambda n: n in _UINTS,
    "integral": lambda n: n in _INTS or n in _UINTS,
    "real floating": lambda n: n in _FLOATS,
    "complex floating": lambda n: n in _COMPLEX,
    "numeric": lambda n: n != "bool",
}


def _isdtype_ref(xp, dtype, kind):
    n = _name(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return any(_KINDS[k](n) if isinstance(k, str) else _name(k) == n for k in kinds)


# IEEE 754 binary32 / binary64: (bits, mantissa bits, largest exponent, smallest normal exponent)
_IEEE = {32: (32, 23, 127, -126), 64: (64, 52, 1023, -1022)}


def _finfo_ref(xp, t):
    n = _name(_dtype_of(t))
    bits = _FLOATS.get(n) or _COMPLEX[n] // 2
    b, mant, emax, emin = _IEEE[bits]
    big = (2.0 - 2.0**-mant) * 2.0**emax
    return (b, 2.0**-mant, big, -big, 2.0**emin)


def _iinfo_ref(xp, t):
    n = _name(_dtype_of(t))
    if n in _INTS:
        bits = _INTS[n]
        return (bits, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)))
    bits = _UINTS[n]
    return (bits, 2**bits - 1, 0)


# ------------------------------------------------------------------------------ samples


def astype_samples(s):
    xp = s.xp
    return [
        Sample((s.float(2, 3), xp.float32), name="to float32"),
        Sample((s.float(2, 3, dtype=xp.float32), xp.float64), name="from float32"),
        Sample((s.float(3), xp.complex128), name="to complex"),
        Sample((s.complex(3), xp.complex64), name="complex to complex64"),
        Sample((s.float(), xp.float64), name="0-d same"),
        Sample((s.float(0, 2), xp.float32), name="empty"),
        Sample((s.noncontiguous(2, 3), xp.float64), {"copy": False}, name="non-contiguous"),
        Sample((s.int(2, 3), xp.float64), name="int to float"),
        Sample((s.bool(3), xp.int8), name="bool to int"),
    ]


def can_cast_samples(s):
    xp = s.xp
    pairs = [
        (xp.int8, xp.int16), (xp.int16, xp.int8), (xp.uint8, xp.int16), (xp.int8, xp.uint8),
        (xp.uint16, xp.uint32), (xp.uint32, xp.int32), (xp.float32, xp.float64), (xp.float64, xp.float32),
        (xp.float32, xp.complex64), (xp.float64, xp.complex64), (xp.complex128, xp.complex64),
        (xp.bool, xp.bool),
    ]  # fmt: skip
    out = [Sample(p, name=f"{_name(p[0])}->{_name(p[1])}") for p in pairs]
    out.append(Sample((s.float(2), xp.float32), name="array"))
    return out


def finfo_samples(s):
    xp = s.xp
    return [
        Sample((xp.float32,), name="float32"),
        Sample((xp.float64,), name="float64"),
        Sample((xp.complex64,), name="complex64"),
        Sample((xp.complex128,), name="complex128"),
        Sample((s.float(2),), name="array"),
    ]


def iinfo_samples(s):
    xp = s.xp
    out = [Sample((getattr(xp, n),), name=n) for n in (*_INTS, *_UINTS)]
    out.append(Sample((s.int(2),), name="array"))
    return out


def isdtype_samples(s):
    xp = s.xp
    cases = [
        (xp.float32, "real floating"), (xp.complex64, "real floating"), (xp.complex128, "complex floating"),
        (xp.int8, "signed integer"), (xp.uint8, "signed integer"), (xp.uint16, "unsigned integer"),
        (xp.int64, "integral"), (xp.bool, "integral"), (xp.bool, "bool"), (xp.float64, "numeric"),
        (xp.bool, "numeric"), (xp.int32, ("bool", "real floating")), (xp.int32, (xp.int32, "bool")),
        (xp.float32, xp.float64),
    ]  # fmt: skip
    return [Sample(c, name=f"{_name(c[0])} {c[1] if isinstance(c[1], str) else 'dtypes'}") for c in cases]


def result_type_samples(s):
    xp = s.xp
    return [
        Sample((xp.float32, xp.float64), name="floats"),
        Sample((xp.int8, xp.uint8), name="int uint"),
        Sample((xp.uint32, xp.int64, xp.int16), name="three"),
        Sample((xp.float32, xp.complex64), name="float complex"),
        Sample((xp.float64, xp.complex64), name="float64 complex64"),
        Sample((s.float(2, dtype=xp.float32), xp.float32), name="array and dtype"),
        Sample(
            (s.float(2, dtype=xp.float32), s.complex(1, dtype=xp.complex64).dtype, s.float(1)), name="arrays"
        ),
        Sample((s.float(2, dtype=xp.float32), 1.0), name="python float"),
        Sample((xp.int16, 3), name="python int"),
        Sample((xp.float32, 1j), name="python complex"),
        Sample((xp.bool, True), name="bool"),
    ]


NO_ARRAYS = {
    "abstract": "returns Python values (bool, dtype, limits), not arrays: nothing to evaluate abstractly"
}
Q = {"differentiable": False, "vmap_dims": (), "known_failures": NO_ARRAYS}
ROWS = [
    # linear between floating dtypes: finite differences through float32 need a wider step and tolerance
    OpInfo("astype", astype_samples, rtol=1e-6, eps=1e-3, grad_rtol=1e-3, grad_atol=1e-4),
    OpInfo("can_cast", can_cast_samples, ref=_can_cast_ref, **Q),
    OpInfo("finfo", finfo_samples, ref=_finfo_ref, rtol=1e-15, atol=0.0, **Q),
    OpInfo("iinfo", iinfo_samples, ref=_iinfo_ref, **Q),
    OpInfo("isdtype", isdtype_samples, ref=_isdtype_ref, **Q),
    OpInfo("result_type", result_type_samples, ref=_result_type_ref, **Q),
]

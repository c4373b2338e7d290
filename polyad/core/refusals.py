"""What a refused exit says: the habit that led there and the fix that fits it.

``np.asarray()`` of a transform's value is refused (``tensor._refuse``), and NumPy reaches it from several
habits of NumPy code, each with its own fix. Only when refusing, the calling frames are read to say which:

- a write into a NumPy array (``buf = np.zeros(3); buf[0:2] = x``): the calling instruction stores into a
  subscript. Fix: make the buffer with polyad (``pa.xp.zeros_like(x)``, ``pa.xp.asarray(u0, copy=True)``)
  or build the value without writes (``pa.xp.stack``).
- ``np.array([a, b])`` / ``np.asarray(x)`` of traced values: the user's code calls NumPy's constructor.
  Fix: ``pa.xp.stack([a, b])``, ``pa.xp.asarray([a, b])``, ``pa.xp.asarray(x, copy=True)``.
- a SciPy function given a traced value (``scipy.linalg.expm(x)``): a frame of ``scipy`` sits between the
  user's code and the conversion. Fix: polyad's own function where there is one (``polyad.linalg``,
  ``pa.xp.linalg``, ``polyad.scipy_fft``...), else ``pa.custom_vjp`` around the SciPy call.

``pa.xp.asarray(u0)`` of a NumPy ``u0`` shares ``u0``'s memory (as the standard's ``asarray`` does), so a
write into it changes ``u0`` on calls made outside a transform: every hint that suggests it for a buffer
says ``copy=True``.

``float()`` of a value that NumPy stores into one of its arrays (``buf[0] = x[0]``) is the same habit; a
tensor is a sequence to NumPy, so NumPy replaces any error raised there by its own "setting an array
element with a sequence" (the refusal is its ``__cause__``, printed above it).
"""

import dis
import os
import sys

from polyad.core.call_sites import classify_frame

_STORES = frozenset(dis.opmap[n] for n in ("STORE_SUBSCR", "STORE_SLICE") if n in dis.opmap)
_POLYAD = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_CONSTRUCTORS = frozenset(("array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "stack"))

BUFFER_FIX = (
    "NumPy converts the value to store it in a NumPy array (buf[i] = x: a buffer made by np.zeros, "
    "np.empty, a NumPy array's .copy()), and a NumPy array cannot hold a derivative or a batch. Make the "
    "buffer with polyad so that it can: buf = pa.xp.zeros_like(x) (or pa.xp.zeros(n, dtype=x.dtype)), or "
    "a copy of your NumPy array, pa.xp.asarray(u0, copy=True) (without copy=True it shares u0's memory and "
    "the write would change u0); or build the value without writes: pa.xp.stack([a, b])"
)
LIST_FIX = (
    "NumPy's constructor (np.array([a, b]), np.asarray(x)) makes a NumPy array, which cannot hold a "
    "derivative or a batch. Build it with polyad instead: pa.xp.stack([a, b]) or pa.xp.asarray([a, b]) for "
    "a list of values, pa.xp.asarray(x, copy=True) for an array"
)

# NumPy converts a traced value where its own code takes one: say how to write it so that polyad sees it
NUMPY_HINT = (
    ". NumPy converts it where a NumPy array's own method takes it (A.dot(x), A.take(i) with a NumPy A: "
    "write np.dot(A, x) or A @ x), where np.array/np.asarray/np.ascontiguousarray or a C extension is given "
    "it, and for an argument a NumPy function does not dispatch on (np.take(A, i) with a NumPy A)"
)


def _module(frame):
    return frame.f_globals.get("__name__") or ""


def _own(frame):
    return frame.f_code.co_filename.startswith(_POLYAD)


def _caller(depth):
    """The first frame, ``depth`` above the caller, outside polyad's own files."""
    frame = sys._getframe(depth + 1)
    while frame is not None and _own(frame):
        frame = frame.f_back
    return frame


def stores_into_array(depth=0):
    """Whether the conversion method calling this (``__float__``) was called, ``depth`` frames further up,
    by code storing into a subscript (``buf[i] = x``): a C container's (a NumPy array's) store. A call
    from polyad's own code is never one (its writes into tensors are its own)."""
    frame = sys._getframe(depth + 2)
    if _own(frame):
        return False
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] in _STORES


def _public_name(module, function):
    """``scipy.linalg._basic``, ``solve`` -> ``scipy.linalg.solve``."""
    parts = []
    for p in module.split("."):
        if p.startswith("_"):
            break
        parts.append(p)
    return ".".join([*parts, function])


def _polyad_function(name):
    """Where polyad has a function for SciPy's ``name`` (read from modules already imported), or None."""
    short = name.rsplit(".", 1)[-1]
    linalg = sys.modules.get("polyad.scipy.linalg")  # its public path: polyad.linalg
    if ".linalg." in f".{name}" and linalg is not None and hasattr(linalg, short):
        return f"polyad.linalg.{short}"
    xp = sys.modules.get("polyad.xp")
    if ".linalg." in f".{name}" and xp is not None and hasattr(getattr(xp, "linalg", None), short):
        return f"pa.xp.linalg.{short}"
    fft = sys.modules.get("polyad.interop.scipy_fft")  # its public path: polyad.scipy_fft
    if ".fft." in f".{name}" and fft is not None and hasattr(fft, short):
        return f"polyad.scipy_fft.{short}"
    return None


def _scipy_entry(frame):
    """The public name of the SciPy function the user's code called, where the conversion happened
    inside SciPy (frames of NumPy and SciPy between it and the user's code), else None."""
    entry = None
    for _ in range(64):
        if frame is None:
            break
        module = _module(frame)
        if module == "scipy" or module.startswith("scipy."):
            entry = frame
        elif not (module == "numpy" or module.startswith("numpy.") or _own(frame)):
            break
        frame = frame.f_back
    return None if entry is None else _public_name(_module(entry), entry.f_code.co_name)


def _called_name(frame):
    """The name of the function the instruction at ``frame``'s position calls, read from the source
    (None where it cannot be read)."""
    return classify_frame(frame)[1]


def array_hint(depth=0):
    """The habit and fix for a refused ``np.asarray()``, read from the frames ``depth`` above the caller:
    a store into a NumPy array, a SciPy function, or NumPy's constructor (else where NumPy converts)."""
    start = _caller(depth + 1)
    if start is None:
        return NUMPY_HINT
    code = start.f_code.co_code
    if 0 <= start.f_lasti < len(code) and code[start.f_lasti] in _STORES:
        return f". {BUFFER_FIX}"
    scipy_name = _scipy_entry(sys._getframe(depth + 1))
    if scipy_name is not None:
        own = _polyad_function(scipy_name)
        instead = (
            f"call {own} instead, which differentiates and batches"
            if own is not None
            else "call polyad's function for it where there is one (polyad.linalg and pa.xp.linalg for "
            "scipy.linalg, polyad.scipy_fft, polyad.optimize and polyad.integrate for solvers)"
        )
        return (
            f". It was given to {scipy_name}, which computes in NumPy (compiled code polyad cannot "
            f"follow): {instead}, or give the SciPy call its derivative with pa.custom_vjp (or "
            "pa.custom_jvp) and call SciPy on plain arrays inside it"
        )
    name = _called_name(start)
    if name is not None and name.rsplit(".", 1)[-1] in _CONSTRUCTORS:
        return f". {LIST_FIX}"
    return NUMPY_HINT


def store_message(tensor, interp, carries):
    """Why ``buf[i] = x`` of ``tensor`` into a NumPy array is refused: it drops what ``x`` ``carries``
    (None: ``x`` has no single value, under vmap or pa.jit), and the fix."""
    what = f"storing a {type(tensor).__name__} (a value inside {interp.transform}) into a NumPy array"
    if carries is None:
        return (
            f"{what} needs one number, and it has none (a batch's examples differ; pa.jit traces without "
            f"values). {BUFFER_FIX}"
        )
    return f"{what} is refused: it would drop the {carries} the value carries. {BUFFER_FIX}"


def closed_over_write(tensor, interp):
    """Why an in-place write of a value of ``interp`` into ``tensor``, made outside that transform (a
    closed-over ``pa.Tensor``), is refused (before anything changes, as torch.func refuses it)."""
    return (
        f"an in-place write (x[key] = v, x += v) of a value inside {interp.transform} into a "
        f"{type(tensor).__name__} made outside it (closed over by the function) is refused: the tensor "
        "would keep the transform's value after it returns, and every later use of it would fail. The "
        "tensor is left unchanged. Write into a copy made inside the function (y = pa.xp.asarray(x, "
        "copy=True); y[key] = v), or compute the new value without writing (pa.xp.where, pa.xp.concat) "
        "and return it"
    )

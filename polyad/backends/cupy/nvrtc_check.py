"""Every CUDA source of the CuPy backend, expanded into the ``.cu`` file CuPy would compile and compiled to
PTX by NVRTC, with no GPU (CI has none; ``tests/test_cuda_sources.py``). Needs ``cupy-cuda13x`` and
``nvidia-cuda-nvrtc`` (the ``cuda-check`` extra), not a driver.

CuPy builds a kernel's source at its first launch, from the snippet and the arguments' types. The launch
needs a GPU, so here the same source is built by CuPy's own generators (the undecorated functions behind
its per-device caches: ``_get_elementwise_kernel``, ``_ReductionKernel_get_cached_function``,
``_SimpleCubReductionKernel_get_cached_function``) from the argument descriptions a launch would make.
CuPy's ``compile_with_cache`` adds its headers and options; its last step, which would look up the
device's architecture and load the module, is replaced by NVRTC for ``ARCH``. These are CuPy's private
functions (as of CuPy 14.2): a CuPy that renames them makes the check fail loudly, never skip.

A ``ReductionKernel`` has up to four sources, by the launch's shapes: CuPy's own reduction kernel, and,
for one contiguous input, the CUB block reduction (one pass for a reduction over trailing axes, two
passes for a full one). All are compiled, so a launch that picks any of them is covered. Which one CuPy
picks, and the parameters and types it declares for the CUB path, follow ``_try_to_call_cub_reduction``
and ``_cub_two_pass_launch`` of CuPy 14.2 (a cdef function, not callable from Python, so restated here).
"""

import contextlib
import re

import cupy
import numpy
from cupy._core import _carray, _cub_reduction, _kernel, _reduction, _scalar
from cupy.cuda import compiler, memory

from . import fusion

ARCH = "90"  # the H200 this backend was measured on (compute capability 9.0)

# CuPy's _ArgKind (cupy/_core/_kernel.pxd)
_NDARRAY, _INDEXER, _SCALAR, _POINTER = 1, 2, 3, 4
_BLOCK_SIZE = 512  # CuPy's default reduction block on CUDA (_default_block_size, _cub_default_block_size)
_ITEMS_PER_THREAD = 4  # CuPy's CUB block reduction (_get_cub_block_specs)


class Source:
    """One ``.cu`` file as CuPy would hand it to NVRTC: ``label`` says which kernel and which launch path."""

    def __init__(self, label, source, options):
        self.label, self.source, self.options = label, source, tuple(options)

    def compile(self, arch=ARCH):
        """The PTX text; ``cupy.cuda.compiler.CompileException`` (NVRTC's log) if it does not compile."""
        # as _compile_with_cache_cuda and _compile_using_nvrtc_no_warning add them, for PTX
        options = self.options + ("-ftz=true", f"-arch=compute_{arch}", "--device-as-default-execution-space")
        program = compiler._NVRTCProgram(self.source, "kern.cu", method="ptx")
        ptx, _ = program.compile(options)
        return ptx.decode() if isinstance(ptx, bytes) else ptx

    def __repr__(self):
        return f"Source({self.label!r})"


class _Captured(Exception):
    pass


@contextlib.contextmanager
def _capture():
    """CuPy's ``compile_with_cache`` raises ``_Captured(source, options)`` where it would compile and load."""
    saved = compiler._compile_module_with_cache

    def capture(source, options=(), **_):
        raise _Captured(source, options)

    compiler._compile_module_with_cache = capture
    try:
        yield
    finally:
        compiler._compile_module_with_cache = saved


def _expanded(label, build, *args, **kwargs):
    """The ``Source`` that ``build(*args, **kwargs)`` (one of CuPy's kernel builders) would compile."""
    with _capture():
        try:
            build(*args, **kwargs)
        except _Captured as captured:
            source, options = captured.args
            return Source(label, source, options)
    raise RuntimeError(f"{label}: CuPy built no module (its kernel builder changed: see nvrtc_check)")


def _array(dtype, ndim):
    return _kernel._ArgInfo(_NDARRAY, cupy.ndarray, numpy.dtype(dtype), ndim, True, True)


def _int32():
    return _kernel._ArgInfo(_SCALAR, _scalar.CScalar, numpy.dtype("int32"), 0, True, True)


def _indexer(ndim):
    return _kernel._ArgInfo(_INDEXER, _carray.Indexer, None, ndim, True, True)


def _pointer():
    return _kernel._ArgInfo(_POINTER, memory.MemoryPointer, None, 0, True, True)


def elementwise_sources(kernel, in_dtypes, ndim=1):
    """The source of ``cupy.ElementwiseKernel`` ``kernel`` launched on contiguous arrays of ``in_dtypes``
    with ``ndim`` dimensions after CuPy merges them (1 for same-shaped contiguous arrays)."""
    dtypes = tuple(numpy.dtype(d) for d in in_dtypes)
    _, out_types, type_map = kernel._decide_params_type(dtypes, ())
    arginfos = tuple(
        [_array(d, ndim) for d in dtypes] + [_array(t, ndim) for t in out_types] + [_indexer(ndim)]
    )
    build = _kernel._get_elementwise_kernel.__wrapped__  # past its per-device cache
    label = f"{kernel.name}({', '.join(d.name for d in dtypes)})"
    return [
        _expanded(
            label,
            build,
            arginfos,
            type_map,
            kernel.params,
            kernel.operation,
            kernel.name,
            kernel.preamble,
            **kernel.kwargs,
        )
    ]


def reduction_sources(kernel, in_dtypes, ndim=1):
    """The sources of ``cupy.ReductionKernel`` ``kernel`` on arrays of ``in_dtypes`` (``ndim`` dimensions,
    reduced to a lower rank): CuPy's reduction kernel, and for one input the CUB one-pass and two-pass
    kernels too."""
    in_types = tuple(numpy.dtype(d).type for d in in_dtypes)
    _, out_types, type_map = _kernel._decide_params_type(kernel.in_params, kernel.out_params, in_types, ())
    # _AbstractReductionKernel._call's index type: int32 unless a reduction spans 2**31 elements
    type_map = _kernel._TypeMap(type_map._pairs + (("IndexT", "int32"),))
    out_ndim = max(ndim - 1, 0)
    label = f"{kernel.name}({', '.join(numpy.dtype(d).name for d in in_dtypes)})"
    arginfos = tuple(
        [_array(t, ndim) for t in in_types]
        + [_array(t, out_ndim) for t in out_types]
        + [_indexer(ndim), _indexer(out_ndim), _int32()]
    )
    build = _reduction._ReductionKernel_get_cached_function.__wrapped__
    sources = [
        _expanded(
            f"{label} reduction",
            build,
            kernel.nin,
            kernel.nout,
            kernel._params,
            arginfos,
            type_map,
            kernel.name,
            _BLOCK_SIZE,
            kernel.reduce_type,
            kernel.identity,
            kernel.map_expr,
            kernel.reduce_expr,
            kernel.post_map_expr,
            kernel.preamble,
            kernel.options,
        )
    ]
    if kernel.nin == 1 and kernel.nout == 1:  # _can_use_cub_block_reduction: one input, one output
        sources += _cub_sources(kernel, label, in_types[0], out_types[0], type_map, ndim)
    return sources


def _cub_sources(kernel, label, in_type, out_type, type_map, ndim):
    """The CUB block reduction's sources, as ``_try_to_call_cub_reduction`` (CuPy 14.2) declares them."""
    map_expr, post_map_expr = kernel.map_expr, kernel.post_map_expr
    type_map = _kernel._TypeMap(type_map._pairs + (("sizeT", "int32"),))
    params = (
        kernel._params[0:2]
        + _kernel._get_param_info("int32 _segment_size", True)
        + _kernel._get_param_info("int32 _array_size", True)
    )
    # CuPy's renaming for a ReductionKernel whose parameters are not named in0/out0: only then does it
    # declare type_in0_raw and type_out0_raw, which the CUB template reads
    old_in, old_out = params[0].name, params[1].name
    if old_in != "in0" or old_out != "out0":
        params = (
            _kernel._get_param_info("T in0", True) + _kernel._get_param_info("T out0", False) + params[2:]
        )
        map_expr = map_expr.replace(old_in, "in0")
        post_map_expr = post_map_expr.replace(old_out, "out0")
        type_map = _kernel._TypeMap(
            type_map._pairs + (("type_in0_raw", in_type), ("type_out0_raw", out_type))
        )
    build = _cub_reduction._SimpleCubReductionKernel_get_cached_function.__wrapped__
    common = (kernel.reduce_expr,)
    passes = [  # (label, map_expr, post_map_expr, arginfos, name, options)
        ("CUB one pass", map_expr, [_array(in_type, ndim), _array(out_type, ndim - 1)], kernel.name, ()),
        ("CUB pass 1", map_expr, [_array(in_type, ndim), _pointer()], kernel.name + "_pass1",
         ("-DFIRST_PASS=1",)),
        ("CUB pass 2", "in0", [_pointer(), _array(out_type, 0)], kernel.name + "_pass2",
         ("-DSECOND_PASS=1",)),
    ]  # fmt: skip
    sources = []
    for name, pre_map, arrays, kernel_name, options in passes:
        arginfos = tuple(arrays + [_int32(), _int32()])
        sources.append(
            _expanded(
                f"{label} {name}",
                build,
                pre_map,
                *common,
                post_map_expr,
                kernel.reduce_type,
                params,
                arginfos,
                type_map,
                kernel_name,
                _BLOCK_SIZE,
                kernel.identity,
                kernel.preamble,
                options,
                _ITEMS_PER_THREAD,
            )
        )
    return sources


def raw_sources(kernel):
    """The source of a ``cupy.RawKernel`` or ``cupy.RawModule`` (CuPy adds nothing to a raw kernel's code)."""
    options = tuple(getattr(kernel, "options", ()))
    return [Source(getattr(kernel, "name", "RawModule"), kernel.code, options)]


def kernel_sources(kernel, dtypes, ndim=1):
    """The sources CuPy would compile for a kernel object launched on inputs of ``dtypes``.

    Args:
        kernel: a ``cupy.ElementwiseKernel``, ``cupy.ReductionKernel``, ``cupy.RawKernel`` or
            ``cupy.RawModule``.
        dtypes: the input arrays' dtypes (names or NumPy dtypes), one per input; a raw kernel ignores them.
        ndim: the arrays' number of dimensions after CuPy merges contiguous axes (1 for contiguous arrays).

    Returns:
        A list of ``Source``: one for an element-wise or raw kernel, four for a reduction of one input
        (CuPy's kernel, CUB one-pass, CUB pass 1 and 2), one for a reduction of several.

    Example:
        >>> square = cupy.ElementwiseKernel("T x", "T y", "y = x * x", "square")
        >>> [s.label for s in kernel_sources(square, ["float32"])]
        ['square(float32)']
        >>> compile_all(kernel_sources(square, ["float32"]))
        {}
    """
    if isinstance(kernel, cupy.ElementwiseKernel):
        return elementwise_sources(kernel, dtypes, ndim)
    if isinstance(kernel, cupy.ReductionKernel):
        return reduction_sources(kernel, dtypes, ndim)
    if isinstance(kernel, cupy.RawKernel | cupy.RawModule):
        return raw_sources(kernel)
    raise TypeError(f"kernel_sources(kernel=...): expected a CuPy kernel object, got {type(kernel).__name__}")


def is_kernel(value):
    """Whether ``value`` is a CuPy kernel object that carries CUDA source of its own."""
    return isinstance(value, cupy.ElementwiseKernel | cupy.ReductionKernel | cupy.RawKernel | cupy.RawModule)


def fused_sources(spec):
    """Every source of the fused group ``spec`` (``polyad.graph.compiler.fusion.FusionSpec``) as
    ``polyad.backends.cupy.fusion.build`` makes its kernels, for the group's dtype."""
    elementwise, reductions = fusion.build(spec, cupy)
    dtypes = list(spec.input_dtypes)  # the group's dtype, bool for a where's condition
    ndim = max(len(spec.shape), 1)
    sources = kernel_sources(elementwise, dtypes, ndim) if elementwise is not None else []
    for built in reductions:
        if built is not None:  # a stencil group's reductions sum one stored summand
            sources += kernel_sources(built[0], [spec.dtype] if spec.stencil else dtypes, ndim)
    return sources


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b.*$", re.M)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", re.M)


def _translation_unit(sources):
    """``(source, options)``: ``sources`` (whose options differ at most in ``-D`` macros) as one ``.cu``
    file, each in a namespace of its own with C++ linkage (its kernel names then cannot clash), its ``-D``
    options and its own macros defined around it only, and every ``#include`` hoisted to the top."""
    includes, parts = [], []
    for k, source in enumerate(sources):
        for line in _INCLUDE.findall(source.source):
            if line.strip() not in includes:
                includes.append(line.strip())
        body = re.sub(r'extern\s+"C"', "", _INCLUDE.sub("", source.source))
        defines = [o[2:].partition("=") for o in source.options if o.startswith("-D")]
        macros = [name for name, _, _ in defines] + _MACRO.findall(body)
        parts += [f"#define {name} {value or 1}" for name, _, value in defines]
        parts += [f"namespace polyad_nvrtc_check_{k} {{", f'#line 1 "{source.label}"', body, "}"]
        parts += [f"#undef {name}" for name in dict.fromkeys(macros)]
    options = tuple(o for o in sources[0].options if not o.startswith("-D"))
    return "\n".join(includes + parts), options


def compile_all(sources, arch=ARCH):
    """``{label: NVRTC's log}`` of the ``sources`` that do not compile (empty when all do).

    Args:
        sources: ``Source`` objects (``kernel_sources``, ``fused_sources``).
        arch: the compute capability to compile for, as digits ("90": the H200).

    Returns:
        A dict from each failing source's label to NVRTC's log for it alone.

    For speed (CUB's headers take NVRTC seconds to read), sources with the same options are compiled
    together as one translation unit (``_translation_unit``); a unit that fails is halved until each
    failing source is compiled alone, unchanged, so that every reported failure is that of the very source
    CuPy would compile."""
    groups = {}
    for source in sources:
        key = tuple(o for o in source.options if not o.startswith("-D"))
        groups.setdefault(key, []).append(source)
    failures = {}
    for group in groups.values():
        failures.update(_failures(group, arch))
    return failures


def _failures(group, arch):
    try:
        if len(group) == 1:
            group[0].compile(arch)
        else:
            text, options = _translation_unit(group)
            Source("batch", text, options).compile(arch)
        return {}
    except compiler.CompileException as exc:
        if len(group) == 1:
            return {group[0].label: str(exc)}
    half = len(group) // 2
    return {**_failures(group[:half], arch), **_failures(group[half:], arch)}


def summary(failures):
    """One line per failing source: its label and NVRTC's first error."""
    lines = []
    for label, log in failures.items():
        error = next((line for line in log.splitlines() if "error" in line), log.strip().split("\n")[0])
        lines.append(f"{label}: {error.strip()}")
    return "\n".join(lines)

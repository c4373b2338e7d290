"""Every CUDA source polyad ships or generates compiles, checked without a GPU: each kernel is expanded
into the ``.cu`` file CuPy would build at its first launch and compiled to PTX by NVRTC
(``polyad.backends.cupy.nvrtc_check``; CuPy and NVRTC come from the ``cuda-check`` extra, which
``make test`` installs).

The sources: the kernels of ``polyad/backends/cupy/`` (those with CUDA code of their own live in
``elementwise_kernels.py``) and the fused kernels ``pa.jit`` generates for a set of representative
graphs (a loop followed by a sum, sums over axes, broadcasting, float32 and float64, the backward pass,
integer powers, ``where``), each reduction on every path CuPy may take (its own kernel, CUB one-pass and
two-pass). Found this way before it was fixed: ``pa.jit`` of a scan then ``sum(u * u)`` failed on the
GPU with ``identifier "type_in0_raw" is undefined`` (the CUB reduction of ``backends/cupy/fusion.py``).
"""

import pathlib
import re

import numpy as np
import pytest

import polyad as pa
from polyad import xp
from polyad.graph.compiler import fuse, optimize
from polyad.graph.graph import Graph

if pa.get_backend() != "numpy":
    pytest.skip(
        "the CUDA sources are the same in every lane: compiled once, in the numpy lane",
        allow_module_level=True,
    )

nvrtc_check = pytest.importorskip(  # installed by `make test` (the cuda-check extra): this must not skip
    "polyad.backends.cupy.nvrtc_check", reason="pip install 'polyad[cuda-check]' (CuPy and NVRTC, no GPU)"
)
elementwise_kernels = pytest.importorskip("polyad.backends.cupy.elementwise_kernels")
random = pytest.importorskip("polyad.backends.cupy.random")
cuda_fusion = pytest.importorskip("polyad.backends.cupy.fusion")
CUPY_DIR = pathlib.Path(nvrtc_check.__file__).parent


def _specs(graph):
    """The ``FusionSpec`` of every fused group ``pa.jit`` makes of ``graph``, its loops' bodies included
    (the pipeline of ``polyad/api/jit.py``: optimize, fuse, then the same for each body)."""
    for node in fuse(graph, "array_api_strict").nodes:
        spec = getattr(node.op, "fusion", None)
        if spec is not None:
            yield spec
        for value in node.params.values():
            for body in value if isinstance(value, tuple) else (value,):
                if isinstance(getattr(body, "graph", None), Graph):
                    yield from _specs(optimize(body.graph))


def specs_of(f, *args):
    return list(_specs(pa.jit(f).lower(*args).optimized_graph))


def _step(u, _):
    return u + 0.1 * (xp.roll(u, 1) - 2 * u + xp.roll(u, -1)) - 0.01 * u**3, None


def scan_then_sum(u0):  # issue 32's failing program
    u, _ = pa.scan(_step, u0, None, length=4)
    return xp.sum(u * u)


def sums_over_axes(x):
    return (
        xp.sum(xp.tanh(x) * x, axis=0),
        xp.sum(xp.exp(-x) * x, axis=(1, 2), keepdims=True),
        xp.sum(xp.sin(x) ** 2, axis=2),
    )


def broadcasting(x, y):
    return xp.exp(-x * y) + xp.sqrt(y) * 2, xp.sum(xp.cos(x + y))


def integer_powers(x):
    return x**2 + x**3 - x**-1 + x**0.5, xp.sum(x**2)


def with_where(x):
    return xp.where(x > 0.5, xp.sin(x) * 2, xp.cos(x) + 1) * x


def stencil_step(u, mask, k=0.1):  # neighbour reads and a boolean where in one kernel (issue 34)
    lap = xp.roll(u, 1) + xp.roll(u, -1) - 2 * u
    return xp.where(mask, u + k * lap - 0.01 * u**3, 0.5 * xp.roll(u, 7))


def stencil_rows(m):  # a roll along the first axis of a 2-D array: a flat offset of a row's size
    return m + 0.1 * (xp.roll(m, 1, axis=0) + xp.roll(m, -1, axis=0) - 2 * m)


def stencil_gradient(u, mask):  # with respect to u and to k (a sum over the elements)
    loss = lambda u, k: xp.sum(stencil_step(u, mask, k) ** 2)  # noqa: E731
    return pa.grad(loss, argnums=(0, 1))(u, xp.sum(u) * 0.01)


def backward_pass(x):
    return pa.grad(lambda x: xp.sum(xp.sin(x) * xp.exp(-x) / (1 + x**2)))(x)


def _graphs(dtype):
    x = np.linspace(0.1, 1.0, 24, dtype=dtype)
    x3 = x.reshape(2, 3, 4)
    return {
        "scan_then_sum": (scan_then_sum, x),
        "sums_over_axes": (sums_over_axes, x3),
        "broadcasting": (broadcasting, x[:6].reshape(6, 1), x[:4]),
        "integer_powers": (integer_powers, x),
        "where": (with_where, x),
        "backward_pass": (backward_pass, x),
        "grad_of_scan_then_sum": (pa.grad(scan_then_sum), x),
        "stencil_where": (stencil_step, x, x > 0.5),
        "grad_of_stencil_where": (stencil_gradient, x, x > 0.5),
        "stencil_rows": (stencil_rows, x.reshape(4, 6)),
        "slices": (lambda x: xp.sum((x[2:] - 2 * x[1:-1] + x[:-2]) ** 2), x),  # reads from a start, no wrap
        "sum_of_a_where": (lambda x: xp.sum(xp.where(x > 0.5, xp.sin(x), x) * x), x),  # a bool in a reduction
    }


def test_the_fused_kernels_of_representative_graphs_compile():
    sources, seen = [], set()
    for dtype in ("float32", "float64"):
        for name, (f, *args) in _graphs(dtype).items():
            specs = specs_of(f, *args)
            assert specs, f"{name}: pa.jit made no fused group, so nothing of it reaches NVRTC"
            assert {s.dtype for s in specs} == {dtype}
            for spec in specs:
                for source in nvrtc_check.fused_sources(spec):
                    if source.source not in seen:  # a graph and its gradient share groups
                        seen.add(source.source)
                        sources.append(source)
    labels = " ".join(s.label for s in sources)
    assert "CUB one pass" in labels and "CUB pass 2" in labels and "polyad_fused_" in labels
    failures = nvrtc_check.compile_all(sources)
    assert not failures, f"{len(failures)} of {len(sources)} CUDA sources do not compile:\n" + (
        nvrtc_check.summary(failures)
    )


def test_the_scan_then_sum_reduction_declares_the_types_of_cupys_cub_path():
    # the failing program's sum has one input, summed whole: CuPy runs its CUB two-pass kernels, whose
    # template reads type_in0_raw and type_out0_raw
    (spec,) = [s for s in specs_of(scan_then_sum, np.ones(300)) if any(k == "sum" for _, k, _ in s.outputs)]
    assert len(spec.input_shapes) == 1
    sources = nvrtc_check.fused_sources(spec)
    paths = [s.label.split(") ", 1)[1] for s in sources]
    assert paths == ["reduction", "CUB one pass", "CUB pass 1", "CUB pass 2"]
    for source in sources[1:]:
        assert "typedef double type_in0_raw;" in source.source, source.label
        assert "typedef double type_out0_raw;" in source.source, source.label


def test_stencil_kernels_read_raw_inputs_at_wrapped_offsets_and_compile():
    # the step is one kernel, its gradient's stencil groups sum k's summand, which the kernel stores; the
    # rolled input is a raw array read at i - 1, i + 1, i - 7 (wrapped), the condition a raw bool
    x = np.linspace(0.1, 1.0, 24)
    sources = []
    for f in (stencil_step, stencil_gradient):
        specs = specs_of(f, x, x > 0.5)
        assert len(specs) == 1 or f is stencil_gradient
        spec = next(s for s in specs if s.stencil and "bool" in s.input_dtypes)
        sources += [
            source for other in specs if other is not spec for source in nvrtc_check.fused_sources(other)
        ]
        elementwise = cuda_fusion.sources(spec)[0]
        assert "raw T in" in elementwise.in_params and "raw bool in" in elementwise.in_params
        assert "while (j" in elementwise.operation and "_ind.size()" in elementwise.operation
        sources += nvrtc_check.fused_sources(spec)
    assert any("polyad_summed_" in s.label for s in sources)  # the gradient's sum of its summand
    failures = nvrtc_check.compile_all(sources)
    assert not failures, nvrtc_check.summary(failures)


def test_complex_graphs_make_no_cuda_source():
    # fusion takes float32 and float64 only (polyad.graph.compiler.fusion.FLOAT_DTYPES): complex code runs
    # CuPy's own kernels, op by op. Should complex groups ever fuse, their kernels must join the check above
    z = np.linspace(0.1, 1.0, 8) * (1 + 1j)
    assert specs_of(lambda z: xp.sum(xp.exp(z) * z), z) == []


def test_the_shipped_kernels_compile():
    sources = []
    for module in (elementwise_kernels, random):
        for value in vars(module).values():
            if nvrtc_check.is_kernel(value):
                for dtypes in elementwise_kernels.DTYPES[value.name]:
                    sources += nvrtc_check.kernel_sources(value, dtypes)
    assert [s.label for s in sources] == ["polyad_softplus(float32)", "polyad_softplus(float64)"]
    failures = nvrtc_check.compile_all(sources)
    assert not failures, nvrtc_check.summary(failures)


def test_every_cupy_kernel_object_is_in_a_checked_module():
    # kernels.py and linalg_kernels.py import cupyx's linear algebra (cuBLAS), absent without a GPU, so
    # CUDA source lives in modules the check imports; fusion.py's kernels are checked through graphs
    checked = {"elementwise_kernels.py", "random.py", "fusion.py"}
    makes_kernel = re.compile(r"\b(ElementwiseKernel|ReductionKernel|RawKernel|RawModule)\(")
    for path in sorted(CUPY_DIR.glob("*.py")):
        if path.name not in checked and path.name != "nvrtc_check.py":
            assert not makes_kernel.search(path.read_text()), (
                f"{path.name} makes a CuPy kernel the check misses"
            )


def test_a_kernel_that_does_not_compile_is_reported_with_nvrtcs_message():
    cupy = nvrtc_check.cupy
    broken = cupy.ElementwiseKernel("T x", "T y", "y = undefined_function(x)", "polyad_broken")
    good = cupy.ElementwiseKernel("T x", "T y", "y = x * x", "polyad_good")
    sources = nvrtc_check.kernel_sources(broken, ["float64"]) + nvrtc_check.kernel_sources(good, ["float64"])
    failures = nvrtc_check.compile_all(sources)
    assert list(failures) == ["polyad_broken(float64)"]
    assert 'identifier "undefined_function" is undefined' in failures["polyad_broken(float64)"]

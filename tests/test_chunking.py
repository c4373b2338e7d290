"""Chunked Jacobians and vmap: chunk_size="auto" (values against the unchunked transform, the chosen size
from ``chunk_plan``, peak memory within ``max_memory`` under tracemalloc), chunked jacfwd, hessian and
vmap against the unchunked results, progress bars (tqdm, and the message without it), option errors."""

import sys
import tracemalloc

import numpy as np
import pytest
from helpers import assert_close, start_tracemalloc, to_numpy

import polyad as pa
from polyad import core
from polyad import xp as pxp
from polyad.core import dispatch


@pytest.fixture
def A():
    xp = dispatch.default_backend().xp
    return lambda x: xp.asarray(np.asarray(x, dtype=np.float64), dtype=xp.float64)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape) / np.sqrt(shape[-1])


def layer(A, n, m=None, seed=0):
    W, b = A(rand(m or n, n, seed=seed)), A(rand(m or n, seed=seed + 1))
    return lambda v: pxp.tanh(W @ v + b)


@pytest.mark.parametrize("chunk", [1, 3, 7, "auto", 1000])
def test_chunked_transforms_match_unchunked(A, chunk):
    f = layer(A, 9, 11)
    x, xs = A(rand(9, seed=3)), A(rand(13, 9, seed=4))
    for transform in (pa.jacrev, pa.jacfwd):
        assert_close(transform(f, chunk_size=chunk)(x), transform(f)(x), rtol=1e-12, atol=1e-14)
    h = lambda v: pxp.sum(f(v) ** 3)  # noqa: E731
    assert_close(pa.hessian(h, chunk_size=chunk)(x), pa.hessian(h)(x), rtol=1e-12, atol=1e-14)

    def g(v, c):  # a pytree output, an unbatched output and an unmapped input
        return {"y": f(v) * c, "n": pxp.sum(v * v)}, c

    ref = pa.vmap(g, in_dims=(0, None), out_dims=({"y": 1, "n": 0}, None))(xs, A(2.0))
    got = pa.vmap(g, in_dims=(0, None), out_dims=({"y": 1, "n": 0}, None), chunk_size=chunk)(xs, A(2.0))
    assert_close(got[0]["y"], ref[0]["y"], rtol=1e-12)
    assert_close(got[0]["n"], ref[0]["n"], rtol=1e-12)
    assert_close(got[1], 2.0)


def test_auto_chunks_follow_the_budget(A):
    n = 64
    f, x = layer(A, n), A(rand(n, seed=2))
    itemsize = 8
    small, large = (pa.jacrev(f, chunk_size="auto", max_memory=m).chunk_plan(x) for m in ("40KiB", "80KiB"))
    assert isinstance(small, pa.ChunkPlan) and small.max_memory == 40 * 2**10
    # per row: a basis row and a result row (n each) and the 3 intermediates of tanh(W v + b)
    assert small.bytes_per_row == 5 * n * itemsize
    assert small.fixed_bytes == n * n * itemsize + 3 * n * itemsize  # the result and the forward pass
    assert small.chunk_size == (40 * 2**10 - small.fixed_bytes) // small.bytes_per_row
    assert 1 <= small.chunk_size < large.chunk_size < n and small.n_chunks == -(-n // small.chunk_size)
    assert small.estimated_bytes <= small.max_memory
    # the default budget: polyad.config.max_memory
    assert pa.jacfwd(f, chunk_size="auto").chunk_plan(x).max_memory == 2**30
    old = pa.config.max_memory
    try:
        pa.config.max_memory = "40KiB"
        assert pa.jacrev(f, chunk_size="auto").chunk_plan(x) == small
    finally:
        pa.config.max_memory = old
    # max_memory alone means "auto"; an int chunk_size is reported as it is
    assert pa.jacrev(f, max_memory="40KiB").chunk_plan(x) == small
    fixed = pa.jacrev(f, chunk_size=5).chunk_plan(x)
    assert (fixed.chunk_size, fixed.n_chunks, fixed.max_memory) == (5, 13, None)
    vplan = pa.vmap(f, chunk_size="auto", max_memory="40KiB").chunk_plan(A(rand(50, n)))
    assert (
        vplan.rows == 50
        and vplan.bytes_per_row == 5 * n * itemsize
        and vplan.fixed_bytes == 50 * n * itemsize
    )
    assert vplan.chunk_size == (40 * 2**10 - vplan.fixed_bytes) // vplan.bytes_per_row
    hplan = pa.hessian(lambda v: pxp.sum(f(v)), max_memory="100KiB").chunk_plan(x)
    assert hplan.rows == n and hplan.chunk_size < n


@pytest.mark.skipif(pa.get_backend() != "numpy", reason="tracemalloc sees NumPy's allocations")
@pytest.mark.parametrize("transform", ["jacrev", "jacfwd", "hessian", "vmap"])
def test_auto_peak_memory_stays_within_the_budget(A, transform):
    n = 256
    f, x = layer(A, n), A(rand(n, seed=5))
    fn, arg = {
        "jacrev": (lambda **kw: pa.jacrev(f, **kw), x),
        "jacfwd": (lambda **kw: pa.jacfwd(f, **kw), x),
        "hessian": (lambda **kw: pa.hessian(lambda v: pxp.sum(f(v) ** 2), **kw), x),
        "vmap": (lambda **kw: pa.vmap(pa.grad(lambda v: pxp.sum(f(v) ** 2)), **kw), A(rand(512, n, seed=6))),
    }[transform]
    result_bytes = n * n * 8 if transform != "vmap" else 512 * n * 8

    def peak(**kw):
        start_tracemalloc()
        try:
            base = tracemalloc.get_traced_memory()[0]
            out = fn(**kw)(arg)
            return tracemalloc.get_traced_memory()[1] - base, out
        finally:
            tracemalloc.stop()

    unchunked, ref = peak()
    budget = result_bytes + (unchunked - result_bytes) // 4
    assert unchunked > budget  # the budget binds: without chunks the peak is above it
    plan = fn(max_memory=budget).chunk_plan(arg)
    assert 1 < plan.n_chunks
    used, out = peak(max_memory=budget)
    assert used <= budget, (used, budget, plan)
    assert_close(out, ref, rtol=1e-12, atol=1e-14)


def test_budget_too_small_and_option_errors(A):
    f, x = layer(A, 8), A(rand(8))
    with pytest.raises(MemoryError, match=r"one row needs about .* more than max_memory=100 B"):
        pa.jacrev(f, max_memory=100)(x)
    with pytest.raises(MemoryError, match="polyad.config.max_memory"):
        old, pa.config.max_memory = pa.config.max_memory, 64
        try:
            pa.vmap(f, chunk_size="auto")(A(rand(4, 8)))
        finally:
            pa.config.max_memory = old
    for transform in (pa.jacrev, pa.jacfwd, pa.hessian, pa.vmap):
        for bad in (0, -2, 1.5, "big"):
            with pytest.raises(ValueError, match="chunk_size must be None, a positive int or 'auto'"):
                transform(f, chunk_size=bad)
        for bad in (0, "lots", "12 parsecs", True):
            with pytest.raises(ValueError, match="max_memory must be a positive number of bytes"):
                transform(f, max_memory=bad)
        with pytest.raises(ValueError, match="give one or the other"):
            transform(f, chunk_size=4, max_memory="1MiB")
        with pytest.raises(TypeError, match="progress must be True or False"):
            transform(f, progress="yes")
    assert core.current_level() == 0


def test_auto_needs_an_abstract_run(A):
    def branchy(v):
        return v * 2.0 if float(pxp.sum(v)) > 0 else v

    x = A(np.ones(3))
    with pytest.raises(ValueError, match=r"on shapes alone.*give an int chunk_size"):
        pa.jacrev(branchy, chunk_size="auto")(x)
    assert_close(pa.jacrev(branchy, chunk_size=2)(x), 2 * np.eye(3))
    assert core.current_level() == 0


def test_auto_inside_other_transforms(A):
    f = layer(A, 6)
    xs = A(rand(4, 6, seed=8))
    got = pa.vmap(pa.jacrev(f, chunk_size="auto", max_memory="2KiB"))(xs)
    ref = np.stack([to_numpy(pa.jacrev(f)(xs[i, ...])) for i in range(4)])
    assert_close(got, ref, rtol=1e-12)
    g = pa.grad(lambda v: pxp.sum(pa.vmap(f, chunk_size="auto", max_memory="2KiB")(v)))(xs)
    assert_close(g, pa.grad(lambda v: pxp.sum(pa.vmap(f)(v)))(xs), rtol=1e-12)


def test_progress_bar(A, capsys):
    pytest.importorskip("tqdm")
    f, x = layer(A, 10), A(rand(10))
    assert_close(pa.jacrev(f, chunk_size=3, progress=True)(x), pa.jacrev(f)(x), rtol=1e-12)
    err = capsys.readouterr().err
    assert "jacrev(<lambda>, argnums=0)" in err and "10/10" in err and "row" in err
    pa.vmap(f, chunk_size=4, progress=True)(A(rand(9, 10)))
    assert "9/9" in capsys.readouterr().err
    pa.vmap(f, chunk_size=1, progress=True)(A(rand(5, 10)))
    assert "5/5" in capsys.readouterr().err
    pa.hessian(lambda v: pxp.sum(f(v)), chunk_size=4, progress=True)(x)
    assert "jacfwd" in capsys.readouterr().err


def test_progress_without_tqdm_names_the_extra(A, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    f, x = layer(A, 4), A(rand(4))
    for call in (
        lambda: pa.jacrev(f, chunk_size=2, progress=True)(x),
        lambda: pa.jacfwd(f, progress=True)(x),
        lambda: pa.vmap(f, chunk_size=2, progress=True)(A(rand(3, 4))),
    ):
        with pytest.raises(ImportError, match=r"pip install 'polyad\[progress\]'"):
            call()
    assert core.current_level() == 0

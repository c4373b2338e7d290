"""The backend contract (``polyad.backends``): a toy backend registered through the public registry runs
the op table, grad and vmap with values equal to NumPy's; device types are registered with a priority and
never fall silently to the generic kernel; the checker names what a backend lacks; entry points are found.
"""

import doctest
import importlib.metadata
import types

import array_api_compat.numpy as compat_numpy
import numpy as np
import pytest
import toy_backend
from helpers import assert_close, diff_fn, native_device_type, raises_cleanly, to_numpy
from toy_backend import TOY, ToyArray

import polyad as pa
from polyad import backends, xp
from polyad.core import dispatch
from polyad.testing.op_table import BY_NAME, OP_TABLE, Sampler


@pytest.fixture
def toy():
    """The toy backend, registered through the public API for this module's tests."""
    unregister = backends.register("toy", toy_backend.make_backend)
    try:
        yield backends.load("toy")
    finally:
        unregister()


def _numpy_tree(x):
    """A sample's arguments as NumPy sees them: toy arrays unwrapped, the toy device as the CPU."""
    return (
        toy_backend.unwrap(x) if not isinstance(x, dict) else {k: toy_backend.unwrap(v) for k, v in x.items()}
    )


def _leaves(x):
    if isinstance(x, list | tuple):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


# ------------------------------------------------------------------------------ the registry


def test_toy_backend_registers_and_loads(toy):
    assert "toy" in backends.names() and "toy" in dispatch.usable_backends()
    assert dispatch.DEVICE_PRIORITY.index("toy") == dispatch.DEVICE_PRIORITY.index("cpu") - 1
    with pa.backend("toy"):
        assert pa.get_backend() == "toy"
        x = pa.xp.arange(4.0)
    assert isinstance(x, ToyArray) and x.device == TOY
    assert dispatch.backend_of_array(x) is toy and dispatch.device_type(x) == "toy"
    np.testing.assert_array_equal(toy.to_numpy(x), np.arange(4.0))


def test_register_refuses_a_taken_name_and_bad_loader(toy):
    with raises_cleanly(ValueError, "'toy'", "already registered"):
        backends.register("toy", toy_backend.make_backend)
    with raises_cleanly(TypeError, "loader", "3"):
        backends.register("other", 3)


def test_unknown_backend_lists_the_toy_among_the_choices(toy):
    with raises_cleanly(ValueError, "'nope'", "valid choices are numpy, cupy, array_api_strict, dask, toy"):
        pa.set_backend("nope")


def test_unregister_forgets_backend_types_device_types_and_kernels():
    unregister = backends.register("toy2", lambda: toy_backend.make_backend("toy2"))
    b = backends.load("toy2")
    assert "toy" in dispatch.DEVICE_PRIORITY and pa.custom_ops.softplus.op.kernels.get("toy") is not None
    x = b.xp.ones(2)
    assert dispatch.backend_of_array(x) is b
    unregister()
    assert "toy2" not in backends.names() and "toy2" not in backends.loaded()
    assert "toy" not in dispatch.DEVICE_PRIORITY
    assert "toy" not in pa.custom_ops.softplus.op.kernels
    assert dispatch.backend_of_array(x) is None


def test_array_types_belong_to_one_backend(toy):
    unregister = backends.register("toy_twin", lambda: toy_backend.make_backend("toy_twin"))
    try:
        with raises_cleanly(RuntimeError, "'toy_twin'", "ToyArray", "already belongs to backend 'toy'"):
            pa.set_backend("toy_twin")
    finally:
        unregister()
    assert dispatch.backend_of_array(toy.xp.ones(1)) is toy


def test_unavailable_loader_gives_the_reason_and_the_choices():
    def loader():
        raise backends.BackendUnavailable("the toy accelerator is switched off")

    unregister = backends.register("toy_off", loader)
    try:
        with raises_cleanly(RuntimeError, "'toy_off' is unavailable", "switched off", "usable here: numpy"):
            pa.set_backend("toy_off")
        assert "toy_off" not in dispatch.usable_backends()
        assert "switched off" in dispatch.unavailable_backends()["toy_off"]
    finally:
        unregister()


# ------------------------------------------------------------------------------ the contract checker


def test_checker_names_a_missing_required_extra():
    broken = types.SimpleNamespace(scatter_add=toy_backend.extras.scatter_add)  # no index_add
    with raises_cleanly(backends.BackendContractError, "'toy_broken'", "index_add(target, key, values)"):
        backends.check(toy_backend.make_backend("toy_broken", extras=broken))


def test_checker_runs_when_the_backend_loads():
    broken = types.SimpleNamespace(index_add=toy_backend.extras.index_add)  # no scatter_add
    unregister = backends.register(
        "toy_broken", lambda: toy_backend.make_backend("toy_broken", extras=broken)
    )
    try:
        with raises_cleanly(RuntimeError, "'toy_broken'", "scatter_add(target, indices, values, axis)"):
            pa.set_backend("toy_broken")
        assert "scatter_add" in dispatch.unavailable_backends()["toy_broken"]
        assert "toy_broken" not in backends.loaded()
        assert "toy" not in dispatch.DEVICE_PRIORITY  # nothing of it stays registered
    finally:
        unregister()


@pytest.mark.parametrize(
    "changes,fragments",
    [
        ({"extras": {"scatter_add": lambda t, i, v: t, "index_add": lambda t, k, v: t}}, ["4 positional"]),
        ({"generator": object}, ["generator", "normal"]),
        ({"kernels": {"polyad::softplus": {"quantum": lambda xp, x: x}}}, ["'quantum'", "not declared"]),
        ({"device_types": {"toy": "warp_drive"}}, ["'toy'", "'warp_drive'"]),
        ({"array_types": ()}, ["array_types"]),
        ({"to_numpy": None}, ["to_numpy must be callable"]),
        ({"name": "other"}, ["registered as 'toy_bad'"]),
        ({"host_arrays": "yes"}, ["host_arrays must be a bool", "'yes'"]),
        ({"lazy": 1}, ["lazy must be a bool"]),
        (
            {"fusion": types.SimpleNamespace(kernels=lambda spec, fallback: {})},
            ["fusion lacks available, exact_ops, expressions"],
        ),
    ],
)
def test_checker_names_each_broken_field(changes, fragments):
    with raises_cleanly(backends.BackendContractError, "'toy_bad'", *fragments):
        changes = dict(changes)
        backends.check(toy_backend.make_backend(changes.pop("name", "toy_bad"), **changes), "toy_bad")


def test_loader_must_return_a_backend():
    unregister = backends.register("toy_none", lambda: None)
    try:
        with raises_cleanly(RuntimeError, "'toy_none'", "must return a polyad.backends.Backend", "NoneType"):
            pa.set_backend("toy_none")
    finally:
        unregister()


def test_builtin_backends_keep_the_contract():
    for name in dispatch.usable_backends():
        if name in ("numpy", "cupy", "array_api_strict"):
            b = backends.check(backends.load(name), name)
            assert callable(b.xp.scatter_add) and callable(b.xp.index_add)


def test_fusion_asks_the_backends_fusion_field():
    # the compiler reads what a backend declares, never its name: an unavailable fusion leaves the graph
    # as it is; under math="exact" only the backend's exact_ops join a group; its kernels build each group
    from polyad.graph.compiler.fusion import FUSABLE, fuse

    x = np.linspace(0.0, 1.0, 4)
    graph = pa.make_graph(lambda v: pa.xp.sum(pa.xp.exp(v) * v + v), x)
    cases = [  # (available, exact_ops, math, the fused graph's node names)
        (False, None, "fast", None),
        (True, None, "exact", ["fused[exp,multiply,add,sum]"]),
        (True, frozenset({"multiply", "add"}), "exact", ["exp", "fused[multiply,add,sum]"]),
        (True, frozenset({"multiply", "add"}), "fast", ["fused[exp,multiply,add,sum]"]),
    ]
    for k, (available, exact_ops, math, expected) in enumerate(cases):
        fusion = types.SimpleNamespace(
            kernels=lambda spec, fallback: {},
            available=lambda available=available: available,
            exact_ops=exact_ops,
            expressions=dict.fromkeys(FUSABLE, "{0}"),
        )
        name = f"toy_fuse{k}"
        unregister = backends.register(
            name, lambda name=name, fusion=fusion: toy_backend.make_backend(name, fusion=fusion)
        )
        try:
            fused = fuse(graph, name, math)
        finally:
            unregister()
        if expected is None:
            assert fused is graph
        else:
            assert [n.op.name for n in fused.nodes] == expected
            assert_close(fused(x), graph(x), rtol=1e-14)


# ------------------------------------------------------------------------------ entry points


class _EntryPoint:
    """Stands in for an ``importlib.metadata.EntryPoint`` whose ``load()`` imports a loader."""

    def __init__(self, name, value, target):
        self.name, self.value, self.group = name, value, backends.ENTRY_POINT_GROUP
        self._target = target
        self.loads = 0

    def load(self):
        self.loads += 1
        return self._target


def test_entry_point_backend_is_discovered_and_loaded_lazily(monkeypatch):
    ep = _EntryPoint("toy_ep", "toy_backend_pkg:load", lambda: toy_backend.make_backend("toy_ep"))

    def entry_points(**kwargs):
        assert kwargs == {"group": "polyad.backends"}
        return [ep]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    try:
        assert backends.discover() == ("toy_ep",)
        assert "toy_ep" in backends.names()
        assert ep.loads == 0  # not imported yet
        with pa.backend("toy_ep"):
            y = pa.grad(lambda v: xp.sum(xp.sin(v)))(pa.xp.linspace(0.0, 1.0, 5))
        assert ep.loads == 1 and isinstance(y, ToyArray)
        np.testing.assert_allclose(to_numpy(y), np.cos(np.linspace(0.0, 1.0, 5)), rtol=1e-12)
    finally:
        backends.unregister("toy_ep")


def test_entry_point_found_when_its_name_is_first_asked_for(monkeypatch):
    backends.names()  # the entry points were scanned before this package was "installed"
    ep = _EntryPoint("toy_late", "toy_late:load", lambda: toy_backend.make_backend("toy_late"))
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [ep])
    try:
        with pa.backend("toy_late"):
            x = pa.xp.asarray([1.0, 2.0])
            y = pa.vmap(lambda v: v * xp.sum(v))(xp.stack([x, 2 * x]))
        assert isinstance(y, ToyArray)
        np.testing.assert_allclose(to_numpy(y), [[3.0, 6.0], [12.0, 24.0]])
    finally:
        backends.unregister("toy_late")


def test_entry_point_that_does_not_import_is_unavailable(monkeypatch):
    class Broken(_EntryPoint):
        def load(self):
            raise ImportError("No module named 'toy_missing'")

    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda **kw: [Broken("toy_missing", "toy_missing:load", None)]
    )
    try:
        with raises_cleanly(
            RuntimeError, "'toy_missing' is unavailable", "toy_missing:load", "does not import"
        ):
            pa.set_backend("toy_missing")
    finally:
        backends.unregister("toy_missing")


# ------------------------------------------------------------------------------ the op table on the toy


def _value_cases():
    sampler = Sampler()
    return [
        pytest.param(row, i, id=f"{row.name}-{sample.name or i}")
        for row in OP_TABLE
        for i, sample in enumerate(row.samples(sampler))
    ]


@pytest.mark.parametrize("row,i", _value_cases())
def test_op_table_value_on_toy(toy, row, i):
    """Every row's forward value on toy arrays equals NumPy's on the same numbers."""
    if row.skip_reason("value"):
        pytest.xfail(row.skip_reason("value"))
    with pa.backend("toy"):
        sample = row.samples(Sampler(toy))[i]
        if row.device_types is not None and "toy" not in row.device_types:
            # no generic kernel (SciPy on CPU, cupyx on CUDA): the dispatcher refuses, naming the op
            with raises_cleanly(NotImplementedError, "no kernel for device types ['toy']"):
                row.function()(*sample.args, **sample.kwargs)
            return
        got = row.function()(*sample.args, **sample.kwargs)
    expected = row.reference(compat_numpy)(*_numpy_tree(sample.args), **_numpy_tree(sample.kwargs))
    for leaf in _leaves(got):  # results stay on the toy backend
        assert not isinstance(leaf, np.ndarray | np.generic), f"{row.name} returned NumPy's {type(leaf)}"
    assert_close(got, expected, rtol=row.rtol, atol=row.atol)


# rows whose first sample differentiates through the families: element-wise, broadcasting, linear
# algebra, indexing (scatter_add / index_add in the backward pass), reductions, manipulation, FFT
REPRESENTATIVE = ["sin", "exp", "multiply", "divide", "where", "matmul", "linalg.inv", "linalg.solve",
                  "take", "take_along_axis", "sum", "mean", "std", "cumulative_sum", "reshape", "concat",
                  "flip", "sort", "fft.rfft", "clip"]  # fmt: skip


def _loss_and_args(row, backend):
    """A real scalar loss of the row's first sample on ``backend``, and its floating arguments."""
    fn, args = diff_fn(row, row.samples(Sampler(backend))[0])

    def loss(*diff):
        out = fn(*diff)
        out = out[0] if isinstance(out, tuple) else out
        return xp.sum(xp.abs(out) ** 2) if xp.isdtype(out.dtype, "complex floating") else xp.sum(out * out)

    return loss, args


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_grad_on_toy_equals_numpy(toy, name):
    row = BY_NAME[name]
    with pa.backend("toy"):
        loss, args = _loss_and_args(row, toy)
        got = pa.grad(loss, argnums=tuple(range(len(args))))(*args)
    loss_np, args_np = _loss_and_args(row, backends.load("numpy"))
    expected = pa.grad(loss_np, argnums=tuple(range(len(args_np))))(*args_np)
    assert all(isinstance(g, ToyArray) for g in got)
    assert_close(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_vmap_on_toy_equals_numpy(toy, name):
    row = BY_NAME[name]

    def batched(backend):
        loss, args = _loss_and_args(row, backend)
        stacked = tuple(backend.xp.stack([a, a * 0.5, a + 0.25]) for a in args)
        return pa.vmap(pa.grad(loss, argnums=tuple(range(len(args)))))(*stacked)

    with pa.backend("toy"):
        got = batched(toy)
    expected = batched(backends.load("numpy"))
    assert all(isinstance(g, ToyArray) for g in got)
    assert_close(got, expected, rtol=1e-10, atol=1e-12)


def test_operators_defer_to_tensors_through_the_hook(toy):
    """``W @ x`` with a raw toy ``W``: the toy's operators return NotImplemented for polyad's tensors
    only because the core handed it the Tensor type (``defer_to``)."""
    W = toy.xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    x = toy.xp.asarray([0.5, -1.0])
    g = pa.grad(lambda v: xp.sum(W @ v + 2.0 * v - W[0] * v))(x)
    np.testing.assert_allclose(to_numpy(g), np.array([[1, 2], [3, 4]]).sum(0) + 2 - np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="toy arrays do not mix"):
        W @ np.ones(2)


def test_random_draws_with_the_backend_generator(toy):
    a = pa.random.Generator(3).normal(size=(4,), device=TOY)
    b = pa.random.Generator(3).normal(size=(4,), device=TOY)
    assert isinstance(a, ToyArray)
    np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    np.testing.assert_array_equal(to_numpy(a), np.random.default_rng(3).standard_normal(4))


def test_backend_kernel_for_a_shipped_op_is_attached_and_chosen(toy):
    """The toy declares a "toy" kernel for polyad::softplus as data; the core attached it."""
    toy_backend.SOFTPLUS_CALLS.clear()
    x = toy.xp.linspace(-3.0, 3.0, 7)
    out = pa.custom_ops.softplus(x)
    g = pa.grad(lambda v: xp.sum(pa.custom_ops.softplus(v)))(x)
    assert toy_backend.SOFTPLUS_CALLS == [(7,), (7,)]
    xn = np.linspace(-3.0, 3.0, 7)
    np.testing.assert_allclose(to_numpy(out), np.logaddexp(0, xn), rtol=1e-14)
    np.testing.assert_allclose(to_numpy(g), 1 / (1 + np.exp(-xn)), rtol=1e-14)
    np.testing.assert_allclose(
        pa.custom_ops.softplus(xn), np.logaddexp(0, xn), rtol=1e-14
    )  # the generic kernel
    assert len(toy_backend.SOFTPLUS_CALLS) == 2


# ------------------------------------------------------------------------------ device types


@pytest.fixture
def xpu():
    """Device type "xpu", directly above the backend under test's own ("cpu" on NumPy, "cuda" on CuPy):
    its float32 arrays play xpu arrays. Yields that native type."""
    native = native_device_type()
    undo = pa.register_device_type(
        "xpu", lambda a: a.dtype == dispatch.default_backend().xp.float32, above=native
    )
    try:
        yield native
    finally:
        undo()
    assert "xpu" not in pa.DEVICE_PRIORITY


def test_registered_device_type_kernel_is_chosen_over_cpu(xpu):
    native = xpu  # "cpu" on NumPy, "cuda" on CuPy
    assert pa.DEVICE_PRIORITY.index("xpu") == pa.DEVICE_PRIORITY.index(native) - 1
    calls = []

    @pa.custom_op("contract::scale", mutates_args=())
    def scale(x):
        calls.append("generic")
        return x * 2

    scale.register_kernel(native, lambda x: calls.append("cpu") or x * 2)
    scale.register_kernel("xpu", lambda x: calls.append("xpu") or x * 3)
    bxp = dispatch.default_backend().xp
    a64, a32 = bxp.ones(2, dtype=bxp.float64), bxp.ones(2, dtype=bxp.float32)
    assert_close(scale(a64), bxp.full(2, 2.0, dtype=bxp.float64))
    assert_close(scale(a32), bxp.full(2, 3.0, dtype=bxp.float32))
    assert calls == ["cpu", "xpu"]

    @pa.custom_op("contract::add", mutates_args=())
    def add(x, y):
        return x + y

    add.register_kernel(native, lambda x, y: calls.append("cpu") or x + y)
    add.register_kernel("xpu", lambda x, y: calls.append("xpu") or x + y + 1)
    assert_close(add(a64, bxp.astype(a32, bxp.float64)), bxp.full(2, 2.0, dtype=bxp.float64))
    assert_close(add(a64, a32), bxp.full(2, 3.0, dtype=bxp.float64))  # mixed: the higher priority wins
    assert calls == ["cpu", "xpu", "cpu", "xpu"]


def test_registered_device_type_placed_by_above(xpu):
    undo = pa.register_device_type("rocm", above="xpu")
    try:
        assert pa.DEVICE_PRIORITY.index("rocm") == pa.DEVICE_PRIORITY.index("xpu") - 1
    finally:
        undo()
    assert "rocm" not in pa.DEVICE_PRIORITY
    with raises_cleanly(ValueError, "above='nowhere'", "known"):
        pa.register_device_type("rocm", above="nowhere")
    with raises_cleanly(TypeError, "name", "5"):
        pa.register_device_type(5)


def test_unregistered_device_type_is_refused():
    @pa.custom_op("contract::refused", mutates_args=())
    def refused(x):
        return x

    with raises_cleanly(ValueError, "'npu'", "unknown device type", "register_device_type"):
        refused.register_kernel("npu", lambda x: x)
    with raises_cleanly(ValueError, "'npu'", "unknown device type"):
        with pa.library.override(refused, "npu", lambda x: x):
            pass


def test_device_type_outside_the_priority_never_falls_to_the_generic_kernel():
    """A backend whose arrays report an undeclared device type breaks the contract when it loads; an
    array whose type is outside the priority is an error at kernel choice, never the generic kernel."""
    unregister = backends.register(
        "toy_odd", lambda: toy_backend.make_backend("toy_odd", device_type=lambda a: "odd", kernels={})
    )
    try:
        with raises_cleanly(backends.BackendUnavailable, "'toy_odd'", "'odd'", "device_types"):
            backends.load("toy_odd")
    finally:
        unregister()
    b = backends.load(pa.get_backend())
    x = b.xp.ones(3)
    original = b.device_type
    b.device_type = lambda a: "odd"  # an array of a backend with several device types may report any
    b.device_types = {**b.device_types, "gpu-odd": "cpu"}
    op = pa.custom_ops.softplus.op
    before = dict(op.kernels)
    op.kernels["cpu"] = lambda xp_, v: v  # a device kernel, so the dispatcher must choose
    try:
        with raises_cleanly(ValueError, "'odd'", "not a registered device type"):
            pa.custom_ops.softplus(x)
    finally:
        op.kernels.clear()
        op.kernels.update(before)
        b.device_type = original
        b.device_types = {k: v for k, v in b.device_types.items() if k != "gpu-odd"}


# ------------------------------------------------------------------------------ the docs


@pytest.mark.skipif(pa.get_backend() != "numpy", reason="the examples print NumPy results")
def test_backends_docstring_examples():
    """``polyad.backends`` lives outside the polyad folder, which the doctest run covers: run its own."""
    attempted = 0
    for module in (backends, backends.contract, backends.devices, backends.registry):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted > 5

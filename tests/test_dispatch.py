"""The dispatcher's device policy, proved without a GPU: stand-in device types are registered for
some arrays, and an op with per-device kernels must pick the highest-priority one present."""

import threading
import types

import pytest
from helpers import to_numpy

import polyad as pa
from polyad.core import Op, bind, dispatch


def _op(kernels, generic=True):
    calls = []

    def make(tag):
        def kernel(xp, *arrays):
            calls.append(tag)
            return arrays[0] + 0

        return kernel

    op = Op("test::probe", make("generic") if generic else None, register=False)
    for device in kernels:
        op.kernels[device] = make(device)
    return op, calls


def _arrays():
    xp = dispatch.default_backend().xp
    return xp.ones(2, dtype=xp.float64), xp.ones(2, dtype=xp.float32)


def test_cuda_kernel_wins_for_mixed_inputs(fake_cuda):
    op, calls = _op(["cpu", "cuda"])
    cpu, gpu = _arrays()
    bind(op, cpu, gpu)
    bind(op, gpu, cpu)
    assert calls == ["cuda", "cuda"]


def test_cpu_kernel_for_cpu_inputs(stand_in):
    native, accelerator = stand_in  # "cpu" and "cuda" on NumPy
    op, calls = _op([native, accelerator])
    cpu, _ = _arrays()
    out = bind(op, cpu, cpu)
    assert calls == [native]
    assert (to_numpy(out) == 1).all()


def test_generic_fallback_when_no_kernel_for_the_device(fake_cuda):
    op, calls = _op(["cpu"])
    cpu, gpu = _arrays()
    bind(op, cpu, gpu)  # cuda present, no cuda kernel: the generic kernel, not the cpu one
    assert calls == ["generic"]


def test_clear_error_when_nothing_fits(stand_in):
    native, accelerator = stand_in
    op, _ = _op([accelerator], generic=False)
    cpu, _ = _arrays()
    with pytest.raises(NotImplementedError, match=rf"test::probe.*\['{native}'\].*{accelerator}"):
        bind(op, cpu)


def test_new_device_type_is_placed_by_priority():
    xp = dispatch.default_backend().xp
    native = dispatch.device_type(xp.ones(2))  # "cpu" on NumPy, "cuda" on CuPy
    undo = dispatch.register_device_type("accel", lambda a: "int" in str(a.dtype), above=native)
    try:
        assert dispatch.DEVICE_PRIORITY.index("accel") == dispatch.DEVICE_PRIORITY.index(native) - 1
        op, calls = _op([native, "accel"])
        bind(op, xp.ones(2), xp.ones(2, dtype=xp.int64))
        assert calls == ["accel"]
    finally:
        undo()
    assert "accel" not in dispatch.DEVICE_PRIORITY


def test_kernel_choice_inside_transforms(fake_cuda):
    """Transforms pass the op down to level 0, where the kernel is chosen from the real arrays."""
    op, calls = _op(["cpu", "cuda"])
    op.rules["batch"] = lambda info, dims, x: (bind(op, x), dims[0])
    _, gpu = _arrays()
    xp = dispatch.default_backend().xp
    batch = xp.stack([gpu, gpu])
    pa.vmap(lambda v: bind(op, v))(batch)
    assert calls == ["cuda"]


@pytest.mark.skipif(pa.get_backend() != "array_api_strict", reason="array_api_strict offers extra devices")
def test_strict_devices_as_stand_in():
    import array_api_strict

    device1 = array_api_strict.Device("device1")
    undo = dispatch.register_device_type("cuda", lambda a: a.device == device1)
    try:
        op, calls = _op(["cpu", "cuda"])
        a = array_api_strict.ones(2)
        b = array_api_strict.ones(2, device=device1)
        bind(op, a)
        bind(op, b, a)  # mixed devices: the cuda-priority kernel is chosen
        assert calls == ["cpu", "cuda"]
    finally:
        undo()


def test_what_is_no_array_loads_no_backend(monkeypatch):
    """pa.jit looks for arrays among a function's globals (``api/_closed_over.py``): a module there
    (``np``, ``xp``) loaded every installed backend, CuPy and Dask too, in a NumPy process (36 MiB of its
    memory). Only something with a shape and a dtype loads them now, and is still found."""
    loads = []
    monkeypatch.setattr(dispatch, "_NOT_ARRAY", set())
    monkeypatch.setattr(dispatch, "usable_backends", lambda: loads.append(1))
    for value in (types, object(), len, dispatch.backend_of_array, Op, threading.local()):
        assert dispatch.backend_of_array(value) is None
    assert loads == []

    class Foreign:  # an array of some library no loaded backend owns
        shape, dtype = (2,), "float64"

    assert dispatch.backend_of_array(Foreign()) is None
    assert loads == [1]
    assert dispatch.backend_of_array(pa.xp.ones(2)) is not None

"""Shared test helpers."""

import contextlib

import numpy as np
import pytest

import polyad as pa
from polyad import core


def to_numpy(x):
    """A NumPy copy of a backend array, polyad tensor, scalar or (named)tuple or list of them."""
    if isinstance(x, list):
        return [to_numpy(v) for v in x]
    if isinstance(x, tuple):
        return tuple(to_numpy(v) for v in x)
    if isinstance(x, pa.Tensor):
        x = x.concrete()
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return np.zeros((), dtype=x)  # a dtype (result_type): a 0-d zero of it, so dtypes get compared
    if type(x).__name__ == "DType":  # array_api_strict's dtype objects
        return np.zeros((), dtype=np.dtype(str(x).rsplit(".", 1)[-1]))
    if isinstance(x, int | float | complex | bool | np.generic):
        return np.asarray(x)
    if hasattr(x, "get"):  # cupy
        return x.get()
    return np.asarray(x)


def assert_close(got, expected, rtol=1e-7, atol=1e-10):
    got, expected = to_numpy(got), to_numpy(expected)
    if isinstance(expected, tuple | list):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_close(g, e, rtol, atol)
        return
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


@contextlib.contextmanager
def raises_cleanly(exc, *fragments):
    """pytest.raises that also checks the message names each fragment and the level stack is empty."""
    with pytest.raises(exc) as info:
        yield info
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    assert core.current_level() == 0

"""A numpy-backed stand-in for the small part of CuPy that archline.characterize.workloads uses, for CPU tests.

Install it with ``monkeypatch.setitem(sys.modules, "cupy", make_fake_cupy())``. Its
ElementwiseKernel knows only archline's two kernels by name and evaluates them in numpy at
the arrays' own precision, so the workloads' setup, counts and output checks can be exercised.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

__all__ = ["FakeDeviceArray", "make_fake_cupy"]


class FakeDeviceArray(np.ndarray[Any, Any]):
    """An ndarray that answers ``get()`` and looks like a device array to ``teardown``."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {}

    def get(self) -> np.ndarray[Any, Any]:
        return np.array(self)


def _dev(x: Any) -> FakeDeviceArray:
    return np.asarray(x).view(FakeDeviceArray)


class _RandomState:
    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def uniform(self, low: float, high: float, size: tuple[int, ...], dtype: Any) -> FakeDeviceArray:
        return _dev(self._rng.uniform(low, high, size).astype(dtype))


class _ElementwiseKernel:
    def __init__(self, in_params: str, out_params: str, operation: str, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any) -> None:
        if self.name == "archline_triad":
            b, c, s, a = args
            a[...] = b + s * c
        elif self.name == "archline_stencil5":
            x, _width, y = args
            y[...] = x
            t = x.dtype.type
            y[1:-1, 1:-1] = t(0.2) * (x[1:-1, 1:-1] + x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
        else:
            raise NotImplementedError(self.name)


def make_fake_cupy() -> types.ModuleType:
    """A module object with the attributes archline.characterize.workloads reaches for."""
    cp = types.ModuleType("cupy")
    stream = types.SimpleNamespace(synchronize=lambda: None)
    cp.cuda = types.SimpleNamespace(get_current_stream=lambda: stream)  # type: ignore[attr-defined]
    cp.random = types.SimpleNamespace(RandomState=_RandomState)  # type: ignore[attr-defined]
    cp.float64 = np.float64  # type: ignore[attr-defined]
    cp.ElementwiseKernel = _ElementwiseKernel  # type: ignore[attr-defined]
    cp.asarray = _dev  # type: ignore[attr-defined]
    cp.empty = lambda shape, dtype: _dev(np.empty(shape, dtype))  # type: ignore[attr-defined]
    cp.empty_like = lambda x: _dev(np.empty_like(x))  # type: ignore[attr-defined]
    cp.abs = lambda x: _dev(np.abs(x))  # type: ignore[attr-defined]
    cp.count_nonzero = np.count_nonzero  # type: ignore[attr-defined]
    cp.sum = lambda x, out: np.sum(x, out=out)  # type: ignore[attr-defined]
    cp.matmul = lambda a, b, out: np.matmul(a, b, out=out)  # type: ignore[attr-defined]
    return cp

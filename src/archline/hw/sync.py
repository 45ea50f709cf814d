"""Device synchronisation for region boundaries: use whatever CUDA library the program already runs."""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["default_synchronizer"]


def _noop() -> None:
    return None


def default_synchronizer(gpu: int = 0) -> Callable[[], None]:
    """A function that waits until all work queued on ``gpu`` has finished.

    Region boundaries must be taken after the GPU has finished the work before them, or the
    region measures the enqueueing, not the execution. Tries, in order: PyTorch (if imported
    and CUDA initialised), CuPy (if imported), the CUDA driver's current context (cuda-bindings);
    otherwise a no-op (the caller synchronises).
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                return lambda: torch.cuda.synchronize(gpu)
        except Exception:
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:

        def _cupy_sync() -> None:
            with cupy.cuda.Device(gpu):
                cupy.cuda.runtime.deviceSynchronize()

        return _cupy_sync
    try:
        from cuda.bindings import driver

        err, ctx = driver.cuCtxGetCurrent()
        if err == driver.CUresult.CUDA_SUCCESS and int(ctx) != 0:
            return lambda: driver.cuCtxSynchronize() and None
    except Exception:
        pass
    return _noop

"""Test configuration: GPU tests run only where an NVIDIA GPU and its driver are present; one BLAS thread a worker."""

from __future__ import annotations

import os

# pytest-xdist runs one worker per core: a BLAS that also starts a thread per core makes the workers' threads spin
# against each other (on CI's 2 cores the linear-algebra tests took 2-3 times as long). Set before numpy is imported
# (nothing imports it before this file); a value the caller set is kept.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402


def _gpu_present() -> bool:
    if os.environ.get("ARCHLINE_NO_GPU"):
        return False
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return bool(n > 0)
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_present():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU with a working NVML on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

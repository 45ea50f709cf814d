"""Test configuration: GPU tests run only where an NVIDIA GPU and its driver are present."""

from __future__ import annotations

import os

import pytest


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

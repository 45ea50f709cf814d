"""archline: what GPU code costs in time, power and energy on your own NVIDIA GPU, and why."""

from __future__ import annotations

__version__ = "0.1.0"

from archline.errors import (
    ArchlineError,
    GPUUnavailableError,
    InputError,
    NVMLUnavailableError,
    RunDirError,
    TraceError,
)

__all__ = [
    "ArchlineError",
    "GPUUnavailableError",
    "InputError",
    "NVMLUnavailableError",
    "RunDirError",
    "TraceError",
    "__version__",
]

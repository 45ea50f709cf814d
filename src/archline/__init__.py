"""archline: what GPU code costs in time, power and energy on your own NVIDIA GPU, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archline.errors import (
    ArchlineError,
    GPUUnavailableError,
    InputError,
    NVMLUnavailableError,
    RunDirError,
    TraceError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from archline.measurement.api import CallableEnergy, Measurement, measure, measure_callable
    from archline.measurement.attribute_api import Attribution, attribute

# The measuring API pulls in scipy; import it on first use so the CLI starts quickly.
_LAZY = {
    "CallableEnergy": "archline.measurement.api",
    "Measurement": "archline.measurement.api",
    "measure": "archline.measurement.api",
    "measure_callable": "archline.measurement.api",
    "Attribution": "archline.measurement.attribute_api",
    "attribute": "archline.measurement.attribute_api",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'archline' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


__all__ = [
    "ArchlineError",
    "Attribution",
    "CallableEnergy",
    "GPUUnavailableError",
    "InputError",
    "Measurement",
    "NVMLUnavailableError",
    "RunDirError",
    "TraceError",
    "__version__",
    "attribute",
    "measure",
    "measure_callable",
]

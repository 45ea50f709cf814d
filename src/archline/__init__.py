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
    from archline.measure.api import CallableEnergy, Measurement, measure, measure_callable
    from archline.measure.attribute_api import Attribution, attribute

# The measuring API pulls in scipy; import it on first use so the CLI starts quickly.
_LAZY = {
    "CallableEnergy": "archline.measure.api",
    "Measurement": "archline.measure.api",
    "measure": "archline.measure.api",
    "measure_callable": "archline.measure.api",
    "Attribution": "archline.measure.attribute_api",
    "attribute": "archline.measure.attribute_api",
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

"""A Recording: every sensor channel captured over one span of time, with the regions marked on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from archline.core.readings import Readings

__all__ = ["SOURCE_NAMES", "Recording", "Region"]

#: Conventional source names for NVML channels (see :mod:`archline.hw.nvml`):
#: ``nvml.buffer``  power, NVML's sample buffer (``NVML_TOTAL_POWER_SAMPLES``), its own µs timestamps;
#: ``nvml.instant`` power, field ``NVML_FI_DEV_POWER_INSTANT``, stamped at the query;
#: ``nvml.average`` power, field ``NVML_FI_DEV_POWER_AVERAGE`` (a 1 s average on Ampere+);
#: ``nvml.usage``   power, ``nvmlDeviceGetPowerUsage``;
#: ``nvml.energy``  energy, ``nvmlDeviceGetTotalEnergyConsumption`` (cumulative J);
#: ``nvml.sm_clock``, ``nvml.mem_clock``, ``nvml.temperature``, ``nvml.throttle``, ``nvml.memory_used``.
SOURCE_NAMES = (
    "nvml.buffer",
    "nvml.instant",
    "nvml.average",
    "nvml.usage",
    "nvml.energy",
    "nvml.sm_clock",
    "nvml.mem_clock",
    "nvml.temperature",
    "nvml.throttle",
    "nvml.memory_used",
)


@dataclass(frozen=True)
class Region:
    """A named span on the common clock (Unix-epoch seconds), e.g. one kernel or one ``m.region``.

    ``how`` says how the ends were obtained: ``host`` (host clock around a synchronised call),
    ``event`` (CUDA events mapped to the host clock), ``globaltimer`` (the kernel's own
    ``%globaltimer`` stamps) or ``cupti`` (CUPTI activity timestamps).
    """

    name: str
    start_s: float
    end_s: float
    how: str = "host"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Recording:
    """All channels recorded over ``[start_s, end_s]`` plus the regions marked during it."""

    readings: Mapping[str, Readings]
    regions: tuple[Region, ...] = ()
    start_s: float = 0.0
    end_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def get(self, source: str) -> Readings | None:
        return self.readings.get(source)

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(name)

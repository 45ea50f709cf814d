"""A stand-in for the pynvml module, so NVML code paths run on a machine with no driver."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class _Val:
    uiVal: int


@dataclass
class _Sample:
    timeStamp: int
    sampleValue: _Val


@dataclass
class _Field:
    nvmlReturn: int
    value: _Val


def make_fake_nvml(
    *,
    count: int = 1,
    init_error: int | None = None,
    samples: list[tuple[int, int]] | None = None,
    power_mw: int = 123_456,
    energy_mj: int = 1_000_000,
    deny: set[str] | None = None,
) -> types.ModuleType:
    """Build a module with the pynvml names archline uses.

    ``samples``: the sample buffer as (µs timestamp, mW); ``deny``: function names that fail
    with NVML_ERROR_NO_PERMISSION.
    """
    m = types.ModuleType("pynvml")
    consts = {
        "NVML_SUCCESS": 0,
        "NVML_ERROR_UNINITIALIZED": 1,
        "NVML_ERROR_INVALID_ARGUMENT": 2,
        "NVML_ERROR_NOT_SUPPORTED": 3,
        "NVML_ERROR_NO_PERMISSION": 4,
        "NVML_ERROR_NOT_FOUND": 6,
        "NVML_ERROR_DRIVER_NOT_LOADED": 9,
        "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
        "NVML_ERROR_GPU_IS_LOST": 15,
        "NVML_TOTAL_POWER_SAMPLES": 0,
        "NVML_CLOCK_SM": 1,
        "NVML_CLOCK_MEM": 2,
        "NVML_TEMPERATURE_GPU": 0,
    }
    for k, v in consts.items():
        setattr(m, k, v)
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    state: dict[str, Any] = {"init": 0, "samples": list(samples or [])}
    m.state = state  # type: ignore[attr-defined]
    deny = deny or set()

    def guard(name: str) -> None:
        if name in deny:
            raise NVMLError(consts["NVML_ERROR_NO_PERMISSION"])

    def nvmlInit() -> None:
        if init_error is not None:
            raise NVMLError(init_error)
        state["init"] += 1

    def nvmlShutdown() -> None:
        state["init"] -= 1

    def nvmlDeviceGetCount() -> int:
        return count

    def nvmlDeviceGetHandleByIndex(i: int) -> str:
        if not 0 <= i < count:
            raise NVMLError(consts["NVML_ERROR_INVALID_ARGUMENT"])
        return f"handle{i}"

    def nvmlDeviceGetSamples(h: str, kind: int, last: int) -> tuple[int, list[_Sample]]:
        guard("nvmlDeviceGetSamples")
        new = [_Sample(t, _Val(v)) for t, v in state["samples"] if t > last]
        if not new:
            raise NVMLError(consts["NVML_ERROR_NOT_FOUND"])
        return 1, new

    def nvmlDeviceGetFieldValues(h: str, ids: list[int]) -> list[_Field]:
        guard("nvmlDeviceGetFieldValues")
        return [_Field(0, _Val(power_mw)) for _ in ids]

    def nvmlDeviceGetPowerUsage(h: str) -> int:
        guard("nvmlDeviceGetPowerUsage")
        return power_mw

    def nvmlDeviceGetTotalEnergyConsumption(h: str) -> int:
        guard("nvmlDeviceGetTotalEnergyConsumption")
        return energy_mj

    def nvmlDeviceGetClockInfo(h: str, which: int) -> int:
        guard("nvmlDeviceGetClockInfo")
        return 1980 if which == consts["NVML_CLOCK_SM"] else 2619

    def nvmlDeviceGetTemperature(h: str, which: int) -> int:
        return 41

    def nvmlDeviceGetCurrentClocksEventReasons(h: str) -> int:
        guard("nvmlDeviceGetCurrentClocksEventReasons")
        return 0x4

    # Static facts and state for the manifest (device_static / device_state), per handle "gpu<i>".
    class _Mem:
        total, used, free = 80 << 30, 1 << 30, 79 << 30

    class _Pci:
        busId = b"00000000:19:00.0"

    facts: dict[str, Any] = {
        "nvmlDeviceGetName": lambda h: b"Fake H100",
        "nvmlDeviceGetUUID": lambda h: f"GPU-fa4e0000-0000-0000-0000-00000000000{h[-1]}",
        "nvmlDeviceGetSerial": lambda h: "0",
        "nvmlDeviceGetVbiosVersion": lambda h: "96.00.00.00.00",
        "nvmlDeviceGetPciInfo": lambda h: _Pci(),
        "nvmlDeviceGetMemoryInfo": lambda h: _Mem(),
        "nvmlDeviceGetMaxClockInfo": lambda h, which: 1980 if which == consts["NVML_CLOCK_SM"] else 2619,
        "nvmlDeviceGetApplicationsClock": lambda h, which: 1755 if which == consts["NVML_CLOCK_SM"] else 2619,
        "nvmlDeviceGetPowerManagementLimit": lambda h: 700_000,
        "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: 700_000,
        "nvmlDeviceGetPowerManagementLimitConstraints": lambda h: (200_000, 700_000),
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetPersistenceMode": lambda h: 1,
        "nvmlDeviceGetComputeMode": lambda h: 0,
        "nvmlDeviceGetMigMode": lambda h: (0, 0),
        "nvmlDeviceGetPerformanceState": lambda h: 0,
        "nvmlSystemGetDriverVersion": lambda: "580.159.04",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
        "nvmlSystemGetNVMLVersion": lambda: "13.580.159.04",
    }

    def _fact(name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            guard(name)
            return fn(*args)

        call.__name__ = name
        return call

    for name, fn in facts.items():
        setattr(m, name, _fact(name, fn))

    for fn in (
        nvmlInit,
        nvmlShutdown,
        nvmlDeviceGetCount,
        nvmlDeviceGetHandleByIndex,
        nvmlDeviceGetSamples,
        nvmlDeviceGetFieldValues,
        nvmlDeviceGetPowerUsage,
        nvmlDeviceGetTotalEnergyConsumption,
        nvmlDeviceGetClockInfo,
        nvmlDeviceGetTemperature,
        nvmlDeviceGetCurrentClocksEventReasons,
    ):
        setattr(m, fn.__name__, fn)
    return m

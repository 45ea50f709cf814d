"""Which process wrote an injection trace and which GPU each of its devices is (the PROCESS and DEVICES chunks).

Every CUDA process of a traced program writes its own file. The file says who the process was (its
pid and the launcher's variables: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``CUDA_VISIBLE_DEVICES``)
and names each device id of its activity records by the GPU's UUID. The UUID is what ties a
kernel to a GPU's sensors: ``CUDA_VISIBLE_DEVICES`` renumbers CUDA's ordinals in each process, NVML's
indices stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from archline.core.activity import ActivityRecord
from archline.hw.cupti.trace import ClockMap

__all__ = [
    "DEVICE_DTYPE",
    "InjectedDevice",
    "InjectedProcess",
    "format_uuid",
    "parse_devices",
    "parse_process_text",
    "pid_from_name",
]

#: struct dev_rec of cupti_inject.c (88 bytes).
DEVICE_DTYPE = np.dtype(
    [
        ("id", "<u4"),
        ("source", "u1"),
        ("cuda_visible", "u1"),
        ("reserved", "<u2"),
        ("uuid", "u1", (16,)),
        ("name", "S64"),
    ]
)
_SOURCES: dict[int, Literal["cupti", "driver"]] = {1: "cupti", 2: "driver"}

#: Launcher variables that give a process's global rank, most specific first (torchrun, Open MPI, PMI, Slurm).
_RANK_VARS = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
_LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
_WORLD_VARS = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def format_uuid(raw: bytes) -> str:
    """A CUuuid's 16 bytes in NVML's form: ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``."""
    h = bytes(raw).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


@dataclass(frozen=True)
class InjectedDevice:
    """One device id of a process's activity records: the GPU's UUID and name, and who said so
    (``cupti``: CUPTI's device record; ``driver``: cuDeviceGetUuid of that CUDA ordinal)."""

    id: int
    uuid: str
    name: str
    source: Literal["cupti", "driver"]
    cuda_visible: bool = True


@dataclass
class InjectedProcess:
    """One traced CUDA process: its file, pid, launcher variables, devices and activity records.

    ``records`` are on the common clock (through ``clock``, its CUPTI-to-host map); ``traced`` are its
    duty-cycled tracing intervals (None: traced throughout).
    """

    file: Path
    pid: int
    env: dict[str, str] = field(default_factory=dict)
    devices: dict[int, InjectedDevice] = field(default_factory=dict)
    records: list[ActivityRecord] = field(default_factory=list)
    traced: list[tuple[float, float]] | None = None
    clock: ClockMap | None = None

    def _first_int(self, names: tuple[str, ...]) -> int | None:
        for n in names:
            v = self.env.get(n, "").strip()
            if v.lstrip("-").isdigit():
                return int(v)
        return None

    @property
    def rank(self) -> int | None:
        """The global rank the launcher gave the process (None: not launched as a rank)."""
        return self._first_int(_RANK_VARS)

    @property
    def local_rank(self) -> int | None:
        return self._first_int(_LOCAL_RANK_VARS)

    @property
    def world_size(self) -> int | None:
        return self._first_int(_WORLD_VARS)

    def uuid_of(self, device: int) -> str | None:
        """The UUID of the GPU behind ``device`` (an activity record's device id), None if unknown."""
        d = self.devices.get(device)
        return d.uuid if d is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "host": self.env.get("host"),
            "cuda_visible_devices": self.env.get("CUDA_VISIBLE_DEVICES"),
            "file": self.file.name,
            "devices": {str(k): {"uuid": d.uuid, "name": d.name, "source": d.source} for k, d in self.devices.items()},
            "records": len(self.records),
        }


def parse_process_text(text: str) -> dict[str, str]:
    """The PROCESS chunk's ``key=value`` fields (tab-separated)."""
    out: dict[str, str] = {}
    for part in text.split("\t"):
        key, sep, value = part.partition("=")
        if sep and key:
            out[key] = value
    return out


def parse_devices(data: bytes, offset: int, count: int, nbytes: int, into: dict[int, InjectedDevice]) -> None:
    """The records of a DEVICES chunk into ``into`` (by device id). A CUDA-visible record wins over a hidden one
    of the same id, CUPTI's over the driver's; ValueError if the chunk is malformed."""
    if count * DEVICE_DTYPE.itemsize > nbytes:
        raise ValueError(f"{count} device records do not fit in {nbytes} bytes")
    for rec in np.frombuffer(data, DEVICE_DTYPE, count, offset):
        source = _SOURCES.get(int(rec["source"]))
        if source is None:
            continue  # a source a newer library knows
        dev = InjectedDevice(
            id=int(rec["id"]),
            uuid=format_uuid(rec["uuid"].tobytes()),
            name=bytes(rec["name"]).split(b"\0", 1)[0].decode("utf-8", errors="replace"),
            source=source,
            cuda_visible=bool(rec["cuda_visible"]),
        )
        old = into.get(dev.id)
        if old is None or (dev.cuda_visible, dev.source == "cupti") > (old.cuda_visible, old.source == "cupti"):
            into[dev.id] = dev


def pid_from_name(path: Path) -> int:
    """The pid in ``cupti-<pid>.bin`` or ``cupti-<pid>-<ns>.bin`` (-1 if the name has none)."""
    parts = path.stem.split("-")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1

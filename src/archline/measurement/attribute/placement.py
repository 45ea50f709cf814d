"""Which GPU each traced activity ran on: a process's device id → the GPU's UUID → the NVML index.

CUDA numbers a process's devices after ``CUDA_VISIBLE_DEVICES``; NVML numbers the machine's. The
injection library names every device id of a process's trace by UUID, and the UUID is the only key
used here: two processes' device 0 may be two different GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archline.core.activity import ActivityRecord
from archline.records.multi_run import uuid_prefix

if TYPE_CHECKING:
    from archline.hw.cupti.inject import InjectionTrace
    from archline.hw.cupti.processes import InjectedProcess

__all__ = ["GpuSplit", "intersect_intervals", "split_by_gpu"]

Interval = tuple[float, float]


@dataclass
class GpuSplit:
    """A traced program's activities by GPU (NVML index): records, the processes that ran them, each process's
    busy time per activity name, the traced intervals and clock map to use, and what could not be placed."""

    records: dict[int, list[ActivityRecord]]
    processes: dict[int, list[InjectedProcess]]
    busy_s: dict[int, dict[str, dict[int, float]]]
    traced: dict[int, list[Interval] | None]
    clock: dict[int, dict[str, Any] | None]
    notes: list[str]
    #: Activities on a device that the process's trace names by no UUID (left out).
    unnamed: int = 0


def intersect_intervals(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """The time both interval lists cover."""
    out: list[Interval] = []
    for s1, e1 in a:
        for s2, e2 in b:
            s, e = max(s1, s2), min(e1, e2)
            if e > s:
                out.append((s, e))
    return sorted(out)


def _who(p: InjectedProcess) -> str:
    return f"process {p.pid}" + (f" (rank {p.rank})" if p.rank is not None else "")


def split_by_gpu(trace: InjectionTrace, uuids: Mapping[int, str]) -> GpuSplit:
    """Give every activity to the GPU (``uuids``: NVML index → UUID) its process's device record names.

    Records on a device without a UUID, or on a GPU not in ``uuids``, are left out with a note. A GPU's
    traced intervals are the time every process with work on it was traced (duty cycles are per process).
    """
    index_of = {u.lower(): g for g, u in uuids.items()}
    split = GpuSplit({g: [] for g in uuids}, {g: [] for g in uuids}, {g: {} for g in uuids}, {}, {}, [])
    elsewhere: dict[str, int] = defaultdict(int)
    for p in trace.processes:
        unknown: dict[int, int] = defaultdict(int)
        used: set[int] = set()
        for r in p.records:
            uuid = p.uuid_of(r.device)
            g = index_of.get(uuid.lower()) if uuid is not None else None
            if uuid is None:
                unknown[r.device] += 1
            elif g is None:
                elsewhere[uuid] += 1
            else:
                split.records[g].append(r)
                per = split.busy_s[g].setdefault(r.name, {})
                per[p.pid] = per.get(p.pid, 0.0) + r.duration_s
                used.add(g)
        for g in sorted(used):
            split.processes[g].append(p)
        split.unnamed += sum(unknown.values())
        for dev, n in sorted(unknown.items()):
            split.notes.append(
                f"{n} activities of {_who(p)} ran on its CUDA device {dev}, which its trace names by no UUID: "
                "left out (they cannot be placed on a GPU without it)"
            )
    for uuid, n in sorted(elsewhere.items()):
        split.notes.append(f"{n} activities ran on {uuid_prefix(uuid)}, a GPU this run does not measure: left out")
    for g in uuids:
        procs = split.processes[g]
        traced: list[Interval] | None = None
        for p in procs:
            if p.traced is not None:
                traced = list(p.traced) if traced is None else intersect_intervals(traced, p.traced)
        split.traced[g] = traced
        clocks = [p.clock for p in procs if p.clock is not None]
        split.clock[g] = clocks[0].to_json() if clocks else None
    return split

"""The tables of an ``archline run`` over several GPUs: every GPU's rows in one table, one row per GPU, per process.

Each GPU's own run directory (``gpu<i>/``) holds its attribution as a single-GPU run does
(``kernels.csv``, ``attribution.json``, ``raw/``); the run directory above them adds these tables,
which ``archline report`` reads without a GPU.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archline.core.activity import is_communication
from archline.records.attribution import KERNEL_COLUMNS, AttributionResult
from archline.records.rundir import RunDir, read_csv, write_csv

__all__ = [
    "GPU_COLUMNS",
    "GPU_KERNEL_COLUMNS",
    "MULTI_RUN_FILES",
    "PROCESS_COLUMNS",
    "MultiRunTables",
    "gpu_dir_name",
    "gpu_kernel_rows",
    "gpu_summary",
    "is_multi_gpu_run",
    "join_ids",
    "uuid_prefix",
    "write_multi_tables",
]

#: Files of the run directory above the GPUs' own → what each holds (for the manifest).
MULTI_RUN_FILES = {
    "kernels.csv": "every GPU's rows: gpu, gpu_uuid, rank, pid, comm, then the columns of gpu<i>/kernels.csv",
    "gpus.csv": "one row per GPU: its energy over the span (its energy counter), kernel and NCCL energy, ranks",
    "processes.csv": "one row per traced CUDA process: pid, rank, the GPUs its kernels ran on, their energy",
    "raw/cupti/": "each process's kernel trace as the injection library wrote it (cupti-<pid>-<ns>.bin)",
}

#: ``kernels.csv`` of a multi-GPU run: column → (unit, meaning).
GPU_KERNEL_COLUMNS: dict[str, tuple[str, str]] = {
    "gpu": ("", "NVML index of the GPU the row's work ran on (its sensors measured the row)"),
    "gpu_uuid": ("", "that GPU's UUID, first 12 characters"),
    "rank": ("", "launcher rank (RANK) of the process(es) whose work the row is; several are comma-separated"),
    "pid": ("", "process id(s) of that work"),
    "comm": ("", "nccl for NCCL communication kernels (ncclDevKernel_*, ncclKernel_*), else empty"),
    **KERNEL_COLUMNS,
}

#: ``gpus.csv``: column → (unit, meaning).
GPU_COLUMNS: dict[str, tuple[str, str]] = {
    "gpu": ("", "NVML index"),
    "gpu_uuid": ("", "the GPU's UUID"),
    "name": ("", "product name"),
    "driver_version": ("", "driver version"),
    "status": ("", "status of the GPU's own run directory"),
    "energy_j": ("J", "the GPU's energy over the analysed span: its energy counter, and the sum of its rows"),
    "kernel_energy_j": ("J", "energy of its kernel, copy and memset rows"),
    "comm_energy_j": ("J", "energy of its NCCL communication rows"),
    "unattributed_energy_j": ("J", "idle, gaps, untraced time and residual (a [whole program] row is neither)"),
    "identifiable_share": ("", "share of kernel energy in rows the data identified (data_weight ≥ 0.8)"),
    "kernel_rows": ("", "kernel, copy and memset rows"),
    "comm_rows": ("", "NCCL rows"),
    "span_s": ("s", "analysed span"),
    "mean_power_w": ("W", "energy_j / span_s"),
    "ranks": ("", "ranks whose kernels ran on the GPU"),
    "pids": ("", "processes whose kernels ran on the GPU"),
    "sensor_model": ("", "the power buffer's sensor model this GPU's attribution used (its own, never another's)"),
    "power_limit_w": ("W", "enforced power limit"),
    "whole_program_only": ("", "true if the GPU got one [whole program] row (no kernels traced on it)"),
    "run_dir": ("", "the GPU's own run directory, relative to this one"),
}

#: ``processes.csv``: column → (unit, meaning).
PROCESS_COLUMNS: dict[str, tuple[str, str]] = {
    "pid": ("", "process id"),
    "rank": ("", "global rank (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID); empty if none"),
    "local_rank": ("", "local rank (LOCAL_RANK, ...)"),
    "world_size": ("", "world size (WORLD_SIZE, ...)"),
    "host": ("", "host name"),
    "cuda_visible_devices": ("", "CUDA_VISIBLE_DEVICES as the process found it"),
    "gpus": ("", "NVML indices of the GPUs its kernels ran on (mapped by UUID, never by CUDA ordinal)"),
    "devices": ("", "its CUDA device ids → GPU UUID prefixes, e.g. 0→GPU-1a2b3c4d"),
    "calls": ("", "kernels, copies and memsets it ran on the measured GPUs"),
    "busy_s": ("s", "their summed duration"),
    "kernel_energy_j": (
        "J",
        "its share of its GPUs' kernel rows (a row run by several processes: split by time)",
    ),
    "comm_energy_j": ("J", "the same for NCCL rows"),
    "file": ("", "its trace under raw/cupti/"),
}

_ACTIVITY_KINDS = ("kernel", "memcpy", "memset", "program")
#: Rows of traced GPU work (a [whole program] row is not: its kernels were not traced).
_WORK_KINDS = ("kernel", "memcpy", "memset")


def gpu_dir_name(index: int) -> str:
    """The GPU's own run directory inside the run: ``gpu<index>``."""
    return f"gpu{index}"


def uuid_prefix(uuid: str) -> str:
    """A UUID shortened for tables: ``GPU-1a2b3c4d``."""
    return uuid[:12]


def join_ids(ids: Iterable[int | None]) -> int | str | None:
    """One id as itself, several comma-separated, none as None (for a CSV cell)."""
    vals = sorted({i for i in ids if i is not None})
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else ",".join(map(str, vals))


def gpu_kernel_rows(
    gpu: int, uuid: str, result: AttributionResult, owners: Mapping[str, tuple[Sequence[int | None], Sequence[int]]]
) -> list[dict[str, Any]]:
    """The GPU's rows with its index, UUID prefix, ranks and pids (``owners``: row name → (ranks, pids)) and the
    communication mark."""
    out = []
    for r in result.rows:
        ranks, pids = owners.get(r.name, ((), ()))
        comm = "nccl" if r.kind == "kernel" and is_communication(r.name) else None
        out.append(
            {"gpu": gpu, "gpu_uuid": uuid_prefix(uuid), "rank": join_ids(ranks), "pid": join_ids(pids), "comm": comm,
             **r.to_row()}
        )  # fmt: skip
    return out


def gpu_summary(result: AttributionResult | None) -> dict[str, Any]:
    """The figures of one GPU's row of ``gpus.csv`` that come from its attribution (NaN/None without one)."""
    if result is None:
        return {"energy_j": math.nan, "kernel_energy_j": math.nan, "comm_energy_j": math.nan}
    acts = [r for r in result.rows if r.kind in _WORK_KINDS]
    comm = [r for r in acts if r.kind == "kernel" and is_communication(r.name)]
    kernel_j = math.fsum(r.energy_j for r in acts)
    ident_j = math.fsum(r.energy_j for r in acts if r.identifiable)
    span = result.span_end_s - result.span_start_s
    return {
        "energy_j": result.total_energy_j,
        "kernel_energy_j": kernel_j,
        "comm_energy_j": math.fsum(r.energy_j for r in comm),
        "unattributed_energy_j": math.fsum(r.energy_j for r in result.rows if r.kind not in _ACTIVITY_KINDS),
        "identifiable_share": ident_j / kernel_j if kernel_j > 0 else math.nan,
        "kernel_rows": len(acts),
        "comm_rows": len(comm),
        "span_s": span,
        "mean_power_w": result.total_energy_j / span if span > 0 else math.nan,
        "whole_program_only": result.whole_program_only,
    }


def write_multi_tables(
    directory: str | os.PathLike[str],
    kernels: Iterable[Mapping[str, Any]],
    gpus: Iterable[Mapping[str, Any]],
    processes: Iterable[Mapping[str, Any]],
) -> None:
    """Write ``kernels.csv``, ``gpus.csv`` and ``processes.csv`` (atomically)."""
    d = Path(directory)
    write_csv(d / "kernels.csv", kernels, list(GPU_KERNEL_COLUMNS))
    write_csv(d / "gpus.csv", gpus, list(GPU_COLUMNS))
    write_csv(d / "processes.csv", processes, list(PROCESS_COLUMNS))


def is_multi_gpu_run(run: RunDir) -> bool:
    """Whether ``run`` is an ``archline run`` over several GPUs (its manifest lists them)."""
    return bool((run.manifest.extra or {}).get("multi_gpu"))


@dataclass(frozen=True)
class MultiRunTables:
    """The three tables of a multi-GPU run directory, as written."""

    kernels: list[dict[str, Any]]
    gpus: list[dict[str, Any]]
    processes: list[dict[str, Any]]

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> MultiRunTables:
        d = Path(directory)
        return cls(read_csv(d / "kernels.csv"), read_csv(d / "gpus.csv"), read_csv(d / "processes.csv"))

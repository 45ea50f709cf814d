"""A fleet on Dask: one characterization or sensor-calibration task per GPU, their run directories gathered."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from archline.errors import FleetError, InputError
from archline.records import RunDir

__all__ = [
    "FLEET_KINDS",
    "FleetResult",
    "FleetTask",
    "TaskRunner",
    "archline_runner",
    "gather",
    "physical_gpu",
    "run_fleet",
    "run_task",
    "submit",
]

FleetKind = Literal["quick", "full", "calibrate"]
FLEET_KINDS: tuple[str, ...] = ("quick", "full", "calibrate")

#: runner(gpu index as NVML numbers it, kind, run directory to write)
TaskRunner = Callable[[int, str, Path], None]

_MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class FleetTask:
    """One GPU's task: its label in the fleet, the GPU index on its worker (None: the worker's own GPU), the kind."""

    label: str
    kind: str
    gpu: int | None = None


@dataclass(frozen=True)
class FleetResult:
    """What a task sends back: the run directory as a tar archive (or the error), and where it ran."""

    label: str
    host: str
    gpu: int
    archive: bytes
    error: str = ""
    wall_s: float = 0.0


def physical_gpu(env: dict[str, str] | None = None) -> int:
    """The NVML index of this worker's GPU: the first of CUDA_VISIBLE_DEVICES (dask-cuda sets it per worker), else 0.

    NVML ignores CUDA_VISIBLE_DEVICES, so the child gets the physical index and no CUDA_VISIBLE_DEVICES.
    """
    env = dict(os.environ) if env is None else env
    first = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.isdigit():
        return int(first)
    if first.startswith(("GPU-", "MIG-")):
        from archline.hw.nvml import index_of_uuid

        return index_of_uuid(first)
    return 0


def archline_runner(gpu: int, kind: str, out: Path) -> None:
    """Run ``archline characterize`` (quick or full) or ``archline sensor calibrate`` on one GPU, in a child process."""
    if kind == "calibrate":
        args = ["sensor", "calibrate"]
    else:
        args = ["characterize", "--no-shipped", *(["--quick"] if kind == "quick" else [])]
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(_MULTICAST_OFF)
    cmd = [sys.executable, "-m", "archline", *args, "--gpu", str(gpu), "--output", str(out), "--force"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()
        raise FleetError(f"{' '.join(args)} on GPU {gpu} exited {done.returncode}: {tail[-1] if tail else ''}")


def _tar(path: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(path, arcname=".")
    return buf.getvalue()


def run_task(task: FleetTask, runner: TaskRunner | None = None) -> FleetResult:
    """Run one task on this worker; return its run directory packed (so it can travel to the client)."""
    import time

    run = runner or archline_runner
    gpu = physical_gpu() if task.gpu is None else task.gpu
    host = socket.gethostname()
    label = task.label or f"{host}-gpu{gpu}"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="archline-fleet-") as tmp:
        out = Path(tmp) / "run"
        try:
            run(gpu, task.kind, out)
        except Exception as exc:  # one GPU failing must not lose the others
            return FleetResult(label, host, gpu, b"", f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
        return FleetResult(label, host, gpu, _tar(out), "", time.perf_counter() - t0)


def submit(
    client: Any, tasks: Sequence[FleetTask], runner: TaskRunner | None = None, *, pin: bool
) -> list[FleetResult]:
    """Submit ``tasks`` on a ``distributed.Client``; with ``pin``, task i runs on worker i (one GPU each)."""
    if pin:
        workers = sorted(client.scheduler_info()["workers"])
        if len(workers) < len(tasks):
            raise FleetError(f"{len(tasks)} GPU tasks but only {len(workers)} Dask workers")
        futs = [
            client.submit(
                run_task, t, runner, workers=[w], allow_other_workers=False, pure=False, key=f"fleet-{t.label or i}"
            )
            for i, (t, w) in enumerate(zip(tasks, workers, strict=False))
        ]
    else:
        futs = [
            client.submit(run_task, t, runner, pure=False, key=f"fleet-{t.label or i}") for i, t in enumerate(tasks)
        ]
    results: list[FleetResult] = client.gather(futs)
    return results


def gather(results: Sequence[FleetResult], out: Path) -> list[tuple[FleetResult, Path | None]]:
    """Unpack every task's run directory under ``out/runs/<label>``; failed tasks get no directory."""
    if len({r.label for r in results}) != len(results):
        raise FleetError("two fleet tasks report the same GPU: is one GPU shared by two workers?")
    placed: list[tuple[FleetResult, Path | None]] = []
    for r in results:
        if r.error or not r.archive:
            placed.append((r, None))
            continue
        dest = out / "runs" / r.label
        if dest.exists():
            raise InputError(f"{dest} exists already (use --force or another --output)")
        dest.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(r.archive), mode="r:gz") as tar:
            tar.extractall(dest, filter="data")
        placed.append((r, dest))
    return placed


def run_fleet(
    client: Any,
    tasks: Sequence[FleetTask],
    out: Path,
    runner: TaskRunner | None = None,
    *,
    pin: bool,
    force: bool = False,
) -> RunDir:
    """Run ``tasks`` on the client's workers, gather their run directories under ``out/runs``, and record the fleet."""
    from archline.records import Manifest

    if not tasks:
        raise FleetError("the fleet has no GPU to run on (no worker, or no GPU selected)")
    rd = RunDir.create(out, Manifest.new("fleet", extra={"kind": tasks[0].kind, "tasks": len(tasks)}), overwrite=force)
    if force and (out / "runs").exists():
        shutil.rmtree(out / "runs")
    results = submit(client, tasks, runner, pin=pin)
    placed = gather(results, out)
    runs = [
        {"label": r.label, "host": r.host, "gpu": r.gpu, "path": None if p is None else str(p.relative_to(out)),
         "error": r.error, "wall_s": r.wall_s}
        for r, p in placed
    ]  # fmt: skip
    notes = tuple(f"{r.label}: {r.error}" for r in results if r.error)
    status: Any = "failed" if len(notes) == len(results) else "complete"
    rd.finish(status, notes=notes, extra={**rd.manifest.extra, "runs": runs})
    return rd

"""Where a fleet runs: a Dask client on dask-cuda's LocalCUDACluster, a LocalCluster, SLURM/PBS, or an address."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from archline.errors import FleetError, InputError

__all__ = ["CLUSTERS", "ClusterSpec", "open_client"]

CLUSTERS: tuple[str, ...] = ("local-cuda", "local", "slurm", "pbs")
_MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
_EXTRA = "archline fleet needs Dask: pip install 'archline[fleet]'"


@dataclass(frozen=True)
class ClusterSpec:
    """How to get workers: ``cluster`` (one of CLUSTERS) or a ``scheduler`` address; one worker per GPU."""

    cluster: str = "local-cuda"
    scheduler: str | None = None
    gpus: tuple[int, ...] = ()
    workers: int = 2
    processes: bool = True
    timeout_s: float = 10.0
    queue: str | None = None
    account: str | None = None
    walltime: str = "01:00:00"
    #: slurm/pbs: how long the jobs may take to start (queued) before the fleet gives up.
    start_s: float = 1800.0


def _import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise FleetError(f"{_EXTRA} ({name} is not installed)") from None


def _connect(address: str, timeout_s: float) -> Any:
    distributed = _import("distributed")
    try:
        return distributed.Client(address, timeout=timeout_s)
    except (OSError, TimeoutError) as exc:
        raise FleetError(
            f"cannot reach the Dask scheduler at {address} within {timeout_s:g} s ({type(exc).__name__})"
        ) from None


#: The command each batch system submits its jobs with.
_SUBMIT = {"slurm": "sbatch", "pbs": "qsub"}


def _jobqueue(spec: ClusterSpec, n_jobs: int) -> Any:
    import shutil

    if n_jobs < 1:
        raise InputError(f"--cluster {spec.cluster} needs --jobs N: how many GPU jobs to submit (one GPU each)")
    submit = _SUBMIT[spec.cluster]
    if shutil.which(submit) is None:
        raise FleetError(f"--cluster {spec.cluster}: {submit} is not on this machine's PATH (run it on a login node)")
    jq = _import("dask_jobqueue")
    kw: dict[str, Any] = {"cores": 1, "processes": 1, "memory": "16GB", "walltime": spec.walltime, "queue": spec.queue}
    if spec.cluster == "slurm":
        cluster = jq.SLURMCluster(account=spec.account, job_extra_directives=["--gres=gpu:1"], **kw)
    else:
        cluster = jq.PBSCluster(account=spec.account, resource_spec="select=1:ngpus=1", **kw)
    cluster.scale(jobs=n_jobs)
    return cluster


def _make_cluster(spec: ClusterSpec, n_tasks: int) -> Any:
    if spec.cluster == "local-cuda":
        dask_cuda = _import("dask_cuda")
        devices: Sequence[int] | None = list(spec.gpus) or None
        return dask_cuda.LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, threads_per_worker=1)
    if spec.cluster == "local":
        distributed = _import("distributed")
        return distributed.LocalCluster(
            n_workers=spec.workers, threads_per_worker=1, processes=spec.processes, dashboard_address=None
        )
    if spec.cluster in ("slurm", "pbs"):
        return _jobqueue(spec, n_tasks)
    raise InputError(f"--cluster must be one of {', '.join(CLUSTERS)}, not {spec.cluster!r}")


@contextlib.contextmanager
def open_client(spec: ClusterSpec, n_tasks: int) -> Iterator[tuple[Any, bool]]:
    """A ``distributed.Client`` and whether tasks are pinned one per worker (one GPU per worker)."""
    os.environ.update(_MULTICAST_OFF)  # workers started here inherit it, and so do their children
    if spec.scheduler:
        client = _connect(spec.scheduler, spec.timeout_s)
        try:
            yield client, True
        finally:
            client.close()
        return
    distributed = _import("distributed")
    cluster = _make_cluster(spec, n_tasks)
    try:
        client = distributed.Client(cluster, timeout=spec.timeout_s)
        try:
            if spec.cluster in ("slurm", "pbs"):
                try:
                    client.wait_for_workers(n_tasks, timeout=spec.start_s)
                except (TimeoutError, OSError) as exc:
                    raise FleetError(
                        f"{n_tasks} {spec.cluster} job(s) did not all start within {spec.start_s:g} s "
                        f"({type(exc).__name__}; --start-s waits longer)"
                    ) from None
            yield client, spec.cluster != "local"
        finally:
            client.close()
    finally:
        cluster.close()

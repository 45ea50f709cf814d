"""CLI: ``archline fleet run`` (one task per GPU on Dask) and ``archline fleet compare`` (runs side by side)."""

from __future__ import annotations

from pathlib import Path

import typer

from archline.cli._common import console, err_console, gpu_indices, handle_errors
from archline.errors import InputError

__all__ = ["compare_runs", "register"]


def _tasks(kind: str, gpus: list[int] | None, simulate: int, n_workers: int) -> list[object]:
    from archline.characterize.fleet import FleetTask

    if simulate:
        return [FleetTask(f"sim{i:03d}", kind, gpu=i) for i in range(simulate)]
    if gpus is not None:
        return [FleetTask("", kind) for _ in gpus]
    return [FleetTask("", kind) for _ in range(n_workers)]


def _report(rd_path: Path) -> None:
    from archline.records import RunDir
    from archline.report.fleet import render

    rep = render(RunDir.open(rd_path), rd_path)
    for w in rep.warnings:
        err_console.print(f"archline: no result: {w}", markup=False)
    console.print(f"report: {rep.markdown}")
    if rep.html:
        console.print(f"        {rep.html}")


def compare_runs(runs: list[Path], output: Path, *, split: bool, force: bool) -> Path:
    """Write a fleet run directory at ``output`` comparing the run directories ``runs`` (copied under runs/)."""
    import shutil

    from archline.records import Manifest, RunDir
    from archline.report.fleet_stats import check_comparable, load_board

    seen: dict[Path, Path] = {}
    for p in runs:
        if (key := p.resolve()) in seen:
            raise InputError(f"{p}: given twice (as {seen[key]}); each GPU's run once")
        seen[key] = p
    boards = [load_board(p.name, p) for p in runs]
    uuids: dict[str, str] = {}
    for b in boards:
        if b.uuid in uuids and b.uuid != "unknown":
            err_console.print(
                f"archline: warning: {b.path} and {uuids[b.uuid]} are runs of one board ({b.uuid}): "
                "it is counted twice",
                soft_wrap=True, markup=False,
            )  # fmt: skip
        uuids.setdefault(b.uuid, str(b.path))
    if not split:
        check_comparable(boards)
    rd = RunDir.create(output, Manifest.new("fleet", extra={"kind": "compare"}), overwrite=force)
    entries = []
    for i, p in enumerate(runs):
        label = f"{i}-{p.resolve().name}"
        shutil.copytree(p, output / "runs" / label, dirs_exist_ok=force)
        entries.append({"label": label, "host": "", "gpu": None, "path": f"runs/{label}", "error": ""})
    rd.finish("complete", extra={**rd.manifest.extra, "runs": entries})
    return output


def register(app: typer.Typer) -> None:
    """Add ``archline fleet run`` and ``archline fleet compare``."""
    fleet = typer.Typer(
        help="A fleet of GPUs on Dask: one task per GPU, one report comparing them.", no_args_is_help=True
    )
    app.add_typer(fleet, name="fleet")

    @fleet.command("run")
    @handle_errors
    def run(
        kind: str = typer.Option("quick", "--kind", help="quick or full characterization, or calibrate (the sensor)."),
        cluster: str = typer.Option(
            "local-cuda", "--cluster", help="local-cuda (one worker per GPU), local, slurm, pbs."
        ),
        scheduler: str | None = typer.Option(None, "--scheduler", help="Address of a running Dask scheduler."),
        gpu: str = typer.Option("all", "--gpu", help="With local-cuda: GPUs of this node, 'all' or 0,2,…"),
        jobs: int = typer.Option(0, "--jobs", help="slurm/pbs: number of GPU jobs (one GPU each)."),
        simulate: int = typer.Option(0, "--simulate", help="Simulated GPUs instead of real ones (testing; no GPU)."),
        workers: int = typer.Option(2, "--workers", help="local/simulated: Dask workers."),
        timeout_s: float = typer.Option(10.0, "--timeout-s", help="Seconds to wait for the scheduler."),
        start_s: float = typer.Option(
            1800.0, "--start-s", help="slurm/pbs: seconds the jobs may wait in the queue before the fleet gives up."
        ),
        output: Path = typer.Option(Path("archline-fleet"), "-o", "--output", "--out", help="Fleet run directory."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing fleet run directory."),
    ) -> None:
        """Characterize (or calibrate the sensor of) every GPU of a node or cluster, and compare them."""
        from archline.characterize.fleet import FLEET_KINDS, FleetTask, run_fleet
        from archline.characterize.fleet_cluster import ClusterSpec, open_client

        if kind not in FLEET_KINDS:
            raise InputError(f"--kind must be one of {', '.join(FLEET_KINDS)}, not {kind!r}")
        if timeout_s <= 0 or start_s <= 0 or workers < 1 or simulate < 0 or jobs < 0:
            raise InputError("--timeout-s, --start-s, --workers must be > 0 and --simulate, --jobs ≥ 0")
        if cluster in ("slurm", "pbs") and not scheduler and not jobs and not simulate:
            raise InputError(f"--cluster {cluster} needs --jobs N: how many GPU jobs to submit (one GPU each)")
        gpus: list[int] | None = None
        runner = None
        if simulate:
            from archline.characterize.fleet_sim import SimulatedRunner

            runner, cluster = SimulatedRunner(), "local" if cluster == "local-cuda" else cluster
        elif cluster == "local-cuda" and not scheduler:
            gpus = gpu_indices(gpu)
        spec = ClusterSpec(cluster, scheduler, tuple(gpus or ()), workers, not simulate, timeout_s, start_s=start_s)
        n = simulate or (len(gpus) if gpus is not None else jobs)
        with open_client(spec, n) as (client, pin):
            n_workers = len(client.scheduler_info()["workers"])
            tasks = [t for t in _tasks(kind, gpus, simulate, jobs or n_workers) if isinstance(t, FleetTask)]
            err_console.print(f"archline: fleet: {len(tasks)} task(s) ({kind}) on {n_workers} Dask worker(s)")
            run_fleet(client, tasks, output, runner, pin=pin and not simulate, force=force)
        _report(output)

    @fleet.command("compare")
    @handle_errors
    def compare(
        runs: list[Path] = typer.Argument(..., help="Characterization run directories, one per GPU."),
        output: Path = typer.Option(
            Path("archline-compare"), "-o", "--output", "--out", help="Fleet run directory to write."
        ),
        split: bool = typer.Option(False, "--split", help="Allow several GPU models or drivers (compared apart)."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing run directory."),
    ) -> None:
        """Compare characterization runs of several GPUs side by side (one model and driver, or --split)."""
        _report(compare_runs(runs, output, split=split, force=force))

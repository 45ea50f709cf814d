"""CLI: ``archline characterize``: measure every unit and memory level of a GPU (or show the shipped run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from archline.cli._common import (
    GpuSessions,
    console,
    deps,
    err_console,
    gpu_indices,
    handle_errors,
    parse_gpus,
    progress_bar,
)
from archline.cli.multi_gpu import fan_out
from archline.cli.tables import Col, fit_table
from archline.core.kernel import KernelSpec
from archline.errors import GPUUnavailableError, InputError

__all__ = ["register"]


def _gpu_available(gpu: int) -> str | None:
    """None if NVML sees GPU ``gpu``; otherwise the one-line reason."""
    from archline.hw.nvml import device_count

    try:
        n = device_count()
    except GPUUnavailableError as exc:
        return str(exc)
    if n == 0:
        return "NVML found no NVIDIA GPU"
    if not 0 <= gpu < n:
        return f"no GPU with index {gpu} (this machine has {n})"
    return None


def _show_shipped(output: Path, reason: str, *, quick: bool, only: list[str], force: bool) -> None:
    from archline.report.shipped import default_characterize_run, render_shipped_default

    run = default_characterize_run(quick=quick)
    err_console.print(f"archline: no GPU here ({reason}).")
    err_console.print(
        f"archline: showing the recorded run shipped with archline: {run.gpu_name} ({run.key}), "
        "measured by 'archline characterize' on that GPU."
    )
    if only:
        err_console.print(
            "archline: --only picks the benchmarks to measure on a GPU; the shipped run holds the whole suite."
        )
    report = render_shipped_default(output, quick=quick, force=force)
    console.print(f"report: {report}")
    html = report.with_suffix(".html")
    if html.exists():
        console.print(f"        {html}")


def _targets_table(rows: list[dict[str, Any]]) -> Table:
    body = []
    for r in rows:
        m = r.get("measured")
        req = r.get("required")
        unit = str(r.get("unit") or "")
        p = r.get("passed")
        mark = "[green]pass[/]" if p is True else ("[red]miss[/]" if p is False else "—")
        body.append(
            [
                escape(str(r["target"])),
                "—" if m is None else f"{float(m):.1f} {unit}",
                "—" if req is None else f"{float(req):.1f}",
                mark,
                escape(str(r.get("detail") or "")),
            ]
        )
    cols = [Col("target", "name"), Col("measured"), Col("required"), Col("passed", "text"), Col("detail", "text", 1)]
    t, _ = fit_table(cols, body, console=console, title="targets")
    return t


def register(app: typer.Typer) -> None:
    """Add ``archline characterize``."""

    @app.command("characterize")
    @handle_errors
    def characterize(
        ctx: typer.Context,
        gpu: str = typer.Option("0", "--gpu", help="GPU index, a list like 0,2, or 'all' (one process per GPU)."),
        quick: bool = typer.Option(False, "--quick", help="The quick subset (about 20 kernels, ≤ 2 min)."),
        only: list[str] = typer.Option([], "--only", help="Glob(s) of benchmark names, e.g. 'arith.fp32.*'."),
        output: Path = typer.Option(Path("archline-run"), "-o", "--output", "--out", help="Run directory to write."),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing run directory."),
        target_s: float | None = typer.Option(
            None,
            "--target-s",
            help="Seconds measured per benchmark (default 1 s; 0.5 s with --quick).",
            show_default=False,
        ),
        roofline: bool | None = typer.Option(
            None,
            "--roofline/--no-roofline",
            help="Also run the energy roofline (sweep, fit, held-out kernels) as a section of the report "
            "(default: on for the full suite, off with --quick or --only).",
        ),
        no_shipped: bool = typer.Option(
            False, "--no-shipped", help="Without a GPU, fail instead of showing the shipped run."
        ),
    ) -> None:
        """Characterize a GPU: time, throughput vs spec, power and energy of every unit and memory level.

        Without a GPU it renders the report of a real run shipped with archline.
        """
        from archline.characterize.kernels import catalogue

        if target_s is not None and not target_s > 0:
            raise InputError("--target-s must be > 0")
        # Check the patterns before touching any hardware, so a typo fails fast everywhere.
        # ("lat…" names the pointer-chase latencies, which are not catalogue kernels.)
        if kernel_only := [p for p in only if not p.startswith("lat")]:
            catalogue.select(kernel_only)
        parse_gpus(gpu, None)  # a --gpu that is no GPU list is bad input, with or without a GPU here
        reason = _gpu_available(0)
        if reason is not None:
            if no_shipped:
                raise GPUUnavailableError(reason)
            _show_shipped(output, reason, quick=quick, only=only, force=force)
            return
        gpus = gpu_indices(gpu)
        if len(gpus) > 1:
            fan_out("characterize", gpus, output, force=force, report=True, extra=["--no-shipped"])
            return
        with_roofline = roofline if roofline is not None else not (quick or only)
        with GpuSessions(deps(ctx)) as sessions:
            _characterize(
                gpus[0], quick, only, output, force, target_s or (0.5 if quick else 1.0), with_roofline, sessions
            )


def _characterize(
    gpu: int,
    quick: bool,
    only: list[str],
    output: Path,
    force: bool,
    target_s: float,
    roofline: bool = False,
    sessions: GpuSessions | None = None,
) -> None:
    from archline.characterize.suite import characterize_gpu
    from archline.report.characterize import render

    with progress_bar() as prog:
        task = prog.add_task("characterize", total=None)

        def started(spec: KernelSpec, i: int, n: int) -> None:
            prog.update(task, description=spec.name, completed=min(i, n), total=n)

        res, planned = characterize_gpu(
            gpu,
            output,
            quick=quick,
            only=only,
            force=force,
            target_s=target_s,
            roofline=roofline,
            say=lambda m: err_console.print(f"archline: {m}"),
            on_start=started,
            nvml=sessions,
        )
    rep = render(output)
    console.print(_targets_table(res.targets))
    failed = [r for r in res.rows if r.get("status") != "ok"]
    if failed:
        err_console.print(f"archline: {len(failed)} benchmark(s) failed: " + ", ".join(str(r["name"]) for r in failed))
    console.print(f"report: {rep.markdown}")
    if rep.html:
        console.print(f"        {rep.html}")
    if res.interrupted:
        err_console.print(
            f"archline: interrupted: {len(res.rows)} of {planned} benchmarks finished; "
            f"{output} holds them and says it is incomplete"
        )
        raise typer.Exit(130)

"""CLI: ``archline sensor calibrate`` and ``archline sensor validate`` (they run loads on the GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from archline.cli._common import GpuSessions, console, deps, err_console, gpu_indices, handle_errors, print_json
from archline.cli.multi_gpu import fan_out
from archline.cli.sensor import sensor_app
from archline.cli.tables import Col, fit_table

__all__ = ["register"]


def _say(msg: str) -> None:
    err_console.print(f"archline: {msg}")


@sensor_app.command("calibrate")
@handle_errors
def calibrate_cmd(
    ctx: typer.Context,
    gpu: str = typer.Option("0", "--gpu", help="GPU index, a list like 0,2, or 'all' (one process per GPU)."),
    output: Path = typer.Option(Path("archline-sensor"), "-o", "--output", "--out", help="Run directory to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing run directory."),
    quick: bool = typer.Option(False, "--quick", help="A 15 s schedule instead of the full ~45 s one."),
    json_out: bool = typer.Option(False, "--json", help="Print the fitted profiles as JSON."),
) -> None:
    """Run step, square-wave and pulse loads; fit each power source's profile and store it.

    The profile (stored in the user's cache, keyed by GPU UUID and driver) is used by every
    later measurement on this GPU. The run directory keeps the raw traces and the findings.
    """
    from archline.characterize.session import GPUSession
    from archline.measurement.calibrate.run import calibrate
    from archline.report.sensor import render_calibration

    gpus = gpu_indices(gpu)
    if len(gpus) > 1:
        fan_out("sensor calibrate", gpus, output, force=force, report=False)
        return
    with (
        GpuSessions(deps(ctx)) as sessions,
        GPUSession(gpus[0], output, "sensor-calibration", force=force, sources=_ALL_POWER, nvml=sessions) as s,
    ):
        g = s.rd.manifest.gpu
        cal = calibrate(
            s.ex,
            s.sampler,
            gpu_uuid=str(g.get("uuid")),
            driver_version=str(g.get("driver_version")),
            quick=quick,
            progress=lambda m: _say(f"calibration load: {m}"),
        )
        s.rd.write_csv("loads.csv", [{"name": r.name, "start_s": r.start_s, "end_s": r.end_s} for r in cal.loads])
        s.rd.write_json(
            "profiles.json",
            {"profiles": {k: p.to_json() for k, p in cal.profiles.items()}, "failures": cal.failures},
        )
    rep = render_calibration(s.rd, s.rd.path)
    if json_out:
        print_json({k: p.to_json() for k, p in cal.profiles.items()})
        return
    for src, p in cal.profiles.items():
        console.print(f"[bold]{src}[/]: {p.kind}, coverage {100 * p.coverage:.0f} %")
        for f in p.findings:
            console.print(f"  - {f}")
    for src, why in cal.failures.items():
        err_console.print(f"archline: {src}: could not be fitted: {why}")
    console.print(f"report: {rep.markdown}")


_ALL_POWER = (
    "nvml.buffer",
    "nvml.instant",
    "nvml.average",
    "nvml.usage",
    "nvml.energy",
    "nvml.sm_clock",
    "nvml.temperature",
    "nvml.throttle",
)


@sensor_app.command("validate")
@handle_errors
def validate_cmd(
    ctx: typer.Context,
    gpu: int = typer.Option(0, "--gpu", help="GPU index."),
    output: Path = typer.Option(Path("archline-validation"), "-o", "--output", "--out", help="Run directory to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing run directory."),
    json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    quick: bool = typer.Option(False, "--quick", help="Fewer, shorter loads (about 25 s instead of 80 s)."),
) -> None:
    """Check the corrected energies on this GPU against its energy counter (Burtscher's tests).

    Steady kernels of 0.1–3 s (one invocation from the 20 ms samples vs the counter's
    per-invocation energy over a long repeated run), the doubling test and the back-to-back
    test, each with the raw and the corrected energy.
    """
    from archline.characterize.session import GPUSession
    from archline.core.recording import Recording, Region
    from archline.measurement.calibrate.experiments import (
        analyze_validation,
        checks_passed,
        run_validation_loads,
        validation_table,
    )
    from archline.measurement.calibrate.load_runs import BusyLoad
    from archline.measurement.energy import WindowEstimate, estimate_window
    from archline.report.sensor import render_validation

    with (
        GpuSessions(deps(ctx)) as sessions,
        GPUSession(gpu, output, "sensor-validation", force=force, nvml=sessions) as s,
    ):
        est = s.estimator(progress=lambda m: _say(f"sensor calibration: {m}"))
        load = BusyLoad(s.ex)
        try:
            kw: dict[str, Any] = (
                {"durations_s": (0.1, 1.0), "isolated_reps": 2, "repeated_total_s": 4.0} if quick else {}
            )
            regions = run_validation_loads(load, progress=lambda m: _say(f"validation load: {m}"), **kw)
        finally:
            load.close()
        for r in regions:
            s.sampler.mark(r.name, r.start_s, r.end_s, r.how, **r.meta)
        rec = s.sampler.recording()

        def raw(rec_: Recording, reg: Region) -> WindowEstimate:
            e = estimate_window(rec_, reg, estimator=est)
            return WindowEstimate(**{**e.__dict__, "energy_j": e.raw_energy_j})

        rows = analyze_validation(rec, est, raw)
        table = validation_table(rows)
        s.rd.write_csv("validation.csv", table)
        s.note_extra(sensor_checks_passed=checks_passed(rows))
    rep = render_validation(s.rd, s.rd.path)
    if json_out:
        print_json({"checks": table})
        return
    console.print(_validation_table(table))
    console.print(f"report: {rep.markdown}")


def _validation_table(rows: list[dict[str, Any]]) -> Table:
    body = []
    for r in rows:
        body.append(
            [
                str(r["check"]),
                f"{r['measured']:.4g}",
                f"{r['reference']:.4g}",
                f"{r['error_pct']:+.2f}",
                f"{r['limit_pct']:.0f}",
                "n/a" if r["passed"] is None else ("[green]yes[/]" if r["passed"] else "[red]no[/]"),
            ]
        )
    cols = [
        Col("check", "name"),
        Col("measured"),
        Col("reference"),
        Col("error %"),
        Col("limit %"),
        Col("passed", "text"),
    ]
    t, _ = fit_table(cols, body, console=console, title="sensor validation")
    return t


def register(app: typer.Typer) -> None:
    """The commands are added to the ``sensor`` group when this module is imported."""

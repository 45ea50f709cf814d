"""CLI: ``archline measure -- CMD ARGS...``: a command's GPU energy, time, mean and maximum power."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import typer
from rich.markup import escape

from archline.cli._common import Deps, console, deps, err_console, gpu_indices, handle_errors, print_json
from archline.cli.tables import Col, fit_table
from archline.errors import ArchlineError, InputError

__all__ = ["register"]


def _run_measured(cmd: list[str], gpu: int, d: Deps, *, stdout_to_stderr: bool = False) -> tuple[int, dict[str, Any]]:
    from archline.hw.nvml import device_state
    from archline.measurement.api import Measurement
    from archline.measurement.attribute.program import as_child, classify_command, run_binary

    # As archline run starts its children: a missing command is exit 127, Ctrl-C reaches the child.
    child = as_child(classify_command(cmd))
    clock = d.effective_clock()
    with contextlib.closing(d.open_gpu(gpu)) as session:
        state_before = device_state(session)
        m = Measurement(gpu=gpu, session=session, sync=lambda: None, clock=d.clock)
        with m:
            t0 = clock.now_s()
            rc = run_binary(child, os.environ, stdout_to_stderr=stdout_to_stderr)
            wall = clock.now_s() - t0
    if rc < 0:  # killed by signal N: exit 128 + N as a shell does (sys.exit(-N) would give 256 - N)
        rc = 128 - rc
    out = {"command": cmd, "exit_code": rc, "time_s": wall, **_gpu_result(m, gpu), "state_before": state_before}
    return rc, out


def _counter(m: Any) -> tuple[float | None, float | None]:
    """The NVML energy counter's energy over the whole measurement, with its σ (None under 0.5 s)."""
    total = m.total
    if m.trace is None or (en := m.trace.get("nvml.energy")) is None or total.duration_s < 0.5:
        return None, None
    from archline.core.recording import Region
    from archline.measurement.counter import counter_window_energies

    try:
        (w,) = counter_window_energies(en, [Region("total", total.start_s, total.end_s)], max_rel_uncertainty=1.0)
    except ArchlineError as exc:
        err_console.print(f"archline: note: no energy-counter figure: {exc}", soft_wrap=True)
        return None, None
    return w.energy_j, w.energy_uncertainty_j


def _gpu_result(m: Any, gpu: int) -> dict[str, Any]:
    """One GPU's figures of a finished Measurement."""
    counter, counter_sigma = _counter(m)
    total = m.total
    return {
        "gpu": gpu,
        "energy_j": m.energy_j,
        "energy_uncertainty_j": m.energy_uncertainty_j,
        "energy_counter_j": counter,
        "energy_counter_uncertainty_j": counter_sigma,
        "mean_power_w": m.mean_power_w,
        "max_power_w": total.max_power_w,
        "resolvable": m.resolvable,
        "sensor_model": total.sensor_model,
        "notes": list(total.notes),
    }


def _sum(vals: list[float | None], quad: bool = False) -> float | None:
    import math

    if any(v is None for v in vals):
        return None
    xs = [float(v) for v in vals if v is not None]
    return math.hypot(*xs) if quad else math.fsum(xs)


def _run_measured_gpus(
    cmd: list[str], gpus: list[int], d: Deps, *, stdout_to_stderr: bool
) -> tuple[int, dict[str, Any]]:
    """Several GPUs over one run of ``cmd`` (e.g. torchrun): each GPU's energy and the total."""
    from archline.measurement.api import Measurement
    from archline.measurement.attribute.program import as_child, classify_command, run_binary
    from archline.measurement.multi import MultiMeasurement

    child = as_child(classify_command(cmd))
    clock = d.effective_clock()
    with contextlib.ExitStack() as stack:
        sessions = {g: stack.enter_context(contextlib.closing(d.open_gpu(g))) for g in gpus}
        mm = MultiMeasurement(gpus, lambda g: Measurement(gpu=g, session=sessions[g], sync=lambda: None, clock=d.clock))
        with mm:
            t0 = clock.now_s()
            rc = run_binary(child, os.environ, stdout_to_stderr=stdout_to_stderr)
            wall = clock.now_s() - t0
    if rc < 0:
        rc = 128 - rc
    per = [_gpu_result(m, g) for g, m in mm.per_gpu.items()]
    total = {
        "energy_j": _sum([p["energy_j"] for p in per]),
        "energy_uncertainty_j": _sum([p["energy_uncertainty_j"] for p in per], quad=True),
        "energy_counter_j": _sum([p["energy_counter_j"] for p in per]),
        "energy_counter_uncertainty_j": _sum([p["energy_counter_uncertainty_j"] for p in per], quad=True),
        "mean_power_w": _sum([p["mean_power_w"] for p in per]),
    }
    return rc, {"command": cmd, "exit_code": rc, "time_s": wall, "gpus": per, "total": total}


def _display(out: dict[str, Any], rc: int) -> None:
    """One row per GPU as Zeus reports a window (time, energy per GPU), with the NVML counter's figure beside
    archline's corrected one; a total row when several GPUs were measured."""

    def num(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    per: list[dict[str, Any]] = out.get("gpus") or [out]
    rows = [
        [
            str(p["gpu"]),
            f"{out['time_s']:.3f}",
            num(p["energy_j"], ".2f"),
            num(p["energy_uncertainty_j"], ".2f"),
            num(p["energy_counter_j"], ".2f"),
            num(p["mean_power_w"], ".1f"),
            num(p["max_power_w"], ".1f"),
        ]
        for p in per
    ]
    if "total" in out:
        tot = out["total"]
        rows.append(
            ["total", f"{out['time_s']:.3f}", num(tot["energy_j"], ".2f"), num(tot["energy_uncertainty_j"], ".2f"),
             num(tot["energy_counter_j"], ".2f"), num(tot["mean_power_w"], ".1f"), ""]
        )  # fmt: skip
    cols = [
        Col("GPU", "text"),
        Col("time (s)"),
        Col("energy (J)"),
        Col("± J (1σ)"),
        Col("NVML counter (J)"),
        Col("mean power (W)", drop=2),
        Col("max power (W)", drop=1),
    ]
    t, _ = fit_table(cols, rows, console=console, title=escape(" ".join(out["command"])))
    console.print(t)
    energies = ", ".join(f"{p['gpu']}: {num(p['energy_j'], '.2f')} J" for p in per)
    console.print(f"time {out['time_s']:.3f} s, gpu_energy {{{energies}}}, exit code {rc}")
    console.print(
        "[dim]energy: archline's, corrected for the power sensor; NVML counter: the board's energy counter "
        "(nvmlDeviceGetTotalEnergyConsumption, what Zeus and nvidia-smi report) over the same time[/]"
    )


def register(app: typer.Typer) -> None:
    """Add ``archline measure``."""

    @app.command(
        "measure",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        no_args_is_help=True,
    )
    @handle_errors
    def measure_cmd(
        ctx: typer.Context,
        gpu: str = typer.Option("0", "--gpu", help="GPU index (as NVML numbers them), a list like 0,1, or 'all'."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    ) -> None:
        """Run a command and report its GPU energy, time, and mean and maximum power.

        Usage: archline measure [--gpu N] [--json] -- CMD ARGS...

        The command's exit code is passed through; with --json its stdout goes to stderr.
        """
        cmd = list(ctx.args)
        if not cmd:
            raise InputError("no command given (usage: archline measure [--gpu N] -- CMD ARGS...)")
        gpus = gpu_indices(gpu)
        if len(gpus) > 1:
            rc, out = _run_measured_gpus(cmd, gpus, deps(ctx), stdout_to_stderr=json_out)
            if json_out:
                print_json(out)
            else:
                _display(out, rc)
            raise typer.Exit(rc)
        rc, out = _run_measured(cmd, gpus[0], deps(ctx), stdout_to_stderr=json_out)
        if json_out:
            print_json(out)
        else:
            _display(out, rc)
            err_console.print(f"archline: {out['sensor_model']}", soft_wrap=True)
            degraded = [n for n in out["notes"][1:] if n]
            if degraded or not out["resolvable"]:
                why = degraded[-1] if degraded else "the run was too short for the power sensor to resolve its energy"
                err_console.print(f"archline: note: {why}", soft_wrap=True)
        raise typer.Exit(rc)

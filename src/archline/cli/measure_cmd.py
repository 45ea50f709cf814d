"""CLI: ``archline measure -- CMD ARGS...``: a command's GPU energy, time, mean and maximum power."""

from __future__ import annotations

import os
import time
from typing import Any

import typer
from rich.table import Table

from archline.cli._common import console, err_console, handle_errors, print_json
from archline.errors import ArchlineError, InputError

__all__ = ["register"]


def _run_measured(cmd: list[str], gpu: int, *, stdout_to_stderr: bool = False) -> tuple[int, dict[str, Any]]:
    from archline.hw.nvml import device_state
    from archline.measurement.api import Measurement
    from archline.measurement.attribute.program import as_child, classify_command, run_binary

    # As archline run starts its children: a missing command is exit 127, Ctrl-C reaches the child.
    child = as_child(classify_command(cmd))
    state_before = device_state(gpu)
    m = Measurement(gpu=gpu, sync=lambda: None)
    with m:
        t0 = time.time()
        rc = run_binary(child, os.environ, stdout_to_stderr=stdout_to_stderr)
        wall = time.time() - t0
    if rc < 0:  # killed by signal N: exit 128 + N as a shell does (sys.exit(-N) would give 256 - N)
        rc = 128 - rc
    counter = counter_sigma = None
    total = m.total
    if m.trace is not None and (en := m.trace.get("nvml.energy")) is not None and total.duration_s >= 0.5:
        from archline.core.recording import Region
        from archline.measurement.counter import counter_window_energies

        try:
            (w,) = counter_window_energies(en, [Region("total", total.start_s, total.end_s)], max_rel_uncertainty=1.0)
            counter, counter_sigma = w.energy_j, w.energy_uncertainty_j
        except ArchlineError as exc:
            err_console.print(f"archline: note: no energy-counter figure: {exc}", soft_wrap=True)
    out = {
        "command": cmd,
        "exit_code": rc,
        "gpu": gpu,
        "time_s": wall,
        "energy_j": m.energy_j,
        "energy_uncertainty_j": m.energy_uncertainty_j,
        "energy_counter_j": counter,
        "energy_counter_uncertainty_j": counter_sigma,
        "mean_power_w": m.mean_power_w,
        "max_power_w": total.max_power_w,
        "resolvable": m.resolvable,
        "sensor_model": total.sensor_model,
        "notes": list(total.notes),
        "state_before": state_before,
    }
    return rc, out


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
        gpu: int = typer.Option(0, "--gpu", help="GPU index (as NVML numbers them)."),
        json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    ) -> None:
        """Run a command and report its GPU energy, time, and mean and maximum power.

        Usage: archline measure [--gpu N] [--json] -- CMD ARGS...
        The command's exit code is passed through; with --json its stdout goes to stderr.
        """
        cmd = list(ctx.args)
        if not cmd:
            raise InputError("no command given (usage: archline measure [--gpu N] -- CMD ARGS...)")
        rc, out = _run_measured(cmd, gpu, stdout_to_stderr=json_out)
        if json_out:
            print_json(out)
        else:
            t = Table(title=f"GPU {gpu}: {' '.join(cmd)}", show_header=False)
            t.add_row("wall time", f"{out['time_s']:.3f} s")
            e, u = out["energy_j"], out["energy_uncertainty_j"]
            t.add_row(
                "energy (archline, corrected)",
                "—" if e is None else (f"{e:.2f} J" if u is None else f"{e:.2f} ± {u:.2f} J"),
            )
            c, cu = out["energy_counter_j"], out["energy_counter_uncertainty_j"]
            if c is not None:
                t.add_row("energy (NVML energy counter)", f"{c:.2f} ± {cu:.2f} J" if cu is not None else f"{c:.2f} J")
            mp = out["mean_power_w"]
            t.add_row("mean power", "—" if mp is None else f"{mp:.1f} W")
            xp = out["max_power_w"]
            t.add_row("max power", "—" if xp is None else f"{xp:.1f} W")
            t.add_row("exit code", str(rc))
            console.print(t)
            err_console.print(f"archline: {out['sensor_model']}", soft_wrap=True)
            degraded = [n for n in out["notes"][1:] if n]
            if degraded or not out["resolvable"]:
                why = degraded[-1] if degraded else "the run was too short for the power sensor to resolve its energy"
                err_console.print(f"archline: note: {why}", soft_wrap=True)
        raise typer.Exit(rc)

"""CLI: ``archline measure -- CMD ARGS...``: a command's GPU energy, time, mean and maximum power."""

from __future__ import annotations

import os
import time
from typing import Any

import typer
from rich.table import Table

from archline.cli._common import console, err_console, handle_errors, print_json
from archline.errors import InputError

__all__ = ["register"]


def _run_measured(cmd: list[str], gpu: int, *, stdout_to_stderr: bool = False) -> tuple[int, dict[str, Any]]:
    from archline.hw.nvml import device_state
    from archline.measurement.api import Measurement
    from archline.measurement.attribute.program import as_child, classify_command, run_binary
    from archline.measurement.energy import counter_energy_j

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
    rec = m.trace
    counter = None
    if rec is not None and (en := rec.get("nvml.energy")) is not None:
        counter = counter_energy_j(en, m.total.start_s, m.total.end_s)
    out = {
        "command": cmd,
        "exit_code": rc,
        "gpu": gpu,
        "time_s": wall,
        "energy_j": m.energy_j,
        "energy_uncertainty_j": m.energy_uncertainty_j,
        "energy_counter_j": counter,
        "mean_power_w": m.mean_power_w,
        "max_power_w": m.total.max_power_w,
        "resolvable": m.resolvable,
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
                "energy (NVML sample buffer, corrected)",
                "—" if e is None else (f"{e:.2f} J" if u is None else f"{e:.2f} ± {u:.2f} J"),
            )
            if out["energy_counter_j"] is not None:
                t.add_row("energy (energy counter)", f"{out['energy_counter_j']:.2f} J")
            mp = out["mean_power_w"]
            t.add_row("mean power", "—" if mp is None else f"{mp:.1f} W")
            xp = out["max_power_w"]
            t.add_row("max power", "—" if xp is None else f"{xp:.1f} W")
            t.add_row("exit code", str(rc))
            console.print(t)
            if not out["resolvable"]:
                err_console.print("note: the run was too short for the power sensor to resolve its energy")
        raise typer.Exit(rc)

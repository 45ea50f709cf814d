"""CLI: ``archline roofline``: the intensity sweep, the fitted energy roofline, and held-out predictions."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from archline.cli._common import GpuSessions, console, deps, err_console, gpu_indices, handle_errors
from archline.cli.multi_gpu import fan_out
from archline.errors import InputError

__all__ = ["parse_precisions", "register"]

_ALIASES = {"single": "single", "fp32": "single", "float": "single", "double": "double", "fp64": "double"}


def parse_precisions(text: str) -> list[str]:
    """``"single,double"`` → ["single", "double"] (fp32/fp64 accepted)."""
    out: list[str] = []
    for part in text.split(","):
        p = part.strip().lower()
        if not p:
            continue
        if p not in _ALIASES:
            raise InputError(f"--precision: unknown precision {part.strip()!r} (use single, double or both)")
        if _ALIASES[p] not in out:
            out.append(_ALIASES[p])
    if not out:
        raise InputError("--precision: none given (use single, double or single,double)")
    return out


def register(app: typer.Typer) -> None:
    """Add ``archline roofline``."""

    @app.command("roofline")
    @handle_errors
    def roofline(
        ctx: typer.Context,
        gpu: str = typer.Option("0", "--gpu", help="GPU index, a list like 0,2, or 'all' (one process per GPU)."),
        precision: str = typer.Option("single,double", "--precision", help="single, double, or both."),
        output: Path = typer.Option(
            Path("archline-roofline"), "-o", "--output", "--out", help="Run directory to write."
        ),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing run directory."),
        heldout: bool = typer.Option(True, "--heldout/--no-heldout", help="Measure the held-out real kernels."),
        target_s: float = typer.Option(1.0, "--target-s", help="Seconds measured per sweep point."),
        heldout_error: float = typer.Option(
            0.02, "--heldout-error", help="Target relative error of each held-out kernel's energy."
        ),
        counted: bool = typer.Option(
            True,
            "--counted/--no-counted",
            help="Also measure the component microbenchmarks and count the held-out kernels with ncu.",
        ),
        ml: bool = typer.Option(
            True,
            "--ml/--no-ml",
            help="Also measure and count the machine-learning kernels (PyTorch: GEMMs, attention, norms, cuDNN).",
        ),
    ) -> None:
        """Sweep intensity from 1/4 to 512 flop:byte, fit the energy roofline (Choi et al. eq. 9) and
        predict real kernels: roofline, arch line and power line, with the power cap.
        """
        precisions = parse_precisions(precision)
        if target_s <= 0:
            raise InputError("--target-s must be > 0")
        if not 0 < heldout_error < 1:
            raise InputError("--heldout-error must be between 0 and 1")
        gpus = gpu_indices(gpu)
        if len(gpus) > 1:
            fan_out("roofline", gpus, output, force=force, report=False)
            return
        with GpuSessions(deps(ctx)) as sessions:
            _run(gpus[0], precisions, output, force, heldout, target_s, heldout_error, counted, sessions, ml=ml)


def _run(
    gpu: int,
    precisions: list[str],
    output: Path,
    force: bool,
    heldout: bool,
    target_s: float,
    heldout_error: float,
    counted: bool = True,
    sessions: GpuSessions | None = None,
    *,
    ml: bool = True,
) -> None:
    from archline.characterize.roofline import run_roofline
    from archline.characterize.runner import Runner, RunnerOptions
    from archline.characterize.session import GPUSession
    from archline.model.build import fit_run_dir
    from archline.report.roofline import render_roofline

    t0 = time.time()
    with GPUSession(gpu, output, "roofline", force=force, extra={"precisions": precisions}, nvml=sessions) as s:

        def say(msg: str, *_: Any) -> None:
            err_console.print(f"archline: {msg}")

        copy_bps, _ = s.ex.copy_bandwidth()
        est = s.estimator(progress=lambda m: say(f"sensor calibration: {m}"))
        runner = Runner(s.ex, s.sampler, RunnerOptions(target_s=target_s), estimator=est)
        run_roofline(
            s,
            runner,
            gpu,
            precisions,
            copy_bps,
            target_s=target_s,
            heldout=heldout,
            heldout_error=heldout_error,
            counted=counted,
            ml=ml,
            say=say,
        )
        s.note_extra(wall_s_sweep=time.time() - t0)
    model = fit_run_dir(output)
    sec = render_roofline(output, model=model)
    console.print(f"report: {sec.markdown_path}")

"""CLI: ``archline roofline``: the intensity sweep, the fitted energy roofline, and held-out predictions."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from archline.cli._common import console, err_console, handle_errors
from archline.errors import InputError

__all__ = ["parse_precisions", "register", "roofline_in_session"]

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


def _peaks(runner: Any, dev: Any, precisions: list[str]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Peak FLOP/s per precision from the FP32/FP64 FMA throughput kernels, measured now."""
    from archline.kernels import catalogue

    names = {"single": "arith.fp32.fma", "double": "arith.fp64.fma"}
    peaks: dict[str, float] = {}
    rows = []
    for p in precisions:
        spec = next(k for k in catalogue.catalogue(dev) if k.name == names[p])
        run = runner.run(spec, target_s=0.5)
        r = run.row
        if r.get("flops") and r.get("time_s"):
            peaks[p] = float(r["flops"]) / float(r["time_s"])
        rows.append(r)
    return peaks, rows


def roofline_in_session(
    s: Any,
    runner: Any,
    gpu: int,
    precisions: list[str],
    copy_bps: float,
    *,
    target_s: float,
    heldout: bool = True,
    heldout_error: float = 0.02,
    counted: bool = True,
    say: Any = None,
) -> None:
    """Peaks, intensity sweep, held-out kernels, component microbenchmarks and ncu counts, written
    into the open session's run directory (``archline roofline``, ``archline characterize --roofline``)."""
    from archline.bench.roofline import measure_components, measure_heldout, sweep
    from archline.kernels.target import Target
    from archline.records import to_jsonable

    say = say or (lambda *_: None)
    dev = s.ex.device
    peaks, peak_rows = _peaks(runner, dev, precisions)
    state = s.rd.manifest.state_before
    limit = state.get("enforced_power_limit_w") or state.get("power_limit_w")
    s.rd.write_json(
        "roofline_peaks.json",
        {"copy_bytes_per_s": copy_bps, "peak_flops_per_s": peaks, "power_limit_w": limit, "device": dev.name},
    )
    s.rd.write_csv("peaks_runs.csv", peak_rows)
    rows = sweep(
        runner,
        precisions,
        Target.from_device(dev),
        power_limit_w=float(limit) if isinstance(limit, (int, float)) else None,
        target_s=target_s,
        on_start=say,
    )
    good = [r for r in rows if r.get("status") == "ok" and r.get("energy_j") is not None]
    s.rd.write_csv("roofline_sweep_all.csv", rows)
    s.rd.write_csv("roofline_sweep.csv", good)
    if not heldout:
        return
    from archline.gpu.workloads import default_workloads

    hrows, log = measure_heldout(gpu, default_workloads(), target_rel_error=heldout_error, on_start=say)
    s.rd.write_csv("roofline_heldout_log.csv", log)
    if hrows:
        s.rd.write_csv("roofline_heldout.csv", [to_jsonable(r) for r in hrows])
    if counted and hrows:
        comp = measure_components(runner, Target.from_device(dev), target_s=target_s, on_start=say)
        s.rd.write_csv("roofline_components.csv", comp)
        _count_heldout(s, gpu, [r.name for r in hrows], say)


def _count_heldout(s: Any, gpu: int, names: list[str], say: Any) -> None:
    """Nsight Compute counts of one invocation of each held-out kernel; a note if ncu cannot run."""
    from archline.gpu.ncu import NcuUnavailableError, count_workloads

    say("counting the held-out kernels with ncu")
    try:
        counts, metrics = count_workloads(names, gpu=gpu, keep=s.rd.path)
    except NcuUnavailableError as exc:
        s.rd.update_manifest(notes=(*s.rd.manifest.notes, f"held-out kernels not counted: {exc}"))
        say(f"held-out kernels not counted: {exc}")
        return
    s.rd.write_csv("roofline_heldout_counts.csv", [counts[n].as_row() for n in names if n in counts])
    s.note_extra(ncu_metrics=metrics)
    missing = [n for n in names if n not in counts]
    if missing:
        s.rd.update_manifest(notes=(*s.rd.manifest.notes, f"ncu recorded no kernel for {', '.join(missing)}"))


def register(app: typer.Typer) -> None:
    """Add ``archline roofline``."""

    @app.command("roofline")
    @handle_errors
    def roofline(
        gpu: int = typer.Option(0, "--gpu", help="GPU index."),
        precision: str = typer.Option("single,double", "--precision", help="single, double, or both."),
        output: Path = typer.Option(Path("archline-roofline"), "-o", "--output", help="Run directory to write."),
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
    ) -> None:
        """Sweep intensity from 1/4 to 512 flop:byte, fit the energy roofline (Choi et al. eq. 9) and
        predict real kernels: roofline, arch line and power line, with the power cap.
        """
        precisions = parse_precisions(precision)
        if target_s <= 0:
            raise InputError("--target-s must be > 0")
        if not 0 < heldout_error < 1:
            raise InputError("--heldout-error must be between 0 and 1")
        _run(gpu, precisions, output, force, heldout, target_s, heldout_error, counted)


def _run(
    gpu: int,
    precisions: list[str],
    output: Path,
    force: bool,
    heldout: bool,
    target_s: float,
    heldout_error: float,
    counted: bool = True,
) -> None:
    from archline.bench.runner import Runner, RunnerOptions
    from archline.bench.session import GPUSession
    from archline.model.build import fit_run_dir
    from archline.report.roofline import render_roofline

    t0 = time.time()
    with GPUSession(gpu, output, "roofline", force=force, extra={"precisions": precisions}) as s:

        def say(msg: str, *_: Any) -> None:
            err_console.print(f"archline: {msg}")

        copy_bps, _ = s.ex.copy_bandwidth()  # type: ignore[attr-defined]
        est = s.estimator(progress=lambda m: say(f"sensor calibration: {m}"))
        runner = Runner(s.ex, s.sampler, RunnerOptions(target_s=target_s), estimator=est)
        roofline_in_session(
            s,
            runner,
            gpu,
            precisions,
            copy_bps,
            target_s=target_s,
            heldout=heldout,
            heldout_error=heldout_error,
            counted=counted,
            say=say,
        )
        s.note_extra(wall_s_sweep=time.time() - t0)
    model = fit_run_dir(output)
    sec = render_roofline(output, model=model)
    console.print(f"report: {sec.markdown_path}")

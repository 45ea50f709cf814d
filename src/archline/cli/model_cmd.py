"""CLI: `archline model`: fit the energy roofline from a run directory and predict a kernel's time, energy and power."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from archline.cli._common import console, err_console, handle_errors, print_json
from archline.cli.tables import Col, fit_table
from archline.errors import InputError
from archline.model.sweep import PRECISIONS

__all__ = ["model_app", "register"]

model_app = typer.Typer(
    name="model",
    help="The energy roofline (Choi et al.): fit it to a sweep, predict kernels from their flops and bytes.",
    no_args_is_help=True,
)


def _pm(v: float, sd: float, scale: float = 1.0) -> tuple[str, str]:
    if not math.isfinite(v):
        return "—", "—"
    if not math.isfinite(sd):
        return f"{v * scale:.4g}", "—"
    # Under the cap the power is the cap itself; its σ is rounding noise, not uncertainty.
    return f"{v * scale:.4g}", ("0" if sd <= 1e-9 * abs(v) else f"{sd * scale:.2g}")


@model_app.command("predict")
@handle_errors
def predict(
    model: Annotated[
        Path, typer.Option("--model", "-m", help="Model file (roofline_model.json) from `archline model fit`.")
    ],
    flops: Annotated[float, typer.Option("--flops", help="W: floating-point operations of the kernel (FMA = 2).")],
    nbytes: Annotated[float, typer.Option("--bytes", help="Q: DRAM bytes the kernel reads plus writes.")],
    time_s: Annotated[
        float | None, typer.Option("--time", help="Measured kernel time in seconds: also predict the energy at it.")
    ] = None,
    precision: Annotated[str, typer.Option("--precision", "-p", help="single or double.")] = "single",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")] = False,
) -> None:
    """Predict time, energy and power of a kernel from its counts, with 1σ errors from the fit's covariance."""
    from archline.model.io import load_model
    from archline.model.predict import predict_kernel

    if precision not in PRECISIONS:
        raise InputError(f"--precision must be single or double (got {precision!r})")
    for name, value in (("--flops", flops), ("--bytes", nbytes), ("--time", time_s)):
        if value is not None and not (math.isfinite(value) and value > 0.0):
            raise InputError(f"{name} must be a positive number (got {value:g})")
    m = load_model(model)
    pred = predict_kernel(m.parameters, flops, nbytes, precision, measured_time_s=time_s)
    if time_s is not None:
        _check_measured_time(time_s, pred.time_uncapped_s, pred.energy_at_measured_time_j, m.parameters.power_limit_w)
    if as_json:
        keys = ["precision", "flops", "bytes", "intensity", "time_s", "time_sigma_s", "time_uncapped_s", "cap_active"]
        keys += ["energy_j", "energy_sigma_j", "power_w", "power_sigma_w"]
        if time_s is not None:
            keys += ["measured_time_s", "energy_at_measured_time_j", "energy_at_measured_time_sigma_j"]
        out: dict[str, Any] = {"model": str(model), "device": m.device}
        out.update({k: getattr(pred, k) for k in keys})
        if time_s is not None:
            out["power_at_measured_time_w"] = pred.energy_at_measured_time_j / time_s
            out["power_at_measured_time_sigma_w"] = pred.energy_at_measured_time_sigma_j / time_s
        print_json(out)
        return
    cap = " (power-capped)" if pred.cap_active else ""
    rows = [
        ["intensity W/Q", f"{pred.intensity:.4g}", "", "flop/B"],
        [f"time{cap}", *_pm(pred.time_s, pred.time_sigma_s, 1e3), "ms"],
        ["energy", *_pm(pred.energy_j, pred.energy_sigma_j), "J"],
        ["power", *_pm(pred.power_w, pred.power_sigma_w), "W"],
    ]
    if time_s is not None:
        e, sd = pred.energy_at_measured_time_j, pred.energy_at_measured_time_sigma_j
        rows.append([f"energy at T = {time_s * 1e3:.4g} ms", *_pm(e, sd), "J"])
        rows.append([f"power at T = {time_s * 1e3:.4g} ms", *_pm(e / time_s, sd / time_s), "W"])
    cols = [Col("quantity", "name"), Col("value"), Col("± 1σ"), Col("unit", "text")]
    title = f"{m.device or 'model'}: W = {flops:.4g} flop, Q = {nbytes:.4g} B ({precision})"
    table, _ = fit_table(cols, rows, console=console, title=title)
    console.print(table)


@model_app.command("fit")
@handle_errors
def fit(
    run_dir: Annotated[Path, typer.Argument(help="Run directory holding roofline_sweep.csv and roofline_peaks.json.")],
    weighting: Annotated[
        str, typer.Option("--weighting", help="auto, uncertainty or none (ordinary least squares).")
    ] = "auto",
    render: Annotated[
        bool, typer.Option("--render/--no-render", help="Also write the roofline report section.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the model as JSON on stdout.")] = False,
) -> None:
    """Fit eq. (9) to a run's sweep, derive the balances and write roofline_model.json into the run directory."""
    from archline.model.build import MODEL_FILE, fit_run_dir
    from archline.model.fit import Weighting
    from archline.model.io import model_to_json

    if weighting not in ("auto", "uncertainty", "none"):
        raise InputError(f"--weighting must be auto, uncertainty or none (got {weighting!r})")
    m = fit_run_dir(run_dir, weighting=cast(Weighting, weighting))
    if render:
        from archline.report.roofline import render_roofline

        render_roofline(run_dir, model=m)
    if as_json:
        print_json(model_to_json(m))
        return
    for p in m.parameters.precisions:
        console.print(m.race_to_halt.verdict[p])
    f = m.fit
    console.print(f"R² {f.r2:.5f} over {f.n_rows} rows; model written to {Path(run_dir) / MODEL_FILE}")


def _check_measured_time(time_s: float, min_time_s: float, energy_j: float, limit_w: float) -> None:
    """A measured time the GPU cannot reach is an error; one that needs power beyond the limit, a warning."""
    if time_s < 0.5 * min_time_s:
        raise InputError(
            f"--time {time_s:g} s is shorter than this kernel can run on this GPU: its counts need at least "
            f"{min_time_s:.3g} s at the measured peaks (time roofline)"
        )
    power_w = energy_j / time_s
    if power_w > 1.05 * limit_w:
        err_console.print(
            f"archline: warning: at --time {time_s:g} s the model needs {power_w:.4g} W, above the board's "
            f"{limit_w:.0f} W limit: the counts or the time are off",
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to app."""
    app.add_typer(model_app, name="model")

"""CLI: `archline model`: fit the energy roofline from a run directory and predict a kernel's time, energy and power."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from archline.cli._common import console, err_console, handle_errors, print_json, print_para
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
        Path | None,
        typer.Option(
            "--model",
            "-m",
            help="Model file (roofline_model.json), or for --ncu-csv/--counts a roofline run directory "
            "or one of its ML model files (roofline_ml_model.json, roofline_ml_v2.json).",
        ),
    ] = None,
    flops: Annotated[
        float | None, typer.Option("--flops", help="W: floating-point operations of the kernel (FMA = 2).")
    ] = None,
    nbytes: Annotated[float | None, typer.Option("--bytes", help="Q: DRAM bytes the kernel reads plus writes.")] = None,
    time_s: Annotated[
        float | None, typer.Option("--time", help="Measured kernel time in seconds: also predict the energy at it.")
    ] = None,
    precision: Annotated[str, typer.Option("--precision", "-p", help="single or double.")] = "single",
    ncu_csv: Annotated[
        Path | None,
        typer.Option(
            "--ncu-csv",
            help="Nsight Compute raw CSV (ncu --csv --page raw) of the kernel: predict from its counts "
            "with the counted model (every kernel in the file summed).",
        ),
    ] = None,
    counts: Annotated[
        list[str] | None,
        typer.Option(
            "--counts",
            help="Counts per component as KEY=VALUE (repeatable): tensor_bf16, tensor_fp16, tensor_fp8, "
            "tensor_fp64, fp32, fp64 (flops); dram, l2, l1, shared (bytes); inst (other thread instructions).",
        ),
    ] = None,
    activity: Annotated[
        float,
        typer.Option("--activity", help="Operand toggle rate 0–1 of the tensor-core inputs (random data: 0.5)."),
    ] = 0.5,
    protocol: Annotated[
        str,
        typer.Option(
            "--protocol",
            help="With --model RUN_DIR and --ncu-csv/--counts: auto (protocol v2 where the run has it, else v1), "
            "v1 (docs/roofline.md §10b) or v2 (§10e).",
        ),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")] = False,
) -> None:
    """Predict time, energy and power of a kernel from its counts, with 1σ errors from the fit's covariance;
    or, with --ncu-csv or --counts, from its counted work per component (95 % intervals)."""
    from archline.model.io import load_model
    from archline.model.predict import predict_kernel

    if ncu_csv is not None or counts:
        _predict_counted(model, ncu_csv, counts or [], time_s, activity, as_json, protocol)
        return
    if model is None or flops is None or nbytes is None:
        raise InputError("model predict needs --model, --flops and --bytes (or --ncu-csv/--counts with --model RUN)")

    if precision not in PRECISIONS:
        raise InputError(f"--precision must be single or double (got {precision!r})")
    for name, value in (("--flops", flops), ("--bytes", nbytes), ("--time", time_s)):
        if value is not None and not (math.isfinite(value) and value > 0.0):
            raise InputError(f"{name} must be a positive number (got {value:g})")
    m = load_model(model)
    pred = predict_kernel(m.parameters, flops, nbytes, precision, measured_time_s=time_s)
    if (why := _outside_sweep(model, precision, flops / nbytes)) is not None:
        err_console.print(f"archline: warning: {why}", soft_wrap=True, markup=False)
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


def _outside_sweep(model: Path, precision: str, intensity: float) -> str | None:
    """Where the model's run directory keeps the sweep it was fitted on (roofline_sweep.csv beside the model file),
    a warning for an intensity more than twice beyond the sweep's range at this precision: an extrapolation."""
    import csv

    sweep = (model if model.is_dir() else model.parent) / "roofline_sweep.csv"
    try:
        with sweep.open(newline="", encoding="utf-8") as f:
            seen = [float(r["intensity"]) for r in csv.DictReader(f) if r.get("precision") == precision]
    except (OSError, KeyError, ValueError):
        return None
    seen = [v for v in seen if math.isfinite(v) and v > 0]
    if not seen:
        return None
    lo, hi = min(seen), max(seen)
    if lo / 2 <= intensity <= hi * 2:
        return None
    return (
        f"intensity {intensity:.3g} flop/B is outside the {lo:.3g}–{hi:.3g} flop/B the model was fitted on "
        f"({sweep}, {precision}): the prediction extrapolates the fit"
    )


_COUNT_KEYS = {
    "tensor_bf16": "bf16",
    "tensor_fp16": "fp16",
    "tensor_fp8": "fp8",
    "tensor_fp64": "fp64",
    "fp32": "flops_fp32",
    "fp64": "flops_fp64",
    "dram": "dram_bytes",
    "l2": "l2_bytes",
    "l1": "l1_bytes",
    "shared": "shared_bytes",
    "inst": "other_inst",
}


def _parse_counts(items: list[str]) -> Any:
    from archline.model.ml import MlCounts

    kw: dict[str, float] = {}
    tensor: dict[str, float] = {}
    for item in items:
        for part in item.split(","):
            key, sep, val = part.partition("=")
            key = key.strip()
            if not sep or key not in _COUNT_KEYS:
                raise InputError(
                    f"--counts: {part.strip()!r} is not KEY=VALUE with KEY one of {', '.join(_COUNT_KEYS)}"
                )
            try:
                v = float(val)
            except ValueError:
                raise InputError(f"--counts: {key}={val!r} is not a number") from None
            if not (math.isfinite(v) and v >= 0):
                raise InputError(f"--counts: {key} must be a non-negative number (got {val})")
            if key.startswith("tensor_"):
                tensor[_COUNT_KEYS[key]] = v
            else:
                kw[_COUNT_KEYS[key]] = v
    return MlCounts(name="counts", tensor=tensor, **kw)


def _predict_counted(
    run: Path | None,
    ncu_csv: Path | None,
    counts: list[str],
    time_s: float | None,
    activity: float,
    as_json: bool,
    protocol: str = "auto",
) -> None:
    """``model predict --ncu-csv/--counts``: the counted ML model of a roofline run."""
    from archline.model.ml import MeasuredKernel
    from archline.model.ml_run import load_ml_model, ml_model_path

    if run is None:
        raise InputError("--ncu-csv/--counts need --model: a roofline run directory or its roofline_ml_model.json")
    if ncu_csv is not None and counts:
        raise InputError("give --ncu-csv or --counts, not both")
    if not 0.0 <= activity <= 1.0:
        raise InputError(f"--activity must be between 0 and 1 (got {activity:g})")
    if time_s is not None and not (math.isfinite(time_s) and time_s > 0):
        raise InputError(f"--time must be a positive number (got {time_s:g})")
    m = load_ml_model(run, protocol)
    model_file = ml_model_path(run, protocol).name
    if ncu_csv is not None:
        from archline.hw.ncu import METRICS, parse_raw_csv
        from archline.model.ml import counts_from_ncu_values

        try:
            text = ncu_csv.read_text(errors="replace")
        except OSError as exc:
            raise InputError(f"{ncu_csv}: cannot read ({exc.strerror or exc})") from None
        kernels = parse_raw_csv(text, str(ncu_csv))
        back = {v: k for k, v in METRICS.items()}
        summed: dict[str, float] = {}
        for _, vals in kernels:
            for metric, v in vals.items():
                if metric in back and math.isfinite(v):
                    summed[back[metric]] = summed.get(back[metric], 0.0) + v
        if not any(k.startswith(("tc_ops_", "dram_", "l2_b", "ffma", "dfma")) for k in summed):
            raise InputError(f"{ncu_csv}: none of the counts the model needs (collect archline's metric list)")
        c = counts_from_ncu_values(ncu_csv.name, summed)
        source = f"{ncu_csv} ({len(kernels)} kernel{'s' if len(kernels) != 1 else ''})"
    else:
        c = _parse_counts(counts)
        source = "counts given"
    meas = None
    if time_s is not None:
        meas = MeasuredKernel(name=c.name, group="", time_s=time_s, energy_j=math.nan)
    p = m.predict(c, measured=meas, alpha=activity)
    time_from = "ncu" if m.time_source == "ncu" and math.isfinite(c.ncu_time_s) and c.ncu_time_s > 0 else "roofline"
    if as_json:
        out: dict[str, Any] = {
            "model": str(run),
            "model_file": model_file,
            "source": source,
            "terms_j": p.terms,
            "activity": activity,
            "time_from": time_from,
        }
        out.update({k: v for k, v in p.as_row().items() if not k.startswith("term_") and "error" not in k})
        out.pop("measured_energy_j", None)
        print_json(out)
        return
    cap = " (power-capped)" if p.cap_active_predicted else ""
    rows = [
        [f"time{cap}, bound by {p.bound}", f"{p.time_s * 1e3:.4g}", f"{p.time_ci_s * 1e3:.2g}", "ms"],
        ["energy", f"{p.energy_at_predicted_time_j:.4g}", f"{p.energy_at_predicted_time_ci_j:.2g}", "J"],
        ["power", f"{p.power_at_predicted_time_w:.4g}", "", "W"],
    ]
    if math.isfinite(p.ncu_time_s):
        rows.append(["ncu's duration", f"{p.ncu_time_s * 1e3:.4g}", "", "ms"])
    if time_s is not None:
        capm = " (power-capped)" if p.cap_active_measured else ""
        e, ci = p.energy_at_measured_time_j, p.energy_at_measured_time_ci_j
        rows.append([f"energy at T = {time_s * 1e3:.4g} ms{capm}", f"{e:.4g}", f"{ci:.2g}", "J"])
        rows.append([f"power at T = {time_s * 1e3:.4g} ms", f"{e / time_s:.4g}", f"{ci / time_s:.2g}", "W"])
    for k, v in p.terms.items():
        if v:
            rows.append([f"  term {k}", f"{v:.4g}", "", "J"])
    cols = [Col("quantity", "name"), Col("value"), Col("± 95 %"), Col("unit", "text")]
    # One fact a line, so the title fits the table's width on an 80-column terminal.
    title = "\n".join(
        (
            f"counted model of {run}",
            f"model file {model_file}; terms {'+'.join(m.terms) or 'base'}",
            f"kernel: {source}",
            f"time from the {'ncu duration' if time_from == 'ncu' else 'time roofline'}",
        )
    )
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
        print_para(m.race_to_halt.verdict[p])
    f = m.fit
    print_para(f"R² {f.r2:.5f} over {f.n_rows} rows; model written to {Path(run_dir) / MODEL_FILE}")


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

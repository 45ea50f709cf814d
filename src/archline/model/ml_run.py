"""The ML model of a roofline run directory: read its tables, run the frozen protocol (and, beside it, the post-hoc
variant), write and reload the result."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from archline.errors import InputError
from archline.model.ml import (
    POSTHOC_LABEL,
    RANDOM_ACTIVITY,
    V2_LABEL,
    MeasuredKernel,
    MlCounts,
    MlModel,
    MlScore,
    calibrate,
    calibrate_posthoc,
    calibrate_v2,
    counts_from_row,
    machine,
    score,
)
from archline.model.parameters import ParameterSet

__all__ = [
    "CLASSIC_HELDOUT",
    "ML_MODEL_FILE",
    "ML_POSTHOC_FILE",
    "ML_POSTHOC_PREDICTIONS_TABLE",
    "ML_PREDICTIONS_TABLE",
    "ML_TABLE",
    "ML_V2_FILE",
    "ML_V2_PREDICTIONS_TABLE",
    "PROTOCOLS",
    "MlRun",
    "analyze_ml_run",
    "load_ml_model",
    "ml_model_json",
    "ml_model_path",
    "ml_prediction_rows",
    "write_ml_run",
]

ML_TABLE = "roofline_ml.csv"
ML_COUNTS_TABLE = "roofline_ml_counts.csv"
ML_MODEL_FILE = "roofline_ml_model.json"
ML_PREDICTIONS_TABLE = "roofline_ml_predictions.csv"
#: The post-hoc variant's files, written beside the frozen ones (never over them).
ML_POSTHOC_FILE = "roofline_ml_posthoc.json"
ML_POSTHOC_PREDICTIONS_TABLE = "roofline_ml_posthoc_predictions.csv"
#: Protocol v2's files (docs/roofline.md §10e), beside the others.
ML_V2_FILE = "roofline_ml_v2.json"
ML_V2_PREDICTIONS_TABLE = "roofline_ml_v2_predictions.csv"
#: The five kernels of the earlier held-out set that stay held out; the other classic kernels calibrate.
CLASSIC_HELDOUT: tuple[str, ...] = (
    "triad.fp32.n134217728",
    "reduce.sum.fp32.n268435456",
    "stencil5.fp32.n8192",
    "sgemm.n4096",
    "dgemm.n4096",
)


class MlRun:
    """A run's calibrated ML model and its scores on the calibration and held-out kernels; ``posthoc`` is the
    post-hoc variant's (:func:`archline.model.ml.calibrate_posthoc`) and ``v2`` protocol v2's
    (:func:`archline.model.ml_v2.calibrate_v2`), scored on the same kernels."""

    def __init__(
        self,
        model: MlModel,
        calibration: MlScore,
        heldout: MlScore,
        notes: list[str],
        posthoc: MlRun | None = None,
        v2: MlRun | None = None,
    ) -> None:
        self.model, self.calibration, self.heldout, self.notes = model, calibration, heldout, notes
        self.posthoc = posthoc
        self.v2 = v2


def _read(path: Path) -> list[dict[str, Any]]:
    from archline.records import read_csv

    return read_csv(path) if path.is_file() else []


def _num(v: Any) -> float:
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def _kernels(d: Path) -> tuple[list[tuple[MeasuredKernel, MlCounts]], list[str]]:
    counts: dict[str, MlCounts] = {}
    for table in ("roofline_heldout_counts.csv", ML_COUNTS_TABLE):
        for i, r in enumerate(_read(d / table)):
            c = counts_from_row(r, f"{d / table}:{i + 2}")
            counts[c.name] = c
    measured: list[MeasuredKernel] = []
    for r in _read(d / "roofline_heldout.csv"):
        name = str(r.get("name"))
        measured.append(
            MeasuredKernel(
                name=name,
                group="heldout" if name in CLASSIC_HELDOUT else "calibration",
                time_s=_num(r.get("time_s")),
                energy_j=_num(r.get("energy_j")),
                energy_uncertainty_j=_num(r.get("energy_uncertainty_j")),
                precision=str(r.get("precision") or "single"),
                library="CuPy/cuBLAS",
            )
        )
    for r in _read(d / ML_TABLE):
        if str(r.get("status")) != "ok":
            continue
        measured.append(
            MeasuredKernel(
                name=str(r.get("name")),
                group=str(r.get("group") or "heldout"),
                time_s=_num(r.get("time_s")),
                energy_j=_num(r.get("energy_j")),
                energy_uncertainty_j=_num(r.get("energy_uncertainty_j")),
                precision=str(r.get("precision") or "single"),
                library=str(r.get("library") or ""),
                activity=RANDOM_ACTIVITY,
            )
        )
    notes = [f"{k.name}: no ncu counts" for k in measured if k.name not in counts]
    bad = [k.name for k in measured if not (k.time_s > 0 and k.energy_j > 0)]
    notes += [f"{n}: no measured time or energy" for n in bad]
    pairs = [(k, counts[k.name]) for k in measured if k.name in counts and k.name not in bad]
    return pairs, notes


def analyze_ml_run(run_dir: str | os.PathLike[str], params: ParameterSet, *, write: bool = True) -> MlRun | None:
    """Calibrate on the run's calibration kernels, score the held-out ones; None if the run has no ML table.

    The frozen protocol gives the run's model; the post-hoc variant and protocol v2 are calibrated
    from the same machine and kernels and returned as ``posthoc`` and ``v2``. With ``write``, all are
    written (:func:`write_ml_run`).
    """
    d = Path(run_dir)
    if not (d / ML_TABLE).is_file():
        return None
    peaks = json.loads((d / "roofline_peaks.json").read_text()) if (d / "roofline_peaks.json").is_file() else {}
    comps = _read(d / "roofline_components.csv")
    pairs, notes = _kernels(d)
    base = machine(params, comps, dict(peaks.get("peak_flops_per_s", {})))
    m = calibrate(base, pairs)
    ph = calibrate_posthoc(base, pairs)
    posthoc = MlRun(ph, score(ph, pairs, "calibration"), score(ph, pairs, "heldout"), notes)
    m2 = calibrate_v2(base, pairs)
    v2 = MlRun(m2, score(m2, pairs, "calibration"), score(m2, pairs, "heldout"), notes)
    run = MlRun(m, score(m, pairs, "calibration"), score(m, pairs, "heldout"), notes, posthoc, v2)
    if write:
        write_ml_run(d, run)
    return run


def write_ml_run(
    run_dir: str | os.PathLike[str], run: MlRun, *, frozen: bool = True, posthoc: bool = True, v2: bool = True
) -> None:
    """Write the frozen model's files (``frozen``), the post-hoc variant's (``posthoc``) and protocol v2's (``v2``)."""
    from archline.records import atomic_write_text

    d = Path(run_dir)
    variants: list[tuple[MlRun, str, str, str | None]] = []
    if frozen:
        variants.append((run, ML_MODEL_FILE, ML_PREDICTIONS_TABLE, None))
    if posthoc and run.posthoc is not None:
        variants.append((run.posthoc, ML_POSTHOC_FILE, ML_POSTHOC_PREDICTIONS_TABLE, "posthoc-cap"))
    if v2 and run.v2 is not None:
        variants.append((run.v2, ML_V2_FILE, ML_V2_PREDICTIONS_TABLE, "v2"))
    for r, model_file, table, variant in variants:
        _write_csv(d / table, ml_prediction_rows(r))
        text = json.dumps(ml_model_json(r, variant=variant), indent=1, default=_jd) + "\n"
        atomic_write_text(d / model_file, text)


def ml_prediction_rows(run: MlRun) -> list[dict[str, Any]]:
    """The rows of the predictions table: the calibration kernels, then the held-out ones."""
    return [p.as_row() for p in (*run.calibration.predictions, *run.heldout.predictions)]


def _jd(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, (tuple, set, frozenset)):
        return list(o)
    raise TypeError(type(o).__name__)


def _clean(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def _summary(s: MlScore) -> dict[str, Any]:
    return {
        "kernels": len(s.predictions),
        "median_abs_error_measured_time": s.median_abs_error_measured_time,
        "median_abs_error_predicted_time": s.median_abs_error_predicted_time,
        "median_abs_error_ncu_time": s.median_abs_error_ncu_time,
        "max_abs_error_measured_time": s.max_abs_error_measured_time,
        "over_20pct": list(s.over_20pct),
        "targets": {"measured_time": s.target_measured, "predicted_time": s.target_predicted},
        "met": s.met,
    }


def _model_dict(m: MlModel) -> dict[str, Any]:
    """The model's fields; v2's two only where they are set, so earlier variants' files stay as they were."""
    d = asdict(m)
    if not math.isfinite(m.cap_kappa) and m.time_source == "roofline":
        d.pop("cap_kappa")
        d.pop("time_source")
    return d


def ml_model_json(run: MlRun, *, posthoc: bool = False, variant: str | None = None) -> dict[str, Any]:
    """The model file's content: the machine, the choices and both summaries (a variant labelled as such)."""
    head: dict[str, Any] = {"schema": "archline.ml_model", "schema_version": 1}
    if posthoc or variant == "posthoc-cap":
        head |= {"variant": "posthoc-cap", "label": POSTHOC_LABEL}
    elif variant == "v2":
        head |= {"variant": "v2", "label": V2_LABEL}
    out: dict[str, Any] = _clean(
        {
            **head,
            "model": _model_dict(run.model),
            "calibration": _summary(run.calibration),
            "heldout": _summary(run.heldout),
            "notes": run.notes,
        }
    )
    return out


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    from archline.records import write_csv

    write_csv(path, rows)


#: Which protocol's model a run directory gives (``auto``: v2 where the run wrote it, else v1).
PROTOCOLS = ("auto", "v1", "v2")


def ml_model_path(path: str | os.PathLike[str], protocol: str = "auto") -> Path:
    """The model file of ``path`` (a file is itself; a run directory gives ``protocol``'s file)."""
    p = Path(path)
    if protocol not in PROTOCOLS:
        raise InputError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if not p.is_dir():
        return p
    if protocol == "v2" or (protocol == "auto" and (p / ML_V2_FILE).is_file()):
        return p / ML_V2_FILE
    return p / ML_MODEL_FILE


def load_ml_model(path: str | os.PathLike[str], protocol: str = "auto") -> MlModel:
    """The calibrated ML model from a run's model file, or from the run directory itself: protocol v2's
    (``roofline_ml_v2.json``) where the run wrote it and ``protocol`` is ``auto`` or ``v2``, else v1's
    (``roofline_ml_model.json``)."""
    p = ml_model_path(path, protocol)
    if not p.is_file():
        raise InputError(f"{p}: no such file (run `archline roofline`, or `archline model fit` on its run directory)")
    try:
        obj = json.loads(p.read_text())
        raw = obj["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{p}: not an archline ML model file ({exc})") from None

    def f(v: Any) -> float:
        return math.nan if v is None else float(v)

    def fd(d: Any) -> dict[str, float]:
        return {str(k): f(v) for k, v in (d or {}).items()}

    try:
        return MlModel(
            pi0_w=f(raw["pi0_w"]),
            pi0_sigma_w=f(raw["pi0_sigma_w"]),
            eps_mem_j_per_b=f(raw["eps_mem_j_per_b"]),
            eps_mem_sigma=f(raw["eps_mem_sigma"]),
            power_limit_w=f(raw["power_limit_w"]),
            eps=fd(raw["eps"]),
            eps_sigma=fd(raw["eps_sigma"]),
            sources={str(k): str(v) for k, v in raw["sources"].items()},
            rates=fd(raw["rates"]),
            activity_intercept=f(raw["activity_intercept"]),
            activity_slope=f(raw["activity_slope"]),
            terms=tuple(raw["terms"]),
            eta=fd(raw["eta"]),
            model_sigma=f(raw["model_sigma"]),
            model_sigma_predicted=f(raw["model_sigma_predicted"]),
            time_sigma=f(raw["time_sigma"]),
            choices=dict(raw.get("choices") or {}),
            cap_kappa=f(raw.get("cap_kappa")),
            time_source=str(raw.get("time_source") or "roofline"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{p}: malformed ML model ({exc})") from None

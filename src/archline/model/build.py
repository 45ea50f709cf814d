"""Turn a run's sweep rows and peaks into the complete energy-roofline model, in memory or in a run directory."""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from archline.errors import InputError
from archline.model.balance import balances_from_params, measured_balances, race_to_halt
from archline.model.capped import compare_capped
from archline.model.components import counts_from_dicts, derive_components, predict_counted
from archline.model.fit import Weighting, fit_energy
from archline.model.io import save_model
from archline.model.parameters import make_parameter_set
from archline.model.predict import predict_heldout
from archline.model.reference import GTX_580
from archline.model.result import RooflineModel
from archline.model.sweep import HeldOutRow, Peaks, SweepRow, read_heldout_csv, read_peaks_json, read_sweep_csv
from archline.model.time_costs import measure_time_costs
from archline.model.uncertainty import DEFAULT_CONFIDENCE

__all__ = [
    "COMPONENTS_TABLE",
    "COUNTS_TABLE",
    "HELDOUT_TABLE",
    "MODEL_FILE",
    "PEAKS_FILE",
    "SWEEP_TABLE",
    "build_model",
    "fit_run_dir",
]

#: File names inside a run directory.
SWEEP_TABLE = "roofline_sweep.csv"
PEAKS_FILE = "roofline_peaks.json"
HELDOUT_TABLE = "roofline_heldout.csv"
MODEL_FILE = "roofline_model.json"
COMPONENTS_TABLE = "roofline_components.csv"
COUNTS_TABLE = "roofline_heldout_counts.csv"


def build_model(
    rows: Sequence[SweepRow],
    peaks: Peaks,
    heldout: Sequence[HeldOutRow] = (),
    *,
    device: str = "",
    weighting: Weighting = "auto",
    confidence: float = DEFAULT_CONFIDENCE,
    cache_calibration: Collection[str] = (),
    components: Sequence[Mapping[str, Any]] = (),
    counts: Sequence[Mapping[str, Any]] = (),
) -> RooflineModel:
    """Fit eq. (9), measure τ_flop/τ_mem, derive the balances, compare the cap-aware model, predict held-out kernels.

    ``heldout`` rows are predicted, never fitted. The GTX 580 of the paper is the reference
    for the race-to-halt verdict. With the run's microbenchmark rows (``components``) and the
    held-out kernels' Nsight Compute counts (``counts``), the held-out kernels are also
    predicted by the counted model of :mod:`archline.model.components`.
    """
    rows = list(rows)
    if not rows:
        raise InputError("sweep: no rows")
    notes: list[str] = []
    times = measure_time_costs(rows, peaks, confidence)
    notes.extend(times.notes)
    fit = fit_energy(rows, weighting, confidence)
    limits = {r.power_limit_w for r in rows if math.isfinite(r.power_limit_w)}
    off = [lim for lim in limits if abs(lim - peaks.power_limit_w) > 0.01 * peaks.power_limit_w]
    if off:
        notes.append(
            f"rows report power limits {sorted(limits)} W, not the {peaks.power_limit_w:g} W given with the peaks; "
            "the model uses the latter"
        )
    for name, est in fit.estimates.items():
        if est.value <= 0.0 and name != "delta_d_j":
            notes.append(f"fitted {name} = {est.value:.3g} is not positive: eq. (9) does not describe these rows")
    params = make_parameter_set(fit, times, peaks.power_limit_w)
    balances = measured_balances(params)
    ref = {p: balances_from_params(p, GTX_580.params(p)) for p in balances}
    rth = race_to_halt(balances, ref, "GTX 580")
    capped = compare_capped(rows, {p: params.params(p) for p in params.precisions}, peaks.power_limit_w)
    for p, b in balances.items():
        if b.pi0_w >= peaks.power_limit_w:
            notes.append(f"{p}: fitted π0 {b.pi0_w:.4g} W is not below the power limit; the cap-aware model is void")
    summary = predict_heldout(params, heldout, cache_calibration=cache_calibration) if heldout else None
    counted = None
    if heldout and components and counts:
        comps = derive_components(components, params.params(params.precisions[0]).pi0_w)
        counted = predict_counted(params, comps, heldout, counts_from_dicts(counts, heldout, COUNTS_TABLE))
    idle = [r.idle_power_w for r in rows if math.isfinite(r.idle_power_w)]
    return RooflineModel(
        device=device or peaks.device,
        peaks=peaks,
        time_costs=times,
        fit=fit,
        parameters=params,
        balances=balances,
        race_to_halt=rth,
        capped=capped,
        heldout=summary,
        counted=counted,
        idle_power_w=float(np.median(idle)) if idle else math.nan,
        notes=tuple(notes),
    )


def fit_run_dir(
    run_dir: str | os.PathLike[str],
    *,
    write: bool = True,
    weighting: Weighting = "auto",
    cache_calibration: Collection[str] = (),
) -> RooflineModel:
    """Build the model from a run directory's ``roofline_sweep.csv``, ``roofline_peaks.json`` and,
    if present, ``roofline_heldout.csv``; write ``roofline_model.json`` there unless ``write`` is False.

    The device name comes from the peaks file, else from the manifest's ``gpu.name``.
    """
    d = Path(run_dir)
    if not d.is_dir():
        raise InputError(f"{d}: no such run directory")
    rows = read_sweep_csv(d / SWEEP_TABLE)
    peaks = read_peaks_json(d / PEAKS_FILE)
    held = read_heldout_csv(d / HELDOUT_TABLE) if (d / HELDOUT_TABLE).is_file() else []
    comps = _read_csv(d / COMPONENTS_TABLE)
    counts = _read_csv(d / COUNTS_TABLE)
    if not peaks.device:
        peaks = replace(peaks, device=_manifest_gpu_name(d))
    model = build_model(
        rows, peaks, held, weighting=weighting, cache_calibration=cache_calibration, components=comps, counts=counts
    )
    if write:
        save_model(d / MODEL_FILE, model)
        from archline.model.ml_run import analyze_ml_run

        analyze_ml_run(d, model.parameters, write=True)
    return model


def _read_csv(path: Path) -> list[dict[str, Any]]:
    """A run's optional table as dicts ([] if absent)."""
    from archline.records import read_csv

    return read_csv(path) if path.is_file() else []


def _manifest_gpu_name(d: Path) -> str:
    from archline.records import RunDir

    try:
        return str(RunDir.open(d).manifest.gpu.get("name", ""))
    except InputError:
        return ""

"""Protocol v2 of the ML model (docs/roofline.md §10e): the observed cap, a capped dynamic energy κ, a time source.

Frozen before its scoring runs. Every step sees the calibration kernels only:

(a) the cap is the observed capped power (:func:`archline.model.ml.calibrate_posthoc`);
(b) the optional terms are scored on the uncapped calibration kernels (as there);
(c) κ, the dynamic energy a capped kernel spends as a fraction of its components' sum: the median
    of (E − π0·T)/E_dyn over the capped calibration kernels (1 where none is capped). A kernel whose
    predicted power exceeds the cap takes T = max(T_time, κ·E_dyn/(P_cap − π0)) and E = P_cap·T;
(d) the time a prediction starts from, the time roofline over η or Nsight Compute's duration,
    whichever gives the lower median |energy error| at predicted time on the calibration kernels
    (the roofline on a tie within 0.1 point; the roofline when a calibration kernel has no ncu time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from archline.model.ml import (
    MeasuredKernel,
    MlCounts,
    MlModel,
    _calibration,
    _finish,
    _median_abs,
    calibrate_posthoc,
)

__all__ = ["TIME_SOURCES", "V2_LABEL", "calibrate_v2"]

#: Where protocol v2's predicted time may start from, in order of preference on a tie.
TIME_SOURCES: tuple[str, ...] = ("roofline", "ncu")
#: How protocol v2 is labelled wherever it is written or shown.
V2_LABEL = (
    "protocol v2 (docs/roofline.md §10e), frozen before its scoring runs; its rules were chosen after protocol v1 "
    "was scored on H100 GPU-cab9fa05 and H200 GPU-9af93dd4, on the same kernel set"
)


def capped_kappa(m: MlModel, cal: Sequence[tuple[MeasuredKernel, MlCounts]], capped: Sequence[str]) -> dict[str, float]:
    """(E − π0·T)/E_dyn of each capped calibration kernel (its measured dynamic energy over the components' sum)."""
    out: dict[str, float] = {}
    for k, c in cal:
        if k.name not in capped:
            continue
        dyn = float(sum(m.energy_terms(c, k.activity).values()))
        if dyn > 0 and k.time_s > 0:
            out[k.name] = (k.energy_j - m.pi0_w * k.time_s) / dyn
    return out


def calibrate_v2(m: MlModel, kernels: Sequence[tuple[MeasuredKernel, MlCounts]]) -> MlModel:
    """Protocol v2 (module docstring), on the calibration kernels of ``kernels`` only."""
    cal = _calibration(kernels)
    ph = calibrate_posthoc(m, kernels)
    capped = list((ph.choices.get("capped_calibration_kernels") or {}).keys())
    ratios = capped_kappa(ph, cal, capped)
    kappa = float(np.median(list(ratios.values()))) if ratios else 1.0
    have_ncu = all(math.isfinite(c.ncu_time_s) and c.ncu_time_s > 0 for _, c in cal)
    scores: dict[str, float] = {}
    for src in TIME_SOURCES:
        if src == "ncu" and not have_ncu:
            continue
        mm = replace(ph, cap_kappa=kappa, time_source=src)
        scores[src] = _median_abs([mm.predict(c, measured=k, alpha=k.activity).error_predicted_time for k, c in cal])
    best = min(scores, key=lambda s: (round(scores[s], 3), TIME_SOURCES.index(s)))
    chosen = replace(ph, cap_kappa=kappa, time_source=best)
    out = _finish(
        chosen,
        cal,
        ph.choices.get("eta_ratios") or {},
        ph.choices.get("term_scores_median_abs_error") or {},
    )
    return replace(
        out,
        choices={
            **ph.choices,
            **out.choices,
            "variant": "v2",
            "label": V2_LABEL,
            "cap_kappa": kappa,
            "cap_kappa_kernels": ratios,
            "time_source": best,
            "time_source_scores_median_abs_error_predicted_time": scores,
            "time_source_ncu_available": have_ncu,
        },
    )

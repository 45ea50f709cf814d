"""Predictions of a kernel's time, energy and power from its W and Q, and their check on held-out kernels."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np

from archline.errors import InputError
from archline.model.capped import capped_time_s
from archline.model.energy_roofline import RooflineParams, energy_j, time_s
from archline.model.parameters import ParameterSet
from archline.model.sweep import HeldOutRow

__all__ = [
    "PREDICTION_TARGET",
    "HeldOutSummary",
    "KernelPrediction",
    "calibrate_cache_energy",
    "predict_heldout",
    "predict_kernel",
]

#: The acceptance target for held-out kernels: median |relative energy error| ≤ 10 %.
PREDICTION_TARGET = 0.10


@dataclass(frozen=True)
class KernelPrediction:
    """Predicted time, energy and power of one kernel, with 1-sigma errors from the fit's covariance.

    ``time_s``/``energy_j``/``power_w`` are fully predicted (cap-aware time, eq. (2) energy);
    ``energy_at_measured_time_j`` uses the measured time in eq. (2) instead. Errors are
    relative, (predicted − measured)/measured, and NaN without a measurement. The sigmas are
    confidence errors of the model's mean (parameter uncertainty), not of one run's scatter.
    """

    name: str
    precision: str
    flops: float
    bytes: float
    intensity: float
    time_s: float
    time_sigma_s: float
    time_uncapped_s: float
    cap_active: bool
    energy_j: float
    energy_sigma_j: float
    power_w: float
    power_sigma_w: float
    cache_energy_j: float = 0.0
    measured_time_s: float = math.nan
    measured_energy_j: float = math.nan
    energy_at_measured_time_j: float = math.nan
    energy_at_measured_time_sigma_j: float = math.nan
    energy_error: float = math.nan
    energy_error_at_measured_time: float = math.nan
    time_error: float = math.nan
    calibration: bool = False


def _positive(value: float | None, what: str) -> None:
    if value is None:
        return
    if not math.isfinite(value) or value <= 0.0:
        raise InputError(f"{what} must be a positive number (got {value:g})")


def predict_kernel(
    params: ParameterSet,
    flops: float,
    nbytes: float,
    precision: str = "single",
    *,
    measured_time_s: float | None = None,
    measured_energy_j: float | None = None,
    name: str = "",
    cache_bytes: float = 0.0,
    eps_cache_j_per_b: float = 0.0,
    capped: bool = True,
) -> KernelPrediction:
    """Predict one kernel of W = ``flops`` and Q = ``nbytes`` at ``precision``.

    The optional cache term adds ``cache_bytes·eps_cache_j_per_b`` (Choi et al. §V-C) to every
    energy. Counts and times must be positive; a precision the model lacks is refused.
    """
    _positive(flops, "flops")
    _positive(nbytes, "bytes")
    _positive(measured_time_s, "time")
    _positive(measured_energy_j, "energy")
    p0 = params.params(precision)
    cap = params.power_limit_w if capped else math.inf
    e_cache = cache_bytes * eps_cache_j_per_b

    def t_of(p: RooflineParams) -> float:
        return float(capped_time_s(flops, nbytes, p, cap))

    def e_of(p: RooflineParams) -> float:
        return float(energy_j(flops, nbytes, t_of(p), p)) + e_cache

    t, t_sd = params.propagate(precision, t_of)
    e, e_sd = params.propagate(precision, e_of)
    pw, pw_sd = params.propagate(precision, lambda p: e_of(p) / t_of(p))
    t_unc = float(time_s(flops, nbytes, p0))
    pred = KernelPrediction(
        name=name,
        precision=precision,
        flops=float(flops),
        bytes=float(nbytes),
        intensity=float(flops) / float(nbytes),
        time_s=t,
        time_sigma_s=t_sd,
        time_uncapped_s=t_unc,
        cap_active=t > t_unc * (1.0 + 1e-12),
        energy_j=e,
        energy_sigma_j=e_sd,
        power_w=pw,
        power_sigma_w=pw_sd,
        cache_energy_j=e_cache,
    )
    if measured_time_s is None:
        return pred
    t_m = float(measured_time_s)
    em, em_sd = params.propagate(precision, lambda p: float(energy_j(flops, nbytes, t_m, p)) + e_cache)
    e_meas = float(measured_energy_j) if measured_energy_j is not None else math.nan
    return replace(
        pred,
        measured_time_s=t_m,
        measured_energy_j=e_meas,
        energy_at_measured_time_j=em,
        energy_at_measured_time_sigma_j=em_sd,
        energy_error=(e - e_meas) / e_meas,
        energy_error_at_measured_time=(em - e_meas) / e_meas,
        time_error=(t - t_m) / t_m,
    )


def calibrate_cache_energy(params: ParameterSet, rows: Sequence[HeldOutRow], names: Collection[str]) -> float:
    """ε_cache (J/B) as in §V-C: the median of (E_measured − E_eq.(2) at measured T)/cache_bytes over ``names``."""
    picked = [r for r in rows if r.name in names]
    if not picked:
        raise InputError(f"held-out: no kernel named {', '.join(sorted(names))} to calibrate the cache energy on")
    vals = []
    for r in picked:
        if r.cache_bytes <= 0.0:
            raise InputError(f"held-out: kernel {r.name} has no cache_bytes to calibrate the cache energy on")
        e = float(energy_j(r.flops, r.bytes, r.time_s, params.params(r.precision)))
        vals.append((r.energy_j - e) / r.cache_bytes)
    return float(np.median(vals))


@dataclass(frozen=True)
class HeldOutSummary:
    """Predictions for the held-out kernels and their median absolute relative errors.

    Kernels used to calibrate ε_cache (``calibration``) are listed but left out of the medians.
    """

    predictions: tuple[KernelPrediction, ...]
    median_abs_error_at_measured_time: float
    median_abs_error_predicted_time: float
    median_abs_time_error: float
    target: float
    target_met_at_measured_time: bool
    target_met_predicted_time: bool
    eps_cache_j_per_b: float = 0.0


def _median_abs(values: Sequence[float]) -> float:
    return float(np.median(np.abs(values))) if values else math.nan


def predict_heldout(
    params: ParameterSet,
    rows: Sequence[HeldOutRow],
    *,
    cache_calibration: Collection[str] = (),
    target: float = PREDICTION_TARGET,
) -> HeldOutSummary:
    """Predict every held-out kernel, with and without its measured time, and summarise the errors.

    With ``cache_calibration`` naming one or more kernels, ε_cache is calibrated on them
    (:func:`calibrate_cache_energy`) and applied to every kernel that has ``cache_bytes``.
    """
    eps_cache = calibrate_cache_energy(params, rows, cache_calibration) if cache_calibration else 0.0
    preds = []
    for r in rows:
        pr = predict_kernel(
            params,
            r.flops,
            r.bytes,
            r.precision,
            measured_time_s=r.time_s,
            measured_energy_j=r.energy_j,
            name=r.name,
            cache_bytes=r.cache_bytes,
            eps_cache_j_per_b=eps_cache,
        )
        preds.append(replace(pr, calibration=r.name in cache_calibration))
    scored = [p for p in preds if not p.calibration]
    at_t = _median_abs([p.energy_error_at_measured_time for p in scored])
    full = _median_abs([p.energy_error for p in scored])
    return HeldOutSummary(
        predictions=tuple(preds),
        median_abs_error_at_measured_time=at_t,
        median_abs_error_predicted_time=full,
        median_abs_time_error=_median_abs([p.time_error for p in scored]),
        target=target,
        target_met_at_measured_time=bool(at_t <= target),
        target_met_predicted_time=bool(full <= target),
        eps_cache_j_per_b=eps_cache,
    )

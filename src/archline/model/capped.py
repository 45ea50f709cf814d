"""The cap-aware model: power limited to the board's cap, time stretched so average power equals it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from archline.model.energy_roofline import Overlap, RooflineParams, energy_j, power_line_w, time_s
from archline.model.sweep import SweepRow

__all__ = [
    "CAP_WINDOW",
    "CapComparison",
    "CapRow",
    "capped_arch_line",
    "capped_power_line_w",
    "capped_roofline",
    "capped_time_s",
    "compare_capped",
]

#: Rows with B_τ/CAP_WINDOW ≤ I ≤ B_τ·CAP_WINDOW are "near B_τ", where eq. (7) peaks.
CAP_WINDOW = 4.0


def _as(x: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=float)


def capped_time_s(
    flops: ArrayLike, nbytes: ArrayLike, p: RooflineParams, power_limit_w: float, overlap: Overlap = "perfect"
) -> float | NDArray[np.float64]:
    """T = max(T_roofline, (W·ε_flop + Q·ε_mem)/(P_cap − π0)).

    The second term is the time at which E/T equals the cap when the dynamic energy per flop
    and per byte stay as fitted (the cap stretches time; it does not make work cheaper).
    A cap at or below π0 leaves no power for work: the time is infinite.
    """
    t_roof = _as(time_s(flops, nbytes, p, overlap))
    e_dyn = _as(flops) * p.eps_flop_j + _as(nbytes) * p.eps_mem_j_per_b
    head_w = power_limit_w - p.pi0_w
    t_cap = e_dyn / head_w if head_w > 0.0 else np.full_like(e_dyn, math.inf)
    t = np.maximum(t_roof, t_cap)
    return float(t) if t.ndim == 0 else t


def capped_roofline(intensity: ArrayLike, p: RooflineParams, power_limit_w: float) -> float | NDArray[np.float64]:
    """Normalised speed W·τ_flop/T under the cap: min(1, I/B_τ, τ_flop·(P_cap − π0)/(ε_flop + ε_mem/I))."""
    i = _as(intensity)
    t = _as(capped_time_s(i, np.ones_like(i), p, power_limit_w))
    r = i * p.tau_flop_s / t
    return float(r) if r.ndim == 0 else r


def capped_arch_line(intensity: ArrayLike, p: RooflineParams, power_limit_w: float) -> float | NDArray[np.float64]:
    """Normalised energy efficiency W·ε̂_flop/E under the cap (the stretched time costs π0·ΔT more)."""
    i = _as(intensity)
    t = _as(capped_time_s(i, np.ones_like(i), p, power_limit_w))
    r = i * p.eps_hat_flop_j / _as(energy_j(i, np.ones_like(i), t, p))
    return float(r) if r.ndim == 0 else r


def capped_power_line_w(intensity: ArrayLike, p: RooflineParams, power_limit_w: float) -> float | NDArray[np.float64]:
    """Average power under the cap: min(eq. (7), P_cap) (W)."""
    r = np.minimum(_as(power_line_w(intensity, p)), power_limit_w)
    return float(r) if r.ndim == 0 else r


@dataclass(frozen=True)
class CapRow:
    """One measured sweep point near B_τ, with both models' predictions of T, P and E."""

    precision: str
    intensity: float
    time_s: float
    power_w: float
    energy_j: float
    sm_clock_mhz: float
    time_uncapped_s: float
    time_capped_s: float
    power_uncapped_w: float
    power_capped_w: float
    energy_uncapped_j: float
    energy_capped_j: float
    cap_active: bool


@dataclass(frozen=True)
class CapComparison:
    """Residuals of the uncapped and cap-aware models on the measured points near B_τ.

    RMS values are of relative residuals (predicted − measured)/measured. ``capped_better``
    is True when the cap-aware model's combined time-and-power RMS is lower, None when no
    point lies in the window.
    """

    power_limit_w: float
    window: float
    rows: tuple[CapRow, ...]
    rms_time_uncapped: float
    rms_time_capped: float
    rms_power_uncapped: float
    rms_power_capped: float
    rms_energy_uncapped: float
    rms_energy_capped: float
    capped_rows: int
    capped_better: bool | None


def _rms(pred: Sequence[float], meas: Sequence[float]) -> float:
    if not pred:
        return math.nan
    rel = (np.asarray(pred) - np.asarray(meas)) / np.asarray(meas)
    return float(np.sqrt(np.mean(rel**2)))


def compare_capped(
    rows: Sequence[SweepRow], params: Mapping[str, RooflineParams], power_limit_w: float, window: float = CAP_WINDOW
) -> CapComparison:
    """Predict T, P and E with and without the cap for the sweep rows within ``window`` of B_τ."""
    out: list[CapRow] = []
    for r in rows:
        p = params.get(r.precision)
        if p is None:
            continue
        i = r.measured_intensity
        if not p.b_tau / window <= i <= p.b_tau * window:
            continue
        t_u = float(time_s(r.flops, r.bytes, p))
        t_c = float(capped_time_s(r.flops, r.bytes, p, power_limit_w))
        e_u = float(energy_j(r.flops, r.bytes, t_u, p))
        e_c = float(energy_j(r.flops, r.bytes, t_c, p))
        out.append(
            CapRow(
                precision=r.precision,
                intensity=i,
                time_s=r.time_s,
                power_w=r.power_w,
                energy_j=r.energy_j,
                sm_clock_mhz=r.sm_clock_mhz,
                time_uncapped_s=t_u,
                time_capped_s=t_c,
                power_uncapped_w=e_u / t_u,
                power_capped_w=e_c / t_c,
                energy_uncapped_j=e_u,
                energy_capped_j=e_c,
                cap_active=t_c > t_u,
            )
        )
    meas_t = [c.time_s for c in out]
    meas_p = [c.power_w for c in out]
    meas_e = [c.energy_j for c in out]
    rt_u, rt_c = _rms([c.time_uncapped_s for c in out], meas_t), _rms([c.time_capped_s for c in out], meas_t)
    rp_u, rp_c = _rms([c.power_uncapped_w for c in out], meas_p), _rms([c.power_capped_w for c in out], meas_p)
    better = None if not out else bool(math.hypot(rt_c, rp_c) < math.hypot(rt_u, rp_u))
    return CapComparison(
        power_limit_w=power_limit_w,
        window=window,
        rows=tuple(out),
        rms_time_uncapped=rt_u,
        rms_time_capped=rt_c,
        rms_power_uncapped=rp_u,
        rms_power_capped=rp_c,
        rms_energy_uncapped=_rms([c.energy_uncapped_j for c in out], meas_e),
        rms_energy_capped=_rms([c.energy_capped_j for c in out], meas_e),
        capped_rows=sum(c.cap_active for c in out),
        capped_better=better,
    )

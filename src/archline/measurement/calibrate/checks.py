"""Evidence behind a sensor fit: load-by-load energy checks, isolation, tails and stale repeats."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Readings
from archline.core.recording import Region
from archline.hw.simulated import PiecewisePower
from archline.measurement.clean import REPEAT_GAP_S
from archline.measurement.idle import IdleLevels, tail_after
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import window_energies

__all__ = ["LoadCheck", "isolated", "load_checks", "stale_repeats", "tail_time"]

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class LoadCheck:
    """How well one group of identical loads is measured, window by window.

    ``power_w`` is the group's fitted busy power; errors are (estimate − truth)/truth of each
    load's energy, truth = busy power × duration. ``model_*`` uses the fitted model;
    ``naive_*`` treats the readings as means over the intervals between them (what a plain
    averaging assumption gives), which shows whether readings conserve energy load by load.
    """

    name: str
    duration_s: float
    count: int
    power_w: float
    idle_w: float
    model_median_error: float
    model_spread: float
    naive_median_error: float
    naive_spread: float
    resolvable: int


def load_checks(
    readings: Readings,
    loads: Sequence[Region],
    model: SensorModel,
    names: list[str],
    base: F64,
    amp: F64,
    max_rel: float,
) -> tuple[tuple[LoadCheck, ...], float]:
    """Per-group energy errors with the fitted and with a naive model, and the edge timing σ (s)."""
    fitted = window_energies(readings, model.with_(edge_sigma_s=0.0), loads, max_rel_uncertainty=max_rel)
    naive_model = SensorModel(
        kind="averaging",
        period_s=model.period_s,
        window_s=None,
        undisplace=model.undisplace,
        noise_w=model.noise_w,
        edge_sigma_s=0.0,
    )
    naive = window_energies(readings, naive_model, loads, max_rel_uncertainty=max_rel)
    gi = {n: i for i, n in enumerate(names)}
    out: list[LoadCheck] = []
    edge_terms: list[float] = []
    iso_flags = isolated(loads, 5 * model.period_s)
    for n in names:
        idx = [i for i, r in enumerate(loads) if r.name == n]
        g = gi[n]
        busy = base[g] + amp[g]
        truth = np.array([busy * loads[i].duration_s for i in idx])
        em = np.array([fitted[i].energy_j for i in idx]) / truth - 1
        en = np.array([naive[i].energy_j for i in idx]) / truth - 1
        dur = float(np.median([loads[i].duration_s for i in idx]))
        out.append(
            LoadCheck(
                n,
                dur,
                len(idx),
                float(busy),
                float(base[g]),
                float(np.median(em)),
                _spread(em),
                float(np.median(en)),
                _spread(en),
                int(sum(fitted[i].resolvable for i in idx)),
            )
        )
        # Only loads the sensor saw whole say how well an edge is placed; the part-time misses
        # are covered by their own term.
        iso = np.array(
            [
                iso_flags[i] and fitted[i].observed_fraction >= 0.9 and not fitted[i].note.startswith("not seen")
                for i in idx
            ]
        )
        if abs(amp[g]) > 0 and dur <= 10 * model.period_s and iso.any():
            edge_terms += list((em[iso] * truth[iso] / abs(amp[g])) ** 2 / 2)
    edge_sigma = math.sqrt(float(np.mean(edge_terms))) if edge_terms else model.period_jitter_s
    return tuple(out), edge_sigma


def isolated(loads: Sequence[Region], clear_s: float) -> list[bool]:
    """Whether each load has no other load within ``clear_s`` of either end."""
    out = []
    for i, r in enumerate(loads):
        near = any(
            j != i and o.start_s < r.end_s + clear_s and o.end_s > r.start_s - clear_s for j, o in enumerate(loads)
        )
        out.append(not near)
    return out


def _spread(e: F64) -> float:
    """Half the 5–95 % range of relative errors (a robust ±)."""
    if e.size < 2:
        return 0.0
    lo, hi = np.percentile(e, [5, 95])
    return float(0.5 * (hi - lo))


def tail_time(t: F64, y: F64, loads: Sequence[Region], idle: IdleLevels, noise: float, settle: float) -> float | None:
    """Median time for the readings to return to active idle after the longer loads."""
    if idle.active_idle_w is None:
        return None
    longest = sorted(loads, key=lambda r: -r.duration_s)[: max(3, len(loads) // 10)]
    starts = np.array(sorted(r.start_s for r in loads))
    tails = []
    for r in longest:
        nxt = starts[np.searchsorted(starts, r.end_s, side="right") :]
        horizon = float(nxt[0] - r.end_s) if nxt.size else 10.0
        tl = tail_after(
            t, y, r.end_s, idle.active_idle_w, max(4 * noise, 0.01 * abs(idle.active_idle_w)), max_s=min(horizon, 10.0)
        )
        if tl.settled:
            tails.append(tl.duration_s)
    return float(np.median(tails)) if tails else None


def stale_repeats(raw_t: F64, raw_y: F64, busy: PiecewisePower, model: SensorModel) -> float:
    """Fraction of repeated readings (beyond the 4 ms rule) taken while the model says the
    power was moving: those are stale copies, the rest are quantisation of a steady power."""
    same = np.nonzero((np.diff(raw_y) == 0) & (np.diff(raw_t) > REPEAT_GAP_S))[0] + 1
    if same.size == 0:
        return 0.0
    ta, tb = raw_t[same - 1], raw_t[same]
    w = model.period_s if model.window_s is None else model.window_s
    ra = busy.lagged(ta - model.delay_s - 0.5 * w, model.lag_s)
    rb = busy.lagged(tb - model.delay_s - 0.5 * w, model.lag_s)
    return float(np.mean(np.abs(rb - ra) > 0.05))

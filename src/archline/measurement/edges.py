"""How a trace's transitions look (level crossings, rising edges) and the sensor kind they point to."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.errors import SensorError
from archline.hw.simulated import SensorKind
from archline.measurement.clean import blocks
from archline.measurement.lagged import RiseFit, fit_lag_step

__all__ = ["EdgeStats", "edge_stats", "kind_from_edges", "lag_from_rises"]

F64 = NDArray[np.float64]

#: Transitions needed before a sensor is taken as identified full-coverage averaging.
_MIN_EDGES = 10
#: Rising edges needed to tell a full-coverage average from a part-time one by them.
_MIN_RISES = 8


@dataclass(frozen=True)
class EdgeStats:
    """Transitions found in a trace: how many readings each took between 5 % and 95 %."""

    n_edges: int
    transition_readings: tuple[int, ...]
    lag_estimates_s: tuple[float, ...]

    @property
    def median_transition(self) -> float:
        return float(np.median(self.transition_readings)) if self.transition_readings else float("nan")

    @property
    def intermediate_fraction(self) -> float:
        """Fraction of edges with at least one reading caught mid-transition."""
        if not self.transition_readings:
            return float("nan")
        return float(np.mean(np.asarray(self.transition_readings) > 0))


def edge_stats(t_s: F64, y_w: F64, noise_w: float, *, fit_lag: bool = True, max_edges: int = 400) -> EdgeStats:
    """Find full transitions between a low and a high level and measure how they look.

    A lagged sensor spends many readings in transit; an averaging sensor catches a step in
    one reading (in transit with probability ~0.9); a part-time sensor only when the step
    falls inside its window.
    """
    if y_w.size < 8:
        return EdgeStats(0, (), ())
    lo, hi = (float(v) for v in np.percentile(blocks(y_w), [5, 95]))
    if hi - lo < max(10 * noise_w, 0.02 * abs(hi), 1e-9):
        return EdgeStats(0, (), ())
    mid = 0.5 * (lo + hi)
    above = y_w >= mid
    cross = np.nonzero(above[1:] != above[:-1])[0] + 1
    trans: list[int] = []
    lags: list[float] = []
    bounds = np.concatenate([[0], cross, [y_w.size]])
    # A long trace has plenty of edges: look at an evenly spread subset of them.
    pick = (
        np.unique(np.linspace(0, cross.size - 1, min(cross.size, max_edges)).astype(np.int64)) if cross.size else cross
    )
    for j in pick:
        k = int(cross[j])
        b0, b2 = int(bounds[j]), int(bounds[j + 2])
        # The level on each side: from the readings nearest the next edge (at most 50).
        pre = y_w[max(b0, k - 150) : k]
        post = y_w[k:b2]
        if pre.size < 3 or post.size < 3:
            continue
        l0 = float(np.median(pre[-min(max(3, pre.size // 3), 50) :]))
        l1 = float(np.median(post[-min(max(3, post.size // 3), 50) :]))
        amp = l1 - l0
        if abs(amp) < 0.5 * (hi - lo):
            continue
        # Walk out from the crossing while readings are between 5 % and 95 % of the step.
        i0 = k
        while i0 - 1 > b0 and 0.05 < (y_w[i0 - 1] - l0) / amp < 0.95:
            i0 -= 1
        i1 = k
        while i1 < b2 and 0.05 < (y_w[i1] - l0) / amp < 0.95:
            i1 += 1
        trans.append(int(i1 - i0))
        if fit_lag and i1 - i0 >= 4:
            lag = _edge_lag(t_s, y_w, i0, b2, l0, amp)
            if lag is not None:
                lags.append(lag)
    return EdgeStats(len(trans), tuple(trans), tuple(lags))


def _edge_lag(t_s: F64, y_w: F64, i0: int, stop: int, l0: float, amp: float) -> float | None:
    """Lag constant of one transition, fitted up to its extreme (where the load may have ended).

    Discarded when the fitted span is shorter than one lag constant: a response cut off that
    early is nearly a straight line, and its curvature cannot pin C down.
    """
    seg = y_w[i0:stop] * np.sign(amp)
    if seg.size < 6:
        return None
    end = i0 + int(np.argmax(seg)) + 1
    if end - i0 < 5:
        return None
    try:
        fit = fit_lag_step(t_s[:end], y_w[:end], float(t_s[i0]), free_start=True)
    except SensorError:
        return None
    if not np.isfinite(fit.lag_s) or t_s[end - 1] - t_s[i0] < fit.lag_s:
        return None
    return fit.lag_s


def lag_from_rises(rise: RiseFit | None, period_s: float) -> tuple[float, float] | None:
    """The lag constant and its 1 σ (s) when the rising edges show a lag the data pin down
    (at least a quarter period, known to 25 %, and edges that an exponential fits where a
    straight ramp does not), else None."""
    if rise is None or rise.ramp_window_s is not None or rise.shape_votes >= 0:
        return None
    if rise.lag_s < 0.25 * period_s or not rise.lag_sigma_s <= 0.25 * rise.lag_s:
        return None
    return rise.lag_s, max(rise.lag_sigma_s, 0.005 * rise.lag_s)


def kind_from_edges(
    stats: EdgeStats, rise: RiseFit | None, period: float, jitter: float, notes: list[str]
) -> tuple[float, float, float | None, SensorKind, bool, float]:
    """(lag, lag σ, window, kind, identified, edge σ) from how the trace's transitions look."""
    # Without known loads nothing shows where, relative to its stamp, a reading looks (delay,
    # window alignment): each edge is charged a uniform position within a period.
    edge_sigma = max(jitter, period / math.sqrt(12.0))
    lagged = lag_from_rises(rise, period)
    if lagged is not None and rise is not None:
        notes.append(
            f"{rise.edges} rising edges fit a first-order lag C = {1e3 * lagged[0]:.1f} ± {1e3 * lagged[1]:.1f} ms"
        )
        return lagged[0], lagged[1], 0.0, "lagged", True, edge_sigma
    if rise is not None and rise.ramp_window_s is not None and rise.ramp_window_s > period:
        notes.append(
            f"{rise.edges} rising edges are straight ramps into a corner: a {1e3 * rise.ramp_window_s:.0f} ms average"
        )
        # Each edge places the window to within a fraction of a period; the longest ramp may
        # also belong to a load shorter than the window.
        notes.append(f"window uncertain by {1e3 * 0.1 * period:.0f} ms")
        return 0.0, 0.0, rise.ramp_window_s, "averaging", True, edge_sigma
    if rise is not None and rise.rising >= _MIN_RISES:
        # Rising edges are cleaner than level crossings (no holds, step-downs or unequal levels).
        caught = rise.caught_mid / rise.rising
        if caught < 0.6:
            window = min(0.95, caught / 0.9) * period
            notes.append(
                f"only {100 * caught:.0f} % of {rise.rising} rising edges caught mid-way: "
                "readings cover part of each period"
            )
            return 0.0, 0.0, window, "part-time", True, max(jitter, (period - window) / math.sqrt(12.0))
        notes.append(f"{100 * caught:.0f} % of {rise.rising} rising edges caught mid-way: averaging")
        return 0.0, _lag_bound(rise, period), None, "averaging", True, edge_sigma
    if stats.n_edges == 0:
        notes.append("no full transitions in the trace: assumed an averaging sensor, edges uncertain by half a period")
        return 0.0, 0.0, None, "averaging", False, max(jitter, 0.5 * period)
    if stats.median_transition >= 4:
        # Slow transitions without an exponential's curvature: a boxcar longer than the period.
        window = stats.median_transition * period / 0.9
        notes.append(
            f"transitions take a median {stats.median_transition:.0f} readings as straight ramps: "
            f"a {1e3 * window:.0f} ms average"
        )
        return 0.0, 0.0, window, "averaging", True, edge_sigma
    if stats.n_edges >= 8 and stats.intermediate_fraction < 0.5:
        window = min(0.95, stats.intermediate_fraction / 0.9) * period
        notes.append(
            f"only {100 * stats.intermediate_fraction:.0f} % of {stats.n_edges} transitions caught mid-way: "
            "readings cover part of each period"
        )
        # Level crossings mislead where loads end in holds or steps (a full boxcar then looks
        # part-time): without enough rising edges to confirm it, the kind stays assumed.
        return 0.0, 0.0, window, "part-time", rise is None, max(jitter, (period - window) / math.sqrt(12.0))
    # Few transitions cannot tell a full-coverage average from a part-time one: a part-time
    # sensor misses a share of the edges, which takes several to see.
    enough = stats.n_edges >= _MIN_EDGES
    notes.append(
        f"{stats.n_edges} transitions completed within one or two readings: averaging"
        + ("" if enough else f" (assumed: fewer than {_MIN_EDGES} transitions cannot rule out a part-time sensor)")
    )
    return 0.0, _lag_bound(rise, period), None, "averaging", enough, edge_sigma


def _lag_bound(rise: RiseFit | None, period_s: float) -> float:
    """1 σ (s) on the lag of a sensor taken as lag-free: what the rising edges allow, at most P/4."""
    if rise is None or rise.ramp_window_s is not None:
        return 0.25 * period_s
    return float(min(rise.lag_s + rise.lag_sigma_s, 0.25 * period_s))

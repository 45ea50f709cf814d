"""Idle and active-idle power levels, and the tail of elevated power after a kernel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.recording import Region
from archline.measurement.clean import estimate_noise_w

__all__ = ["IdleLevels", "Tail", "idle_levels", "power_levels", "tail_after"]

F64 = NDArray[np.float64]


def _time_weights(t_s: F64) -> F64:
    if t_s.size < 2:
        return np.ones_like(t_s)
    d = np.diff(t_s)
    w = np.empty_like(t_s)
    w[0] = d[0]
    w[-1] = d[-1]
    w[1:-1] = 0.5 * (d[1:] + d[:-1])
    return w


def power_levels(
    t_s: F64,
    power_w: F64,
    mask: NDArray[np.bool_] | None = None,
    *,
    bin_w: float | None = None,
    min_share: float = 0.01,
) -> list[tuple[float, float]]:
    """The power levels the series dwells at: (level W, share of time), lowest first.

    A level is a peak of the time-weighted histogram of readings (bins of ``bin_w``, default
    1 % of the range but at least 0.5 W and two noise σ) holding at least ``min_share`` of the time; its
    value is the time-weighted median of the readings within two bins of the peak.
    """
    m = np.ones(t_s.size, bool) if mask is None else mask
    if m.sum() < 3:
        return []
    y = power_w[m]
    w = _time_weights(t_s)[m]
    if y.size > 400_000:
        # Dwell levels of a long trace: a regular subsample of it tells the same story.
        step = y.size // 200_000
        y, w = y[::step], w[::step]
    lo, hi = float(np.min(y)), float(np.max(y))
    # Bins narrower than the reading noise split one level into noise peaks (Burtscher-corrected
    # readings carry the noise amplified by C/P): never below two noise σ.
    width = bin_w if bin_w is not None else max(0.01 * (hi - lo), 0.5, 2.0 * estimate_noise_w(y))
    nb = max(int(np.ceil((hi - lo) / width)) + 1, 1)
    hist, edges = np.histogram(y, bins=nb, range=(lo, lo + nb * width), weights=w)
    share = hist / max(float(hist.sum()), 1e-300)
    out: list[tuple[float, float]] = []
    for k in range(nb):
        left = share[k - 1] if k > 0 else -1.0
        right = share[k + 1] if k + 1 < nb else -1.0
        if share[k] >= min_share and share[k] >= left and share[k] > right:
            near = (y >= edges[max(k - 2, 0)]) & (y <= edges[min(k + 3, nb)])
            level = _weighted_median(y[near], w[near])
            tot = float(share[max(k - 2, 0) : k + 3].sum())
            out.append((level, tot))
    return out


def _weighted_median(y: F64, w: F64) -> float:
    order = np.argsort(y)
    c = np.cumsum(w[order])
    return float(y[order][int(np.searchsorted(c, 0.5 * c[-1]))])


@dataclass(frozen=True)
class IdleLevels:
    """Deep idle (W): the lowest level held for a while away from any load; active idle (W):
    where the power settles right after a load, while the GPU waits for the next one."""

    idle_w: float | None
    active_idle_w: float | None
    levels: tuple[tuple[float, float], ...]


def idle_levels(t_s: F64, power_w: F64, loads: Sequence[Region], *, settle_s: float, hold_s: float = 0.5) -> IdleLevels:
    """Idle and active-idle power from readings around known loads.

    Active idle is the median of readings from ``settle_s`` (the sensor's own settling time)
    to ``settle_s + hold_s`` after each load that no other load follows within that time.
    Deep idle is the lowest dwell level among readings at least ``settle_s`` clear of loads.
    """
    starts = np.array(sorted(r.start_s for r in loads))
    # Readings within settle_s of any load, marked through a difference array (one pass).
    lo = np.searchsorted(t_s, np.array([r.start_s - settle_s for r in loads]), side="left")
    hi = np.searchsorted(t_s, np.array([r.end_s + settle_s for r in loads]), side="right")
    mark = np.zeros(t_s.size + 1, np.int64)
    np.add.at(mark, lo, 1)
    np.add.at(mark, hi, -1)
    busy = np.cumsum(mark[:-1]) > 0
    levels = power_levels(t_s, power_w, ~busy) if loads else power_levels(t_s, power_w)
    idle = levels[0][0] if levels else None
    after: list[F64] = []
    for r in loads:
        a, b = r.end_s + settle_s, r.end_s + settle_s + hold_s
        nxt = starts[np.searchsorted(starts, r.end_s, side="right") :]
        if nxt.size and nxt[0] < b + settle_s:
            continue
        i0, i1 = np.searchsorted(t_s, [a, b], side="left")
        if i1 > i0:
            after.append(power_w[i0:i1])
    active = float(np.median(np.concatenate(after))) if after else None
    return IdleLevels(idle, active, tuple(levels))


@dataclass(frozen=True)
class Tail:
    """Elevated power after a load ends: how long (s) until the readings settle at the
    baseline, and the energy above the baseline in that time (J)."""

    duration_s: float
    energy_j: float
    settled: bool


def tail_after(
    t_s: F64, power_w: F64, end_s: float, baseline_w: float, tolerance_w: float, *, max_s: float = 10.0, hold: int = 3
) -> Tail:
    """The tail after ``end_s``: until ``hold`` consecutive readings lie within ``tolerance_w``
    of ``baseline_w`` (or ``max_s`` passes, then ``settled`` is False)."""
    m = (t_s > end_s) & (t_s <= end_s + max_s)
    tt, yy = t_s[m], power_w[m]
    if tt.size == 0:
        return Tail(0.0, 0.0, False)
    ok = np.abs(yy - baseline_w) <= tolerance_w
    run = np.convolve(ok.astype(np.int64), np.ones(hold, np.int64), mode="valid") == hold if ok.size >= hold else ok
    hit = np.nonzero(run)[0]
    if hit.size == 0:
        stop, settled = tt.size, False
    else:
        stop, settled = int(hit[0]), True
    if stop == 0:
        return Tail(0.0, 0.0, settled)
    ts = np.concatenate([[end_s], tt[:stop]])
    ex = np.concatenate([[yy[0] - baseline_w], yy[:stop] - baseline_w])
    energy = float(np.sum(0.5 * (ex[1:] + ex[:-1]) * np.diff(ts)))
    return Tail(float(tt[stop - 1] - end_s) if stop > 0 else 0.0, energy, settled)

"""Energy windows from the sensors (those traced, the power buffer's scale to them) and each activity's busy time."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Readings
from archline.errors import SensorError, TooLittleTracedError

__all__ = [
    "BufferIntegral",
    "Coverage",
    "EnergyWindows",
    "buffer_windows",
    "counter_windows",
    "gap_intervals",
    "traced_windows",
    "window_overlap",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True)
class EnergyWindows:
    """Consecutive windows ``[edges_s[i], edges_s[i+1]]`` with the energy measured in each.

    ``edges_s`` are when the sensor's value changed (not yet shifted by the sensor's delay);
    ``period_s`` is the median window length; ``jitter_s`` the rms scatter of the update
    instants about a regular grid (NaN where no grid was fitted).
    """

    source: str
    edges_s: F64
    energy_j: F64
    period_s: float
    jitter_s: float
    regular: bool

    def __len__(self) -> int:
        return int(self.energy_j.shape[0])


def counter_windows(readings: Readings, *, min_updates: int = 3) -> EnergyWindows:
    """Windows between the updates of a cumulative energy counter (J), e.g. ``nvml.energy``.

    The counter is polled faster than it updates, so each update lies between the last poll
    that saw the old value and the first that saw the new one. When the updates fall on a
    regular grid (NVML's counter: every 100 ms), the grid fitted to all of them places each
    update far more precisely than one poll interval.
    """
    t = np.asarray(readings.t_s, np.float64)
    v = np.asarray(readings.value, np.float64)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    if t.size < 2:
        raise SensorError(f"{readings.source}: {t.size} energy-counter reading(s); cannot form windows")
    change = np.nonzero(np.diff(v) != 0)[0] + 1
    if change.size < min_updates:
        raise SensorError(
            f"{readings.source}: the energy counter changed {change.size} time(s) during the recording; "
            f"at least {min_updates} updates are needed"
        )
    mid = 0.5 * (t[change - 1] + t[change])
    val = v[change]
    period = float(np.median(np.diff(mid)))
    jitter = float("nan")
    regular = False
    if change.size >= 6 and period > 0:
        k = np.round((mid - mid[0]) / period)
        keep = np.ones(k.size, bool)
        coef = np.polyfit(k, mid, 1)
        for _ in range(3):
            res = mid - np.polyval(coef, k)
            mad = float(np.median(np.abs(res[keep] - np.median(res[keep])))) * 1.4826
            keep = np.abs(res) <= max(4.0 * mad, 1e-6)
            if keep.sum() < 4:
                break
            coef = np.polyfit(k[keep], mid[keep], 1)
        res = mid - np.polyval(coef, k)
        jitter = float(np.sqrt(np.mean(res[keep] ** 2))) if keep.any() else float("nan")
        unique_k = np.unique(k).size == k.size
        # A grid is trusted only when it explains the updates far better than one poll interval.
        if unique_k and jitter < 0.1 * period:
            regular = True
            mid = np.polyval(coef, k)
            period = float(coef[0])
    inc = np.diff(val)
    if np.any(inc < 0):
        raise SensorError(f"{readings.source}: the energy counter went backwards (reset or wrap-around)")
    return EnergyWindows(readings.source, mid.astype(np.float64), inc.astype(np.float64), period, jitter, regular)


def buffer_windows(readings: Readings) -> EnergyWindows:
    """Windows from an averaging power sensor: each reading is the mean power since the previous one."""
    t = np.asarray(readings.t_s, np.float64)
    p = np.asarray(readings.value, np.float64)
    ok = np.isfinite(t) & np.isfinite(p)
    t, p = t[ok], p[ok]
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    if t.size < 3:
        raise SensorError(f"{readings.source}: {t.size} power reading(s); cannot form windows")
    dt = np.diff(t)
    return EnergyWindows(readings.source, t, p[1:] * dt, float(np.median(dt)), float("nan"), False)


class BufferIntegral:
    """Energy between any two instants from an averaging power sensor (reading i = mean power over (t[i-1], t[i]]).

    ``delay_s`` is how long after the power was drawn the sensor stamps its reading.
    """

    def __init__(self, readings: Readings, *, t_ref: float = 0.0, delay_s: float = 0.0) -> None:
        self.readings = readings
        self.t_ref = t_ref
        self.delay_s = delay_s
        # A reading stamped at t describes the power at t - delay.
        t = np.asarray(readings.t_s, np.float64) - t_ref - delay_s
        p = np.asarray(readings.value, np.float64)
        ok = np.isfinite(t) & np.isfinite(p)
        t, p = t[ok], p[ok]
        order = np.argsort(t, kind="stable")
        t, p = t[order], p[order]
        if t.size < 2:
            raise SensorError(f"{readings.source}: {t.size} power reading(s); cannot integrate")
        dt = np.diff(t)
        self.period_s = float(np.median(dt))
        # The first reading covers one median period before its timestamp.
        self._t = np.concatenate([[t[0] - self.period_s], t])
        self._e = np.concatenate([[0.0], np.cumsum(p * np.concatenate([[self.period_s], dt]))])
        self.start_s = float(self._t[0])
        self.end_s = float(self._t[-1])

    def cumulative(self, t_s: F64) -> F64:
        """Energy (J) from the start of the buffer to each instant (relative seconds)."""
        out: F64 = np.interp(t_s, self._t, self._e).astype(np.float64)
        return out

    def energy(self, a_s: F64, b_s: F64) -> F64:
        return (self.cumulative(b_s) - self.cumulative(a_s)).astype(np.float64)

    def with_delay(self, delay_s: float) -> BufferIntegral:
        return BufferIntegral(self.readings, t_ref=self.t_ref, delay_s=delay_s)

    def fit_delay(self, edges_s: F64, energy_j: F64, search_s: tuple[float, float] = (-0.03, 0.03)) -> BufferIntegral:
        """The same buffer shifted by the delay that best matches windows of known energy (e.g. the counter's)."""
        inside = (edges_s[:-1] >= self.start_s + 0.05) & (edges_s[1:] <= self.end_s - 0.05)
        if inside.sum() < 8:
            return self
        best, best_err = self, np.inf
        for d in np.arange(search_s[0], search_s[1] + 1e-9, 0.001):
            cand = self.with_delay(float(d))
            b = np.diff(cand.cumulative(edges_s))[inside]
            y = energy_j[inside]
            scale = y.sum() / b.sum() if b.sum() > 0 else 1.0
            err = float(np.sum((scale * b - y) ** 2))
            if err < best_err:
                best, best_err = cand, err
        return best

    def scale_to(self, edges_s: F64, energy_j: F64) -> tuple[BufferIntegral, float, float]:
        """The buffer shifted to windows of known energy (:meth:`fit_delay`), the scale that makes it agree with
        them over the run (1 where too few are covered) and the robust relative spread per window (NaN then)."""
        scale, rel_sd = 1.0, math.nan
        integral = self.fit_delay(edges_s, energy_j)
        b_w = np.diff(integral.cumulative(edges_s))
        covered = (edges_s[:-1] >= integral.start_s) & (edges_s[1:] <= integral.end_s)
        if covered.sum() >= 3 and b_w[covered].sum() > 0:
            y = energy_j[covered]
            scale = float(y.sum() / b_w[covered].sum())
            rel = (scale * b_w[covered] - y) / np.maximum(y, 1e-12)
            rel_sd = float(1.4826 * np.median(np.abs(rel - np.median(rel))))
        return integral, scale, rel_sd


class Coverage:
    """How many activities run at each instant; ``effective(a, b)`` is ∫ 1/count over [a, b].

    Time during which several activities overlap (concurrent streams) is split equally among
    them, so every second of the timeline is counted once.
    """

    def __init__(self, starts_s: F64, ends_s: F64) -> None:
        n = starts_s.size
        g = np.concatenate([starts_s, ends_s])
        d = np.concatenate([np.ones(n), -np.ones(n)])
        order = np.argsort(g, kind="stable")
        self.edges_s = g[order]
        count = np.cumsum(d[order])  # count on [edges[j], edges[j+1])
        self.count = count
        seg = np.diff(self.edges_s) if n else np.zeros(0)
        self.overlap_s = float(seg[count[:-1] > 1].sum()) if n else 0.0
        # Float64 epoch stamps resolve ~0.24 µs, so back-to-back calls can seem to overlap by
        # a hair; only overlaps longer than 1 µs count as concurrency.
        real_overlap_s = float(np.clip(seg[count[:-1] > 1] - 1e-6, 0.0, None).sum()) if n else 0.0
        self._f: F64 | None = None
        if real_overlap_s > 0.0:
            slope = np.where(count[:-1] > 0, 1.0 / np.maximum(count[:-1], 1.0), 0.0)
            self._f = np.concatenate([[0.0], np.cumsum(slope * np.diff(self.edges_s))])

    @property
    def overlapping(self) -> bool:
        return self._f is not None

    def transform(self) -> Callable[[F64], F64] | None:
        """The cumulative effective-time function, or None where nothing overlaps (it is then t itself)."""
        if self._f is None:
            return None
        edges, f = self.edges_s, self._f
        return lambda t: np.interp(t, edges, f).astype(np.float64)


def gap_intervals(cov: Coverage, lo_s: float, hi_s: float) -> tuple[F64, F64]:
    """The intervals in [lo, hi] during which no activity runs."""
    e = cov.edges_s
    if e.size == 0:
        return np.array([lo_s]), np.array([hi_s])
    idle = np.nonzero(cov.count[:-1] <= 0)[0]
    gs = np.concatenate([[lo_s], e[idle], [e[-1]]])
    ge = np.concatenate([[e[0]], e[idle + 1], [hi_s]])
    gs = np.clip(gs, lo_s, hi_s)
    ge = np.clip(ge, lo_s, hi_s)
    keep = ge > gs
    return gs[keep], ge[keep]


def traced_windows(
    edges_s: F64, traced: Sequence[tuple[float, float]], t_ref: float, settle_s: float, notes: list[str]
) -> NDArray[np.bool_]:
    """The windows (relative to ``t_ref``) inside the traced intervals (host clock), ``settle_s`` after each start."""
    keep = np.zeros(len(edges_s) - 1, dtype=bool)
    for a, b in traced:
        a0, b0 = a - t_ref + settle_s, b - t_ref
        keep |= (edges_s[:-1] >= a0) & (edges_s[1:] <= b0)
    if int(keep.sum()) < 3:
        raise TooLittleTracedError(
            f"only {int(keep.sum())} of the energy counter's {len(keep)} windows lie inside the traced "
            "intervals; trace longer (a larger duty cycle or a longer program)"
        )
    notes.append(
        f"duty-cycled tracing: {int(keep.sum())} of {len(keep)} counter windows were traced and fitted; "
        "per-kernel rows cover the traced time only"
    )
    return keep


def window_overlap(
    edges_s: F64,
    starts_s: F64,
    ends_s: F64,
    cols: I64,
    n_cols: int,
    *,
    effective: Callable[[F64], F64] | None = None,
    weights: F64 | None = None,
) -> F64:
    """Matrix (windows × columns) of the time each column's intervals spend in each window.

    ``effective`` maps time to cumulative effective time (see :class:`Coverage`);
    ``weights`` scales each interval's contribution (e.g. J per effective second).
    """
    n_w = edges_s.size - 1
    out = np.zeros(n_w * n_cols, np.float64)
    if n_w <= 0 or starts_s.size == 0:
        return out.reshape(max(n_w, 0), n_cols)
    s = np.clip(starts_s, edges_s[0], edges_s[-1])
    e = np.clip(ends_s, edges_s[0], edges_s[-1])
    keep = e > s
    s, e, c = s[keep], e[keep], cols[keep]
    wt = weights[keep] if weights is not None else None
    w0 = np.clip(np.searchsorted(edges_s, s, side="right") - 1, 0, n_w - 1)
    w1 = np.clip(np.searchsorted(edges_s, e, side="left") - 1, 0, n_w - 1)
    span = w1 - w0 + 1
    idx = np.repeat(np.arange(s.size), span)
    first = np.repeat(np.cumsum(span) - span, span)
    w = w0[idx] + (np.arange(idx.size) - first)
    a = np.maximum(s[idx], edges_s[w])
    b = np.minimum(e[idx], edges_s[w + 1])
    val = effective(b) - effective(a) if effective is not None else b - a
    val = np.maximum(val, 0.0)
    if wt is not None:
        val = val * wt[idx]
    out += np.bincount(w * n_cols + c[idx], weights=val, minlength=n_w * n_cols)
    return out.reshape(n_w, n_cols)

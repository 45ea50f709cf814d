"""Cleaning a power series before integration: repeated readings, displaced timestamps, noise level."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Readings

__all__ = [
    "KEEP_REPEATS",
    "MIN_UPDATES",
    "REPEATS_NOTE",
    "REPEAT_GAP_S",
    "Displacement",
    "blocks",
    "drop_repeats",
    "estimate_noise_w",
    "estimate_quantum_w",
    "find_displaced",
    "keep_repeats",
    "repeat_fraction",
    "undisplace",
    "update_period",
]

F64 = NDArray[np.float64]

#: Burtscher et al. (ICPE'14, §5 step 2): consecutive equal readings no more than 4 ms apart
#: are repeats of the latest measurement, not new data.
REPEAT_GAP_S = 0.004


def blocks(x: F64, limit: int = 200_000, n_blocks: int = 10) -> F64:
    """At most ``limit`` values of ``x`` as ``n_blocks`` evenly spread contiguous blocks.

    Robust statistics of a long trace (noise, resolution, period) need not see every reading;
    contiguous blocks keep neighbouring differences meaningful.
    """
    if x.size <= limit:
        return x
    size = limit // n_blocks
    starts = np.linspace(0, x.size - size, n_blocks).astype(np.int64)
    return np.concatenate([x[s : s + size] for s in starts])


#: Fewer changes of value than this in a trace at least ten times as long: few enough to ask whether the repeats are
#: a sensor repeating its last update (dropped) or a meter's exact constant power (kept only when the user says so).
MIN_UPDATES = 10
#: ``Readings.meta`` key: keep every reading (a trace from an exact meter or a simulator: its repeats are power).
KEEP_REPEATS = "keep_repeats"
#: ``Readings.meta`` key of the note a trace with few changes carries.
REPEATS_NOTE = "repeats_note"


def keep_repeats(r: Readings) -> Readings:
    """``r`` marked so that :func:`drop_repeats` keeps every reading (``--keep-repeats``)."""
    return Readings(r.source, r.quantity, r.t_s, r.value, {**r.meta, KEEP_REPEATS: True})


def drop_repeats(r: Readings, max_gap_s: float = REPEAT_GAP_S) -> Readings:
    """Drop each reading equal to its predecessor and no more than ``max_gap_s`` after it.

    The first reading of each run of repeats is kept: it is the one nearest the update. A trace marked
    ``meta[KEEP_REPEATS]`` (``archline analyze --keep-repeats``: an exact meter or a simulator, whose equal readings
    are constant power) is kept whole. A trace whose value changes fewer than :data:`MIN_UPDATES` times in ten
    times as many readings gets a note (``meta[REPEATS_NOTE]``): either a sensor polled far faster than it updates
    over a quiet stretch, or such an exact trace; the data cannot tell which.
    """
    if len(r) < 2 or r.meta.get(KEEP_REPEATS):
        return r
    same = (np.diff(r.value) == 0) & (np.diff(r.t_s) <= max_gap_s)
    keep = np.concatenate([[True], ~same])
    if keep.all():
        return r
    kept = int(keep.sum())
    meta = dict(r.meta)
    if kept < MIN_UPDATES and len(r) >= 10 * MIN_UPDATES:
        meta[REPEATS_NOTE] = (
            f"{r.source}: only {kept} of {len(r)} readings change value; they are taken as a sensor's updates and "
            "the repeats dropped (from an exact meter or a simulator, whose equal readings are constant power: "
            "archline analyze or sensor fit --keep-repeats, or keep_repeats=True)"
        )
    return Readings(r.source, r.quantity, r.t_s[keep], r.value[keep], meta)


def repeat_fraction(value: F64) -> float:
    """Fraction of consecutive readings that repeat the previous value exactly."""
    if value.size < 2:
        return 0.0
    return float(np.mean(np.diff(value) == 0))


def update_period(t_s: F64) -> tuple[float, float]:
    """The real update period (median interval, s) and its jitter (robust std of intervals, s)."""
    if t_s.size < 2:
        return float("nan"), float("nan")
    d = blocks(np.diff(t_s))
    med = float(np.median(d))
    q75, q25 = np.percentile(d, [75, 25])
    jitter = float((q75 - q25) / 1.349)
    if jitter == 0.0:
        jitter = float(np.std(d))
    return med, jitter


@dataclass(frozen=True)
class Displacement:
    """Readings stamped off a regular grid and the shift (s) that puts each back on it.

    NVML's 20 ms buffer on the H200 stamps about one sample in five 10 ms late: the intervals
    around such a sample read 30 ms then 10 ms. Its value belongs to the empty slot before it.
    """

    period_s: float
    index: NDArray[np.int64]
    shift_s: F64

    @property
    def count(self) -> int:
        return int(self.index.size)

    def fraction(self, n: int) -> float:
        return self.count / n if n else 0.0

    @property
    def typical_shift_s(self) -> float:
        return float(np.median(np.abs(self.shift_s))) if self.count else 0.0


def find_displaced(t_s: F64, tol_s: float = 0.0015, min_shift_s: float | None = None) -> Displacement:
    """Find readings whose two intervals sum to two periods but are each off by more than
    ``min_shift_s`` (default ``2 * tol_s``): a regular sample with a displaced timestamp.

    Works locally, interval by interval, so a sensor clock that drifts or slips against the
    host clock over a long trace does not matter.
    """
    empty = Displacement(float("nan"), np.empty(0, np.int64), np.empty(0, np.float64))
    if t_s.size < 3:
        return empty
    d = np.diff(t_s)
    period = float(np.median(d))
    if not np.isfinite(period) or period <= 0:
        return empty
    lim = 2 * tol_s if min_shift_s is None else min_shift_s
    before, after = d[:-1], d[1:]
    hit = (np.abs(before + after - 2 * period) <= tol_s) & (np.abs(before - period) > lim)
    idx = np.nonzero(hit)[0] + 1
    # A reading flagged twice in a row would be ambiguous; keep neither.
    if idx.size > 1:
        dup = np.diff(idx) == 1
        drop = np.zeros(idx.size, bool)
        drop[1:] |= dup
        drop[:-1] |= dup
        idx = idx[~drop]
    return Displacement(period, idx.astype(np.int64), period - d[idx - 1])


def undisplace(t_s: F64, disp: Displacement) -> F64:
    """Timestamps with each displaced reading moved back onto its grid slot."""
    if disp.count == 0:
        return t_s
    out = np.array(t_s, dtype=np.float64)
    out[disp.index] += disp.shift_s
    return np.asarray(out, np.float64)


def estimate_noise_w(value: F64) -> float:
    """Reading noise (1 σ, W), robust to steps and slow drifts.

    The smaller of two robust estimates: the MAD of second differences (immune to slopes) and
    the lower quartile of absolute first differences (immune to a signal that jumps every few
    readings, as long as fewer than half of the intervals hold a jump).
    """
    if value.size < 4:
        return 0.0
    value = blocks(value)
    d2 = value[2:] - 2 * value[1:-1] + value[:-2]
    mad = float(np.median(np.abs(d2 - np.median(d2))))
    from_d2 = 1.4826 * mad / np.sqrt(6.0)
    # |N(0, 2σ²)| has its lower quartile at 0.3186·√2·σ.
    from_d1 = float(np.percentile(np.abs(np.diff(value)), 25)) / (0.3186 * np.sqrt(2.0))
    return float(min(from_d2, from_d1))


def estimate_quantum_w(value: F64) -> float:
    """The reading resolution (W): the most common smallest step between distinct values."""
    u = np.unique(blocks(value))
    if u.size < 2:
        return 0.0
    d = np.diff(u)
    d = d[d > 0]
    return float(np.percentile(d, 10)) if d.size else 0.0

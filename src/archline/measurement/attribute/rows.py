"""The rows of an attribution: notes on rows the data cannot pin down, exact rows, kept time intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from archline.measurement.attribute.buffer_fit import LIMIT_SLACK
from archline.measurement.attribute.design import GAP_NAMES
from archline.measurement.attribute.fit import PowerFit
from archline.records.attribution import KernelRow, RowKind, RowMethod

__all__ = ["exact_row", "inside", "limit_note", "merge_intervals", "overlap_s", "row_note"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def row_note(k: int, names: list[str], fit: PowerFit, active: I64, prior: str = "default") -> str:
    corr = fit.correlation()
    pos = int(np.nonzero(active == k)[0][0])
    c = corr[pos].copy()
    c[pos] = 0.0
    if c.size > 1:
        j = int(np.argmax(np.abs(c)))
        if abs(c[j]) >= 0.7:
            other = names[int(active[j])]
            return f"not identifiable: confounded with {other} (r = {c[j]:+.2f}); leans on its {prior} prior"
    what = "its default prior (the pooled power)" if prior == "default" else f"its {prior} prior"
    return f"not identifiable: too little variation in its share of the windows; power is mostly {what}"


def exact_row(kind: RowKind, energy_j: float, total_j: float, method: RowMethod, time_s: float = 0.0) -> KernelRow:
    """A row whose energy is known exactly (the residual, untraced time): no interval, no power."""
    return KernelRow(
        name=GAP_NAMES[kind],
        kind=kind,
        calls=0,
        time_s=time_s,
        energy_j=energy_j,
        energy_lo_j=energy_j,
        energy_hi_j=energy_j,
        share=energy_j / total_j if total_j else math.nan,
        mean_power_w=math.nan,
        power_lo_w=math.nan,
        power_hi_w=math.nan,
        method=method,
    )


def merge_intervals(lo: F64, hi: F64, keep: NDArray[np.bool_]) -> list[tuple[float, float]]:
    """Contiguous runs of kept windows as (start, end) intervals."""
    out: list[tuple[float, float]] = []
    for a, b, k in zip(lo.tolist(), hi.tolist(), keep.tolist(), strict=True):
        if not k:
            continue
        if out and abs(out[-1][1] - a) < 1e-12:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def inside(mid: F64, intervals: Sequence[tuple[float, float]]) -> NDArray[np.bool_]:
    m = np.zeros(mid.shape, dtype=bool)
    for a, b in intervals:
        m |= (mid >= a) & (mid < b)
    return m


def overlap_s(s: float, e: float, intervals: Sequence[tuple[float, float]]) -> float:
    return float(sum(max(0.0, min(e, b) - max(s, a)) for a, b in intervals))


def limit_note(limit_w: float | None, at_bound: bool, power_w: float) -> str:
    """Why a row cannot be trusted against the board's power limit ('' when it can)."""
    if not limit_w:
        return ""
    if at_bound:
        return (
            f"constrained: its power would exceed the board's {limit_w:.0f} W limit × {LIMIT_SLACK:g}; "
            "held at the limit (confounded with other rows, or a sensor/clock problem)"
        )
    if power_w > LIMIT_SLACK * limit_w:
        return f"impossible: {power_w:.0f} W above the board's {limit_w:.0f} W limit × {LIMIT_SLACK:g}"
    return ""

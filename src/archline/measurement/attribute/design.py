"""The busy-time design of an attribution: columns per kernel name and gap class, windows, long calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.activity import ActivityRecord
from archline.measurement.attribute.fit import ols_rss
from archline.measurement.attribute.windows import (
    BufferIntegral,
    Coverage,
    EnergyWindows,
    gap_intervals,
    window_overlap,
)
from archline.records.attribution import RowKind

__all__ = ["GAP_NAMES", "Design", "design_matrix", "long_energy", "prepare", "search_delay"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Names of the unattributed rows.
GAP_NAMES = {
    "idle": "(idle before/after the program)",
    "gap": "(GPU idle inside the program)",
    "launch": "(launch gaps)",
    "residual": "(unexplained residual)",
    "untraced": "(untraced time, duty-cycled tracing)",
}


@dataclass
class Design:
    """Everything the fit needs that does not depend on the counter delay."""

    t_ref: float
    col_names: list[str]
    col_kinds: list[RowKind]
    col_parent: I64
    act_s: F64
    act_e: F64
    act_col: I64
    long_idx: I64
    long_share: F64
    gap_s: F64
    gap_e: F64
    gap_col: I64
    effective: Callable[[F64], F64] | None
    overlapping: bool


def prepare(
    activities: Sequence[ActivityRecord],
    t_ref: float,
    lo: float,
    hi: float,
    program_span: tuple[float, float] | None,
    long_min_s: float,
    idle_gap_s: float,
) -> Design:
    acts = [a for a in activities if a.end_s > a.start_s]
    keys: dict[tuple[str, str], int] = {}
    col_names: list[str] = []
    col_kinds: list[RowKind] = []
    cols = np.empty(len(acts), np.int64)
    for i, a in enumerate(acts):
        key = (a.kind, a.name)
        k = keys.get(key)
        if k is None:
            k = keys[key] = len(col_names)
            col_names.append(a.name)
            col_kinds.append(a.kind)
        cols[i] = k
    s = np.array([a.start_s for a in acts], np.float64) - t_ref
    e = np.array([a.end_s for a in acts], np.float64) - t_ref
    kinds = np.array([a.kind for a in acts], dtype=object)
    cov = Coverage(s, e)
    eff = cov.transform()
    dur = e - s
    eff_dur = (eff(e) - eff(s)) if eff is not None else dur
    is_long = (dur >= long_min_s) & (kinds != "program") if acts else np.zeros(0, bool)
    long_idx = np.nonzero(is_long)[0].astype(np.int64)
    long_share = np.where(dur[long_idx] > 0, eff_dur[long_idx] / np.maximum(dur[long_idx], 1e-300), 1.0)

    gs, ge = gap_intervals(cov, lo, hi)
    glen = ge - gs
    n_act = len(col_names)
    idle_col, gap_col, launch_col = n_act, n_act + 1, n_act + 2
    inner = np.where(glen >= idle_gap_s, gap_col, launch_col).astype(np.int64)
    if program_span is not None:
        p0, p1 = program_span[0] - t_ref, program_span[1] - t_ref
        # Split every gap at the program's ends: the parts outside are idle before/after it.
        parts_s = [gs, np.maximum(gs, p0), np.maximum(gs, p1)]
        parts_e = [np.minimum(ge, p0), np.minimum(ge, p1), ge]
        parts_c = [np.full(gs.size, idle_col), inner, np.full(gs.size, idle_col)]
        gs = np.concatenate(parts_s)
        ge = np.concatenate(parts_e)
        gc = np.concatenate(parts_c)
        keep = ge > gs
        gs, ge, gc = gs[keep], ge[keep], gc[keep]
    else:
        gc = inner
    col_names += [GAP_NAMES["idle"], GAP_NAMES["gap"], GAP_NAMES["launch"]]
    col_kinds += ["idle", "gap", "gap"]
    parent = np.array([0] * n_act + [2, 1, 3], np.int64)
    short = np.ones(len(acts), bool)
    short[long_idx] = False
    return Design(
        t_ref=t_ref,
        col_names=col_names,
        col_kinds=col_kinds,
        col_parent=parent,
        act_s=s,
        act_e=e,
        act_col=cols,
        long_idx=long_idx,
        long_share=long_share.astype(np.float64),
        gap_s=gs,
        gap_e=ge,
        gap_col=gc.astype(np.int64),
        effective=eff,
        overlapping=cov.overlapping,
    )


def design_matrix(d: Design, edges: F64) -> F64:
    n_cols = len(d.col_names)
    short = np.ones(d.act_s.size, bool)
    short[d.long_idx] = False
    x = window_overlap(edges, d.act_s[short], d.act_e[short], d.act_col[short], n_cols, effective=d.effective)
    x += window_overlap(edges, d.gap_s, d.gap_e, d.gap_col, n_cols)
    return x


def long_energy(d: Design, edges: F64, integral: BufferIntegral | None, scale: float) -> F64:
    """Energy of each long call inside each window (long calls × windows), J."""
    n_w = edges.size - 1
    out = np.zeros((d.long_idx.size, max(n_w, 0)), np.float64)
    if integral is None or n_w <= 0:
        return out
    for j, i in enumerate(d.long_idx):
        clipped = np.clip(edges, d.act_s[i], d.act_e[i])
        out[j] = np.diff(integral.cumulative(clipped)) * scale * d.long_share[j]
    return out


def search_delay(
    d: Design, w: EnergyWindows, edges0: F64, integral: BufferIntegral | None, delay_range_s: tuple[float, float]
) -> tuple[float, bool]:
    """The counter delay that fits best over a grid, and whether the data really prefer it."""
    lo, hi = delay_range_s

    def rss(delta: float) -> float:
        edges = edges0 - delta
        x = design_matrix(d, edges)
        y = w.energy_j - long_energy(d, edges, integral, 1.0).sum(axis=0)
        used = x.any(axis=0)
        return ols_rss(x[:, used], y)[0]

    coarse = np.arange(lo, hi + 1e-9, 0.005)
    r_coarse = np.array([rss(float(x)) for x in coarse])
    best = float(coarse[int(np.argmin(r_coarse))])
    fine = np.arange(best - 0.004, best + 0.0041, 0.001)
    r_fine = np.array([rss(float(x)) for x in fine])
    i = int(np.argmin(r_fine))
    best = float(fine[i])
    if 0 < i < fine.size - 1:
        # Parabola through the three best points for a sub-millisecond estimate.
        y0, y1, y2 = r_fine[i - 1], r_fine[i], r_fine[i + 1]
        den = y0 - 2 * y1 + y2
        if den > 0:
            best += 0.001 * 0.5 * (y0 - y2) / den
    # The data pin the delay down only if a wrong delay fits clearly worse.
    identified = bool(np.median(r_coarse) > 1.2 * float(r_fine.min()))
    return best, identified

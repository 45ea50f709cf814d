"""The rows of an attribution: each column's energy, interval and identifiability, integrated calls, exact rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from archline.measurement.attribute.buffer_fit import LIMIT_SLACK
from archline.measurement.attribute.column_fit import ColumnFit
from archline.measurement.attribute.design import GAP_NAMES, Design
from archline.measurement.attribute.fit import PowerFit
from archline.measurement.attribute.prior import dominance
from archline.records.attribution import KernelRow, LongCall, RowKind, RowMethod

__all__ = [
    "LongCalls",
    "calls_in_span",
    "column_rows",
    "exact_row",
    "inside",
    "limit_note",
    "long_calls",
    "merge_intervals",
    "ordered_rows",
    "overlap_s",
    "row_note",
]

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


def limit_note(limit_w: float | None, at_bound: bool, power_w: float, bound_w: float | None = None) -> str:
    """Why a row cannot be trusted against its bound on power ('' when it can): ``bound_w`` (ceiling.py), by
    default the board's limit × LIMIT_SLACK."""
    if not limit_w:
        return ""
    bound = bound_w if bound_w is not None and math.isfinite(bound_w) else LIMIT_SLACK * limit_w
    what = (
        f"the board's {limit_w:.0f} W limit × {LIMIT_SLACK:g}"
        if bound <= LIMIT_SLACK * limit_w * (1 + 1e-9)
        else f"its {bound:.0f} W bound (the burst ceiling, or the {limit_w:.0f} W limit over its share of a window)"
    )
    if at_bound:
        return (
            f"constrained: its power would exceed {what}; held there "
            "(confounded with other rows, or a sensor/clock problem)"
        )
    if power_w > bound:
        return f"impossible: {power_w:.0f} W above {what}"
    return ""


@dataclass(frozen=True)
class LongCalls:
    """The integrated calls per column: their time in the kept windows (s), energy (J) and its variance (J²)."""

    time_s: F64
    energy_j: F64
    var_j2: F64
    calls: list[LongCall]


def long_calls(
    d: Design,
    long_e: F64,
    keep: NDArray[np.bool_],
    kept: Sequence[tuple[float, float]],
    *,
    period_s: float,
    rel_sd: float,
    n_windows: int,
    wait_w: float,
    duty_cycled: bool,
) -> LongCalls:
    """The integrated calls' energies in the kept windows (``long_e``: per call and window), with each column's
    variance from the buffer's spread vs the counter (``rel_sd``) and the power step at the calls' ends."""
    n_cols = len(d.col_names)
    long_time = np.zeros(n_cols)
    long_j = np.zeros(n_cols)
    long_var = np.zeros(n_cols)
    calls: list[LongCall] = []
    rs = rel_sd if math.isfinite(rel_sd) else 0.03
    n_cov = max(n_windows, 1)
    for j, i in enumerate(d.long_idx):
        c = int(d.act_col[i])
        e_j = float(long_e[j][keep].sum())
        t_in = overlap_s(float(d.act_s[i]), float(d.act_e[i]), kept) * float(d.long_share[j])
        long_time[c] += t_in
        long_j[c] += e_j
        dur_i = float(d.act_e[i] - d.act_s[i])
        rel = math.hypot(rs * math.sqrt(period_s / max(dur_i, period_s)), rs / math.sqrt(n_cov))
        # The sample straddling each end of the call may cover only part of its period: allow
        # a quarter period of the step in power at either end.
        step_w = abs(e_j / max(t_in, 1e-12) - wait_w) if t_in > 0 else 0.0
        long_var[c] += (rel * e_j) ** 2 + 2.0 * (0.25 * period_s * step_w) ** 2
        if t_in > 0 or not duty_cycled:
            calls.append(LongCall(d.col_names[c], float(d.act_s[i] + d.t_ref), float(d.act_e[i] + d.t_ref), e_j))
    return LongCalls(long_time, long_j, long_var, calls)


def calls_in_span(
    d: Design, edges: F64, kept: Sequence[tuple[float, float]], duty_cycled: bool, notes: list[str]
) -> tuple[I64, float]:
    """Calls per column inside the span (the kept windows with tracing), and the time of work outside it (s)."""
    n_cols = len(d.col_names)
    span_lo, span_hi = float(edges[0]), float(edges[-1])
    if not duty_cycled:
        in_span = (d.act_e > span_lo) & (d.act_s < span_hi)
        g_in = (d.gap_e > span_lo) & (d.gap_s < span_hi)
    else:
        in_span = inside(0.5 * (d.act_s + d.act_e), kept)
        g_in = inside(0.5 * (d.gap_s + d.gap_e), kept)
    calls = np.bincount(d.act_col[in_span], minlength=n_cols)
    calls += np.bincount(d.gap_col[g_in], minlength=n_cols)
    outside = np.clip(np.minimum(d.act_e, span_lo) - d.act_s, 0, None) + np.clip(
        d.act_e - np.maximum(d.act_s, span_hi), 0, None
    )
    clipped_s = float(np.sum(np.minimum(outside, d.act_e - d.act_s)))
    if clipped_s > 0:
        notes.append(
            f"{clipped_s * 1e3:.3g} ms of GPU work ran outside the energy counter's coverage and is not in the table"
        )
    return calls.astype(np.int64), clipped_s


def column_rows(
    d: Design,
    col_time: F64,
    long: LongCalls,
    calls: I64,
    cols: ColumnFit,
    total_j: float,
    *,
    confidence: float,
    min_data_weight: float,
    calibrated_max_rel_half: float,
    power_limit_w: float | None,
) -> list[KernelRow]:
    """A row per column with calls or time (``col_time``: its short calls' busy time in the fitted windows): its
    energy, interval, identifiability and note."""
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    rows: list[KernelRow] = []
    for k in range(len(d.col_names)):
        t_short = float(col_time[k])
        t_all = t_short + long.time_s[k]
        if t_all <= 0 and calls[k] == 0:
            continue
        p = cols.power_w[k] if t_short > 0 else 0.0
        e_short = p * t_short
        e = e_short + long.energy_j[k]
        half_short_lo = (p - cols.lo_w[k]) * t_short if t_short > 0 else 0.0
        half_short_hi = (cols.hi_w[k] - p) * t_short if t_short > 0 else 0.0
        half_long = z * math.sqrt(long.var_j2[k])
        e_lo = max(e - math.hypot(half_short_lo, half_long), 0.0)
        e_hi = e + math.hypot(half_short_hi, half_long)
        method: RowMethod = "regression" if long.time_s[k] == 0 else ("integrated" if t_short == 0 else "mixed")
        weight = float(cols.data_weight[k]) if t_short > 0 else 1.0
        identifiable = bool(t_short == 0 or cols.data_weight[k] >= min_data_weight)
        src = cols.prior_source.get(k, "default")
        note = "" if identifiable else row_note(k, d.col_names, cols.fit, cols.active, src)
        calibrated = cols.prior_source.get(k) in cols.calibrated and k not in cols.impossible_priors
        if not identifiable and calibrated and e > 0:
            # A prior calibrated on these windows is evidence too: narrow enough, the row is identified.
            half = max(e - e_lo, e_hi - e) / e
            if half <= calibrated_max_rel_half:
                identifiable = True
                note = f"identified by its {src} prior, calibrated on this run's windows (±{100 * half:.0f} %)"
        parts = (cols.prior_parts or {}).get(k)
        if parts is not None and t_short > 0 and dominance(weight) != "data":
            clause = parts.note(src)
            note = f"{note}; {clause}" if note else clause
        elif k in cols.impossible_priors and t_short > 0:
            clause = (
                f"its {src} prior was above this kernel's bound here: capped at the bound, its σ widened by "
                "ln(prior / bound) (the run's notes)"
            )
            note = f"{note}; {clause}" if note else clause
        bound_k = float(cols.bound_w[k]) if cols.bound_w is not None else None
        over = limit_note(power_limit_w, bool(cols.at_limit[k]), e / t_all if t_all > 0 else math.nan, bound_k)
        if over:
            identifiable, note = False, over
        elif power_limit_w and bound_k is not None and t_all > 0 and e / t_all > LIMIT_SLACK * power_limit_w:
            # below its bound (the burst ceiling), above the limit: possible in bursts, and said
            burst = (
                f"above the {power_limit_w:.0f} W limit × {LIMIT_SLACK:g} at {e / t_all:.0f} W, within its "
                f"{bound_k:.0f} W bound (the burst ceiling: a kernel can draw more than the limit in bursts)"
            )
            note = f"{note}; {burst}" if note else burst
        rows.append(
            KernelRow(
                name=d.col_names[k],
                kind=d.col_kinds[k],
                calls=int(calls[k]),
                time_s=t_all,
                energy_j=e,
                energy_lo_j=e_lo,
                energy_hi_j=e_hi,
                share=e / total_j if total_j else math.nan,
                mean_power_w=e / t_all if t_all > 0 else math.nan,
                power_lo_w=e_lo / t_all if t_all > 0 else math.nan,
                power_hi_w=e_hi / t_all if t_all > 0 else math.nan,
                method=method,
                identifiable=identifiable,
                data_weight=weight,
                note=note,
                dominated_by=dominance(weight),
            )
        )
    return rows


def ordered_rows(
    rows: list[KernelRow],
    energy_j: F64,
    edges: F64,
    keep: NDArray[np.bool_],
    total_j: float,
    duty_cycled: bool,
    notes: list[str],
) -> tuple[KernelRow, ...]:
    """The columns' ``rows`` with the untraced time and the residual of the windows' ``energy_j``, the activities'
    largest energy first."""
    residual = float(energy_j[keep].sum()) - sum(r.energy_j for r in rows)
    rows = list(rows)
    if duty_cycled:
        lo_e, hi_e = edges[:-1], edges[1:]
        untraced_s = float(np.sum((hi_e - lo_e)[~keep]))
        rows.append(exact_row("untraced", float(energy_j[~keep].sum()), total_j, "counter", untraced_s))
    rows.append(exact_row("residual", residual, total_j, "residual"))
    act_kinds = ("kernel", "memcpy", "memset", "program")
    act_rows = sorted((r for r in rows if r.kind in act_kinds), key=lambda r: -r.energy_j)
    other = [r for r in rows if r.kind not in act_kinds]
    n_unident = sum(1 for r in act_rows if not r.identifiable)
    if n_unident:
        notes.append(f"{n_unident} row(s) not identifiable from this run; their energies lean on their priors")
    return tuple(act_rows + other)

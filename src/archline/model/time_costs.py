"""τ_flop and τ_mem measured from the compute-bound and memory-bound ends of the intensity sweep."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archline.errors import InputError
from archline.model.sweep import PRECISIONS, Peaks, SweepRow
from archline.model.uncertainty import DEFAULT_CONFIDENCE, Estimate, t_quantile

__all__ = ["END_FACTOR", "TimeCosts", "measure_time_costs"]

#: A row is taken as memory-bound when I ≤ B_τ/END_FACTOR and compute-bound when
#: I ≥ B_τ·END_FACTOR, where the smaller of the two times is then ≤ 1/8 of the larger.
END_FACTOR = 8.0
_MIN_END_ROWS = 2


@dataclass(frozen=True)
class TimeCosts:
    """Measured time per flop (per precision) and per DRAM byte, with the rows they came from.

    ``peak_fraction``/``bandwidth_fraction`` compare 1/τ with the peaks measured in the same run.
    """

    tau_flop_s: dict[str, Estimate]
    tau_mem_s_per_b: Estimate
    memory_bound_rows: int
    compute_bound_rows: dict[str, int]
    peak_fraction: dict[str, float]
    bandwidth_fraction: float
    notes: tuple[str, ...] = ()


def _median_estimate(values: Sequence[float], confidence: float) -> Estimate:
    v = np.asarray(values, dtype=float)
    n = v.size
    med = float(np.median(v))
    # Standard error of a median of normal data (π/2 efficiency); honest enough for 2–10 rows.
    se = math.sqrt(math.pi / 2.0) * float(np.std(v, ddof=1)) / math.sqrt(n) if n > 1 else math.nan
    return Estimate.from_stderr(med, se, t_quantile(confidence, n - 1))


def _ends(
    rows: Sequence[SweepRow], b_tau_guess: float, notes: list[str], label: str
) -> tuple[list[SweepRow], list[SweepRow]]:
    by_i = sorted(rows, key=lambda r: r.measured_intensity)
    mem = [r for r in by_i if r.measured_intensity <= b_tau_guess / END_FACTOR]
    cmp_ = [r for r in by_i if r.measured_intensity >= b_tau_guess * END_FACTOR]
    if len(mem) < _MIN_END_ROWS:
        mem = by_i[:_MIN_END_ROWS]
        notes.append(
            f"{label}: fewer than {_MIN_END_ROWS} rows at I ≤ B_τ/{END_FACTOR:g}; "
            f"τ_mem taken from the {len(mem)} lowest-intensity rows"
        )
    if len(cmp_) < _MIN_END_ROWS:
        cmp_ = by_i[-_MIN_END_ROWS:]
        notes.append(
            f"{label}: fewer than {_MIN_END_ROWS} rows at I ≥ {END_FACTOR:g}·B_τ; "
            f"τ_flop taken from the {len(cmp_)} highest-intensity rows"
        )
    return mem, cmp_


def measure_time_costs(
    rows: Sequence[SweepRow], peaks: Peaks | None = None, confidence: float = DEFAULT_CONFIDENCE
) -> TimeCosts:
    """Measure τ_flop per precision and τ_mem (pooled over precisions) as medians of T/W and T/Q.

    Rows are classified by the time balance from ``peaks`` (or, without peaks, from the sweep's
    extreme rows), then reclassified once with the measured balance. At least two rows per
    end are used; fewer triggers a fallback to the extreme rows, recorded in ``notes``.
    """
    by_p: dict[str, list[SweepRow]] = {}
    for prec in PRECISIONS:
        if picked := [r for r in rows if r.precision == prec]:
            by_p[prec] = picked
    if not by_p:
        raise InputError("sweep: no rows to measure τ_flop and τ_mem from")
    for p, rs in by_p.items():
        if len(rs) < 2 * _MIN_END_ROWS:
            raise InputError(f"sweep: only {len(rs)} {p}-precision rows; need at least {2 * _MIN_END_ROWS}")

    def guess(p: str, rs: Sequence[SweepRow]) -> float:
        if peaks is not None and math.isfinite(peaks.peak_for(p)):
            return peaks.peak_for(p) / peaks.copy_bytes_per_s
        lo = min(rs, key=lambda r: r.measured_intensity)
        hi = max(rs, key=lambda r: r.measured_intensity)
        return (lo.time_s / lo.bytes) / (hi.time_s / hi.flops)

    b_tau = {p: guess(p, rs) for p, rs in by_p.items()}
    for _round in range(2):
        notes: list[str] = []
        mem_rows: list[SweepRow] = []
        tau_flop: dict[str, Estimate] = {}
        n_cmp: dict[str, int] = {}
        for p, rs in by_p.items():
            mem, cmp_ = _ends(rs, b_tau[p], notes, p)
            mem_rows.extend(mem)
            tau_flop[p] = _median_estimate([r.time_s / r.flops for r in cmp_], confidence)
            n_cmp[p] = len(cmp_)
        tau_mem = _median_estimate([r.time_s / r.bytes for r in mem_rows], confidence)
        b_tau = {p: tau_mem.value / tau_flop[p].value for p in by_p}

    peak_fraction = {p: (1.0 / tau_flop[p].value) / peaks.peak_for(p) if peaks is not None else math.nan for p in by_p}
    bw_fraction = (1.0 / tau_mem.value) / peaks.copy_bytes_per_s if peaks is not None else math.nan
    return TimeCosts(
        tau_flop_s=tau_flop,
        tau_mem_s_per_b=tau_mem,
        memory_bound_rows=len(mem_rows),
        compute_bound_rows=n_cmp,
        peak_fraction=peak_fraction,
        bandwidth_fraction=bw_fraction,
        notes=tuple(notes),
    )

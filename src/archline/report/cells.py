"""Cells of the characterization tables: one results row's metric, formatted, or '—' with why it is missing."""

from __future__ import annotations

from dataclasses import dataclass

from archline.records.csvload import CsvRow
from archline.report.doc import Cell, Missing
from archline.report.fmt import fmt_pct, fmt_pm, fmt_value

__all__ = [
    "UNRESOLVABLE",
    "Ctx",
    "derived",
    "energy_cell",
    "flags_text",
    "per_unit",
    "row_problem",
    "value_cell",
]

UNRESOLVABLE = "below what the power sensor can resolve (resolvable = false): not printed, it would be noise"


@dataclass(frozen=True)
class Ctx:
    """Run-wide facts a cell may need: SM count (per-SM figures), compute capability, missing benchmarks."""

    sm_count: int | None = None
    compute_capability: str | None = None
    absent: str = "not measured in this run"
    #: planned benchmarks with no row (the run was interrupted before them)
    missing: tuple[str, ...] = ()
    status: str = "complete"


def row_problem(row: CsvRow) -> str | None:
    """Why a row has no usable figures (failed or skipped, with its note), or None if it is ok."""
    status = row.text("status") or "ok"
    if status == "ok":
        return None
    note = row.text("note")
    return f"{row.text('name')} {status}" + (f": {note}" if note else "")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b != 0 else None


def derived(row: CsvRow, col: str, ctx: Ctx) -> float | None:
    """The recorded value of ``col``, or where it is empty, the value computed from the row's other columns."""
    v = row.num(col)
    if v is not None:
        return v
    ops, energy, dyn = row.num("ops"), row.num("energy_j"), row.num("dynamic_energy_j")
    if col == "frac_of_spec":
        by_bytes = _ratio(row.num("bytes_per_clk_per_sm"), row.num("spec_bytes_per_clk_per_sm"))
        return (
            by_bytes
            if by_bytes is not None
            else _ratio(row.num("ops_per_clk_per_sm"), row.num("spec_ops_per_clk_per_sm"))
        )
    if col == "nj_per_op":
        r = _ratio(energy, ops)
        return None if r is None else r * 1e9
    if col == "dyn_nj_per_op":
        r = _ratio(dyn, ops)
        return None if r is None else r * 1e9
    if col == "dynamic_energy_j":
        p_idle, t = row.num("idle_power_w"), row.num("time_s")
        return None if energy is None or p_idle is None or t is None else energy - p_idle * t
    if col == "mips_per_w_per_sm":
        t, p = row.num("time_s"), row.num("avg_power_w")
        if ops is None or t is None or p is None or ctx.sm_count is None or t <= 0 or p <= 0:
            return None
        return ops / t / 1e6 / p / ctx.sm_count
    if col == "bytes_per_s":
        return _ratio(row.num("bytes"), row.num("time_s"))
    return None


def _missing_reason(row: CsvRow | None, col: str, ctx: Ctx, what: str) -> str:
    if row is None:
        return ctx.absent
    problem = row_problem(row)
    if problem:
        return problem
    if col == "spec_ops_per_clk_per_sm" or (col == "frac_of_spec" and row.num("spec_ops_per_clk_per_sm") is None):
        cc = ctx.compute_capability or "unknown"
        return f"no spec throughput for this class at compute capability {cc} (left empty, never guessed)"
    return f"{what} not recorded in results.csv"


def value_cell(
    row: CsvRow | None, col: str, ctx: Ctx, *, scale: float = 1.0, what: str = "", pct: bool = False
) -> Cell:
    """The (scaled) value of ``col`` on ``row``, or '—' with the reason."""
    reason = _missing_reason(row, col, ctx, what or col)
    if row is None or row_problem(row):
        return Missing(reason)
    v = derived(row, col, ctx)
    return fmt_pct(v, reason) if pct else fmt_value(v, reason, scale=scale)


def energy_cell(
    row: CsvRow | None,
    value: float | None,
    uncertainty: float | None,
    ctx: Ctx,
    *,
    scale: float = 1.0,
    what: str = "energy",
) -> Cell:
    """An energy-like figure ± its uncertainty; '—' if the row failed or the sensor could not resolve it."""
    if row is None:
        return Missing(ctx.absent)
    problem = row_problem(row)
    if problem:
        return Missing(problem)
    if row.flag("resolvable") is False:
        return Missing(UNRESOLVABLE)
    return fmt_pm(value, uncertainty, f"{what} not recorded in results.csv", scale=scale)


def per_unit(row: CsvRow, energy_col: str, per_col: str, ctx: Ctx) -> tuple[float | None, float | None]:
    """(energy / count, uncertainty / count) for an energy column and a count column (ops, bytes)."""
    n = row.num(per_col)
    e = derived(row, energy_col, ctx)
    u = row.num("dynamic_energy_uncertainty_j") if energy_col == "dynamic_energy_j" else None
    if u is None:
        u = row.num("energy_uncertainty_j")
    if n is None or n <= 0 or e is None:
        return None, None
    return e / n, (u / n if u is not None else None)


def flags_text(row: CsvRow | None) -> Cell:
    """Short flags for a row: failed, throttled, unverified, unresolvable; "none" when clean."""
    if row is None:
        return Missing("not measured in this run")
    flags = []
    status = row.text("status") or "ok"
    if status != "ok":
        flags.append(status)
    if row.flag("throttled"):
        flags.append("throttled")
    if row.flag("verified") is False:
        flags.append("unverified")
    if row.flag("resolvable") is False:
        flags.append("unresolvable")
    return ", ".join(flags) if flags else "none"

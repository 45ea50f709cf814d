"""Characterization report sections beyond the MIPP tables: status, sweeps, throughput chart, targets, flags."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archline.records.csvload import CsvRow, CsvTable
from archline.report.cells import Ctx, energy_cell, flags_text, value_cell
from archline.report.classes import ARITH_CLASSES, arith_class
from archline.report.doc import Block, Bullets, Cell, Figure, Heading, Missing, Para, Table
from archline.report.fmt import fmt_num, is_number
from archline.report.plots import SweepPoint, ThroughputBar, plot_sweep, plot_throughput_vs_spec
from archline.report.rundata import RunData
from archline.report.tables import arithmetic_rows

__all__ = ["flag_blocks", "status_text", "sweep_blocks", "targets_blocks", "throughput_blocks"]

#: Swept variable → (title, axis label). Others are shown under their own name.
SWEEPS: dict[str, tuple[str, str]] = {
    "coalescing": ("DRAM coalescing (MIPP Fig. 6)", "coalescing"),
    "access_bytes": ("DRAM access size per thread (MIPP Fig. 7)", "bytes per access"),
    "conflict_ways": ("Shared-memory bank conflicts (MIPP Fig. 8)", "extra conflict ways"),
    "block": ("Occupancy: threads per block", "threads per block"),
    "blocks_per_sm": ("Occupancy: blocks per SM", "blocks per SM"),
}


def status_text(data: RunData) -> str:
    """complete / interrupted / failed, and which planned benchmarks are missing or did not succeed."""
    m = data.manifest
    n = len(data.rows)
    bad = [r for r in data.rows if (r.text("status") or "ok") != "ok"]
    parts = [f"{m.status}: {n} result rows"]
    if bad:
        parts.append(f"{len(bad)} not ok ({', '.join(r.text('name') for r in bad)})")
    if data.missing:
        parts.append(f"missing: {', '.join(data.missing)}")
    elif m.status != "complete":
        parts.append(
            "the planned benchmark list (manifest extra.planned) was not recorded, so missing ones cannot be named"
        )
    return "; ".join(parts)


def _x_label(v: object) -> tuple[str, float | None]:
    if is_number(v):
        assert isinstance(v, (int, float))
        x = float(v)
        if 0 < x < 1 and abs(1 / x - round(1 / x)) < 1e-6:
            return f"1/{round(1 / x)}", x
        return fmt_num(x), x
    return str(v), None


def _sweep_series(points: Sequence[CsvRow]) -> dict[str, list[CsvRow]]:
    names: dict[str, list[CsvRow]] = {}
    for r in points:
        names.setdefault(r.text("name"), []).append(r)
    if all(len(v) == 1 for v in names.values()):
        unit = points[0].text("unit") or points[0].text("group")
        return {unit: list(points)}
    return names


def sweep_blocks(data: RunData, ctx: Ctx, plots_dir: Path, rel: str) -> tuple[list[Block], list[Path]]:
    """For each swept variable (and unit): a plot of time, power and energy, and the table of its points."""
    groups: dict[tuple[str, str], list[CsvRow]] = {}
    for r in data.rows:
        if r.text("sweep_var"):
            groups.setdefault((r.text("sweep_var"), r.text("unit")), []).append(r)
    blocks: list[Block] = []
    files: list[Path] = []
    if not groups:
        return [Para("No sweep points in this run.")], files
    for (var, unit), pts in sorted(groups.items()):
        title, xlabel = SWEEPS.get(var, (f"Sweep of {var}", var))
        title = f"{title} — {unit}" if unit else title
        series = {
            name: [
                SweepPoint(
                    *_x_label(r.raw("sweep_value")),
                    *(
                        (None, None, None, None, None)
                        if (r.text("status") or "ok") != "ok"
                        else (
                            r.num("time_s"),
                            r.num("avg_power_w"),
                            r.num("max_power_w"),
                            None if r.flag("resolvable") is False else r.num("energy_j"),
                            r.num("energy_uncertainty_j"),
                        )
                    ),
                )
                for r in rows
            ]
            for name, rows in _sweep_series(pts).items()
        }
        fname = f"sweep_{var}_{unit or 'all'}.png".replace("/", "_")
        files.append(plot_sweep(series, title=title, xlabel=xlabel, path=plots_dir / fname))
        body: list[tuple[Cell, ...]] = []
        for r in sorted(pts, key=lambda r: (r.text("name"), _x_label(r.raw("sweep_value"))[1] or 0.0)):
            tput = (
                value_cell(r, "bytes_per_s", ctx, scale=1e-9, what="bandwidth")
                if r.text("group") == "memory"
                else value_cell(r, "ops_per_clk_per_sm", ctx, what="throughput")
            )
            body.append(
                (
                    _x_label(r.raw("sweep_value"))[0],
                    f"`{r.text('name')}`",
                    value_cell(r, "time_s", ctx, scale=1e3, what="time"),
                    tput,
                    value_cell(r, "avg_power_w", ctx, what="average power"),
                    value_cell(r, "max_power_w", ctx, what="max power"),
                    energy_cell(r, r.num("energy_j"), r.num("energy_uncertainty_j"), ctx),
                    flags_text(r),
                )
            )
        tp = "GB/s" if any(r.text("group") == "memory" for r in pts) else "ops/clk/SM"
        header = (xlabel, "Benchmark", "Time (ms)", tp, "Avg W", "Max W", "Energy (J)", "Flags")
        blocks += [
            Heading(title, 3),
            Figure(f"{rel}/{fname}", f"{title}: time, average and max power, and energy per launch."),
            Table(header, tuple(body), caption=f"{title}: points"),
        ]
    return blocks, files


def throughput_blocks(data: RunData, plots_dir: Path, rel: str) -> tuple[list[Block], list[Path]]:
    """A bar chart of measured arithmetic throughput against spec (no spec drawn where none is recorded)."""
    by_class = arithmetic_rows(data.rows)
    order = {c.key: i for i, c in enumerate(ARITH_CLASSES)}

    def rank(r: CsvRow) -> tuple[int, str]:
        key = arith_class(r.text("name"), r.text("unit"), r.text("mipp_class")) or ""
        return order.get(key, len(order)), r.text("name")

    rows = sorted((r for rs in by_class.values() for r in rs), key=rank)
    if not rows:
        return [Para("No arithmetic benchmarks in this run.")], []
    bars = [
        ThroughputBar(
            r.text("name"),
            r.num("ops_per_clk_per_sm") if (r.text("status") or "ok") == "ok" else None,
            r.num("spec_ops_per_clk_per_sm"),
        )
        for r in rows
    ]
    path = plot_throughput_vs_spec(
        bars,
        title="Measured throughput against spec",
        unit="ops/clk/SM (thread-level)",
        path=plots_dir / "throughput_vs_spec.png",
    )
    blocks: list[Block] = [Figure(f"{rel}/{path.name}", "Measured throughput (bars) and spec (ticks), % of spec.")]
    if all(b.spec is None for b in bars):
        cc = data.compute_capability or "unknown"
        blocks.append(
            Para(f"No spec throughput is recorded for compute capability {cc}: the spec is left empty, never guessed.")
        )
    return blocks, [path]


def _target_value(v: object) -> Cell:
    if v is None:
        return Missing("not recorded in targets.csv")
    return fmt_num(float(v)) if isinstance(v, (int, float)) and is_number(v) else str(v)


def targets_blocks(targets: CsvTable | None) -> list[Block]:
    """The targets of the suite: pass/fail, by how much, why."""
    if targets is None:
        return [Para("This run has no targets.csv.")]
    body = []
    for r in targets.rows:
        passed = r.flag("passed")
        verdict: Cell = Missing("could not be evaluated") if passed is None else ("PASS" if passed else "FAIL")
        body.append(
            (
                r.text("target"),
                _target_value(r.raw("required")),
                _target_value(r.raw("measured")),
                r.text("unit"),
                verdict,
                r.text("detail"),
            )
        )
    n_pass = sum(1 for r in targets.rows if r.flag("passed") is True)
    n_fail = sum(1 for r in targets.rows if r.flag("passed") is False)
    n_na = len(targets.rows) - n_pass - n_fail
    summary = Para(f"{n_pass} of {len(targets.rows)} targets passed, {n_fail} failed, {n_na} could not be evaluated.")
    table = Table(("Target", "Required", "Measured", "Unit", "Result", "Detail"), tuple(body), caption="Targets")
    return [summary, table]


def flag_blocks(rows: Sequence[CsvRow]) -> list[Block]:
    """Rows to read with care: throttled, unverified, unresolvable energy, failed or skipped."""
    items: list[str] = []
    for r in sorted(rows, key=lambda r: r.text("name")):
        name = f"`{r.text('name')}`"
        status = r.text("status") or "ok"
        if status != "ok":
            items.append(f"{name}: {status}" + (f" — {r.text('note')}" if r.text("note") else ""))
        if r.flag("throttled"):
            reasons = r.text("throttle_reasons")
            items.append(f"{name}: throttled" + (f" ({reasons})" if reasons else ""))
        if r.flag("verified") is False:
            items.append(f"{name}: output not verified — its figures may not measure the intended work")
        if r.flag("resolvable") is False:
            items.append(f"{name}: energy below what the sensor can resolve — not printed")
    if not items:
        return [Para("No row was throttled, unverified, unresolvable, failed or skipped.")]
    return [Bullets(tuple(items))]

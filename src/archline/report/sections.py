"""Characterization report sections beyond the MIPP tables: status, sweeps, throughput chart, targets, flags."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from archline.records.csvload import CsvRow, CsvTable
from archline.report.cells import Ctx, energy_cell, flags_text, value_cell
from archline.report.classes import ARITH_CLASSES, arith_class
from archline.report.doc import Block, Bullets, Cell, Chart, Figure, Heading, Missing, Para, Table
from archline.report.fmt import fmt_num, is_number
from archline.report.interactive import panels_chart
from archline.report.plots import SweepPoint, ThroughputBar, plot_sweep, plot_throughput_vs_spec
from archline.report.rundata import RunData
from archline.report.tables import arithmetic_rows

__all__ = ["above_spec_blocks", "flag_blocks", "status_text", "sweep_blocks", "targets_blocks", "throughput_blocks"]

#: Swept variable → (title, axis label). Others are shown under their own name.
SWEEPS: dict[str, tuple[str, str]] = {
    "coalescing": ("DRAM coalescing (MIPP Fig. 6)", "coalescing"),
    "access_bytes": ("DRAM access size per thread (MIPP Fig. 7)", "bytes per access"),
    "conflict_ways": ("Shared-memory bank conflicts (MIPP Fig. 8)", "extra conflict ways"),
    "block": ("Occupancy: threads per block", "threads per block"),
    "blocks_per_sm": ("Occupancy: blocks per SM", "blocks per SM"),
    "toggle_pct": ("Operand toggle rate", "% of sign and mantissa bits toggling between operands"),
    "sparsity_pct": ("Operand sparsity", "% of elements zero"),
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


def _throughput(r: CsvRow, memory: bool) -> float | None:
    if (r.text("status") or "ok") != "ok":
        return None
    if memory:
        b, t = r.num("bytes"), r.num("time_s")
        bps = r.num("bytes_per_s") if r.num("bytes_per_s") is not None else (b / t if b and t else None)
        return None if bps is None else bps * 1e-9
    return r.num("ops_per_clk_per_sm")


def _sweep_point(r: CsvRow, memory: bool) -> SweepPoint:
    label, x = _x_label(r.raw("sweep_value"))
    if (r.text("status") or "ok") != "ok":
        return SweepPoint(label, x, None, None, None, None, None)
    energy = None if r.flag("resolvable") is False else r.num("energy_j")
    return SweepPoint(
        label,
        x,
        _throughput(r, memory),
        r.num("avg_power_w"),
        r.num("max_power_w"),
        energy,
        r.num("energy_uncertainty_j"),
    )


def _sweep_chart(series: dict[str, list[SweepPoint]], xlabel: str, tp: str, fname: str, title: str) -> Chart:
    pts = [
        {
            "series": name,
            "x": p.x,
            "x_label": p.x_label,
            "throughput": p.throughput,
            "avg_power_w": p.avg_power_w,
            "energy_j": p.energy_j,
        }
        for name, ps in series.items()
        for p in ps
        if p.x is not None
    ]
    xs = [float(p["x"]) for p in pts if isinstance(p["x"], float)]
    log_x = bool(xs) and min(xs) > 0 and max(xs) / min(xs) >= 16
    panels = (
        ("throughput", f"throughput ({tp})"),
        ("avg_power_w", "average power (W)"),
        ("energy_j", "energy per launch (J)"),
    )
    return Chart(
        panels_chart(pts, xlabel, panels, log_x=log_x),
        f"{title}: throughput, average power and energy per launch (hover a point for its values).",
        fallback=fname,
    )


def sweep_blocks(data: RunData, ctx: Ctx, plots_dir: Path, rel: str) -> tuple[list[Block], list[Path]]:
    """For each swept variable (and unit): a plot of throughput, power and energy, and the table of its points."""
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
        memory = any(r.text("group") == "memory" for r in pts)
        tp = "GB/s" if memory else "ops/clk/SM"
        series = {name: [_sweep_point(r, memory) for r in rows] for name, rows in _sweep_series(pts).items()}
        fname = f"sweep_{var}_{unit or 'all'}.png".replace("/", "_")
        files.append(
            plot_sweep(
                series, title=title, xlabel=xlabel, throughput_label=f"throughput ({tp})", path=plots_dir / fname
            )
        )
        body: list[tuple[Cell, ...]] = []
        # Numeric order of the swept value (32, 64, 128, ... not 1024, 128, ...), then the benchmark's name.
        for r in sorted(pts, key=lambda r: (_x_label(r.raw("sweep_value"))[1] or 0.0, r.text("name"))):
            tput = (
                value_cell(r, "bytes_per_s", ctx, scale=1e-9, what="bandwidth")
                if r.text("group") == "memory"
                else value_cell(r, "ops_per_clk_per_sm", ctx, what="throughput")
            )
            body.append(
                (
                    _x_label(r.raw("sweep_value"))[0],
                    f"`{r.text('name')}`",
                    tput,
                    value_cell(r, "time_s", ctx, scale=1e3, what="time"),
                    value_cell(r, "avg_power_w", ctx, what="average power"),
                    value_cell(r, "max_power_w", ctx, what="max power"),
                    energy_cell(r, r.num("energy_j"), r.num("energy_uncertainty_j"), ctx),
                    flags_text(r),
                )
            )
        header = (xlabel, "Benchmark", tp, "Time (ms)", "Avg W", "Max W", "Energy (J)", "Flags")
        blocks += [
            Heading(title, 3),
            _sweep_chart(series, xlabel, tp, f"{rel}/{fname}", title),
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


#: Why a class can run above its spec: the Programming Guide's table counts one pipe per instruction.
_ABOVE_SPEC: dict[str, str] = {
    "int32": (
        "ptxas compiles part of the 32-bit adds to IMAD.IADD, which issues on the FMA pipe, and the rest to IADD3 "
        "on the integer pipe (docs/kernels.md lists the SASS mix), so two pipes share work that the CUDA "
        "Programming Guide's throughput table counts on one; it is not a measuring error"
    ),
}


def above_spec_blocks(rows: Sequence[CsvRow]) -> list[Block]:
    """Explain every arithmetic row measured above 100 % of its spec throughput (e.g. INT32 add at 149 %)."""
    items = []
    for r in rows:
        frac = r.num("frac_of_spec")
        if frac is None or frac <= 1.02 or (r.text("status") or "ok") != "ok":
            continue
        why = _ABOVE_SPEC.get(r.text("unit"), "the spec counts one pipe; the SASS of this kernel may use another too")
        tput, spec = r.num("ops_per_clk_per_sm"), r.num("spec_ops_per_clk_per_sm")
        figures = f"{fmt_num(tput or 0.0, 3)} of {fmt_num(spec or 0.0, 3)} ops/clk/SM" if tput and spec else ""
        items.append(f"`{r.text('name')}` runs at {fmt_num(100 * frac, 3)} % of spec ({figures}): {why}.")
    return [Para("Above 100 % of spec:"), Bullets(tuple(items))] if items else []


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

"""MIPP-shaped tables (arithmetic, memory, synchronisation) and the per-benchmark detail table, from results rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from archline.records.csvload import CsvRow
from archline.report.cells import Ctx, derived, energy_cell, flags_text, per_unit, value_cell
from archline.report.classes import ARITH_CLASSES, MEMORY_ORDER, arith_class, memory_label, pick_representative
from archline.report.doc import Cell, Missing, Table

__all__ = [
    "arithmetic_rows",
    "arithmetic_table",
    "detail_table",
    "group_rows",
    "memory_table",
    "sync_table",
]

RowFn = Callable[[CsvRow | None], Cell]


def group_rows(rows: Sequence[CsvRow], group: str, *, sweeps: bool = False) -> list[CsvRow]:
    """Rows of one report group; sweep points only if ``sweeps``."""
    return [r for r in rows if r.text("group") == group and bool(r.text("sweep_var")) == sweeps]


def arithmetic_rows(rows: Sequence[CsvRow]) -> dict[str, list[CsvRow]]:
    """Arithmetic rows (not sweep points) by MIPP class key; unclassifiable rows under ``""``."""
    out: dict[str, list[CsvRow]] = {}
    for r in group_rows(rows, "arithmetic"):
        key = arith_class(r.text("name"), r.text("unit"), r.text("mipp_class")) or ""
        out.setdefault(key, []).append(r)
    return out


def _transpose(
    caption: str,
    columns: Sequence[tuple[str, CsvRow | None, str]],
    metrics: Sequence[tuple[str, RowFn]],
    notes: tuple[str, ...],
) -> Table:
    """Benchmarks as columns, figures as rows; a column without a row is '—' throughout, with its reason."""
    header = ("", *[label for label, _, _ in columns])
    body = tuple(
        (label, *[fn(row) if row is not None else Missing(absent) for _, row, absent in columns])
        for label, fn in metrics
    )
    return Table(header, body, caption=caption, notes=notes)


def _in_class(key: str) -> Callable[[str], bool]:
    return lambda name: arith_class(name) == key


def _at_level(order: int) -> Callable[[str], bool]:
    return lambda name: name.startswith("mem.") and memory_label(name, "")[0] == order


def _absent(ctx: Ctx, belongs: Callable[[str], bool]) -> str:
    """Why a table column has no row: a planned benchmark of it is missing, or none was measured."""
    lost = [n for n in ctx.missing if belongs(n)]
    if lost and ctx.status != "complete":
        return f"missing: the run was interrupted before {', '.join(lost)}"
    if lost:
        return f"missing: {', '.join(lost)} planned but has no row in results.csv"
    return ctx.absent


def _name(row: CsvRow | None, ctx: Ctx) -> Cell:
    return value_cell(row, "name", ctx) if row is None else f"`{row.text('name')}`"


def _per_op_rows(ctx: Ctx) -> list[tuple[str, RowFn]]:
    def nj(row: CsvRow | None) -> Cell:
        v, u = per_unit(row, "energy_j", "ops", ctx) if row else (None, None)
        if row is not None and v is None:
            v = derived(row, "nj_per_op", ctx)
            return energy_cell(row, v, None, ctx, what="nJ per instruction")
        return energy_cell(row, v, u, ctx, scale=1e9, what="nJ per instruction")

    def dyn(row: CsvRow | None) -> Cell:
        v, u = per_unit(row, "dynamic_energy_j", "ops", ctx) if row else (None, None)
        if row is not None and v is None:
            return energy_cell(row, row.num("dyn_nj_per_op"), None, ctx, what="dynamic nJ per instruction")
        return energy_cell(row, v, u, ctx, scale=1e9, what="dynamic nJ per instruction")

    return [("nJ per instruction", nj), ("Dynamic nJ per instruction (above idle)", dyn)]


def _common_rows(ctx: Ctx) -> list[tuple[str, RowFn]]:
    return [
        ("Execution time (ms)", lambda r: value_cell(r, "time_s", ctx, scale=1e3, what="time")),
        ("Average power (W)", lambda r: value_cell(r, "avg_power_w", ctx, what="average power")),
        ("Max power (W)", lambda r: value_cell(r, "max_power_w", ctx, what="max power")),
        ("Energy per launch (J)", lambda r: _energy(r, ctx)),
    ]


def _energy(r: CsvRow | None, ctx: Ctx) -> Cell:
    if r is None:
        return energy_cell(None, None, None, ctx)
    return energy_cell(r, r.num("energy_j"), r.num("energy_uncertainty_j"), ctx)


def arithmetic_table(rows: Sequence[CsvRow], ctx: Ctx) -> Table:
    """MIPP Table I for this GPU: one column per arithmetic class, one row per figure."""
    by_class = arithmetic_rows(rows)
    columns: list[tuple[str, CsvRow | None, str]] = []
    for c in ARITH_CLASSES:
        members = by_class.get(c.key, [])
        row = pick_representative(members, c.preferred) if members else None
        columns.append((c.label, row, _absent(ctx, _in_class(c.key))))
    common = _common_rows(ctx)
    metrics: list[tuple[str, RowFn]] = [
        ("Benchmark", lambda r: _name(r, ctx)),
        common[0],
        ("Spec throughput (ops/clk/SM)", lambda r: value_cell(r, "spec_ops_per_clk_per_sm", ctx, what="spec")),
        ("Measured throughput (ops/clk/SM)", lambda r: value_cell(r, "ops_per_clk_per_sm", ctx, what="throughput")),
        ("% of spec", lambda r: value_cell(r, "frac_of_spec", ctx, pct=True, what="fraction of spec")),
        *common[1:],
        (
            "Energy efficiency (MIPS/W/SM)",
            lambda r: value_cell(r, "mips_per_w_per_sm", ctx, what="energy efficiency"),
        ),
        *_per_op_rows(ctx),
        ("Flags", flags_text),
    ]
    notes = (
        "One benchmark per class (named in the first row; every benchmark is in the detail table). "
        "Instructions are thread-level; energies are board energy per launch, ± 1σ.",
    )
    return _transpose("Arithmetic classes (shape of MIPP Table I)", columns, metrics, notes)


def memory_table(rows: Sequence[CsvRow], ctx: Ctx) -> Table:
    """MIPP Table III for this GPU: DRAM (stride, stream, copy …), L2, shared and constant memory."""
    mem = sorted(
        group_rows(rows, "memory"),
        key=lambda r: (*memory_label(r.text("name"), r.text("unit")), r.text("name")),
    )
    keys = [memory_label(r.text("name"), r.text("unit")) for r in mem]
    labels = [label for _, label in keys]
    placed: list[tuple[int, str, CsvRow | None, str]] = [
        (order, label if labels.count(label) == 1 else f"{label} ({r.text('name')})", r, "")
        for (order, label), r in zip(keys, mem, strict=True)
    ]
    # MIPP's four levels always get a column, so a level the run lacks shows as "—", not as nothing.
    for level, label in (("dram", "DRAM"), ("l2", "L2"), ("shared", "Shared"), ("constant", "Constant")):
        order = MEMORY_ORDER.index(level)
        if not any(o == order for o, _, _, _ in placed):
            absent = _absent(ctx, _at_level(order))
            placed.append((order, label, None, absent))
    columns = [(label, r, absent) for _, label, r, absent in sorted(placed, key=lambda c: c[0])]

    def per_byte(energy_col: str, what: str) -> RowFn:
        def fn(r: CsvRow | None) -> Cell:
            v, u = per_unit(r, energy_col, "bytes", ctx) if r else (None, None)
            return energy_cell(r, v, u, ctx, scale=1e12, what=what)

        return fn

    def per_access(r: CsvRow | None) -> Cell:
        v, u = per_unit(r, "energy_j", "ops", ctx) if r else (None, None)
        return energy_cell(r, v, u, ctx, scale=1e9, what="nJ per transaction")

    def accesses_per_j(r: CsvRow | None) -> Cell:
        if r is None:
            return energy_cell(r, None, None, ctx)
        e, u, n = r.num("energy_j"), r.num("energy_uncertainty_j"), r.num("ops")
        v = n / e if n is not None and e else None
        uu = v * u / e if v is not None and u is not None and e else None
        return energy_cell(r, v, uu, ctx, scale=1e-6, what="transactions per joule")

    common = _common_rows(ctx)
    metrics: list[tuple[str, RowFn]] = [
        ("Benchmark", lambda r: _name(r, ctx)),
        common[0],
        ("Throughput (B/clk/SM)", lambda r: value_cell(r, "bytes_per_clk_per_sm", ctx, what="B/clk/SM")),
        ("Throughput (GB/s)", lambda r: value_cell(r, "bytes_per_s", ctx, scale=1e-9, what="bandwidth")),
        *common[1:],
        ("10⁶ transactions per J", accesses_per_j),
        ("nJ per transaction", per_access),
        ("pJ per byte", per_byte("energy_j", "pJ per byte")),
        ("Dynamic pJ per byte (above idle)", per_byte("dynamic_energy_j", "dynamic pJ per byte")),
        ("Flags", flags_text),
    ]
    notes = ("A transaction is one thread-level memory instruction (the `ops` column); bytes are at the named level.",)
    return _transpose("Memory levels (shape of MIPP Table III)", columns, metrics, notes)


def sync_table(rows: Sequence[CsvRow], ctx: Ctx) -> Table:
    """Synchronisation benchmarks (barriers, atomics with and without contention), one per column."""
    sync = sorted(group_rows(rows, "sync"), key=lambda r: r.text("name"))
    columns = [(r.text("name"), r, "") for r in sync]
    common = _common_rows(ctx)
    metrics: list[tuple[str, RowFn]] = [
        common[0],
        ("Throughput (ops/clk/SM)", lambda r: value_cell(r, "ops_per_clk_per_sm", ctx, what="throughput")),
        *common[1:],
        *_per_op_rows(ctx),
        ("Flags", flags_text),
    ]
    return _transpose("Synchronisation", columns, metrics, ())


def detail_table(rows: Sequence[CsvRow], ctx: Ctx, caption: str, *, memory: bool = False) -> Table:
    """Every given row as a table row with its key figures and flags (``memory``: bandwidth columns)."""
    mid = ("GB/s", "B/clk/SM") if memory else ("ops/clk/SM", "% of spec")
    header = ("Benchmark", "Class", "Time (ms)", *mid, "Avg W", "Max W", "Energy (J)", "nJ/op", "Flags")
    body = []
    for r in sorted(rows, key=lambda r: (r.text("group"), r.text("name"))):
        if r.text("group") == "arithmetic":
            cls = arith_class(r.text("name"), r.text("unit"), r.text("mipp_class"))
            label = next((c.label for c in ARITH_CLASSES if c.key == cls), r.text("unit") or "arithmetic")
        else:
            label = memory_label(r.text("name"), r.text("unit"))[1] if memory else r.text("unit") or r.text("group")
        nj, nj_u = per_unit(r, "energy_j", "ops", ctx)
        if memory:
            cells: tuple[Cell, Cell] = (
                value_cell(r, "bytes_per_s", ctx, scale=1e-9, what="bandwidth"),
                value_cell(r, "bytes_per_clk_per_sm", ctx, what="B/clk/SM"),
            )
        else:
            cells = (
                value_cell(r, "ops_per_clk_per_sm", ctx, what="throughput"),
                value_cell(r, "frac_of_spec", ctx, pct=True),
            )
        body.append(
            (
                f"`{r.text('name')}`",
                label,
                value_cell(r, "time_s", ctx, scale=1e3, what="time"),
                *cells,
                value_cell(r, "avg_power_w", ctx, what="average power"),
                value_cell(r, "max_power_w", ctx, what="max power"),
                _energy(r, ctx),
                energy_cell(r, nj, nj_u, ctx, scale=1e9, what="nJ per op"),
                flags_text(r),
            )
        )
    return Table(header, tuple(body), caption=caption)

"""The tensor-core and operand-data sections of a characterization report: rates, energy per flop, data effects."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from archline.records.csvload import CsvRow
from archline.report.cells import Ctx, energy_cell, flags_text, per_unit, value_cell
from archline.report.doc import Block, Cell, Missing, Para, Table
from archline.report.fmt import fmt_pm

__all__ = ["DataEffect", "ToggleFit", "data_effects", "latency_blocks", "tensor_blocks", "toggle_fits"]

_TENSOR = re.compile(r"^tensor\.(mma|wgmma)\.([a-z0-9]+)$")
_SERIES = ("tensor.wgmma.bf16", "tensor.wgmma.fp8e4m3", "tensor.mma.fp16", "operand.ffma")


@dataclass(frozen=True)
class DataEffect:
    """Energy per op of one kernel on zeros against random operands (same code, same launch)."""

    series: str
    zeros_pj: float
    random_pj: float
    diff_pj: float
    diff_sigma_pj: float

    @property
    def ratio(self) -> float:
        return self.random_pj / self.zeros_pj if self.zeros_pj > 0 else float("nan")


@dataclass(frozen=True)
class ToggleFit:
    """Weighted straight line of energy per op (pJ) against the operand toggle rate (%)."""

    series: str
    points: int
    intercept_pj: float
    slope_pj_per_100pct: float
    slope_sigma_pj_per_100pct: float


def _pj(row: CsvRow, ctx: Ctx) -> tuple[float | None, float | None]:
    e, u = per_unit(row, "energy_j", "ops", ctx)
    return (e * 1e12 if e is not None else None), (u * 1e12 if u is not None else None)


def _ok(row: CsvRow) -> bool:
    return (row.text("status") or "ok") == "ok"


def data_effects(rows: Sequence[CsvRow], ctx: Ctx) -> list[DataEffect]:
    """Zeros against random operands for every series measured both ways."""
    by_name = {r.text("name"): r for r in rows if _ok(r)}
    out = []
    for series in _SERIES:
        z, r = by_name.get(f"{series}.zeros"), by_name.get(series if series != "operand.ffma" else f"{series}.random")
        if z is None or r is None:
            continue
        (ez, uz), (er, ur) = _pj(z, ctx), _pj(r, ctx)
        if ez is None or er is None:
            continue
        sigma = float(np.hypot(uz or 0.0, ur or 0.0))
        out.append(DataEffect(series, ez, er, er - ez, sigma))
    return out


def toggle_fits(rows: Sequence[CsvRow], ctx: Ctx) -> list[ToggleFit]:
    """Per series, a weighted least-squares line through the toggle-rate sweep points (≥ 3 points)."""
    out = []
    for series in _SERIES:
        pts: list[tuple[float, float, float | None]] = []
        for r in rows:
            if _ok(r) and r.text("sweep_var") == "toggle_pct" and r.text("name").startswith(f"{series}.toggle-"):
                e, u = _pj(r, ctx)
                x = r.num("sweep_value")
                if e is not None and x is not None:
                    pts.append((x, e, u if u and u > 0 else None))
        if len(pts) < 3:
            continue
        xs = np.array([p[0] for p in pts]) / 100.0
        y = np.array([p[1] for p in pts])
        # Weights from the energy σ where every point has one; the residual scatter sets the slope's σ.
        sig = np.array([p[2] if p[2] is not None else 1.0 for p in pts])
        a = np.vstack([np.ones_like(xs), xs]).T / sig[:, None]
        coef, *_ = np.linalg.lstsq(a, y / sig, rcond=None)
        resid = (y - (coef[0] + coef[1] * xs)) / sig
        dof = max(len(pts) - 2, 1)
        cov = np.linalg.inv(a.T @ a) * max(float(resid @ resid) / dof, 1.0)
        out.append(ToggleFit(series, len(pts), float(coef[0]), float(coef[1]), float(np.sqrt(cov[1, 1]))))
    return out


def _tensor_table(rows: Sequence[CsvRow], ctx: Ctx) -> Table | None:
    body: list[tuple[Cell, ...]] = []
    for r in sorted(rows, key=lambda r: r.text("name")):
        m = _TENSOR.match(r.text("name"))
        if not m:
            continue
        e, u = _pj(r, ctx)
        body.append(
            (
                f"`{r.text('name')}`",
                m.group(1),
                m.group(2),
                value_cell(r, "ops_per_clk_per_sm", ctx, what="throughput"),
                value_cell(r, "frac_of_spec", ctx, pct=True),
                value_cell(r, "sm_clock_mhz", ctx, what="SM clock"),
                value_cell(r, "avg_power_w", ctx, what="average power"),
                value_cell(r, "max_power_w", ctx, what="max power"),
                energy_cell(r, e, u, ctx, what="energy per flop"),
                flags_text(r),
            )
        )
    if not body:
        return None
    return Table(
        (
            "Benchmark",
            "Instruction",
            "Type",
            "flop/clk/SM",
            "% of spec",
            "SM MHz",
            "Avg W",
            "Max W",
            "pJ/flop",
            "Flags",
        ),
        tuple(body),
        caption="Tensor cores, dense, random operands",
        notes=(
            "Throughput is dense flops (INT8: ops) per clock per SM at the measured SM clock; the spec is the "
            "whitepaper's dense rate for the compute capability (archline.characterize.kernels.tensor.TENSOR_SPEC).",
            "On Hopper, mma.sync is the warp-level path kept from Ampere: it cannot issue at the rate of the "
            "warpgroup wgmma path, which is the one cuBLAS and CUTLASS use; FP8 exists only as wgmma there.",
            "A power-capped row (sw_power_cap) ran at a lower clock: its energy per flop is that of the capped board.",
        ),
    )


def tensor_blocks(rows: Sequence[CsvRow], ctx: Ctx) -> list[Block]:
    """The tensor-core table, the zeros-versus-random effect and the toggle-rate slopes."""
    blocks: list[Block] = []
    table = _tensor_table(rows, ctx)
    if table is not None:
        blocks.append(table)
    effects = data_effects(rows, ctx)
    if effects:
        blocks.append(
            Table(
                ("Kernel", "Zeros (pJ/op)", "Random (pJ/op)", "Random − zeros (pJ/op)", "Random / zeros"),
                tuple(
                    (
                        f"`{e.series}`",
                        f"{e.zeros_pj:.4g}",
                        f"{e.random_pj:.4g}",
                        fmt_pm(e.diff_pj, e.diff_sigma_pj, "no σ"),
                        f"{e.ratio:.2f}×",
                    )
                    for e in effects
                ),
                caption="Operand data: the same kernel on zeros and on random operands",
                notes=("Same code and launch; ± is the 1σ of the difference from the two energies' σ.",),
            )
        )
    fits = toggle_fits(rows, ctx)
    if fits:
        blocks.append(
            Table(
                ("Kernel", "Points", "At 0 % toggle (pJ/op)", "Slope (pJ/op per 100 % toggle)"),
                tuple(
                    (
                        f"`{f.series}`",
                        str(f.points),
                        f"{f.intercept_pj:.4g}",
                        fmt_pm(f.slope_pj_per_100pct, f.slope_sigma_pj_per_100pct, "no σ"),
                    )
                    for f in fits
                ),
                caption="Operand toggle rate: energy per op against the share of sign and mantissa bits that flip",
                notes=(
                    "Weighted least squares over the toggle sweep; the slope's σ is scaled by the residual scatter "
                    "when it exceeds the energies' σ. The sweep's plot is under Sweeps.",
                ),
            )
        )
    if not blocks:
        blocks.append(Para("No tensor-core or operand-data benchmarks in this run."))
    return blocks


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def latency_blocks(run_path: Path) -> list[Block]:
    """The pointer-chase latency table (``latency.csv``) against the published Hopper figures."""
    path = run_path / "latency.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))

    def num(r: dict[str, str], k: str) -> float | None:
        try:
            return float(r.get(k) or "")
        except ValueError:
            return None

    body: list[tuple[Cell, ...]] = []
    for r in rows:
        c, c2, d = num(r, "cycles_per_load"), num(r, "cycles_per_load_repeat"), num(r, "vs_published_pct")
        lo, hi = num(r, "published_low"), num(r, "published_high")
        why = r.get("note") or "not measured"
        body.append(
            (
                r.get("level", ""),
                _bytes(int(float(r.get("footprint_b") or 0))),
                f"{c:.1f}" if c is not None else Missing(why),
                f"{c2:.1f}" if c2 is not None else Missing(why),
                (f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}") if lo is not None and hi is not None else Missing("none"),
                f"{d:+.1f} %" if d is not None else Missing(why),
                "yes" if (r.get("verified") or "").lower() == "true" else Missing(why or "the chase did not check out"),
            )
        )
    return [
        Table(
            ("Level", "Footprint", "Cycles per load", "Again", "Published (cycles)", "Vs published", "Chase checked"),
            tuple(body),
            caption="Pointer-chase latency: one thread, dependent loads, %clock64 cycles",
            notes=(
                "Published: Luo et al., Benchmarking and Dissecting the Nvidia Hopper GPU Architecture (IPDPS 2024), "
                "measured on an H800; 'vs published' is against the nearest end of their range.",
                "L2 is the average over a random chase of 8 MiB: it mixes the near and far partitions, which this "
                "table does not separate. DRAM includes TLB misses (one line per 64 KiB of a 1 GiB buffer).",
            ),
        )
    ]

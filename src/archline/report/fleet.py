"""The fleet report: key figures per GPU, their spread, outliers and plots, one GPU model and driver at a time."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from archline.errors import ArchlineError, RunDirError
from archline.records import RunDir, atomic_write_bytes, write_csv
from archline.report.doc import Bullets, Cell, Document, Figure, Heading, Missing, Para, Table
from archline.report.fleet_stats import FIGURES, OUTLIER_Z, Board, group_boards, load_board, spread
from archline.report.fmt import fmt_sig
from archline.report.registry import RenderedReport
from archline.report.render import write_document

__all__ = ["boards_of", "build_document", "render"]


def boards_of(run: RunDir) -> tuple[list[Board], list[str]]:
    """The boards a fleet run directory lists (``extra.runs``), and a line per task that left no usable run."""
    boards: list[Board] = []
    failed: list[str] = []
    for entry in run.manifest.extra.get("runs", []):
        label = str(entry.get("label"))
        if entry.get("error") or not entry.get("path"):
            failed.append(f"{label} (GPU {entry.get('gpu')} on {entry.get('host')}): {entry.get('error') or 'no run'}")
            continue
        try:
            boards.append(load_board(label, run.path / str(entry["path"])))
        except ArchlineError as exc:
            failed.append(f"{label}: {exc}")
    return boards, failed


def _cell(v: float | None) -> Cell:
    return Missing("not measured in this run") if v is None else fmt_sig(v, 4)


def _board_table(group: Sequence[Board], flagged: Mapping[tuple[str, str], float]) -> Table:
    header = ("GPU", "UUID", "host", *(f"{f.label} ({f.unit})" for f in FIGURES))
    rows = []
    for b in group:
        cells: list[Cell] = [b.label, b.uuid[:12], b.host]
        for f in FIGURES:
            c = _cell(b.figures.get(f.key))
            z = flagged.get((b.label, f.key))
            cells.append(f"{c} (z {z:+.1f})" if z is not None and isinstance(c, str) else c)
        rows.append(tuple(cells))
    return Table(header, tuple(rows), caption="Key figures per GPU (outliers marked with their modified z-score)")


def _spread_table(group: Sequence[Board]) -> tuple[Table, dict[tuple[str, str], float], list[str]]:
    rows: list[tuple[Cell, ...]] = []
    flagged: dict[tuple[str, str], float] = {}
    lines: list[str] = []
    for f in FIGURES:
        s = spread(group, f.key)
        if s is None:
            rows.append((f"{f.label} ({f.unit})", "0", *(Missing("no GPU has this figure"),) * 5))
            continue
        for lab, v, z in s.outliers:
            flagged[(lab, f.key)] = z
            lines.append(
                f"{lab}: {f.label} {fmt_sig(v, 4)} {f.unit} (modified z {z:+.1f}; group mean {fmt_sig(s.mean, 4)})"
            )
        rows.append(
            (f"{f.label} ({f.unit})", str(s.n), fmt_sig(s.mean, 4), fmt_sig(s.std, 3), f"{s.cv_pct:.2f}",
             fmt_sig(s.min, 4), fmt_sig(s.max, 4))
        )  # fmt: skip
    head = ("figure", "GPUs", "mean", "std", "CV (%)", "min", "max")
    return Table(head, tuple(rows), caption="Spread over the GPUs of this model and driver"), flagged, lines


def _plot(group: Sequence[Board], path: Path, title: str) -> Path | None:
    """Each figure's value per GPU relative to the group median (1 = median), one column per figure."""
    fig = MplFigure(figsize=(max(6.0, 0.9 * len(FIGURES) + 2), 4.2), layout="constrained")
    ax = fig.add_subplot()
    drawn = False
    for i, f in enumerate(FIGURES):
        vals = [v for b in group if (v := b.figures.get(f.key)) is not None]
        med = sorted(vals)[len(vals) // 2] if vals else 0.0
        if not vals or med == 0 or not math.isfinite(med):
            continue
        xs = [i + 0.25 * ((k % 7) / 6 - 0.5) for k in range(len(vals))]
        ax.scatter(xs, [v / med for v in vals], s=14)
        drawn = True
    if not drawn:
        return None
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_xticks(range(len(FIGURES)), [f.label for f in FIGURES], rotation=35, ha="right")
    ax.set_ylabel("value / median of the group")
    ax.set_title(title)
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(path, buf.getvalue())
    return path


def build_document(run: RunDir, out_dir: Path) -> tuple[Document, list[Path], list[dict[str, Any]]]:
    """The fleet report, its plots, and the per-GPU table as rows (for fleet.csv)."""
    boards, failed = boards_of(run)
    if not boards and not failed:
        raise RunDirError(f"{run.path}: the fleet lists no runs")
    groups = group_boards(boards)
    doc = Document(f"GPU fleet: {len(boards)} GPUs in {len(groups)} group(s) of model and driver")
    doc.add(
        Para(
            f"Every figure is read from the run directories under `{run.path}` (one per GPU). GPUs of different "
            "models or drivers are never compared together: each group has its own tables. Outliers: "
            f"|modified z| > {OUTLIER_Z} (0.6745 × deviation from the median / median absolute deviation; "
            "groups of 3 GPUs or more)."
        )
    )
    files: list[Path] = []
    table_rows: list[dict[str, Any]] = []
    for k, ((name, driver), group) in enumerate(sorted(groups.items())):
        spread_t, flagged, lines = _spread_table(group)
        doc.add(Heading(f"{name}, driver {driver}: {len(group)} GPUs"), _board_table(group, flagged), spread_t)
        doc.add(Bullets(tuple(lines)) if lines else Para("No outlier in this group."))
        png = _plot(group, out_dir / "plots" / f"fleet_{k}.png", f"{name}, driver {driver}")
        if png is not None:
            files.append(png)
            doc.add(Figure(f"plots/{png.name}", "Each GPU's figures relative to the group's median"))
        for b in group:
            table_rows.append({"label": b.label, "name": name, "driver": driver, "uuid": b.uuid, "host": b.host,
                               **b.figures})  # fmt: skip
    if failed:
        doc.add(Heading("GPUs without a result"), Bullets(tuple(failed)))
    return doc, files, table_rows


def render(run: RunDir, out_dir: Path) -> RenderedReport:
    """Write ``fleet_report.md``/``.html``, ``fleet.csv`` and plots for a fleet run directory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    doc, files, rows = build_document(run, out_dir)
    cols = ["label", "name", "driver", "uuid", "host", *(f.key for f in FIGURES)]
    write_csv(out_dir / "fleet.csv", rows, cols)
    md, html = write_document(doc, out_dir, "fleet_report")
    _, failed = boards_of(run)
    return RenderedReport("fleet", md, html, (out_dir / "fleet.csv", *files), run.manifest.status, tuple(failed))

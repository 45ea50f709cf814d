"""The report files of an attribution run: per-kernel table, Perfetto trace and timeline plot."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from archline.core.activity import ActivityRecord, short_name
from archline.core.recording import Recording
from archline.errors import RunDirError
from archline.records import RunDir
from archline.records.attribution import RAW_FILES, RESULT_FILES, AttributionResult
from archline.report.doc import Bullets, Cell, Chart, Document, Figure, Heading, Missing, Para, Table
from archline.report.interactive import Span, timeline_chart
from archline.report.perfetto import write_perfetto
from archline.report.render import write_document
from archline.report.timeline_plot import plot_timeline

if TYPE_CHECKING:
    from archline.measurement.attribute.io import RawRun
    from archline.report.registry import RenderedReport

__all__ = [
    "OUTPUT_FILES",
    "REPORT_FILES",
    "markdown_table",
    "render_attribution_report",
    "write_attribution_outputs",
    "write_report_files",
]

#: Report files → what each holds, for the run manifest.
REPORT_FILES = {
    "trace.perfetto.json": "power tracks and kernel spans; open in ui.perfetto.dev",
    "timeline.png": "power over time with the top kernels shaded",
}
#: Every file of an attribution run directory → what it holds.
OUTPUT_FILES = {**RESULT_FILES, **REPORT_FILES, **RAW_FILES}


def write_report_files(
    directory: Path,
    recording: Recording,
    activities: Sequence[ActivityRecord],
    result: AttributionResult,
    program_span: tuple[float, float] | None,
) -> dict[str, str]:
    """The report files of a finished attribution (Perfetto trace, timeline plot); file → what it holds."""
    write_perfetto(directory / "trace.perfetto.json", recording, activities, result, program_span=program_span)
    plot_timeline(directory / "timeline.png", recording, activities, result, program_span=program_span)
    return dict(REPORT_FILES)


def write_attribution_outputs(
    directory: str | os.PathLike[str],
    recording: Recording,
    activities: Sequence[ActivityRecord],
    result: AttributionResult,
    *,
    program_span: tuple[float, float] | None = None,
    title: str | None = None,
) -> dict[str, Path]:
    """Write ``kernels.csv``, ``attribution.json``, ``trace.perfetto.json`` and ``timeline.png``."""
    d = Path(directory)
    csv_path, json_path = result.write(d)
    trace = d / "trace.perfetto.json"
    write_perfetto(trace, recording, activities, result, program_span=program_span)
    png = d / "timeline.png"
    plot_timeline(png, recording, activities, result, program_span=program_span, title=title)
    return {"kernels.csv": csv_path, "attribution.json": json_path, "trace.perfetto.json": trace, "timeline.png": png}


def _cell(x: float, fmt: str) -> str:
    return format(x, fmt) if math.isfinite(x) else "—"


def markdown_table(result: AttributionResult, *, top: int = 30) -> str:
    """The rows as a Markdown table: the ``top`` kernels, then the unattributed parts."""
    conf = round(100 * result.confidence)
    lines = [
        f"| kernel | calls | time (ms) | energy (J) | {conf} % interval (J) | share | power (W) | method |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    rows = [*list(result.kernels)[:top], *result.unattributed]
    for r in rows:
        name = (short_name(r.name, 80) if r.kind in ("kernel", "memcpy", "memset") else r.name).replace("|", "\\|")
        ci = "" if r.kind in ("residual", "untraced") else f"{r.energy_lo_j:.4g} – {r.energy_hi_j:.4g}"
        method = r.method + ("" if r.identifiable else " (not identifiable)") + f", from {r.dominated_by}"
        lines.append(
            f"| {name} | {r.calls or ''} | {_cell(r.time_s * 1e3, '.4g')} | {r.energy_j:.4g} | {ci} | "
            f"{100 * r.share:.1f} % | {_cell(r.mean_power_w, '.0f')} | {method} |"
        )
    return "\n".join(lines)


_HEADER = ("Kernel", "Calls", "Time (ms)", "Energy (J)", "Share", "Power (W)", "Method", "From")


def _spans(activities: Sequence[ActivityRecord], names: Sequence[str], t0: float, limit: int = 4000) -> list[Span]:
    """Kernel spans of the ``names`` kernels (merged where closer than 1/1500 of the run), at most ``limit``."""
    import numpy as np

    from archline.report.timeline_plot import merge_spans

    if not activities:
        return []
    t_end = max(a.end_s for a in activities)
    out: list[Span] = []
    for n in names:
        s = np.array([a.start_s for a in activities if a.name == n]) - t0
        e = np.array([a.end_s for a in activities if a.name == n]) - t0
        ms, me = merge_spans(s, e, (t_end - t0) / 1500.0)
        out += [Span(float(a), float(b), short_name(n, 40)) for a, b in zip(ms, me, strict=True)]
    return out[:limit]


def _document(run: RunDir, result: AttributionResult, raw: RawRun | None, has_png: bool) -> Document:
    """The run's report: what ran, the per-kernel table with intervals and what set each row, the
    interactive power timeline with kernel spans (PNG in Markdown), graph replay's rows if present."""
    m = run.manifest
    cmd = " ".join(m.command) if m.command else "(Python API)"
    gpu = m.gpu.get("name", "GPU") if m.gpu else "GPU"
    uuid = str(m.gpu.get("uuid") or "")[:12] if m.gpu else ""
    conf = round(100 * result.confidence)
    doc = Document(f"GPU energy by kernel: {short_name(cmd, 60)}")
    doc.add(
        Para(
            f"{gpu} {uuid}, run of {m.created_utc} ({m.status}), command `{short_name(cmd, 200)}`. Total "
            f"{result.total_energy_j:.4g} J over {result.span_end_s - result.span_start_s:.3g} s, from "
            f"{result.windows} windows of `{result.window_source}` "
            f"(sensor delay {1e3 * result.counter_delay_s:.1f} ms)."
        ),
        Heading("Energy by kernel"),
    )
    body: list[tuple[Cell, ...]] = []
    for r in [*list(result.kernels)[:40], *result.unattributed]:
        name = short_name(r.name, 60) if r.kind in ("kernel", "memcpy", "memset") else r.name
        interval: Cell = (
            Missing("the residual and untraced rows have no interval")
            if r.kind in ("residual", "untraced")
            else f"{r.energy_lo_j:.4g} – {r.energy_hi_j:.4g}"
        )
        body.append(
            (
                f"`{name}`",
                str(r.calls) if r.calls else Missing("not a kernel row"),
                _cell(r.time_s * 1e3, ".4g") if math.isfinite(r.time_s) else Missing("no busy time"),
                f"{r.energy_j:.4g}",
                interval,
                f"{100 * r.share:.1f} %",
                _cell(r.mean_power_w, ".0f") if math.isfinite(r.mean_power_w) else Missing("no busy time"),
                r.method + ("" if r.identifiable else " (not identifiable)"),
                r.dominated_by or Missing("not recorded in this run"),
            )
        )
    doc.add(
        Table(
            (*_HEADER[:4], f"{conf} % interval (J)", *_HEADER[4:]),
            tuple(body),
            caption=f"The {min(40, len(result.kernels))} kernels with the most energy, then the parts of no kernel",
            notes=(
                "From: what set the estimate, the data (power buffer or counter windows), the kernel's prior "
                "(graph replay or a weak default), or both (mixed). kernels.csv holds every row.",
            ),
        )
    )
    if raw is not None and raw.recording is not None:
        buf = raw.recording.get("nvml.buffer") or next(
            (rd for rd in raw.recording.readings.values() if rd.quantity == "power" and len(rd)), None
        )
        if buf is not None and len(buf):
            t0 = float(raw.recording.start_s) or float(buf.t_s[0])
            names = [r.name for r in result.kernels][:8]
            spec = timeline_chart(
                [float(t) - t0 for t in buf.t_s],
                [float(v) for v in buf.value],
                _spans(raw.activities, names, t0),
                title="board power and the top kernels (drag to pan, wheel to zoom)",
            )
            doc.add(
                Heading("Timeline"),
                Chart(spec, "Power over time with the top kernels' spans", "timeline.png" if has_png else None),
            )
    elif has_png:
        doc.add(Heading("Timeline"), Figure("timeline.png", "power and kernels over time"))
    replay = run.path / "replay.csv"
    if replay.is_file():
        doc.add(Heading("Graph replay"), Para("Graph replay's per-kernel results are in `replay.csv` of this run."))
    notes = [*m.notes, *result.notes]
    if result.whole_program_only:
        notes.insert(0, "whole-program energy only: kernels were not traced")
    if notes:
        doc.add(Heading("Notes"), Bullets(tuple(dict.fromkeys(notes))))
    doc.add(Para("Trace for ui.perfetto.dev: `trace.perfetto.json`."))
    return doc


def render_attribution_report(run: RunDir, out_dir: Path) -> RenderedReport:
    """``archline report`` for ``run``/``attribute`` directories: redo the attribution from the raw
    traces (any machine) and write ``report.md`` with the table, notes, plot and Perfetto trace."""
    from archline.measurement.attribute.io import load_raw
    from archline.report.registry import RenderedReport

    try:
        raw = load_raw(run.path)
    except RunDirError:
        raw = None
    warnings: list[str] = []
    if raw is not None:
        from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy

        # The board's enforced power limit, from the run's record (older runs: the state before).
        m0 = run.manifest
        limit = (m0.extra or {}).get("power_limit_w") or (m0.state_before or {}).get("enforced_power_limit_w")
        opts = AttributionOptions(power_limit_w=float(limit)) if limit else None
        result = attribute_energy(raw.recording, raw.activities, program_span=raw.program_span, options=opts)
        files = write_attribution_outputs(out_dir, raw.recording, raw.activities, result, program_span=raw.program_span)
    else:
        result = AttributionResult.read(run.path)
        warnings.append("no raw traces in the run directory: table only, from attribution.json")
        csv_path, json_path = result.write(out_dir)
        files = {"kernels.csv": csv_path, "attribution.json": json_path}
    m = run.manifest
    md, html = write_document(_document(run, result, raw, "timeline.png" in files), out_dir)
    return RenderedReport(
        kind=m.kind,
        markdown=md,
        html=html,
        files=(md, html, *files.values()),
        status=m.status,
        warnings=tuple(warnings),
        extra={"total_energy_j": result.total_energy_j},
    )

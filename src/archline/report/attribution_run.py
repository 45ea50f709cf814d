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
from archline.records import RunDir, atomic_write_text
from archline.records.attribution import RAW_FILES, RESULT_FILES, AttributionResult
from archline.report.perfetto import write_perfetto
from archline.report.timeline_plot import plot_timeline

if TYPE_CHECKING:
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
        from archline.measurement.attribute.attribution import attribute_energy

        result = attribute_energy(raw.recording, raw.activities, program_span=raw.program_span)
        files = write_attribution_outputs(out_dir, raw.recording, raw.activities, result, program_span=raw.program_span)
    else:
        result = AttributionResult.read(run.path)
        warnings.append("no raw traces in the run directory: table only, from attribution.json")
        csv_path, json_path = result.write(out_dir)
        files = {"kernels.csv": csv_path, "attribution.json": json_path}
    m = run.manifest
    cmd = " ".join(m.command) if m.command else "(Python API)"
    gpu = m.gpu.get("name", "GPU") if m.gpu else "GPU"
    text = [
        f"# GPU energy by kernel: `{cmd}`",
        "",
        f"{gpu}, run of {m.created_utc} ({m.status}). Total {result.total_energy_j:.4g} J over "
        f"{result.span_end_s - result.span_start_s:.3g} s, from {result.windows} windows of "
        f"`{result.window_source}` (sensor delay {1e3 * result.counter_delay_s:.1f} ms).",
        "",
        markdown_table(result),
        "",
    ]
    notes = [*m.notes, *result.notes]
    if result.whole_program_only:
        notes.insert(0, "whole-program energy only: kernels were not traced")
    if notes:
        text += ["## Notes", "", *[f"- {n}" for n in dict.fromkeys(notes)], ""]
    if "timeline.png" in files:
        text += [
            "![power and kernels over time](timeline.png)",
            "",
            "Trace: `trace.perfetto.json` (ui.perfetto.dev).",
            "",
        ]
    md = out_dir / "report.md"
    atomic_write_text(md, "\n".join(text))
    return RenderedReport(
        kind=m.kind,
        markdown=md,
        files=tuple(files.values()),
        status=m.status,
        warnings=tuple(warnings),
        extra={"total_energy_j": result.total_energy_j},
    )

"""The files an attribution run writes beside its tables: Perfetto trace and timeline plot (report: run_report)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from archline.core.activity import ActivityRecord
from archline.core.recording import Recording
from archline.records.attribution import RAW_FILES, RESULT_FILES, AttributionResult
from archline.report.perfetto import write_perfetto
from archline.report.timeline_plot import plot_timeline

__all__ = ["OUTPUT_FILES", "REPORT_FILES", "write_attribution_outputs", "write_report_files"]

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

"""The report of an ``archline run`` (or ``archline.attribute``) directory: kernels, power timeline, graph replay.

The tables show the attribution as the run recorded it (``attribution.json``); the attribution is redone from the
raw traces only where the run did not record one (it was interrupted), and the report then says so. The power
timeline (raw/recording.npz and the activities) is an interactive Vega-Lite chart in the HTML page and
``timeline.png`` in the Markdown one; graph replay's ``replay.csv``/``replay.json``, where the run directory holds
them, get their own section with each kernel's attributed energy per call set against replay's.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from archline.core.activity import short_name
from archline.errors import RunDirError
from archline.records import RunDir, atomic_write_bytes
from archline.records.attribution import AttributionResult
from archline.report.doc import Block, Bullets, Chart, Document, Figure, Heading, Para
from archline.report.registry import RenderedReport
from archline.report.render import write_document
from archline.report.replay import read_replay, replay_priors, replay_summary_text, replay_table
from archline.report.run_tables import ACTIVITY_KINDS, kernel_table, replay_comparison, unattributed_table
from archline.report.run_timeline import TOP_KERNELS, timeline_spec

__all__ = ["power_limit_notes", "render_run_report"]

#: A row whose mean power exceeds the board's limit by more than this fraction cannot be right.
POWER_LIMIT_TOLERANCE = 0.05


def _stored_result(run: RunDir) -> tuple[AttributionResult, list[dict[str, Any]]] | None:
    """``attribution.json`` as the run wrote it, and its rows exactly as recorded (None if the run has none)."""
    p = run.path / "attribution.json"
    if not p.is_file():
        return None
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{p}: corrupt JSON ({exc})") from None
    if not isinstance(d, dict) or not isinstance(d.get("rows", []), list):
        raise RunDirError(f"{p}: not an archline attribution (no list of rows)")
    result = AttributionResult.from_json(d, source=str(p))
    rows = [r for r in d.get("rows", []) if isinstance(r, dict)]
    if len(rows) != len(result.rows):
        raise RunDirError(f"{p}: a row is not a JSON object")
    return result, rows


def power_limit_notes(
    rows: Sequence[Mapping[str, Any]], limit_w: float | None, bounds: Mapping[str, Any] | None = None
) -> list[str]:
    """Rows whose mean power exceeds the board's power limit by more than 5 %: impossible above the row's bound
    (``bounds``: the attribution's ``power_bound_w``, the burst ceiling where one was known), possible in bursts below
    it (a kernel of a few µs between others can draw more than the limit, which holds over longer windows)."""
    if not limit_w or limit_w <= 0:
        return []
    out = []
    for r in rows:
        p = r.get("mean_power_w")
        if not isinstance(p, (int, float)) or p <= (1 + POWER_LIMIT_TOLERANCE) * limit_w:
            continue
        if r.get("kind") not in ACTIVITY_KINDS:
            continue
        b = (bounds or {}).get(str(r.get("name")))
        name = short_name(str(r.get("name")), 60)
        head = f"{name}: mean power {p:.0f} W is above the board's power limit of {limit_w:.0f} W by more than "
        if isinstance(b, (int, float)) and b > (1 + POWER_LIMIT_TOLERANCE) * limit_w and p <= b * (1 + 1e-9):
            out.append(
                f"{head}{100 * POWER_LIMIT_TOLERANCE:.0f} %, within its {b:.0f} W bound (the burst ceiling: a kernel "
                "can draw more than the limit in bursts); possible, read it with its interval"
            )
        else:
            out.append(f"{head}{100 * POWER_LIMIT_TOLERANCE:.0f} %: impossible, do not trust this row")
    return out


def _power_limit_w(run: RunDir) -> float | None:
    m = run.manifest
    for v in (
        (m.extra or {}).get("power_limit_w"),
        (m.state_before or {}).get("enforced_power_limit_w"),
        (m.state_before or {}).get("power_limit_w"),
    ):
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
    return None


def _header(run: RunDir, result: AttributionResult, limit_w: float | None) -> Para:
    m = run.manifest
    g = m.gpu or {}
    tracer = (m.extra or {}).get("tracer")
    limit = f"; power limit {limit_w:.0f} W" if limit_w else ""
    return Para(
        f"{g.get('name', 'GPU')} (UUID {g.get('uuid', '?')}, driver {g.get('driver_version', '?')}{limit}); "
        f"run of {m.created_utc} ({m.status}"
        + (f", tracer {tracer}" if tracer else "")
        + f"). Total {result.total_energy_j:.4g} J over {result.span_end_s - result.span_start_s:.3g} s, from "
        f"{result.windows} windows of `{result.window_source}` (sensor delay {1e3 * result.counter_delay_s:.1f} ms); "
        f"{round(100 * result.confidence)} % intervals ({result.ci_method})."
    )


#: A Perfetto trace larger than this is kept gzip-compressed (ui.perfetto.dev opens both).
PLAIN_TRACE_MAX_B = 8 * 2**20


def _write_trace(run: RunDir, out_dir: Path, raw: Any, result: AttributionResult) -> Path:
    """The Perfetto trace, gzip-compressed where the run keeps it so or where it is large (a long run's
    trace is tens of MB); only one of the two forms is left in the directory."""
    from archline.report.perfetto import write_perfetto

    plain = out_dir / "trace.perfetto.json"
    packed = out_dir / "trace.perfetto.json.gz"
    write_perfetto(plain, raw.recording, raw.activities, result, program_span=raw.program_span)
    compressed = (run.path / "trace.perfetto.json.gz").is_file() or plain.stat().st_size > PLAIN_TRACE_MAX_B
    if not compressed:
        packed.unlink(missing_ok=True)
        return plain
    atomic_write_bytes(packed, gzip.compress(plain.read_bytes(), mtime=0))
    plain.unlink()
    return packed


def _timeline_blocks(
    run: RunDir, out_dir: Path, raw: Any, result: AttributionResult, files: dict[str, Path]
) -> list[Block]:
    """The timeline: interactive with its PNG fallback from the raw traces, else the run's own PNG, else why not."""
    caption = (
        "Board power over time since the start of the recording: the power buffer (grey) and the energy counter's "
        f"mean power per window, delay-corrected (black), with the calls of the top {TOP_KERNELS} kernels by energy "
        "(one lane each in report.html: drag to pan, wheel to zoom, hover for values; shaded in timeline.png, with "
        "their share of busy time below)"
    )
    if raw is not None:
        from archline.report.timeline_plot import plot_timeline

        plot_timeline(out_dir / "timeline.png", raw.recording, raw.activities, result, program_span=raw.program_span)
        files["timeline.png"] = out_dir / "timeline.png"
        trace = _write_trace(run, out_dir, raw, result)
        files[trace.name] = trace
        spec = timeline_spec(raw.recording, raw.activities, result)
        chart: Block = Figure("timeline.png", caption) if spec is None else Chart(spec, caption, "timeline.png")
        return [chart, Para(f"Every call with the power tracks: `{trace.name}` (open it in ui.perfetto.dev).")]
    png = run.path / "timeline.png"
    if png.is_file():
        if png.resolve() != (out_dir / "timeline.png").resolve():
            shutil.copyfile(png, out_dir / "timeline.png")
        files["timeline.png"] = out_dir / "timeline.png"
        return [
            Figure("timeline.png", "Power and kernels over time, as the run drew it"),
            Para("The run directory keeps no raw traces (raw/), so the timeline is the run's own picture."),
        ]
    return [Para("No power timeline: the run directory keeps no raw traces (raw/recording.npz) and no timeline.png.")]


def _replay_blocks(run: RunDir, rows: Sequence[Mapping[str, Any]], confidence: float) -> list[Block]:
    if not (run.path / "replay.csv").is_file():
        return []
    summary, replay_rows = read_replay(run.path)
    blocks: list[Block] = [
        Heading("Graph replay"),
        Para(
            "The run directory holds a graph replay of one step (`replay.csv`), whose isolated energies were the "
            "kernels' priors. "
            + (replay_summary_text(summary) if summary else "Its summary (replay.json) is not kept.")
        ),
        replay_table(replay_rows, summary.get("notes", [])),
    ]
    from archline.measurement.attribute.replay_result import fixed_cost_to_take_out

    comparison = replay_comparison(
        rows, replay_rows, confidence, fixed_cost_to_take_out(replay_rows, summary.get("design"))
    )
    if comparison is not None:
        blocks.append(comparison)
    else:
        blocks.append(Para("No replayed kernel group has the name of an attributed kernel: nothing to compare."))
    return blocks


def render_run_report(run: RunDir, out_dir: Path) -> RenderedReport:
    """``archline report`` for ``run``/``attribute`` directories: report.md, report.html, timeline.png and the
    Perfetto trace (where the raw traces are kept) into ``out_dir``."""
    from archline.measurement.attribute.io import load_raw
    from archline.records.multi_run import is_multi_gpu_run

    if is_multi_gpu_run(run):
        from archline.report.run_multi import render_multi_run_report

        return render_multi_run_report(run, out_dir, render_run_report)
    m = run.manifest
    warnings: list[str] = []
    files: dict[str, Path] = {}
    try:
        raw = load_raw(run.path)
    except RunDirError:
        raw = None
    stored = _stored_result(run)
    if stored is not None:
        result, rows = stored
    elif raw is not None:
        result = _redo(run, raw)
        rows = [r.to_row() for r in result.rows]
        files.update(zip(("kernels.csv", "attribution.json"), result.write(out_dir), strict=True))
        warnings.append("no attribution.json in the run directory: the attribution was redone from the raw traces")
    else:
        raise RunDirError(f"{run.path}: no attribution.json and no raw traces (raw/recording.npz): nothing to report")
    limit_w = _power_limit_w(run)
    doc = Document(f"GPU energy by kernel: `{' '.join(m.command) if m.command else '(Python API)'}`")
    doc.add(_header(run, result, limit_w))
    doc.add(kernel_table(rows, result.confidence), unattributed_table(rows, result.confidence))
    bounds = result.extra.get("power_bound_w")
    notes = [*warnings, *power_limit_notes(rows, limit_w, bounds if isinstance(bounds, dict) else None)]
    notes += [*m.notes, *result.notes]
    if result.whole_program_only:
        notes.insert(0, "whole-program energy only: kernels were not traced")
    if notes:
        doc.add(Heading("Notes"), Bullets(tuple(dict.fromkeys(notes))))
    doc.add(Heading("Power over time"), *_timeline_blocks(run, out_dir, raw, result, files))
    doc.add(*_replay_blocks(run, rows, result.confidence))
    md, html = write_document(doc, out_dir)
    return RenderedReport(
        kind=m.kind,
        markdown=md,
        html=html,
        files=tuple(files.values()),
        status=m.status,
        warnings=tuple(warnings),
        extra={"total_energy_j": result.total_energy_j},
    )


def _redo(run: RunDir, raw: Any) -> AttributionResult:
    """The attribution from the raw traces, with the traced intervals of a duty-cycled run and the priors of the
    graph replay the run directory keeps (``archline run --prior-replay``)."""
    from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy

    iv = raw.info.get("traced_intervals")
    traced = [(float(a), float(b)) for a, b in iv] if isinstance(iv, list) else None
    options = None
    if (run.path / "replay.csv").is_file():
        options = AttributionOptions(priors=replay_priors(run.path))
    return attribute_energy(
        raw.recording, raw.activities, program_span=raw.program_span, options=options, traced=traced
    )

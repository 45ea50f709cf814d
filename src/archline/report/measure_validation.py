"""Report of a measurement validation run: archline's energies of real programs and kernels against the counter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from archline.records import RunDir
from archline.report.doc import Document, Para, Table
from archline.report.registry import RenderedReport
from archline.report.render import write_document

__all__ = ["render_measure_validation"]


def _num(v: Any, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "—"


def render_measure_validation(run: RunDir, out_dir: Path) -> RenderedReport:
    """``benchmarks/validate_real_programs.py``'s run: each check, its error, σ and verdict."""
    summary = json.loads((run.path / "summary.json").read_text(encoding="utf-8"))
    m = run.manifest
    g = m.gpu
    doc = Document("Energy measurement of real programs and kernels, against NVML's energy counter")
    doc.add(
        Para(
            f"{g.get('name', '?')} (UUID {g.get('uuid', '?')}, driver {g.get('driver_version', '?')}); "
            f"power limit {m.state_before.get('power_limit_w', '?')} W, persistence "
            f"{m.state_before.get('persistence_mode', '?')}; run {m.created_utc}, status {m.status}. "
            f"{summary.get('passed')} of {summary.get('total')} checks passed."
        )
    )
    cells = []
    for r in summary["checks"]:
        passed = r.get("passed")
        cells.append(
            (
                str(r.get("check", "")),
                _num(r.get("measured_j"), ".5g"),
                _num(r.get("sigma_j"), ".2g"),
                _num(r.get("reference_j"), ".5g"),
                _num(r.get("error_pct"), "+.2f") + (" %" if r.get("error_pct") is not None else ""),
                _num(r.get("limit_pct"), ".0f") + (" %" if r.get("limit_pct") is not None else ""),
                "yes" if passed else "no",
                str(r.get("sensor_model") or r.get("error") or ""),
            )
        )
    doc.add(
        Table(
            ("check", "archline (J)", "σ (J)", "reference (J)", "error", "limit", "passed", "sensor model / error"),
            tuple(cells),
            caption="Energies in J; σ is archline's 1σ",
            notes=(
                "References: for archline measure, NVML's energy counter over the same span (corrected for "
                "its update grid); for regions and calls, the counter between two of its own update edges "
                "over seconds of back-to-back repetitions, divided by their number.",
            ),
        )
    )
    md, html = write_document(doc, out_dir)
    return RenderedReport("measure-validation", md, html, (), m.status)

"""Report of a graph-replay run: each kernel group's energy per step, isolated and marginal, and the sum."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from archline.records import RunDir
from archline.report.doc import Document, Para, Table
from archline.report.registry import RenderedReport
from archline.report.render import write_document

__all__ = ["render_replay"]


def _f(v: Any, fmt: str) -> str:
    try:
        return format(float(v), fmt)
    except (TypeError, ValueError):
        return "—"


def render_replay(run: RunDir, out_dir: Path) -> RenderedReport:
    """``archline replay``'s run directory as Markdown and HTML."""
    m = run.manifest
    s = json.loads((run.path / "replay.json").read_text(encoding="utf-8"))
    rows = run.read_csv("replay.csv")
    doc = Document("Graph replay: energy of each kernel group of one step")
    g = m.gpu
    doc.add(
        Para(
            f"{g.get('name', '?')} (UUID {g.get('uuid', '?')}, driver {g.get('driver_version', '?')}); run "
            f"{m.created_utc}, status {m.status}. Whole step: {_f(s['step_energy_j'], '.4g')} ± "
            f"{_f(s['step_sigma_j'], '.2g')} J in {_f(1e3 * s['step_time_s'], '.4g')} ms. Sum of the isolated "
            f"energies: {_f(s['sum_isolated_j'], '.4g')} ± {_f(s['sum_isolated_sigma_j'], '.2g')} J "
            f"({_f(s['sum_vs_step_pct'], '+.2f')} % of the step)."
        )
    )
    cells = tuple(
        (
            str(r["group"]),
            str(r["nodes_per_step"]),
            _f(1e3 * float(r["time_s"]), ".4g"),
            f"{_f(r['energy_j'], '.4g')} ± {_f(r['energy_sigma_j'], '.2g')}",
            _f(r["mean_power_w"], ".0f"),
            "—"
            if r.get("marginal_j") in (None, "")
            else f"{_f(r['marginal_j'], '.4g')} ± {_f(r['marginal_sigma_j'], '.2g')}",
        )
        for r in rows
    )
    doc.add(
        Table(
            ("group", "nodes/step", "time (ms)", "isolated energy (J)", "power (W)", "marginal energy (J)"),
            cells,
            caption="Per replay of the step; σ is 1 σ",
            notes=tuple(s.get("notes", [])),
        )
    )
    md, html = write_document(doc, out_dir)
    return RenderedReport("replay", md, html, (), m.status)

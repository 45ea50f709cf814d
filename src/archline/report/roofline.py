"""The energy-roofline section of a report (Markdown, an HTML fragment and PNG plots) rebuilt from a run directory."""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archline.errors import ArchlineError, RunDirError
from archline.model.build import MODEL_FILE, SWEEP_TABLE, fit_run_dir
from archline.model.io import load_model
from archline.model.reference import CITATION
from archline.model.result import RooflineModel
from archline.model.sweep import SweepRow, read_sweep_csv
from archline.records import RunDir, atomic_write_text
from archline.report.doc import Chart
from archline.report.interactive import chart_html, charts_available, page
from archline.report.registry import RenderedReport
from archline.report.render import blocks_html, blocks_markdown
from archline.report.roofline_ml import ml_section
from archline.report.roofline_plots import plot_power_line, plot_roofline_arch, roofline_chart
from archline.report.roofline_tables import Table, roofline_tables

__all__ = [
    "HTML_NAME",
    "MARKDOWN_NAME",
    "POWER_PLOT",
    "ROOFLINE_PLOT",
    "RooflineSection",
    "Table",
    "render",
    "render_roofline",
    "roofline_tables",
]

MARKDOWN_NAME = "roofline.md"
HTML_NAME = "roofline.html"
ROOFLINE_PLOT = "roofline_arch.png"
POWER_PLOT = "roofline_power.png"


@dataclass(frozen=True)
class RooflineSection:
    """What :func:`render_roofline` wrote, and the text it wrote."""

    markdown_path: Path
    html_path: Path
    plot_paths: tuple[Path, ...]
    markdown: str
    html_fragment: str


# --------------------------------------------------------------------------- rendering


def _md_table(t: Table) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [f"### {t.title}", "", line(t.header), "|" + "|".join("---" for _ in t.header) + "|"]
    out += [line(r) for r in t.rows]
    if t.note:
        out += ["", t.note]
    return "\n".join(out) + "\n"


def _html_table(t: Table) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in t.rows)
    note = f"<p>{e(t.note)}</p>" if t.note else ""
    return f"<h3>{e(t.title)}</h3>\n<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n{note}\n"


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}"></figure>'


def _summary_lines(model: RooflineModel) -> list[str]:
    lines = [model.race_to_halt.verdict[p] + "." for p in model.parameters.precisions]
    lines += [f"Note: {n}." for n in model.notes]
    return lines


def _manifest_gpu(d: Path) -> dict[str, Any]:
    """The run's ``gpu`` record ({} where the manifest cannot be read: the section then names no board)."""
    try:
        return dict(RunDir.open(d).manifest.gpu)
    except ArchlineError:
        return {}


def render_roofline(
    run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, model: RooflineModel | None = None
) -> RooflineSection:
    """Write ``roofline.md``, ``roofline.html`` (a fragment) and two PNGs into ``out_dir`` (default: the run directory).

    The model comes from ``model``, else the run directory's ``roofline_model.json``, else it
    is fitted from the sweep table now (and not written back).
    """
    d = Path(run_dir)
    if not (d / SWEEP_TABLE).is_file():
        raise RunDirError(f"{d}: no {SWEEP_TABLE} in the run directory")
    rows: list[SweepRow] = read_sweep_csv(d / SWEEP_TABLE)
    if model is None:
        model = load_model(d / MODEL_FILE) if (d / MODEL_FILE).is_file() else fit_run_dir(d, write=False)
    out = Path(out_dir) if out_dir is not None else d
    out.mkdir(parents=True, exist_ok=True)
    plot_roofline_arch(model, rows, out / ROOFLINE_PLOT)
    plot_power_line(model, rows, out / POWER_PLOT)
    tables = roofline_tables(model)
    title = f"Energy roofline: {model.device or 'measured GPU'}"
    intro = (
        f"Model of Choi et al. fitted to {model.fit.n_rows} sweep points "
        f"({', '.join(model.parameters.precisions)} precision) measured on {model.device or 'this GPU'}."
    )
    summary = _summary_lines(model)
    md = [f"## {title}", "", intro, ""] + [f"- {s}" for s in summary] + [""]
    md += [_md_table(t) for t in tables]
    md += [
        f"![Roofline and arch line]({ROOFLINE_PLOT})",
        "",
        f"![Power line]({POWER_PLOT})",
        "",
        f"Reference values: {CITATION}.",
        "",
    ]
    ml = ml_section(d, model.parameters, _manifest_gpu(d))
    if ml:
        md += [blocks_markdown(ml)]
    e = html.escape
    frag = [f'<section class="archline-roofline">\n<h2>{e(title)}</h2>\n<p>{e(intro)}</p>']
    frag.append("<ul>" + "".join(f"<li>{e(s)}</li>" for s in summary) + "</ul>")
    frag += [_html_table(t) for t in tables]
    caption = "Achieved TFLOP/s and GFLOP/J against intensity: model (lines) and measured points; hover for values."
    if charts_available():
        frag.append(chart_html(Chart(roofline_chart(model, rows), caption), "roofline-chart"))
    else:
        frag.append(_img(out / ROOFLINE_PLOT, "Roofline and arch line"))
    frag.append(_img(out / POWER_PLOT, "Power line"))
    frag.append(f"<p>Reference values: {e(CITATION)}.</p>")
    if ml:
        frag.append(blocks_html(ml, out))
    frag.append("</section>\n")
    markdown, fragment = "\n".join(md), "\n".join(frag)
    atomic_write_text(out / MARKDOWN_NAME, markdown)
    atomic_write_text(out / HTML_NAME, page(title, fragment))
    return RooflineSection(
        markdown_path=out / MARKDOWN_NAME,
        html_path=out / HTML_NAME,
        plot_paths=(out / ROOFLINE_PLOT, out / POWER_PLOT),
        markdown=markdown,
        html_fragment=fragment,
    )


def render(run: RunDir, out_dir: Path) -> RenderedReport:
    """The ``archline report`` renderer for run directories of kind ``roofline`` (see report.registry)."""
    sec = render_roofline(run.path, out_dir)
    return RenderedReport(
        kind="roofline",
        markdown=sec.markdown_path,
        html=sec.html_path,
        files=(sec.markdown_path, sec.html_path, *sec.plot_paths),
        status=run.manifest.status,
    )

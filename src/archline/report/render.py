"""Markdown and self-contained HTML writers for a report :class:`~archline.report.doc.Document`."""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Sequence
from pathlib import Path

from archline.records import atomic_write_text
from archline.report.doc import (
    Block,
    Bullets,
    Cell,
    Chart,
    Document,
    Figure,
    Heading,
    Missing,
    Para,
    Raw,
    SortKey,
    Table,
)
from archline.report.fmt import DASH
from archline.report.interactive import chart_html, charts_available, page

__all__ = ["blocks_html", "blocks_markdown", "to_html", "to_markdown", "write_document"]

_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _footnotes(table: Table) -> dict[str, int]:
    """Reason → footnote number, in order of first appearance."""
    out: dict[str, int] = {}
    for row in table.rows:
        for cell in row:
            if isinstance(cell, Missing) and cell.reason not in out:
                out[cell.reason] = len(out) + 1
    return out


def _cell_text(cell: Cell, notes: dict[str, int]) -> str:
    if isinstance(cell, Missing):
        return f"{DASH}{str(notes[cell.reason]).translate(_SUP)}"
    return cell


# --------------------------------------------------------------------------- Markdown


def _md_escape(s: str) -> str:
    return " ".join(s.split()).replace("|", r"\|")


def _md_table(t: Table) -> list[str]:
    notes = _footnotes(t)
    lines: list[str] = []
    if t.caption:
        lines += [f"**{t.caption}**", ""]
    lines.append("| " + " | ".join(_md_escape(h) for h in t.header) + " |")
    lines.append("|" + "|".join([":---"] + ["---:"] * (len(t.header) - 1)) + "|")
    for row in t.rows:
        lines.append("| " + " | ".join(_md_escape(_cell_text(c, notes)) for c in row) + " |")
    extra = [f"{DASH}{str(n).translate(_SUP)} {reason}" for reason, n in notes.items()] + list(t.notes)
    if extra:
        lines.append("")
        lines += [f"{s}  " for s in extra[:-1]] + [extra[-1]]
    return lines


def blocks_markdown(blocks: Sequence[Block]) -> str:
    """Blocks as GitHub-flavoured Markdown (no title): for a section inside a page that another renderer builds."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += [f"{'#' * max(2, min(6, b.level))} {b.text}", ""]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Table):
            out += [*_md_table(b), ""]
        elif isinstance(b, Figure):
            out += [f"![{_md_escape(b.caption)}]({b.path})", "", f"*{b.caption}*", ""]
        elif isinstance(b, Chart) and b.fallback:
            out += [f"![{_md_escape(b.caption)}]({b.fallback})", "", f"*{b.caption}*", ""]
        elif isinstance(b, Raw):
            out += [b.markdown.rstrip("\n"), ""]
    return "\n".join(out)


def to_markdown(doc: Document) -> str:
    """The document as GitHub-flavoured Markdown; figures are linked by their relative paths."""
    return f"# {doc.title}\n\n{blocks_markdown(doc.blocks)}".rstrip() + "\n"


# --------------------------------------------------------------------------- HTML


def _inline(s: str) -> str:
    esc = html.escape(s, quote=False)
    esc = re.sub(r"`([^`]+)`", r"<code>\1</code>", esc)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", esc)


#: A short cell that starts like a number (value ± σ with its unit, a range, a percentage) stays on one line;
#: text and long cells wrap, so no row pushes the page past the window.
_NUMERIC = re.compile(r"^[\s(≈~<>≤≥+\-−]*\d.{0,38}$")


def _sort_attr(key: SortKey) -> str:
    """The ``data-v`` attribute a sortable table's script reads (none for a missing value: it sorts last)."""
    if key is None or (isinstance(key, float) and not math.isfinite(key)):
        return ""
    return f' data-v="{html.escape(repr(float(key)) if not isinstance(key, str) else key)}"'


def _html_table(t: Table) -> list[str]:
    notes = _footnotes(t)
    out = ['<table class="sortable">' if t.sort_keys is not None else "<table>"]
    if t.caption:
        out.append(f"<caption>{_inline(t.caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in t.header) + "</tr></thead><tbody>")
    for i, row in enumerate(t.rows):
        keys = t.sort_keys[i] if t.sort_keys is not None else (None,) * len(row)
        cells = []
        for c, k in zip(row, keys, strict=True):
            v = _sort_attr(k)
            if isinstance(c, Missing):
                sup = f"<sup>{notes[c.reason]}</sup>"
                cells.append(f'<td class="missing" title="{html.escape(c.reason)}"{v}>{DASH}{sup}</td>')
            elif _NUMERIC.match(c):
                cells.append(f"<td{v}>{_inline(c)}</td>")
            else:
                cells.append(f'<td class="text"{v}>{_inline(c)}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    extra = [f"{DASH}<sup>{n}</sup> {_inline(r)}" for r, n in notes.items()] + [_inline(n) for n in t.notes]
    if extra:
        out.append('<div class="notes">' + "".join(f"<p>{e}</p>" for e in extra) + "</div>")
    return out


def _html_figure(fig: Figure, base_dir: Path, embed: bool) -> str:
    src = html.escape(fig.path)
    if embed:
        try:
            data = (base_dir / fig.path).read_bytes()
        except OSError:
            return f"<p>(figure missing: {html.escape(fig.path)})</p>"
        src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    alt = html.escape(fig.caption)
    return f'<figure><img src="{src}" alt="{alt}"><figcaption>{_inline(fig.caption)}</figcaption></figure>'


def _html_blocks(blocks: Sequence[Block], base_dir: Path, embed_images: bool, interactive: bool) -> list[str]:
    body: list[str] = []
    n_chart = 0
    for b in blocks:
        if isinstance(b, Heading):
            lvl = max(2, min(6, b.level))
            body.append(f"<h{lvl}>{_inline(b.text)}</h{lvl}>")
        elif isinstance(b, Para):
            body.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            body += _html_table(b)
        elif isinstance(b, Figure):
            body.append(_html_figure(b, base_dir, embed_images))
        elif isinstance(b, Chart):
            if interactive:
                n_chart += 1
                body.append(chart_html(b, f"chart-{n_chart}"))
            elif b.fallback:
                body.append(_html_figure(Figure(b.fallback, b.caption), base_dir, embed_images))
        elif isinstance(b, Raw):
            body.append(b.html)
    return body


def blocks_html(blocks: Sequence[Block], base_dir: Path) -> str:
    """Blocks as an HTML fragment (images embedded; charts as their PNG fallback), for a section of a page that
    another renderer builds with :func:`~archline.report.interactive.page` (which adds the sorting script)."""
    return "\n".join(_html_blocks(blocks, base_dir, True, False))


def to_html(doc: Document, base_dir: Path, *, embed_images: bool = True) -> str:
    """The document as one HTML page (report.interactive.page): inline CSS, images embedded as base64 (or linked),
    charts drawn by the embedded Vega-Lite script, or their PNG fallback where vl-convert-python is missing."""
    interactive = charts_available() and any(
        isinstance(b, Chart) or (isinstance(b, Raw) and 'class="vl-chart"' in b.html) for b in doc.blocks
    )
    body = [f"<h1>{_inline(doc.title)}</h1>", *_html_blocks(doc.blocks, base_dir, embed_images, interactive)]
    return page(doc.title, "\n".join(body), with_charts=interactive)


def write_document(doc: Document, out_dir: Path, stem: str = "report") -> tuple[Path, Path]:
    """Write ``stem.md`` and ``stem.html`` into ``out_dir`` (atomically); return their paths."""
    md_path = out_dir / f"{stem}.md"
    html_path = out_dir / f"{stem}.html"
    atomic_write_text(md_path, to_markdown(doc))
    atomic_write_text(html_path, to_html(doc, out_dir))
    return md_path, html_path

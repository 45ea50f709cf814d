"""Markdown and self-contained HTML writers for a report :class:`~archline.report.doc.Document`."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from archline.records import atomic_write_text
from archline.report.doc import Bullets, Cell, Document, Figure, Heading, Missing, Para, Table
from archline.report.fmt import DASH

__all__ = ["to_html", "to_markdown", "write_document"]

_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #bbb;margin-top:2em}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.88em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}
.notes{font-size:0.85em;color:#444;margin:0 0 1em 0}.notes p{margin:0.1em 0}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:0.9em;color:#444}code{background:#f4f4f4;padding:0 3px}
.missing{color:#999}
"""


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


def to_markdown(doc: Document) -> str:
    """The document as GitHub-flavoured Markdown; figures are linked by their relative paths."""
    out: list[str] = [f"# {doc.title}", ""]
    for b in doc.blocks:
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
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------- HTML


def _inline(s: str) -> str:
    esc = html.escape(s, quote=False)
    esc = re.sub(r"`([^`]+)`", r"<code>\1</code>", esc)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", esc)


def _html_table(t: Table) -> list[str]:
    notes = _footnotes(t)
    out = ["<table>"]
    if t.caption:
        out.append(f"<caption>{_inline(t.caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in t.header) + "</tr></thead><tbody>")
    for row in t.rows:
        cells = []
        for c in row:
            if isinstance(c, Missing):
                sup = f"<sup>{notes[c.reason]}</sup>"
                cells.append(f'<td class="missing" title="{html.escape(c.reason)}">{DASH}{sup}</td>')
            else:
                cells.append(f"<td>{_inline(c)}</td>")
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


def to_html(doc: Document, base_dir: Path, *, embed_images: bool = True) -> str:
    """The document as one HTML file: inline CSS, no scripts, images embedded as base64 (or linked)."""
    body: list[str] = [f"<h1>{_inline(doc.title)}</h1>"]
    for b in doc.blocks:
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
    head = f'<meta charset="utf-8"><title>{html.escape(doc.title)}</title><style>{_CSS}</style>'
    return f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head><body>\n' + "\n".join(body) + "\n</body></html>\n"


def write_document(doc: Document, out_dir: Path, stem: str = "report") -> tuple[Path, Path]:
    """Write ``stem.md`` and ``stem.html`` into ``out_dir`` (atomically); return their paths."""
    md_path = out_dir / f"{stem}.md"
    html_path = out_dir / f"{stem}.html"
    atomic_write_text(md_path, to_markdown(doc))
    atomic_write_text(html_path, to_html(doc, out_dir))
    return md_path, html_path

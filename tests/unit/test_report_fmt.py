"""Number formatting and the Markdown/HTML writers of reports."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from archline.report.doc import Bullets, Document, Figure, Heading, Missing, Para, Table
from archline.report.fmt import fmt_num, fmt_pct, fmt_pm, fmt_sig, fmt_value
from archline.report.render import to_html, to_markdown, write_document


@pytest.mark.parametrize(
    ("x", "digits", "text"),
    [
        (0.0123, 3, "0.0123"),
        (12.345, 3, "12.3"),
        (9.996, 3, "10.0"),
        (1980.0, 4, "1980"),
        (123456.7, 3, "123,000"),
        (-0.5, 3, "-0.500"),
        (1.2e-9, 3, "1.20e-09"),
        (3.4e7, 3, "3.40e+07"),
        (0.0, 3, "0"),
    ],
)
def test_fmt_sig(x: float, digits: int, text: str) -> None:
    assert fmt_sig(x, digits) == text


def test_fmt_num_keeps_integers_exact() -> None:
    assert fmt_num(132.0) == "132"
    assert fmt_num(1024) == "1024"
    assert fmt_num(0.0625) == "0.06250"


@pytest.mark.parametrize(
    ("x", "u", "text"),
    [
        (1.2345, 0.0123, "1.234 ± 0.012"),
        (0.51, 0.05, "0.510 ± 0.050"),
        (12345.6, 678.0, "12,350 ± 680"),
        (0.01961, 0.000196, "0.01961 ± 0.00020"),
        (1.5e-9, 2e-11, "(1.500 ± 0.020)e-09"),
        (3.0, None, "3.00 ± ?"),
        (3.0, 0.0, "3.00 ± 0"),
    ],
)
def test_fmt_pm_rounds_value_to_uncertainty(x: float, u: float | None, text: str) -> None:
    assert fmt_pm(x, u, "missing") == text


def test_missing_values_are_never_zero() -> None:
    for v in (None, float("nan"), float("inf"), "text", True):
        cell = fmt_value(v, "why")
        assert cell == Missing("why")
    assert fmt_pm(None, 1.0, "no energy") == Missing("no energy")
    assert fmt_pct(None, "no spec") == Missing("no spec")
    assert fmt_pct(0.957, "x") == "95.7 %"


def _doc(png: Path) -> Document:
    t = Table(
        ("", "A", "B|C"),
        (("row 1", "1.00", Missing("failed: out of memory")), ("row 2", Missing("not measured"), "x")),
        caption="Tab",
        notes=("A note.",),
    )
    return Document(
        "Title <b>",
        [Heading("Section"), Para("Text with `code`."), Bullets(("one", "two")), t, Figure(png.name, "A plot")],
    )


def test_markdown_table_footnotes_and_figures(tmp_path: Path) -> None:
    png = tmp_path / "p.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nfake")
    md = to_markdown(_doc(png))
    assert "| row 1 | 1.00 | —¹ |" in md
    assert "| row 2 | —² | x |" in md
    assert "B\\|C" in md
    assert "—¹ failed: out of memory" in md
    assert "—² not measured" in md
    assert "A note." in md
    assert "![A plot](p.png)" in md
    assert "- one" in md


def test_html_is_self_contained_with_embedded_images(tmp_path: Path) -> None:
    png = tmp_path / "p.png"
    data = b"\x89PNG\r\n\x1a\nfake"
    png.write_bytes(data)
    html = to_html(_doc(png), tmp_path)
    assert "data:image/png;base64," + base64.b64encode(data).decode() in html
    assert "<script" not in html
    assert "<link" not in html
    assert "Title &lt;b&gt;" in html
    assert "<code>code</code>" in html
    assert 'title="failed: out of memory"' in html
    linked = to_html(_doc(png), tmp_path, embed_images=False)
    assert 'src="p.png"' in linked


def test_write_document_writes_both_files(tmp_path: Path) -> None:
    png = tmp_path / "p.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    md, html = write_document(_doc(png), tmp_path)
    assert md.read_text(encoding="utf-8").startswith("# Title <b>")
    assert html.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_table_rejects_ragged_rows() -> None:
    with pytest.raises(ValueError, match="row 0"):
        Table(("a", "b"), (("only one",),))

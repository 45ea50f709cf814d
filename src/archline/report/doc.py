"""The report document model: headings, paragraphs, tables with '—' cells and figures, before rendering."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Block",
    "Bullets",
    "Cell",
    "Chart",
    "Document",
    "Figure",
    "Heading",
    "Missing",
    "Para",
    "Raw",
    "SortKey",
    "Table",
]


@dataclass(frozen=True)
class Missing:
    """A value that is not there; rendered as "—" with ``reason`` in the table's footnotes."""

    reason: str


#: A table cell: formatted text, or a missing value with its reason.
Cell = str | Missing
#: What a sortable table's cell sorts by: its number, its text, or None (missing: sorts last).
SortKey = float | str | None


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    """A paragraph of plain text; `code` spans are kept as code."""

    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table of pre-formatted cells. ``notes`` are printed under it, after the footnotes of its "—" cells.

    ``sort_keys``, one per cell, make the HTML table sortable by clicking a column's header: numbers sort as
    numbers, text as text, None (a missing value) last.
    """

    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""
    notes: tuple[str, ...] = ()
    sort_keys: tuple[tuple[SortKey, ...], ...] | None = None

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(f"table {self.caption!r}: row {i} has {len(row)} cells for {len(self.header)} columns")
        if self.sort_keys is not None and [len(k) for k in self.sort_keys] != [len(r) for r in self.rows]:
            raise ValueError(f"table {self.caption!r}: sort_keys must have one key per cell")


@dataclass(frozen=True)
class Figure:
    """A PNG written beside the report; ``path`` is relative to the report's folder (POSIX separators)."""

    path: str
    caption: str


@dataclass(frozen=True)
class Chart:
    """An interactive chart: a Vega-Lite spec in HTML (see report.interactive), the PNG ``fallback`` in Markdown.

    ``fallback`` is a path relative to the report's folder, like :attr:`Figure.path`; the HTML shows it where
    charts cannot be embedded.
    """

    spec: Mapping[str, Any]
    caption: str
    fallback: str | None = None


@dataclass(frozen=True)
class Raw:
    """A section rendered elsewhere (e.g. the roofline section inside a characterization report)."""

    markdown: str
    html: str


Block = Heading | Para | Bullets | Table | Figure | Chart | Raw


@dataclass
class Document:
    """A report being assembled: a title and blocks in reading order."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

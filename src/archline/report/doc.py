"""The report document model: headings, paragraphs, tables with '—' cells and figures, before rendering."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "Block",
    "Bullets",
    "Cell",
    "Document",
    "Figure",
    "Heading",
    "Missing",
    "Para",
    "Table",
]


@dataclass(frozen=True)
class Missing:
    """A value that is not there; rendered as "—" with ``reason`` in the table's footnotes."""

    reason: str


#: A table cell: formatted text, or a missing value with its reason.
Cell = str | Missing


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
    """A table of pre-formatted cells. ``notes`` are printed under it, after the footnotes of its "—" cells."""

    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(f"table {self.caption!r}: row {i} has {len(row)} cells for {len(self.header)} columns")


@dataclass(frozen=True)
class Figure:
    """A PNG written beside the report; ``path`` is relative to the report's folder (POSIX separators)."""

    path: str
    caption: str


Block = Heading | Para | Bullets | Table | Figure


@dataclass
class Document:
    """A report being assembled: a title and blocks in reading order."""

    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)

"""Reading the Markdown tables of a rendered report back, cell by cell, with their '—' footnotes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MdTable", "md_tables"]
_SUP = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


@dataclass
class MdTable:
    """A Markdown table of a report: header, body rows, and its footnotes (number → reason)."""

    header: list[str]
    rows: list[list[str]]
    notes: dict[str, str]

    def cell(self, row_label: str, col_label: str) -> str:
        """The cell in the row whose first cell is ``row_label`` and the column headed ``col_label``."""
        j = self.header.index(col_label)
        return next(r for r in self.rows if r[0] == row_label)[j]

    def column(self, col_label: str) -> list[str]:
        j = self.header.index(col_label)
        return [r[j] for r in self.rows]

    def reason(self, cell: str) -> str:
        """The footnote of a "—ⁿ" cell."""
        assert cell.startswith("—"), cell
        return self.notes[cell[1:].translate(_SUP)]


def md_tables(markdown: str) -> dict[str, MdTable]:
    """The pipe tables of a Markdown report by caption (the bold line above them)."""
    tables: dict[str, MdTable] = {}
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("**") and line.endswith("**") and i + 2 < len(lines) and lines[i + 2].startswith("|"):
            rows = []
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append([c.strip() for c in lines[j].strip().strip("|").split(" | ")])
                j += 1
            notes = {}
            j += 1
            while j < len(lines) and lines[j].startswith("—"):
                marker, _, reason = lines[j].partition(" ")
                notes[marker[1:].translate(_SUP)] = reason.strip()
                j += 1
            tables[line.strip("*")] = MdTable(rows[0], rows[2:], notes)
            i = j
        else:
            i += 1
    return tables

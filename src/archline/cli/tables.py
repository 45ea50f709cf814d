"""Terminal tables that never cut a number: names fold, numbers keep their full width, low-priority columns go first.

Rich shrinks every column of a table wider than the terminal, and a no-wrap cell then ends in "…", so an energy
of 470.3 J can print as "470…". :func:`fit_table` measures the numbers first, gives them their full width, drops
optional columns (highest ``drop`` first) until they fit, and lets only names and text wrap.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.box import HEAVY_HEAD, Box
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "fit_table"]

#: Width a name column keeps at least (folded over several lines if longer).
_NAME_MIN = 10


@dataclass(frozen=True)
class Col:
    """A column: ``num`` cells never wrap or shorten; ``name`` and ``text`` cells fold to fit.

    ``drop`` > 0 marks a column that may be left out at narrow widths; the highest goes first.
    """

    header: str
    kind: Literal["num", "name", "text"] = "num"
    drop: int = 0
    justify: Literal["left", "right", "center"] | None = None


def _cell_len(cell: str) -> int:
    return max((Text.from_markup(line).cell_len for line in cell.split("\n")), default=0)


def _needs(col: Col, cells: Sequence[str]) -> int:
    """Columns of text this column needs: its widest number, or a short stretch of a name."""
    widest = max((_cell_len(c) for c in cells), default=0)
    if col.kind == "num":
        longest_word = max((len(w) for w in col.header.split()), default=1)
        return max(widest, longest_word, 1)
    return min(max(widest, 1), _NAME_MIN)


def fit_table(
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    console: Console,
    title: str | None = None,
    caption: str | None = None,
    styles: Sequence[str | None] = (),
    section_ends: Collection[int] = (),
    box: Box | None = HEAVY_HEAD,
) -> tuple[Table, list[str]]:
    """A Rich table of ``rows`` that fits ``console.width``; also the headers of the columns it left out.

    ``styles`` gives each row a style; a row whose index is in ``section_ends`` ends a section (a rule follows).
    """
    keep = list(range(len(cols)))
    needs = [_needs(c, [r[i] for r in rows]) for i, c in enumerate(cols)]

    def width(idx: list[int]) -> int:
        return sum(needs[i] for i in idx) + 3 * len(idx) + 1  # padding of 1 each side, one rule per column

    while width(keep) > console.width:
        droppable = [i for i in keep if cols[i].drop > 0]
        if not droppable:
            return _stacked(cols, rows, title, caption, console.width), []
        keep.remove(max(droppable, key=lambda i: (cols[i].drop, i)))
    rows = _fold_names(cols, rows, keep, needs, console.width)
    table = Table(title=title, caption=caption, title_justify="left", box=box)
    for i in keep:
        c = cols[i]
        justify = c.justify or ("right" if c.kind == "num" else "left")
        if c.kind == "num":
            # A fixed width is never collapsed by Rich; the header wraps between words inside it.
            table.add_column(c.header, justify=justify, width=needs[i])
        else:
            table.add_column(c.header, justify=justify, overflow="fold", min_width=min(needs[i], _NAME_MIN))
    for n, r in enumerate(rows):
        style = styles[n] if n < len(styles) else None
        table.add_row(*(r[i] for i in keep), style=style, end_section=n in section_ends)
    return table, [cols[i].header for i in range(len(cols)) if i not in keep]


def _fold_name(cell: str, width: int) -> str:
    """A name longer than ``width`` broken after its dots, slashes, underscores or colons, where it has them
    (``arith.int32.`` / ``add``, not ``arith.int32.ad`` / ``d``); a part longer than the width still folds."""
    if width < 4 or "\n" in cell or _cell_len(cell) <= width:
        return cell
    lines: list[str] = []
    cur = ""
    for part in re.split(r"(?<=[./_:])", cell):
        if cur and len(cur) + len(part) > width:
            lines.append(cur)
            cur = part
        else:
            cur += part
    return "\n".join([*lines, cur])


def _fold_names(
    cols: Sequence[Col], rows: Sequence[Sequence[str]], keep: Sequence[int], needs: Sequence[int], width: int
) -> list[list[str]]:
    """The rows with each name column's long cells broken at their separators, to the width the column gets."""
    names = [i for i in keep if cols[i].kind == "name"]
    if len(names) != 1:
        return [list(r) for r in rows]
    i = names[0]
    # a text column is at least as wide as its header's longest word (Rich keeps headers whole)
    head = [max((len(w) for w in cols[j].header.split()), default=1) for j in range(len(cols))]
    others = sum(max(needs[j], head[j]) for j in keep if j != i) + 3 * len(keep) + 1
    avail = max(width - others, needs[i])
    return [[_fold_name(c, avail) if j == i else c for j, c in enumerate(r)] for r in rows]


def _stacked(
    cols: Sequence[Col], rows: Sequence[Sequence[str]], title: str | None, caption: str | None, width: int
) -> Table:
    """Too narrow for the numbers side by side: one block of "column  value" lines per row."""
    table = Table(title=title, caption=caption, title_justify="left", show_header=False)
    head = max((_cell_len(c.header) for c in cols), default=1)
    widest = max((_cell_len(r[i]) for r in rows for i, c in enumerate(cols) if c.kind == "num"), default=0)
    table.add_column("", no_wrap=True, min_width=head)
    # Values stay whole where they fit beside the headers; only names fold.
    table.add_column("", overflow="fold", min_width=min(widest, max(width - head - 7, 1)))
    for n, r in enumerate(rows):
        for j, (c, cell) in enumerate(zip(cols, r, strict=True)):
            table.add_row(c.header, cell, end_section=j == len(cols) - 1 and n < len(rows) - 1)
    return table

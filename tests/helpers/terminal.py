"""Reading Rich tables back from terminal text: their cells, and whether a JSON number is shown in full."""

from __future__ import annotations

import math
import re

_BARS = re.compile(r"[│┃║|]")
_NUM = re.compile(r"[-+−]?\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?")


def cells(text: str) -> set[str]:
    """Every table cell of the text, stripped (a folded name's pieces are separate cells). Tables without
    vertical rules (box.SIMPLE_HEAD) have at least two spaces between columns."""
    out: set[str] = set()
    for line in text.splitlines():
        parts = _BARS.split(line) if _BARS.search(line) else re.split(r"\s{2,}", line)
        out.update(c.strip() for c in parts if c.strip())
    return out


def column(text: str, index: int) -> str:
    """The pieces of one column of a ruled table, joined in order (folded names become whole again)."""
    out = []
    for line in text.splitlines():
        parts = _BARS.split(line)
        if len(parts) > index + 1 and line.lstrip()[:1] in "│┃":
            out.append(parts[index + 1].strip())
    return "".join(out)


def table_lines(text: str) -> list[str]:
    """The lines drawn by a table (rules, borders, cells): the ones that must fit the terminal."""
    return [ln for ln in text.splitlines() if _BARS.search(ln) or ln.strip()[:1] in "┏┡└┌├━─"]


def numbers(cell: str) -> list[tuple[float, float]]:
    """The numbers of a cell with the half-unit of their last digit (what rounding to that digit can hide)."""
    out = []
    for tok in _NUM.findall(cell):
        t = tok.replace(",", "").replace("−", "-")
        mant = t.split("e")[0]
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        scale = 10.0 ** int(t.split("e")[1]) if "e" in t else 1.0
        out.append((float(t), 0.5 * 10.0**-decimals * scale))
    return out


def shown(value: float, table_cells: set[str], scales: tuple[float, ...] = (1.0,)) -> bool:
    """True when some cell shows ``value`` (times one of ``scales``, e.g. 1e3 for ms) rounded to its digits, with
    at least three significant figures or all of the value's integer digits (a cut "470…" shows too few)."""
    for c in table_cells:
        for num, half in numbers(c):
            for s in scales:
                v = value * s
                digits_ok = half <= max(abs(v) * 5e-3, 0.5) or half <= 5e-4
                if digits_ok and math.isclose(num, v, rel_tol=0, abs_tol=half * 1.0001 + 1e-12):
                    return True
    return False

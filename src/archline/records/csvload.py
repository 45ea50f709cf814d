"""Strict, typed reading of a run directory's CSV tables: a bad cell is an error naming the file and line."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from archline.core.frames import Tabular
from archline.errors import RunDirError

__all__ = ["ColType", "CsvRow", "CsvTable", "load_csv"]

#: ``num``: float (empty, nan → None); ``int``: integer; ``bool``: true/false; ``text``: string;
#: ``any``: a number where the cell parses as one, else its text (e.g. a sweep value "1/16").
ColType = Literal["num", "int", "bool", "text", "any"]

Value = str | float | int | bool | None

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


@dataclass(frozen=True)
class CsvRow:
    """One data row: typed values by column, and its line in the file (1-based, header is line 1)."""

    line: int
    values: Mapping[str, Value]

    def num(self, col: str) -> float | None:
        v = self.values.get(col)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return float(v)

    def integer(self, col: str) -> int | None:
        v = self.num(col)
        return None if v is None else round(v)

    def text(self, col: str) -> str:
        v = self.values.get(col)
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    def flag(self, col: str) -> bool | None:
        v = self.values.get(col)
        return v if isinstance(v, bool) else None

    def raw(self, col: str) -> Value:
        return self.values.get(col)


@dataclass(frozen=True)
class CsvTable(Tabular):
    """A result table read from a run directory; ``.to_pandas()`` gives its typed columns."""

    path: Path
    columns: tuple[str, ...]
    rows: tuple[CsvRow, ...]

    def table_rows(self) -> list[dict[str, Any]]:
        return [{c: r.values.get(c) for c in self.columns} for r in self.rows]

    def table_title(self) -> str:
        return str(self.path)


def _convert(path: Path, line: int, col: str, kind: ColType, s: str) -> Value:
    s = s.strip()
    if s == "":
        return None
    if kind == "text":
        return s
    if kind == "bool":
        low = s.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise RunDirError(f"{path}:{line}: column {col!r} is not true/false ({s!r})")
    try:
        f = float(s)
    except ValueError:
        if kind == "any":
            return s
        raise RunDirError(f"{path}:{line}: column {col!r} is not a number ({s!r})") from None
    if not math.isfinite(f):
        return None
    if kind == "int":
        if not f.is_integer():
            raise RunDirError(f"{path}:{line}: column {col!r} is not an integer ({s!r})")
        return int(f)
    return f


def load_csv(path: Path, types: Mapping[str, ColType], required: Sequence[str], *, what: str = "table") -> CsvTable:
    """Read ``path`` strictly. Columns not in ``types`` are kept as text; ``required`` must be present.

    Raises :class:`RunDirError` (one line, naming the file and line) for a missing, empty,
    undecodable or malformed file, a missing column, a row of the wrong width or a bad cell.
    """
    if not path.is_file():
        raise RunDirError(f"{path}: missing from the run directory")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or not any(h.strip() for h in header):
                raise RunDirError(f"{path}: empty file (no header line), not a valid {what}")
            columns = tuple(h.strip() for h in header)
            dup = sorted({c for c in columns if columns.count(c) > 1})
            if dup:
                raise RunDirError(f"{path}: corrupt {what}: duplicate column(s) {', '.join(dup)}")
            absent = [c for c in required if c not in columns]
            if absent:
                raise RunDirError(f"{path}: not a valid {what}: missing column(s) {', '.join(absent)}")
            rows: list[CsvRow] = []
            for cells in reader:
                line = reader.line_num
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue
                if len(cells) != len(columns):
                    raise RunDirError(
                        f"{path}:{line}: corrupt {what}: {len(cells)} fields where the header has {len(columns)}"
                    )
                vals = {
                    c: _convert(path, line, c, types.get(c, "text"), s) for c, s in zip(columns, cells, strict=True)
                }
                rows.append(CsvRow(line, vals))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path}: not a readable CSV file ({exc})") from None
    except OSError as exc:
        raise RunDirError(f"{path}: cannot read ({exc.strerror})") from None
    return CsvTable(path, columns, tuple(rows))

"""The CSV form of GPU activity records (kernels, copies, memsets): written atomically, read back strictly."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import cast, get_args

from archline.core.activity import ACTIVITY_COLUMNS, ActivityKind, ActivityRecord
from archline.errors import TraceError
from archline.records.rundir import read_csv_cells, write_csv


def write_activities(path: str | os.PathLike[str], records: Iterable[ActivityRecord]) -> None:
    """Write records as CSV (atomically), in the order given."""
    write_csv(path, (r.to_row() for r in records), ACTIVITY_COLUMNS)


_KINDS = get_args(ActivityKind)


def _finite(s: str, key: str, path: Path, line: int) -> float:
    try:
        v = float(s) if s not in ("", "true", "false") else math.nan
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise TraceError(path, f"column {key!r} is not a finite number ({s!r})", line)
    return v


def _int(s: str, key: str, path: Path, line: int, empty: int) -> int:
    if s == "":
        return empty
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return int(float(s))
    except (ValueError, OverflowError):
        raise TraceError(path, f"column {key!r} is not an integer ({s!r})", line) from None


def _ns(s: str) -> int | None:
    try:
        return int(s) if s else None
    except ValueError:
        return None


def read_activities(path: str | os.PathLike[str]) -> list[ActivityRecord]:
    """Read an activities CSV written by :func:`write_activities` (plain, .gz or .xz), each column as its type says:
    a real program's trace holds hundreds of thousands of rows."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(p, "activities file not found")
    header, rows, lines = read_csv_cells(p)
    width = len(header)
    # each column's index; a column the header lacks reads the empty cell every row gets at index ``width``
    (ik, iname, i0, i1, ist, icor, idev, ib, i0n, i1n) = (
        header.index(c) if c in header else width
        for c in ("kind", "name", "start_s", "end_s", "stream", "correlation_id", "device", "bytes", "start_ns",
                  "end_ns")
    )  # fmt: skip
    out: list[ActivityRecord] = []
    for line, row in zip(lines, rows, strict=True):  # each row as wide as the header (read_csv_cells)
        row.append("")  # the cell of the columns the header lacks (the list is this function's own)
        kind = row[ik]
        if kind not in _KINDS:
            raise TraceError(p, f"unknown activity kind {kind!r}", line)
        start_s = _finite(row[i0], "start_s", p, line)
        end_s = _finite(row[i1], "end_s", p, line)
        if end_s < start_s:
            raise TraceError(p, "activity ends before it starts", line)
        out.append(
            ActivityRecord(
                name=row[iname],
                start_s=start_s,
                end_s=end_s,
                kind=cast("ActivityKind", kind),
                stream=_int(row[ist], "stream", p, line, -1),
                correlation_id=_int(row[icor], "correlation_id", p, line, -1),
                device=_int(row[idev], "device", p, line, -1),
                bytes=_int(row[ib], "bytes", p, line, 0),
                start_ns=_ns(row[i0n]),
                end_ns=_ns(row[i1n]),
            )
        )
    return out

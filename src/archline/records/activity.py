"""The CSV form of GPU activity records (kernels, copies, memsets): written atomically, read back strictly."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from archline.core.activity import ACTIVITY_COLUMNS, ActivityRecord
from archline.errors import TraceError
from archline.records.rundir import read_csv, write_csv


def write_activities(path: str | os.PathLike[str], records: Iterable[ActivityRecord]) -> None:
    """Write records as CSV (atomically), in the order given."""
    write_csv(path, (r.to_row() for r in records), ACTIVITY_COLUMNS)


def _num(row: Mapping[str, Any], key: str, path: Path, line: int) -> float:
    v = row.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(float(v)):
        raise TraceError(path, f"column {key!r} is not a finite number ({v!r})", line)
    return float(v)


def read_activities(path: str | os.PathLike[str]) -> list[ActivityRecord]:
    """Read an activities CSV written by :func:`write_activities`."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(p, "activities file not found")
    rows = read_csv(p)
    out: list[ActivityRecord] = []
    for i, row in enumerate(rows):
        line = i + 2  # header is line 1
        kind = row.get("kind")
        if kind not in ("kernel", "memcpy", "memset", "program"):
            raise TraceError(p, f"unknown activity kind {kind!r}", line)
        start_s = _num(row, "start_s", p, line)
        end_s = _num(row, "end_s", p, line)
        if end_s < start_s:
            raise TraceError(p, "activity ends before it starts", line)
        sns, ens = row.get("start_ns"), row.get("end_ns")
        out.append(
            ActivityRecord(
                name=str(row.get("name") or ""),
                start_s=start_s,
                end_s=end_s,
                kind=kind,
                stream=int(row.get("stream") or -1),
                correlation_id=int(row.get("correlation_id") or -1),
                device=int(row.get("device") or -1),
                bytes=int(row.get("bytes") or 0),
                start_ns=int(sns) if isinstance(sns, int) else None,
                end_ns=int(ens) if isinstance(ens, int) else None,
            )
        )
    return out

"""GPU activity records (kernels, copies, memsets) on the common clock, and their CSV form."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from archline.errors import TraceError
from archline.records import read_csv, write_csv

__all__ = [
    "ACTIVITY_COLUMNS",
    "ActivityKind",
    "ActivityRecord",
    "demangle",
    "memcpy_name",
    "read_activities",
    "short_name",
    "write_activities",
]

ActivityKind = Literal["kernel", "memcpy", "memset", "program"]

#: Columns of an activities CSV. ``start_ns``/``end_ns`` are the tracer's raw timestamps
#: (kept for exactness: float seconds since the epoch resolve only ~0.24 µs);
#: ``start_s``/``end_s`` are on the common clock (Unix-epoch seconds).
ACTIVITY_COLUMNS = (
    "kind",
    "name",
    "start_s",
    "end_s",
    "stream",
    "correlation_id",
    "device",
    "bytes",
    "start_ns",
    "end_ns",
)

# CUpti_ActivityMemcpyKind (cupti_activity.h, CUDA 13.0).
_MEMCPY_KINDS = {
    0: "unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}


def memcpy_name(copy_kind: int) -> str:
    """The display name of a copy, e.g. ``[memcpy HtoD]`` (CUPTI's copy kind code)."""
    return f"[memcpy {_MEMCPY_KINDS.get(int(copy_kind), str(copy_kind))}]"


@dataclass(frozen=True)
class ActivityRecord:
    """One span of GPU work on the common clock (Unix-epoch seconds).

    ``kind`` is ``kernel``, ``memcpy``, ``memset`` or ``program`` (a whole program whose
    kernels could not be traced). ``stream``, ``correlation_id`` and ``device`` are CUPTI's
    ids (-1 when unknown); ``bytes`` is the size of a copy or memset. ``start_ns``/``end_ns``
    keep the tracer's raw timestamps where there are any.
    """

    name: str
    start_s: float
    end_s: float
    kind: ActivityKind = "kernel"
    stream: int = -1
    correlation_id: int = -1
    device: int = -1
    bytes: int = 0
    start_ns: int | None = None
    end_ns: int | None = None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def to_row(self) -> dict[str, Any]:
        # Plain Python scalars: numpy's own would print as np.float64(…) in a CSV.
        return {c: _plain(getattr(self, c)) for c in ACTIVITY_COLUMNS}


def _plain(v: Any) -> Any:
    item = getattr(v, "item", None)
    return item() if callable(item) and not isinstance(v, (str, bytes)) else v


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


def demangle(names: Sequence[str]) -> dict[str, str]:
    """Demangle C++ kernel names with ``c++filt`` where it is installed (else names map to themselves)."""
    mangled = sorted({n for n in names if n.startswith("_Z")})
    out = {n: n for n in names}
    exe = shutil.which("c++filt")
    if not mangled or exe is None:
        return out
    try:
        res = subprocess.run([exe], input="\n".join(mangled), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return out
    lines = res.stdout.splitlines()
    if res.returncode == 0 and len(lines) == len(mangled):
        out.update(zip(mangled, lines, strict=True))
    return out


def short_name(name: str, width: int = 60) -> str:
    """A kernel name for a narrow table: template arguments and parameter lists elided, then cut."""
    depth = 0
    buf: list[str] = []
    for ch in name:
        if ch in "<(":
            if depth == 0:
                buf.append("<…>" if ch == "<" else "(…)")
            depth += 1
        elif ch in ">)" and depth > 0:
            depth -= 1
        elif depth == 0:
            buf.append(ch)
    s = "".join(buf).strip()
    if s.startswith("void "):
        s = s[5:]
    return s if len(s) <= width else s[: width - 1] + "…"

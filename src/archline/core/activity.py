"""GPU activity records (kernels, copies, memsets) on the common clock, and their CSV form."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ACTIVITY_COLUMNS",
    "ActivityKind",
    "ActivityRecord",
    "demangle",
    "is_communication",
    "memcpy_name",
    "short_name",
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


#: Name fragments of NCCL's communication kernels (all-reduce, all-gather, send/receive, ...).
_COMM_FRAGMENTS = ("ncclDevKernel_", "ncclKernel_")


def is_communication(name: str) -> bool:
    """Whether a kernel is NCCL communication (``ncclDevKernel_*``, ``ncclKernel_*``), mangled or demangled."""
    return any(f in name for f in _COMM_FRAGMENTS)


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

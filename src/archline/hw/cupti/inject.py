"""Trace any CUDA program in a child process: build archline's CUPTI injection library and read what it recorded.

Over 400 lines on purpose: the build of cupti_inject.c and the reader of its binary chunk
format (header, activities, clock pairs, detach and incomplete records) are one protocol.
"""

from __future__ import annotations

import enum
import hashlib
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from archline.core.activity import ActivityRecord, memcpy_name
from archline.errors import CUPTIUnavailableError, TraceError
from archline.hw.cupti.processes import (
    InjectedDevice,
    InjectedProcess,
    parse_devices,
    parse_process_text,
    pid_from_name,
)
from archline.hw.cupti.trace import ClockMap, ClockPair, RawActivity, to_records

__all__ = [
    "ACTIVITY_DTYPE",
    "CHUNK_HEADER",
    "INJECTION_SOURCE",
    "MAGIC",
    "ActivityType",
    "ChunkType",
    "CuptiPaths",
    "InjectedDevice",
    "InjectedProcess",
    "InjectionTrace",
    "build_injection",
    "find_cupti",
    "injection_env",
    "read_injection_output",
]

INJECTION_SOURCE = Path(__file__).with_name("cupti_inject.c")
_LIB_NAMES = ("libcupti.so.13", "libcupti.so.12", "libcupti.so")


@dataclass(frozen=True)
class CuptiPaths:
    """Where CUPTI's headers and library and CUDA's ``cuda.h`` are."""

    include_dir: Path
    lib_path: Path
    cuda_include_dir: Path


def _site_dirs() -> list[Path]:
    out = []
    for p in sys.path:
        d = Path(p) / "nvidia"
        if d.is_dir():
            out.append(d)
    return out


def _candidates() -> list[tuple[Path, Path]]:
    """(include dir, lib dir) pairs where a CUPTI install may live, most specific first."""
    pairs: list[tuple[Path, Path]] = []
    inc, lib = os.environ.get("ARCHLINE_CUPTI_INCLUDE"), os.environ.get("ARCHLINE_CUPTI_LIB")
    if inc and lib:
        pairs.append((Path(inc), Path(lib)))
    # A CUDA toolkit first: its CUPTI, cuda.h and crt/ headers belong together (seen on the GPU
    # image: the nvidia-cuda-cupti wheel's include dir has cuda.h but not crt/host_defines.h).
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            h = Path(home)
            pairs += [
                (h / "extras" / "CUPTI" / "include", h / "extras" / "CUPTI" / "lib64"),
                (h / "include", h / "lib64"),
            ]
    for nv in _site_dirs():
        # nvidia-cuda-cupti wheels: nvidia/cu13/{include,lib} (CUDA 13), nvidia/cuda_cupti/{include,lib} (12).
        pairs += [
            (nv / "cu13" / "include", nv / "cu13" / "lib"),
            (nv / "cuda_cupti" / "include", nv / "cuda_cupti" / "lib"),
        ]
    return pairs


def _cuda_include_dirs() -> list[Path]:
    dirs = [Path(p) / "include" for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    dirs.append(Path("/usr/local/cuda/include"))
    for nv in _site_dirs():
        dirs += [nv / "cu13" / "include", nv / "cuda_runtime" / "include"]
    return dirs


def find_cupti(
    candidates: Sequence[tuple[Path, Path]] | None = None, cuda_include_dirs: Sequence[Path] | None = None
) -> CuptiPaths:
    """Locate CUPTI's ``cupti.h`` and ``libcupti`` and CUDA's ``cuda.h``.

    Searched by default: ``$ARCHLINE_CUPTI_INCLUDE``/``$ARCHLINE_CUPTI_LIB``, the
    nvidia-cuda-cupti wheel, ``$CUDA_HOME`` and ``/usr/local/cuda``; ``candidates`` (include
    dir, lib dir) and ``cuda_include_dirs`` replace those lists.
    """
    found: tuple[Path, Path] | None = None
    for inc, lib in _candidates() if candidates is None else candidates:
        if not (inc / "cupti.h").is_file():
            continue
        for name in _LIB_NAMES:
            if (lib / name).exists():
                found = (inc, lib / name)
                break
        if found:
            break
    if found is None:
        raise CUPTIUnavailableError(
            "CUPTI headers and library not found (install nvidia-cuda-cupti or the CUDA toolkit, "
            "or set ARCHLINE_CUPTI_INCLUDE and ARCHLINE_CUPTI_LIB)"
        )
    dirs = list(_cuda_include_dirs() if cuda_include_dirs is None else cuda_include_dirs)
    for d in [*dirs, found[0]]:
        # A usable cuda.h comes with its crt/ headers (a wheel's include dir may lack them).
        if (d / "cuda.h").is_file() and ((d / "crt").is_dir() or d == found[0]):
            return CuptiPaths(found[0], found[1], d)
    raise CUPTIUnavailableError("cuda.h not found (set CUDA_HOME to a CUDA toolkit) to build the CUPTI injection")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "archline" / "inject"


def build_injection(cache_dir: str | os.PathLike[str] | None = None, *, cc: str | None = None) -> Path:
    """Compile ``cupti_inject.c`` into a shared library (cached by source and CUPTI paths) and return it."""
    paths = find_cupti()
    compiler = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        raise CUPTIUnavailableError("no C compiler (cc) to build the CUPTI injection library")
    src = INJECTION_SOURCE.read_bytes()
    key = hashlib.sha256(src + str(paths).encode()).hexdigest()[:16]
    out_dir = Path(cache_dir) if cache_dir is not None else _cache_dir()
    lib = out_dir / key / "libarchline_cupti_inject.so"
    if lib.is_file():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    tmp = lib.with_suffix(f".{os.getpid()}.tmp")
    libdir = paths.lib_path.parent
    cmd = [
        compiler,
        "-shared",
        "-fPIC",
        "-O2",
        "-Wall",
        "-Wextra",
        f"-I{paths.cuda_include_dir}",
        f"-I{paths.include_dir}",
        str(INJECTION_SOURCE),
        f"-L{libdir}",
        f"-l:{paths.lib_path.name}",
        f"-Wl,-rpath,{libdir}",
        "-lpthread",
        "-ldl",
        "-o",
        str(tmp),
    ]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise CUPTIUnavailableError(f"cannot run the C compiler {compiler} ({exc})") from None
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[:200])
        raise CUPTIUnavailableError(f"building the CUPTI injection library failed: {first}")
    os.replace(tmp, lib)
    return lib


def injection_env(lib: Path, out_dir: Path) -> dict[str, str]:
    """Environment variables that make a CUDA program load the library and write into ``out_dir``."""
    return {"CUDA_INJECTION64_PATH": str(lib), "ARCHLINE_CUPTI_OUT": str(out_dir)}


@dataclass
class InjectionTrace:
    """What the injection library wrote: records on the common clock, clock maps, drops, errors."""

    records: list[ActivityRecord] = field(default_factory=list)
    clocks: list[ClockMap] = field(default_factory=list)
    dropped: int = 0
    errors: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    #: Files whose last chunk was cut short (the process died while writing it).
    truncated: list[Path] = field(default_factory=list)
    #: With a duty cycle: the host-clock intervals (s) in which kernels and copies were traced;
    #: None when tracing was on throughout.
    traced: list[tuple[float, float]] | None = None
    #: With a duty cycle: seconds each switch of tracing took (enable or disable calls; attaching CUPTI).
    switch_s: list[float] = field(default_factory=list)
    #: Duty cycle in detach mode: seconds each on-switch after a detach took (attaching CUPTI again).
    attach_s: list[float] = field(default_factory=list)
    #: Duty cycle in detach mode: seconds cuptiFinalize held the program's thread, per detach.
    detach_s: list[float] = field(default_factory=list)
    #: Duty cycle in detach mode: seconds from asking for each detach to its end (the program's
    #: next CUDA call comes in between).
    detach_wait_s: list[float] = field(default_factory=list)
    #: Records CUPTI handed over without a start or end time (a forced flush caught them in flight),
    #: left out.
    incomplete: int = 0
    #: One per file: the process that wrote it, its devices (by UUID) and its own records.
    processes: list[InjectedProcess] = field(default_factory=list)


# The binary format of cupti_inject.c (its header comment describes it).
#: Every chunk starts with MAGIC, its ChunkType, a count and its payload's size in bytes.
MAGIC = b"ALC1"
CHUNK_HEADER = struct.Struct("<4sIII")


class ChunkType(enum.IntEnum):
    CLOCK_START = 1
    CLOCK_END = 2
    ACTIVITIES = 3
    NAMES = 4
    DROPPED = 5
    ERROR = 6
    TRACE_ON = 7
    TRACE_OFF = 8
    DETACH = 9
    INCOMPLETE = 10
    PROCESS = 11
    DEVICES = 12


class ActivityType(enum.IntEnum):
    """The ``kind`` field of an ACTIVITIES record."""

    KERNEL = 1
    MEMCPY = 2
    MEMSET = 3


ACTIVITY_DTYPE = np.dtype(
    [
        ("kind", "u1"),
        ("copy_kind", "u1"),
        ("reserved0", "<u2"),
        ("name_id", "<u4"),
        ("start_ns", "<u8"),
        ("end_ns", "<u8"),
        ("stream", "<u4"),
        ("correlation", "<u4"),
        ("device", "<u4"),
        ("reserved1", "<u4"),
        ("bytes", "<u8"),
    ]
)
_NAME_ENTRY = struct.Struct("<II")


def traced_intervals(marks: list[tuple[float, bool]], end_s: float) -> list[tuple[float, float]]:
    """Intervals [on, off] from time-ordered (time, on?) switch marks; an open one ends at ``end_s``."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    for t, on in sorted(marks):
        if on and start is None:
            start = t
        elif not on and start is not None:
            if t > start:
                out.append((start, t))
            start = None
    if start is not None and end_s > start:
        out.append((start, end_s))
    return out


def _finish_file(
    path: Path,
    start: list[ClockPair],
    end: list[ClockPair],
    raw: list[RawActivity],
    out: InjectionTrace,
    marks: list[tuple[int, bool]] | None = None,
    env: dict[str, str] | None = None,
    devices: dict[int, InjectedDevice] | None = None,
) -> None:
    info = dict(env or {})
    pid = int(info["pid"]) if info.get("pid", "").isdigit() else pid_from_name(path)
    proc = InjectedProcess(path, pid, info, dict(devices or {}))
    out.processes.append(proc)
    if not start:
        if raw:
            raise TraceError(path, "records without clock pairs")
        return
    clock = ClockMap.from_pairs(start, end)
    out.clocks.append(clock)
    recs = to_records(raw, clock)
    out.records.extend(recs)
    proc.records, proc.clock = recs, clock
    # A duty cycle that never switched off (the automatic one, on a program below its launch
    # rate) traced everything: no traced intervals then, as without a duty cycle.
    if marks and not all(on for _, on in marks):
        host = [(clock.to_host_s(ns), on) for ns, on in marks]
        last = max([clock.to_host_s(p.device_ns) for p in end] + [r.end_s for r in recs] + [t for t, _ in host])
        proc.traced = traced_intervals(host, last)
        out.traced = (out.traced or []) + proc.traced


def _parse_text_file(path: Path, out: InjectionTrace) -> None:
    """The text format of earlier versions of the library (``cupti-<pid>.tsv``), kept for old run directories."""
    start: list[ClockPair] = []
    end: list[ClockPair] = []
    raw: list[RawActivity] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    # The last line may be cut short if the program died while writing it.
    if lines and lines[-1] != "":
        lines = lines[:-1]
    for i, line in enumerate(lines, start=1):
        if not line:
            continue
        f = line.split("\t")
        tag = f[0]
        try:
            if tag == "C" and len(f) >= 5:
                pair = ClockPair(int(f[1]), int(f[2]), int(f[3]))
                (end if f[4] == "end" else start).append(pair)
            elif tag in ("K", "M", "S") and len(f) >= 8:
                s, e, stream, corr, dev, nbytes = (int(x) for x in f[1:7])
                if tag == "K":
                    raw.append(("kernel", f[7] or "(unnamed kernel)", s, e, stream, corr, dev, 0))
                elif tag == "M":
                    raw.append(("memcpy", memcpy_name(int(f[7] or 0)), s, e, stream, corr, dev, nbytes))
                else:
                    raw.append(("memset", "[memset]", s, e, stream, corr, dev, nbytes))
            elif tag == "D" and len(f) >= 2:
                out.dropped += int(f[1])
            elif tag == "E" and len(f) >= 4:
                out.errors.append(f"{f[1]} failed with {f[3]}")
            else:
                raise ValueError(f"unexpected record {line[:40]!r}")
        except ValueError as exc:
            raise TraceError(path, f"malformed injection record ({exc})", i) from None
    _finish_file(path, start, end, raw, out)


def _names(data: bytes, offset: int, count: int, nbytes: int, names: dict[int, str]) -> None:
    pos, stop = offset, offset + nbytes
    for _ in range(count):
        if pos + 8 > stop:
            raise ValueError("name entry past the end of its chunk")
        ident, length = _NAME_ENTRY.unpack_from(data, pos)
        if pos + 8 + length > stop:
            raise ValueError("name past the end of its chunk")
        names[ident] = data[pos + 8 : pos + 8 + length].decode("utf-8", errors="replace")
        pos += (8 + length + 7) & ~7


def _activities(acts: np.ndarray[Any, Any], names: dict[int, str]) -> list[RawActivity]:
    out: list[RawActivity] = []
    memcpy_names: dict[int, str] = {}
    kernel, memcpy, memset = int(ActivityType.KERNEL), int(ActivityType.MEMCPY), int(ActivityType.MEMSET)
    for kind, copy_kind, _, name_id, s, e, stream, corr, dev, _, nbytes in acts.tolist():
        if kind == kernel:
            out.append(("kernel", names.get(name_id) or "(unnamed kernel)", s, e, stream, corr, dev, 0))
        elif kind == memcpy:
            name = memcpy_names.get(copy_kind)
            if name is None:
                name = memcpy_names[copy_kind] = memcpy_name(copy_kind)
            out.append(("memcpy", name, s, e, stream, corr, dev, nbytes))
        elif kind == memset:
            out.append(("memset", "[memset]", s, e, stream, corr, dev, nbytes))
    return out


def _parse_binary_file(path: Path, out: InjectionTrace) -> None:
    data = path.read_bytes()
    start: list[ClockPair] = []
    end: list[ClockPair] = []
    names: dict[int, str] = {}
    chunks: list[np.ndarray[Any, Any]] = []
    marks: list[tuple[int, bool]] = []
    detached = False  # a DETACH since the last on-switch: the next on-switch attaches CUPTI again
    env: dict[str, str] = {}
    devices: dict[int, InjectedDevice] = {}
    pos, size = 0, len(data)
    while pos + CHUNK_HEADER.size <= size:
        magic, kind, count, nbytes = CHUNK_HEADER.unpack_from(data, pos)
        if magic != MAGIC:
            raise TraceError(path, f"malformed injection output: no chunk header at byte {pos}")
        body = pos + CHUNK_HEADER.size
        if body + nbytes > size:
            break  # the process died while writing this chunk
        try:
            if kind in (ChunkType.CLOCK_START, ChunkType.CLOCK_END):
                if count * 24 > nbytes:
                    raise ValueError(f"{count} clock pairs do not fit in {nbytes} bytes")
                vals = np.frombuffer(data, "<u8", 3 * count, body).reshape(count, 3).tolist()
                pairs = [ClockPair(a, d, b) for a, d, b in vals]
                if kind == ChunkType.CLOCK_START:
                    start.extend(pairs)
                else:
                    end = pairs  # written again at each detach: the last set counts
            elif kind == ChunkType.ACTIVITIES:
                if count * ACTIVITY_DTYPE.itemsize != nbytes:
                    raise ValueError(f"{count} activity records do not fill {nbytes} bytes")
                chunks.append(np.frombuffer(data, ACTIVITY_DTYPE, count, body))
            elif kind == ChunkType.NAMES:
                _names(data, body, count, nbytes, names)
            elif kind == ChunkType.DROPPED:
                if nbytes < 8:
                    raise ValueError("dropped-records chunk without its count")
                out.dropped += int(np.frombuffer(data, "<u8", 1, body)[0])
            elif kind == ChunkType.ERROR:
                text = data[body : body + nbytes].rstrip(b"\0").decode("utf-8", errors="replace")
                f = text.split("\t")
                out.errors.append(f"{f[0]} failed with {f[2]}" if len(f) >= 3 else text)
            elif kind in (ChunkType.TRACE_ON, ChunkType.TRACE_OFF):
                if count * 16 > nbytes:
                    raise ValueError(f"{count} switch marks do not fit in {nbytes} bytes")
                on = kind == ChunkType.TRACE_ON
                vals = np.frombuffer(data, "<u8", 2 * count, body).reshape(count, 2).tolist()
                marks.extend((int(ns), on) for ns, _ in vals)
                out.switch_s.extend(took * 1e-9 for _, took in vals if took)
                if on and detached:  # an attach only in detach mode (disable mode only enables kinds again)
                    out.attach_s.extend(took * 1e-9 for _, took in vals if took)
                    detached = False
            elif kind == ChunkType.INCOMPLETE:
                if nbytes < 8:
                    raise ValueError("incomplete-records chunk without its count")
                out.incomplete += int(np.frombuffer(data, "<u8", 1, body)[0])
            elif kind == ChunkType.DETACH:
                if count * 16 > nbytes:
                    raise ValueError(f"{count} detach records do not fit in {nbytes} bytes")
                vals = np.frombuffer(data, "<u8", 2 * count, body).reshape(count, 2).tolist()
                out.detach_wait_s.extend(w * 1e-9 for w, _ in vals)
                out.detach_s.extend(f * 1e-9 for _, f in vals)
                detached = True
            elif kind == ChunkType.PROCESS:
                env.update(parse_process_text(data[body : body + nbytes].rstrip(b"\0").decode("utf-8", "replace")))
            elif kind == ChunkType.DEVICES:
                parse_devices(data, body, count, nbytes, devices)
            # Other chunk types come from a newer library: skipped.
        except ValueError as exc:
            raise TraceError(path, f"malformed injection chunk at byte {pos} ({exc})") from None
        pos = body + nbytes
    if pos != size:
        out.truncated.append(path)
    raw: list[RawActivity] = []
    for acts in chunks:
        raw.extend(_activities(acts, names))
    _finish_file(path, start, end, raw, out, marks, env, devices)


def read_injection_output(out_dir: str | os.PathLike[str]) -> InjectionTrace:
    """Read every ``cupti-<pid>-<ns>.bin`` (and older ``cupti-<pid>.bin``/``.tsv``) in ``out_dir``: one per CUDA
    process, each also in :attr:`InjectionTrace.processes` with its own records and devices."""
    d = Path(out_dir)
    out = InjectionTrace()
    for p in sorted([*d.glob("cupti-*.bin"), *d.glob("cupti-*.tsv")]):
        out.files.append(p)
        if p.suffix == ".bin":
            _parse_binary_file(p, out)
        else:
            _parse_text_file(p, out)
    out.records.sort(key=lambda r: (r.start_s, r.end_s))
    return out

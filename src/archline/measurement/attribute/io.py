"""The raw data of an attribution run (sensors, activities, clock) in a run directory, written as it arrives."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archline.core.activity import ActivityKind, ActivityRecord
from archline.core.recording import Recording
from archline.errors import RunDirError, TraceError
from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy
from archline.records import atomic_write_text, write_json
from archline.records.activity import read_activities, write_activities
from archline.records.attribution import RAW_FILES, RESULT_FILES, AttributionResult

__all__ = [
    "ACTIVITIES_FILE",
    "CLOCK_FILE",
    "RAW_FILES",
    "RECORDING_FILE",
    "RESULT_FILES",
    "RUNINFO_FILE",
    "ChunkWriter",
    "RawRun",
    "load_raw",
    "reanalyze",
    "save_raw",
]

RECORDING_FILE = "raw/recording.npz"
ACTIVITIES_FILE = "raw/activities.csv"
CLOCK_FILE = "raw/clock.json"
RUNINFO_FILE = "raw/run.json"
_PART_GLOB = "activities.part-*.tsv"


class ChunkWriter:
    """Writes batches of raw device-clock activities to numbered files as they arrive.

    Each chunk is written atomically, so a run killed midway leaves every completed batch
    readable (:func:`read_chunks`). :meth:`remove` deletes the chunks once the final table is in.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._n = itertools.count(1)
        self._lock = threading.Lock()
        self.paths: list[Path] = []

    def __call__(self, batch: Iterable[tuple[ActivityKind, str, int, int, int, int, int, int]]) -> None:
        lines = []
        for kind, name, s, e, stream, corr, dev, nbytes in batch:
            clean = name.replace("\t", " ").replace("\n", " ")
            lines.append(f"{kind}\t{s}\t{e}\t{stream}\t{corr}\t{dev}\t{nbytes}\t{clean}\n")
        with self._lock:
            p = self.directory / f"activities.part-{next(self._n):05d}.tsv"
            atomic_write_text(p, "".join(lines))
            self.paths.append(p)

    def remove(self) -> None:
        with self._lock:
            for p in self.paths:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            self.paths = []


def read_chunks(directory: str | os.PathLike[str]) -> list[tuple[ActivityKind, str, int, int, int, int, int, int]]:
    """The raw activities left in chunk files by an interrupted run (device clock)."""
    out: list[tuple[ActivityKind, str, int, int, int, int, int, int]] = []
    for p in sorted(Path(directory).glob(_PART_GLOB)):
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
            f = line.split("\t")
            if len(f) < 8 or f[0] not in ("kernel", "memcpy", "memset"):
                raise TraceError(p, "malformed activity chunk line", i)
            kind: ActivityKind = f[0]  # type: ignore[assignment]
            try:
                s, e, stream, corr, dev, nbytes = (int(x) for x in f[1:7])
            except ValueError:
                raise TraceError(p, "malformed activity chunk line (a field is not an integer)", i) from None
            out.append((kind, f[7], s, e, stream, corr, dev, nbytes))
    return out


@dataclass
class RawRun:
    """What a run recorded, enough to redo the attribution anywhere."""

    recording: Recording
    activities: list[ActivityRecord]
    program_span: tuple[float, float] | None = None
    clock: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)


def save_raw(
    directory: str | os.PathLike[str],
    recording: Recording,
    activities: Sequence[ActivityRecord],
    *,
    program_span: tuple[float, float] | None = None,
    clock: Mapping[str, Any] | None = None,
    info: Mapping[str, Any] | None = None,
) -> None:
    """Write the recording (``raw/recording.npz``), the activities, the clock map and the run info."""
    from archline.records.traces import save_recording

    d = Path(directory)
    (d / "raw").mkdir(parents=True, exist_ok=True)
    save_recording(d / RECORDING_FILE, recording)
    write_activities(d / ACTIVITIES_FILE, activities)
    if clock is not None:
        write_json(d / CLOCK_FILE, dict(clock))
    run_info = dict(info or {})
    run_info["program_span"] = list(program_span) if program_span is not None else None
    write_json(d / RUNINFO_FILE, run_info)


def load_raw(directory: str | os.PathLike[str]) -> RawRun:
    """Read what :func:`save_raw` wrote."""
    import json

    from archline.records.traces import load_recording

    d = Path(directory)
    if not (d / RECORDING_FILE).is_file():
        raise RunDirError(f"{d}: no {RECORDING_FILE}; not an archline run with raw traces")
    rec = load_recording(d / RECORDING_FILE)
    # shipped runs keep large timelines compressed (.gz, or .xz where a smaller checkout matters)
    found = [p for p in (d / (ACTIVITIES_FILE + z) for z in ("", ".gz", ".xz")) if p.is_file()]
    acts = read_activities(found[0]) if found else []
    info: dict[str, Any] = {}
    clock = None
    try:
        if (d / RUNINFO_FILE).is_file():
            info = json.loads((d / RUNINFO_FILE).read_text(encoding="utf-8"))
        if (d / CLOCK_FILE).is_file():
            clock = json.loads((d / CLOCK_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{d}: corrupt raw run information ({exc})") from None
    span = info.get("program_span")
    program_span = (float(span[0]), float(span[1])) if isinstance(span, list) and len(span) == 2 else None
    return RawRun(rec, acts, program_span, clock, info)


def reanalyze(directory: str | os.PathLike[str], options: AttributionOptions | None = None) -> AttributionResult:
    """Redo the attribution of a run directory from its raw traces (on any machine, no GPU needed)."""
    raw = load_raw(directory)
    iv = raw.info.get("traced_intervals")
    traced = [(float(a), float(b)) for a, b in iv] if isinstance(iv, list) else None
    return attribute_energy(
        raw.recording, raw.activities, program_span=raw.program_span, options=options, traced=traced
    )

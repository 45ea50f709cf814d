"""A characterization run directory loaded for reporting: manifest, typed results rows, targets, what is missing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archline.records import Manifest, RunDir
from archline.records.characterize import RESULT_COLUMNS, TARGET_COLUMNS
from archline.records.csvload import ColType, CsvRow, CsvTable, load_csv

__all__ = [
    "RESULTS_NAME",
    "RESULT_TYPES",
    "TARGETS_NAME",
    "TARGET_TYPES",
    "RunData",
    "load_run_data",
    "manifest_value",
    "open_run",
]

RESULTS_NAME = "results.csv"
TARGETS_NAME = "targets.csv"

_TEXT = ("name", "group", "unit", "description", "sweep_var", "throttle_reasons", "status", "note")
_BOOL = ("throttled", "verified", "resolvable")

#: How each results.csv column is parsed; every other schema column is a number.
RESULT_TYPES: dict[str, ColType] = {
    c: ("text" if c in _TEXT else "bool" if c in _BOOL else "any" if c == "sweep_value" else "num")
    for c in RESULT_COLUMNS
}
RESULT_TYPES["mipp_class"] = "text"

TARGET_TYPES: dict[str, ColType] = {
    "target": "text",
    "required": "any",
    "measured": "any",
    "unit": "text",
    "passed": "bool",
    "detail": "text",
}
assert set(TARGET_TYPES) == set(TARGET_COLUMNS)


def open_run(path: str | os.PathLike[str] | RunDir) -> RunDir:
    """A :class:`RunDir` for ``path`` (validated manifest), or ``path`` itself if it already is one."""
    return path if isinstance(path, RunDir) else RunDir.open(path)


def manifest_value(section: Mapping[str, Any], *keys: str) -> Any:
    """The first of ``keys`` present (and not None) in a manifest section, else None."""
    for k in keys:
        v = section.get(k)
        if v is not None and v != "":
            return v
    return None


@dataclass(frozen=True)
class RunData:
    """What the characterization report is built from: nothing else is read."""

    run: RunDir
    results: CsvTable
    targets: CsvTable | None

    @property
    def manifest(self) -> Manifest:
        return self.run.manifest

    @property
    def rows(self) -> tuple[CsvRow, ...]:
        return self.results.rows

    @property
    def planned(self) -> tuple[str, ...]:
        """Benchmark names the run meant to measure (manifest ``extra.planned``), if recorded."""
        planned = self.manifest.extra.get("planned")
        if isinstance(planned, (list, tuple)):
            return tuple(str(p) for p in planned)
        return ()

    @property
    def missing(self) -> tuple[str, ...]:
        """Planned benchmarks with no row in results.csv (an interrupted run)."""
        present = {r.text("name") for r in self.rows}
        return tuple(n for n in self.planned if n not in present)

    @property
    def sm_count(self) -> int | None:
        v = manifest_value(self.manifest.gpu, "sm_count", "multiprocessor_count", "sms")
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None

    @property
    def compute_capability(self) -> str | None:
        v = manifest_value(self.manifest.gpu, "compute_capability", "cc")
        if isinstance(v, (list, tuple)) and len(v) == 2:
            return f"{v[0]}.{v[1]}"
        return str(v) if v is not None else None


def load_run_data(path: str | os.PathLike[str] | RunDir) -> RunData:
    """Open a run directory and read ``results.csv`` (required) and ``targets.csv`` (optional).

    Raises :class:`~archline.errors.RunDirError` with a one-line message for a missing or corrupt
    manifest or results table.
    """
    run = open_run(path)
    results = load_csv(Path(run.path) / RESULTS_NAME, RESULT_TYPES, ("name", "group"), what="results table")
    tpath = Path(run.path) / TARGETS_NAME
    targets = load_csv(tpath, TARGET_TYPES, ("target",), what="targets table") if tpath.is_file() else None
    return RunData(run, results, targets)

"""The per-kernel energy table that attribution produces, with its JSON and CSV forms."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from archline.core.activity import ActivityRecord
from archline.core.frames import Tabular, dataclass_rows
from archline.errors import RunDirError
from archline.records import to_jsonable, write_csv, write_json

#: Data files of an attribution run directory → what each holds (for the manifest).
RESULT_FILES = {
    "kernels.csv": "per-kernel energy table (plus idle, gap and residual rows)",
    "attribution.json": "the attribution result with its method details",
}
RAW_FILES = {
    "raw/recording.npz": "every sensor reading (archline recording format)",
    "raw/activities.csv": "every kernel/memcpy/memset on the common clock (and raw CUPTI ns)",
    "raw/clock.json": "CUPTI-to-host clock mapping and its error",
    "raw/run.json": "program span and run details",
}

__all__ = [
    "ATTRIBUTION_SCHEMA",
    "ATTRIBUTION_SCHEMA_VERSION",
    "KERNEL_COLUMNS",
    "RAW_FILES",
    "RESULT_FILES",
    "AttributionResult",
    "Dominance",
    "KernelRow",
    "KernelTable",
    "LongCall",
    "RowKind",
    "RowMethod",
]

ATTRIBUTION_SCHEMA = "archline.attribution"
ATTRIBUTION_SCHEMA_VERSION = 1

#: ``kernel``/``memcpy``/``memset``: GPU activities; ``program``: a whole untraced program;
#: ``idle``: before/after the program; ``gap``: the GPU waiting inside the program;
#: ``residual``: what the model leaves unexplained, so that the rows add up to the total.
RowKind = Literal["kernel", "memcpy", "memset", "program", "idle", "gap", "residual", "untraced"]

#: ``regression``: from the fit of window energies on busy times; ``integrated``: power
#: integrated over each call's span; ``mixed``: both (long and short calls of one name);
#: ``residual``: total minus every other row.
RowMethod = Literal["regression", "integrated", "mixed", "residual", "counter"]

#: CSV columns of ``kernels.csv``: column → (unit, meaning).
KERNEL_COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("", "kernel name (demangled), [memcpy …]/[memset], or a (bracketed) unattributed part"),
    "kind": ("", "kernel, memcpy, memset, program, idle, gap, residual or untraced"),
    "calls": ("", "number of calls inside the analysed span"),
    "time_s": ("s", "busy time inside the span (time shared with concurrent work is split equally)"),
    "mean_time_s": ("s", "time_s / calls"),
    "energy_j": ("J", "board energy attributed to the row (static + dynamic)"),
    "energy_lo_j": ("J", "lower end of the confidence interval of energy_j"),
    "energy_hi_j": ("J", "upper end of the confidence interval of energy_j"),
    "energy_per_call_j": ("J", "energy_j / calls"),
    "share": ("", "energy_j / total energy of the span"),
    "mean_power_w": ("W", "energy_j / time_s: board power while the row's work ran"),
    "power_lo_w": ("W", "lower end of the confidence interval of mean_power_w"),
    "power_hi_w": ("W", "upper end of the confidence interval of mean_power_w"),
    "method": ("", "regression, integrated, mixed or residual"),
    "identifiable": ("", "false if the data cannot separate this row from others (estimate leans on the prior)"),
    "data_weight": ("", "fraction of the estimate that comes from the data rather than the pooled prior (0–1)"),
    "dominated_by": ("", "what set the estimate: data, prior (replay, counted model or pooled default) or mixed"),
    "note": ("", "why a row is not identifiable, or what to watch for"),
}

#: ``data``: the data set the estimate (data_weight ≥ 0.8); ``prior``: the prior did (≤ 0.2); ``mixed``: both.
Dominance = Literal["data", "prior", "mixed"]


@dataclass(frozen=True)
class KernelRow:
    """One row of the table: a kernel name, a copy kind, or an unattributed part. SI units."""

    name: str
    kind: RowKind
    calls: int
    time_s: float
    energy_j: float
    energy_lo_j: float
    energy_hi_j: float
    share: float
    mean_power_w: float
    power_lo_w: float
    power_hi_w: float
    method: RowMethod
    identifiable: bool = True
    data_weight: float = 1.0
    note: str = ""
    dominated_by: str = "data"

    @property
    def mean_time_s(self) -> float:
        return self.time_s / self.calls if self.calls else math.nan

    @property
    def energy_per_call_j(self) -> float:
        return self.energy_j / self.calls if self.calls else math.nan

    def to_row(self) -> dict[str, Any]:
        d = asdict(self)
        d["mean_time_s"] = self.mean_time_s
        d["energy_per_call_j"] = self.energy_per_call_j
        # Plain Python scalars: numpy's own (np.float64 is a float) would print as np.float64(…).
        return {c: d[c].item() if isinstance(d[c], np.generic) else d[c] for c in KERNEL_COLUMNS}

    @classmethod
    def from_row(cls, d: Mapping[str, Any]) -> KernelRow:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        for k in (
            "time_s",
            "energy_j",
            "energy_lo_j",
            "energy_hi_j",
            "share",
            "mean_power_w",
            "power_lo_w",
            "power_hi_w",
        ):
            kw[k] = math.nan if kw.get(k) is None else float(kw[k])
        kw["note"] = kw.get("note") or ""
        kw["dominated_by"] = kw.get("dominated_by") or "data"
        return cls(**kw)


@dataclass(frozen=True)
class LongCall:
    """A call long enough that its energy was integrated from the power samples over its span."""

    name: str
    start_s: float
    end_s: float
    energy_j: float


class KernelTable(Sequence[KernelRow], Tabular):
    """The per-kernel rows, largest energy first; index by position or by name; ``.to_pandas()``."""

    def __init__(self, rows: Sequence[KernelRow]) -> None:
        self._rows = tuple(rows)

    @overload
    def __getitem__(self, key: int) -> KernelRow: ...
    @overload
    def __getitem__(self, key: slice) -> KernelTable: ...
    @overload
    def __getitem__(self, key: str) -> KernelRow: ...

    def __getitem__(self, key: int | slice | str) -> KernelRow | KernelTable:
        if isinstance(key, str):
            for r in self._rows:
                if r.name == key:
                    return r
            raise KeyError(key)
        if isinstance(key, slice):
            return KernelTable(self._rows[key])
        return self._rows[key]

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[KernelRow]:
        return iter(self._rows)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self._rows]

    @property
    def energy_j(self) -> float:
        return float(sum(r.energy_j for r in self._rows))

    def __str__(self) -> str:
        head = (
            f"{'name':<40} {'calls':>7} {'time ms':>9} {'energy J':>9} {'95 % interval J':>19} {'share':>6} "
            f"{'power W':>8}  method"
        )
        lines = [head]
        for r in self._rows:
            name = r.name if len(r.name) <= 40 else r.name[:39] + "…"
            lines.append(
                f"{name:<40} {r.calls:>7d} {_g(r.time_s * 1e3, 5):>9} {_j(r.energy_j):>9} "
                f"{'[' + _j(r.energy_lo_j) + ', ' + _j(r.energy_hi_j) + ']':>19} {_g(r.share * 100, 3):>5}% "
                f"{_g(r.mean_power_w, 4):>8}  {r.method}{'' if r.identifiable else ' (?)'} [{r.dominated_by}]"
            )
        lines.append(
            "energies in J with their 95 % intervals; (?): not identifiable (the note says why); [data], [prior] or "
            "[mixed]: what set the row's estimate"
        )
        return "\n".join(lines)

    def table_rows(self) -> list[dict[str, Any]]:
        return dataclass_rows(self._rows)

    def table_title(self) -> str:
        return f"{len(self)} rows, {self.energy_j:.4g} J"

    def __repr__(self) -> str:
        return f"KernelTable({len(self)} rows, {self.energy_j:.4g} J)"


def _g(v: float, digits: int) -> str:
    """A number for the plain-text table: ``digits`` significant figures, "—" where it is not finite."""
    return f"{v:.{digits}g}" if math.isfinite(v) else "—"


def _j(v: float) -> str:
    """An energy for the plain-text table: 4 significant figures, and a value below a microjoule as 0 (the fit's
    round-off, not a measurement)."""
    if not math.isfinite(v):
        return "—"
    return "0" if abs(v) < 1e-6 else f"{v:.4g}"


_ACTIVITY_KINDS = ("kernel", "memcpy", "memset", "program")


@dataclass(frozen=True)
class AttributionResult(Tabular):
    """Energy of a recorded span split into per-kernel rows plus unattributed rows.

    The rows add up to ``total_energy_j`` exactly (the ``residual`` row holds what the fit
    does not explain). ``span_start_s``/``span_end_s`` bound the analysed span (the energy
    counter's first and last update, delay-corrected) on the common clock.
    """

    rows: tuple[KernelRow, ...]
    total_energy_j: float
    span_start_s: float
    span_end_s: float
    window_source: str
    windows: int
    window_period_s: float
    counter_delay_s: float
    delay_identified: bool
    residual_rms_j: float
    confidence: float
    ci_method: str
    long_call_min_s: float
    idle_gap_s: float
    buffer_scale: float | None = None
    buffer_delay_s: float | None = None
    buffer_rel_sd: float | None = None
    clipped_time_s: float = 0.0
    whole_program_only: bool = False
    notes: tuple[str, ...] = ()
    long_calls: tuple[LongCall, ...] = ()
    schema: str = ATTRIBUTION_SCHEMA
    schema_version: int = ATTRIBUTION_SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def table_rows(self) -> list[dict[str, Any]]:
        """Every row (kernels, then the unattributed parts) for ``to_pandas()`` and Jupyter."""
        return dataclass_rows(self.rows)

    def table_title(self) -> str:
        return f"GPU energy by kernel: {self.total_energy_j:.4g} J in total"

    @property
    def kernels(self) -> KernelTable:
        """Rows of GPU work (kernels, copies, memsets, or the whole program), largest energy first."""
        return KernelTable([r for r in self.rows if r.kind in _ACTIVITY_KINDS])

    @property
    def unattributed(self) -> KernelTable:
        """Idle, gap and residual rows."""
        return KernelTable([r for r in self.rows if r.kind not in _ACTIVITY_KINDS])

    @property
    def table(self) -> KernelTable:
        """Every row: kernels first, then the unattributed parts."""
        return KernelTable(self.rows)

    def power_of(self, name: str) -> float:
        """Mean power (W) attributed to the calls of ``name`` (NaN if unknown)."""
        for r in self.rows:
            if r.name == name:
                return r.mean_power_w
        return math.nan

    def call_energy_j(self, rec: ActivityRecord) -> float:
        """The energy attributed to one call: its own integral if it was long, else power × duration."""
        for lc in self.long_calls:
            if lc.name == rec.name and lc.start_s == rec.start_s and lc.end_s == rec.end_s:
                return lc.energy_j
        return self.power_of(rec.name) * rec.duration_s

    # -- serialisation
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = to_jsonable(self)
        d["rows"] = [to_jsonable(r.to_row()) for r in self.rows]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any], source: str = "attribution") -> AttributionResult:
        if d.get("schema") != ATTRIBUTION_SCHEMA:
            raise RunDirError(f"{source}: not an archline attribution (schema {d.get('schema')!r})")
        if d.get("schema_version") != ATTRIBUTION_SCHEMA_VERSION:
            raise RunDirError(
                f"{source}: attribution schema version {d.get('schema_version')} is not supported "
                f"(expects {ATTRIBUTION_SCHEMA_VERSION})"
            )
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        try:
            kw["rows"] = tuple(KernelRow.from_row(r) for r in d.get("rows", []))
            kw["long_calls"] = tuple(LongCall(**lc) for lc in d.get("long_calls", []))
            kw["notes"] = tuple(d.get("notes", ()))
            for k in ("residual_rms_j", "total_energy_j", "span_start_s", "span_end_s", "window_period_s"):
                if kw.get(k) is None:
                    kw[k] = math.nan
            return cls(**kw)
        except (TypeError, ValueError) as exc:
            raise RunDirError(f"{source}: malformed attribution ({exc})") from None

    def write(self, directory: str | os.PathLike[str], *, csv_name: str = "kernels.csv") -> tuple[Path, Path]:
        """Write ``kernels.csv`` and ``attribution.json`` into ``directory`` (atomically)."""
        d = Path(directory)
        csv_path = d / csv_name
        json_path = d / "attribution.json"
        write_csv(csv_path, (r.to_row() for r in self.rows), list(KERNEL_COLUMNS))
        write_json(json_path, self.to_json())
        return csv_path, json_path

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> AttributionResult:
        """Read ``attribution.json`` (a file, or the run directory holding it)."""
        p = Path(path)
        if p.is_dir():
            p = p / "attribution.json"
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{p}: file not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{p}: corrupt JSON ({exc})") from None
        if not isinstance(d, dict):
            raise RunDirError(f"{p}: not a JSON object")
        return cls.from_json(d, source=str(p))

"""The report header: GPU, driver, clocks, power limit, temperature, versions, timing and status of a run."""

from __future__ import annotations

import datetime as _dt
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from archline.records import Manifest
from archline.records.csvload import CsvRow
from archline.report.doc import Cell, Missing, Table
from archline.report.fmt import fmt_num, fmt_sig, is_number
from archline.report.rundata import manifest_value

__all__ = ["duration_s", "header_table", "measured_range"]

_NOT_IN_MANIFEST = "not recorded in the manifest"


def _num(section: Mapping[str, Any], *keys: str, scale: float = 1.0, unit: str = "") -> Cell:
    v = manifest_value(section, *keys)
    if not is_number(v):
        return Missing(_NOT_IN_MANIFEST) if v is None else str(v)
    return f"{fmt_num(float(v) * scale, 4)}{(' ' + unit) if unit else ''}"


def _power_limit(section: Mapping[str, Any]) -> Cell:
    if is_number(manifest_value(section, "power_limit_w", "enforced_power_limit_w")):
        return _num(section, "power_limit_w", "enforced_power_limit_w", unit="W")
    return _num(section, "power_limit_mw", "enforced_power_limit_mw", scale=1e-3, unit="W")


def _pair(before: Cell, after: Cell) -> Cell:
    if isinstance(before, Missing) and isinstance(after, Missing):
        return before
    b = "—" if isinstance(before, Missing) else before
    a = "—" if isinstance(after, Missing) else after
    return f"{b} before / {a} after"


def measured_range(rows: Sequence[CsvRow], col: str, unit: str) -> Cell:
    """Median and range of a column over the successful rows: e.g. clocks and idle power under the run."""
    vals = [v for r in rows if (r.text("status") or "ok") == "ok" and (v := r.num(col)) is not None]
    if not vals:
        return Missing(f"no {col} recorded in the run's tables")
    med = statistics.median(vals)
    return f"{fmt_sig(med, 4)} {unit} median ({fmt_sig(min(vals), 4)}–{fmt_sig(max(vals), 4)}, {len(vals)} rows)"


def _parse_utc(s: str | None) -> _dt.datetime | None:
    if not s:
        return None
    try:
        return _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None


def duration_s(m: Manifest) -> float | None:
    """Wall-clock seconds of the run: from creation to finish, else the runner's ``extra.wall_s``."""
    a, b = _parse_utc(m.created_utc), _parse_utc(m.finished_utc)
    if a and b:
        return (b - a).total_seconds()
    wall = m.extra.get("wall_s")
    return float(wall) if isinstance(wall, (int, float)) and is_number(wall) else None


def _duration(m: Manifest) -> Cell:
    d = duration_s(m)
    if d is None:
        return Missing("the run did not record its finish time")
    h, rem = divmod(round(d), 3600)
    mins, s = divmod(rem, 60)
    return f"{h} h {mins:02d} min {s:02d} s" if h else f"{mins} min {s:02d} s"


def _text(section: Mapping[str, Any], *keys: str) -> Cell:
    v = manifest_value(section, *keys)
    if v is None:
        return Missing(_NOT_IN_MANIFEST)
    if isinstance(v, (list, tuple)):
        if not v:
            return "none"
        return ".".join(str(x) for x in v) if all(isinstance(x, int) for x in v) else ", ".join(map(str, v))
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def _persistence(section: Mapping[str, Any]) -> Cell:
    v = manifest_value(section, "persistence", "persistence_mode")
    if v is None:
        return Missing(_NOT_IN_MANIFEST)
    if isinstance(v, (bool, int)):
        return "on" if v else "off"
    return str(v)


def _cuda(gpu: Mapping[str, Any]) -> Cell:
    v = manifest_value(gpu, "cuda_version", "cuda_driver_version", "cuda")
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1000:
        # NVML encodes the CUDA driver version as 1000 × major + 10 × minor (13000 → 13.0).
        return f"{v // 1000}.{(v % 1000) // 10}"
    return _text(gpu, "cuda_version", "cuda_driver_version", "cuda")


def _reasons(section: Mapping[str, Any]) -> Cell:
    throttle = section.get("throttle")
    if isinstance(throttle, Mapping) and isinstance(throttle.get("reasons"), (list, tuple)):
        return ", ".join(map(str, throttle["reasons"])) or "none"
    return _text(section, "throttle_reasons", "clock_event_reasons")


def _memory(gpu: Mapping[str, Any]) -> Cell:
    v = manifest_value(gpu, "memory_total_b", "memory_bytes", "memory_total_bytes")
    return f"{fmt_sig(float(v) / 2**30, 4)} GiB" if is_number(v) else Missing(_NOT_IN_MANIFEST)


def header_table(m: Manifest, rows: Sequence[CsvRow], status_text: str) -> Table:
    """The two-column table of facts at the top of a report, from the manifest (and, for loads, the rows)."""
    g, sb, sa = m.gpu, m.state_before, m.state_after
    pk = ", ".join(f"{k} {v}" for k, v in sorted(m.packages.items()))
    host = ", ".join(str(m.host[k]) for k in ("hostname", "platform", "python") if m.host.get(k))
    sm = ("sm_clock_mhz", "clock_sm_mhz")
    mem = ("mem_clock_mhz", "clock_mem_mhz")
    temp = ("temperature_c", "temp_c")

    def load(label: str, col: str, unit: str) -> list[tuple[str, Cell]]:
        # A table that never records a column (e.g. instructions.csv has no idle power) gets no row for it.
        return [(label, measured_range(rows, col, unit))] if any(col in r.values for r in rows) else []

    items: list[tuple[str, Cell]] = [
        ("GPU", _text(g, "name")),
        ("UUID", _text(g, "uuid")),
        ("Compute capability", _text(g, "compute_capability", "cc")),
        ("SMs", _num(g, "sm_count", "multiprocessor_count")),
        ("Memory", _memory(g)),
        ("Driver", _text(g, "driver_version", "driver")),
        ("CUDA (driver)", _cuda(g)),
        ("SM clock before / after the run", _pair(_num(sb, *sm, unit="MHz"), _num(sa, *sm, unit="MHz"))),
        *load("SM clock under load", "sm_clock_mhz", "MHz"),
        ("Memory clock before / after the run", _pair(_num(sb, *mem, unit="MHz"), _num(sa, *mem, unit="MHz"))),
        *load("Memory clock under load", "mem_clock_mhz", "MHz"),
        *load("Idle power (measured before each benchmark)", "idle_power_w", "W"),
        ("Board power before / after the run", _pair(_num(sb, "power_w", unit="W"), _num(sa, "power_w", unit="W"))),
        ("Power limit", _power_limit(sb)),
        ("Temperature before / after the run", _pair(_num(sb, *temp, unit="°C"), _num(sa, *temp, unit="°C"))),
        *load("Temperature at the end of each benchmark", "temperature_c", "°C"),
        ("Persistence mode", _persistence(sb)),
        ("Performance state before / after the run", _pair(_text(sb, "pstate"), _text(sa, "pstate"))),
        ("Clock-event reasons before / after the run", _pair(_reasons(sb), _reasons(sa))),
        ("Host", host or Missing(_NOT_IN_MANIFEST)),
        ("Packages", pk or Missing(_NOT_IN_MANIFEST)),
        ("Command", " ".join(m.command) or Missing(_NOT_IN_MANIFEST)),
        ("Started (UTC)", m.created_utc or Missing(_NOT_IN_MANIFEST)),
        ("Finished (UTC)", m.finished_utc or Missing("the run did not record its finish time")),
        ("Duration", _duration(m)),
        ("Status", status_text),
    ]
    return Table(("", "Value"), tuple((k, v) for k, v in items))

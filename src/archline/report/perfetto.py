"""Perfetto / Chrome trace-event JSON: power tracks and kernel spans on one timeline (ui.perfetto.dev)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from archline.core.activity import ActivityRecord
from archline.core.recording import Recording
from archline.errors import SensorError
from archline.measurement.attribute.windows import counter_windows
from archline.records import atomic_write_text
from archline.records.attribution import AttributionResult

__all__ = ["perfetto_events", "write_perfetto"]

_PID_POWER, _PID_GPU, _PID_PROGRAM = 1, 2, 3
_UNITS = {
    "power": "W",
    "energy": "J",
    "sm_clock": "MHz",
    "mem_clock": "MHz",
    "temperature": "C",
    "throttle": "mask",
    "memory_used": "B",
}


def _us(t_s: float, t0: float) -> float:
    return round((t_s - t0) * 1e6, 3)


def _meta(pid: int, name: str, tid: int | None = None, sort: int | None = None) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []
    if tid is None:
        ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}})
        if sort is not None:
            ev.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": sort}})
    else:
        ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}})
    return ev


def perfetto_events(
    recording: Recording,
    activities: Sequence[ActivityRecord],
    result: AttributionResult | None = None,
    *,
    program_span: tuple[float, float] | None = None,
    max_spans: int = 500_000,
) -> dict[str, Any]:
    """The trace as a Chrome trace-event JSON object (times in µs from the recording's start).

    One counter track per sensor channel (power in W, clocks in MHz …), the energy counter
    also as the mean power of each of its windows, and one span per GPU activity on a track
    per stream, carrying the energy attributed to that call where ``result`` is given.
    """
    t0 = float(recording.start_s)
    if not t0 and activities:
        t0 = min(a.start_s for a in activities)
    events: list[dict[str, Any]] = []
    events += _meta(_PID_POWER, "Power sensors", sort=0)
    events += _meta(_PID_GPU, "GPU activities", sort=1)
    for name, rd in recording.readings.items():
        unit = _UNITS.get(rd.quantity, "")
        if rd.quantity == "energy":
            try:
                w = counter_windows(rd)
            except SensorError:
                continue
            track = f"{name} mean power (W)"
            for a, b, e in zip(w.edges_s[:-1], w.edges_s[1:], w.energy_j, strict=True):
                events.append(
                    {"ph": "C", "pid": _PID_POWER, "name": track, "ts": _us(a, t0), "args": {"W": e / (b - a)}}
                )
            continue
        track = f"{name} ({unit})" if unit else name
        for t, v in zip(rd.t_s.tolist(), rd.value.tolist(), strict=True):
            if math.isfinite(v):
                events.append(
                    {"ph": "C", "pid": _PID_POWER, "name": track, "ts": _us(t, t0), "args": {unit or "value": v}}
                )

    long_e = {(lc.name, lc.start_s, lc.end_s): lc.energy_j for lc in result.long_calls} if result else {}
    power = {r.name: r.mean_power_w for r in result.rows} if result else {}
    streams: set[int] = set()
    shown = activities[:max_spans]
    for a in shown:
        tid = a.stream if a.stream >= 0 else 0
        streams.add(tid)
        args: dict[str, Any] = {"kind": a.kind, "correlation_id": a.correlation_id}
        if a.bytes:
            args["bytes"] = a.bytes
        if result is not None:
            e = long_e.get((a.name, a.start_s, a.end_s))
            if e is None:
                p = power.get(a.name, math.nan)
                e = p * a.duration_s if math.isfinite(p) else None
            if e is not None:
                args["energy_mJ"] = round(e * 1e3, 6)
        events.append(
            {
                "ph": "X",
                "pid": _PID_GPU,
                "tid": tid,
                "name": a.name,
                "cat": a.kind,
                "ts": _us(a.start_s, t0),
                "dur": round(a.duration_s * 1e6, 3),
                "args": args,
            }
        )
    for tid in sorted(streams):
        events += _meta(_PID_GPU, f"stream {tid}", tid=tid)
    if program_span is not None:
        events += _meta(_PID_PROGRAM, "Program", sort=2)
        events.append(
            {
                "ph": "X",
                "pid": _PID_PROGRAM,
                "tid": 0,
                "name": "program",
                "ts": _us(program_span[0], t0),
                "dur": round((program_span[1] - program_span[0]) * 1e6, 3),
            }
        )
    other: dict[str, Any] = {"generator": "archline", "t0_unix_s": t0}
    if len(activities) > len(shown):
        other["spans_left_out"] = len(activities) - len(shown)
    if result is not None:
        other["total_energy_j"] = result.total_energy_j
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_perfetto(
    path: str | os.PathLike[str],
    recording: Recording,
    activities: Sequence[ActivityRecord],
    result: AttributionResult | None = None,
    *,
    program_span: tuple[float, float] | None = None,
    max_spans: int = 500_000,
) -> None:
    """Write the trace (see :func:`perfetto_events`) atomically; open it in ui.perfetto.dev."""
    obj = perfetto_events(recording, activities, result, program_span=program_span, max_spans=max_spans)
    atomic_write_text(path, json.dumps(obj, separators=(",", ":"), default=_default) + "\n")


def _default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")

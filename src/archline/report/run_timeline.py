"""The power timeline of a run directory's report: board power over time above one lane per top kernel (Vega-Lite).

Both views share the time axis: drag or wheel on the power plot to pan or zoom, and the kernel lanes follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from archline.core.activity import ActivityRecord, short_name
from archline.core.recording import Recording
from archline.errors import SensorError
from archline.records.attribution import AttributionResult
from archline.report.interactive import thin_series

__all__ = ["TOP_KERNELS", "counter_power", "kernel_lanes", "timeline_spec"]

#: Kernels that get a lane (the most attributed energy first), and how many merged spans each lane keeps at most.
TOP_KERNELS = 6
SPANS_PER_KERNEL = 600
_WIDTH_PX = 860
#: Both views reserve the same room for their y axis, so their plot areas line up.
_Y_AXIS_PX = 200
_LANE_PX = 20


def counter_power(recording: Recording, delay_s: float) -> list[tuple[float, float]]:
    """The energy counter's mean power per window (W) at each window's start, shifted back by the sensor delay;
    the last window's power is repeated at its end so that a step line covers it. Empty without a counter."""
    from archline.measurement.attribute.windows import counter_windows

    energy = recording.get("nvml.energy")
    if energy is None or len(energy) <= 3:
        return []
    try:
        w = counter_windows(energy)
    except SensorError:
        return []
    edges = [float(x) - delay_s for x in w.edges_s]
    power = [float(e) / (b - a) for e, a, b in zip(w.energy_j, edges[:-1], edges[1:], strict=True)]
    if not power:
        return []
    return [*zip(edges[:-1], power, strict=True), (edges[-1], power[-1])]


def kernel_lanes(
    activities: Sequence[ActivityRecord], names: Sequence[str], t0_s: float, min_gap_s: float
) -> list[dict[str, Any]]:
    """Each named kernel's calls as spans (s since ``t0_s``), calls closer than ``min_gap_s`` merged into one."""
    from archline.report.timeline_plot import merge_spans

    out: list[dict[str, Any]] = []
    for rank, name in enumerate(names):
        calls = [a for a in activities if a.name == name]
        if not calls:
            continue
        starts = np.array([a.start_s for a in calls], dtype=np.float64) - t0_s
        ends = np.array([a.end_s for a in calls], dtype=np.float64) - t0_s
        s, e = merge_spans(starts, ends, min_gap_s)
        label = f"{rank + 1}. {short_name(name, 36)}"
        out += [{"start": float(a), "end": float(b), "kernel": label} for a, b in zip(s, e, strict=True)]
    return out


def _y(title: str, field: str) -> dict[str, Any]:
    return {
        "field": field,
        "type": "quantitative",
        "scale": {"zero": False},
        "axis": {"title": title, "minExtent": _Y_AXIS_PX, "maxExtent": _Y_AXIS_PX},
    }


def _power_view(power: list[dict[str, float]], counter: list[dict[str, float]]) -> dict[str, Any]:
    x = {"field": "t", "type": "quantitative", "axis": {"title": "time since the start of the recording (s)"}}
    layers: list[dict[str, Any]] = []
    if power:
        layers.append(
            {
                "data": {"values": power},
                "mark": {"type": "line", "interpolate": "step-after", "color": "#888", "tooltip": True, "clip": True},
                "encoding": {"x": x, "y": _y("board power (W)", "p")},
            }
        )
    if counter:
        layers.append(
            {
                "data": {"values": counter},
                "mark": {"type": "line", "interpolate": "step-after", "color": "black", "tooltip": True, "clip": True},
                "encoding": {"x": x, "y": _y("board power (W)", "p")},
            }
        )
    layers[0]["params"] = [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}]
    return {"width": _WIDTH_PX, "height": 260, "layer": layers}


def _lanes_view(lanes: list[dict[str, Any]], order: list[str]) -> dict[str, Any]:
    return {
        "width": _WIDTH_PX,
        "height": _LANE_PX * len(order),
        "data": {"values": lanes},
        "mark": {"type": "rect", "tooltip": True, "height": {"band": 0.8}, "clip": True},
        "encoding": {
            "x": {
                "field": "start",
                "type": "quantitative",
                "axis": {"title": "time since the start of the recording (s)"},
            },
            "x2": {"field": "end"},
            "y": {
                "field": "kernel",
                "type": "nominal",
                "sort": order,
                "axis": {
                    "title": None,
                    "labelLimit": _Y_AXIS_PX - 10,
                    "minExtent": _Y_AXIS_PX,
                    "maxExtent": _Y_AXIS_PX,
                },
            },
            "color": {"field": "kernel", "type": "nominal", "sort": order, "legend": None},
        },
    }


def timeline_spec(
    recording: Recording, activities: Sequence[ActivityRecord], result: AttributionResult, *, top: int = TOP_KERNELS
) -> dict[str, Any] | None:
    """Board power (the power buffer in grey, the energy counter's per-window mean power in black) over time,
    above one lane per top kernel by attributed energy; None when the recording holds no power at all."""
    power = recording.get("nvml.buffer")
    if power is None or not len(power):
        power = next((r for r in recording.readings.values() if r.quantity == "power" and len(r)), None)
    counter = counter_power(recording, result.counter_delay_s)
    if (power is None or not len(power)) and not counter:
        return None
    t0 = float(recording.start_s) if recording.start_s else min((a.start_s for a in activities), default=0.0)
    t1 = float(recording.end_s) if recording.end_s else max((a.end_s for a in activities), default=t0 + 1.0)
    power_pts = [] if power is None else thin_series((power.t_s - t0).tolist(), power.value.tolist())
    counter_pts = [{"t": t - t0, "p": p} for t, p in counter]
    views = [_power_view(power_pts, counter_pts)]
    names = [r.name for r in result.kernels if r.kind in ("kernel", "memcpy", "memset")][:top]
    lanes = kernel_lanes(activities, names, t0, max(t1 - t0, 1e-9) / SPANS_PER_KERNEL)
    if lanes:
        order = list(dict.fromkeys(x["kernel"] for x in lanes))
        views.append(_lanes_view(lanes, order))
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "vconcat": views,
        "spacing": 8,
        # One time scale for both views: zooming the power plot zooms the lanes.
        "resolve": {"scale": {"x": "shared"}},
    }

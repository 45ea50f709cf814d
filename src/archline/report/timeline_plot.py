"""A PNG of the power trace over time with the most energy-hungry kernels shaded (matplotlib, Agg)."""

from __future__ import annotations

import io
import os
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray

from archline.core.activity import ActivityRecord, short_name
from archline.core.recording import Recording
from archline.errors import SensorError
from archline.measurement.attribute.windows import counter_windows, window_overlap
from archline.records import atomic_write_bytes
from archline.records.attribution import AttributionResult

__all__ = ["merge_spans", "plot_timeline"]

F64 = NDArray[np.float64]
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def merge_spans(starts: F64, ends: F64, min_gap_s: float) -> tuple[F64, F64]:
    """Join spans separated by less than ``min_gap_s`` (so a plot draws one patch per visible run)."""
    if starts.size == 0:
        return starts, ends
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], np.maximum.accumulate(ends[o])
    brk = np.nonzero(s[1:] - e[:-1] > min_gap_s)[0]
    return np.concatenate([[s[0]], s[brk + 1]]), np.concatenate([e[brk], [e[-1]]])


def plot_timeline(
    path: str | os.PathLike[str],
    recording: Recording,
    activities: Sequence[ActivityRecord],
    result: AttributionResult | None = None,
    *,
    top: int = 6,
    program_span: tuple[float, float] | None = None,
    title: str | None = None,
) -> None:
    """Power over time (top) and the share of time each top kernel runs (bottom), saved as PNG.

    "Top" kernels are the ones with the most attributed energy (or the most busy time
    without a result).
    """
    t0 = float(recording.start_s) or (min(a.start_s for a in activities) if activities else 0.0)
    t_end = float(recording.end_s) or (max(a.end_s for a in activities) if activities else t0 + 1.0)
    if t_end <= t0:
        t_end = t0 + 1.0
    fig = Figure(figsize=(12, 6), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=(3, 1))

    buf = recording.get("nvml.buffer")
    if buf is not None and len(buf):
        ax.step(buf.t_s - t0, buf.value, where="pre", lw=0.8, color="0.3", label="nvml.buffer (W)")
    for name, rd in recording.readings.items():
        if rd.quantity == "power" and name != "nvml.buffer" and len(rd):
            ax.plot(rd.t_s - t0, rd.value, lw=0.6, alpha=0.7, label=f"{name} (W)")
    energy = recording.get("nvml.energy")
    if energy is not None and len(energy) > 3:
        try:
            w = counter_windows(energy)
            p = w.energy_j / np.diff(w.edges_s)
            shift = result.counter_delay_s if result is not None else 0.0
            x = w.edges_s - shift - t0
            ax.step(x, np.concatenate([p, p[-1:]]), where="post", lw=1.2, color="k", label="energy counter (W)")
        except SensorError:
            pass

    names: list[str]
    if result is not None:
        names = [r.name for r in result.kernels][:top]
    else:
        busy: dict[str, float] = {}
        for a in activities:
            busy[a.name] = busy.get(a.name, 0.0) + a.duration_s
        names = sorted(busy, key=lambda n: -busy[n])[:top]
    min_gap = (t_end - t0) / 1500.0
    n_bins = 600
    edges = np.linspace(0.0, t_end - t0, n_bins + 1)
    occ = np.zeros((len(names) + 1, n_bins))
    index = {n: i for i, n in enumerate(names)}
    if activities:
        s = np.array([a.start_s for a in activities]) - t0
        e = np.array([a.end_s for a in activities]) - t0
        cols = np.array([index.get(a.name, len(names)) for a in activities], np.int64)
        occ = window_overlap(edges, s, e, cols, len(names) + 1).T / np.diff(edges)[None, :]
        for i in range(len(names)):
            m = cols == i
            ms, me = merge_spans(s[m], e[m], min_gap)
            color = _COLORS[i % len(_COLORS)]
            for a, b in zip(ms, me, strict=True):
                ax.axvspan(a, b, color=color, alpha=0.18, lw=0)
    centers = 0.5 * (edges[:-1] + edges[1:])
    labels = [_label(n, result) for n in names] + ["other"]
    colors = [_COLORS[i % len(_COLORS)] for i in range(len(names))] + ["0.75"]
    ax2.stackplot(centers, np.clip(occ, 0, None), labels=labels, colors=colors, alpha=0.85)
    if program_span is not None:
        for t in program_span:
            ax.axvline(t - t0, color="k", ls=":", lw=0.8)
    ax.set_ylabel("power (W)")
    ax2.set_ylabel("busy share")
    ax2.set_xlabel("time since start of recording (s)")
    ax2.set_ylim(0, 1.05)
    ax.legend(loc="upper right", fontsize=7)
    ax2.legend(loc="upper left", fontsize=6, ncols=2, bbox_to_anchor=(1.0, 1.0))
    if title is None and result is not None:
        title = f"{result.total_energy_j:.4g} J over {result.span_end_s - result.span_start_s:.3g} s"
    if title:
        ax.set_title(title, fontsize=10)
    out = io.BytesIO()
    fig.savefig(out, format="png")
    atomic_write_bytes(path, out.getvalue())


def _label(name: str, result: AttributionResult | None) -> str:
    s = short_name(name, 40)
    if result is None:
        return s
    for r in result.rows:
        if r.name == name:
            return f"{s} ({100 * r.share:.1f} %)"
    return s

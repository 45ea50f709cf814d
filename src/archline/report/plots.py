"""The report's PNG plots (matplotlib, Agg, no pyplot state): sweeps, throughput against spec, grouped bars, errors."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from archline.records import atomic_write_bytes

__all__ = [
    "BarGroup",
    "SweepPoint",
    "ThroughputBar",
    "plot_grouped_bars",
    "plot_sweep",
    "plot_technique_errors",
    "plot_throughput_vs_spec",
]

_NAN = float("nan")


def _f(x: float | None, scale: float = 1.0) -> float:
    return _NAN if x is None or not math.isfinite(x) else x * scale


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(path, buf.getvalue())
    return path


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep: the swept value (label for the axis, number for ordering) and its figures."""

    x_label: str
    x: float | None
    throughput: float | None
    avg_power_w: float | None
    max_power_w: float | None
    energy_j: float | None
    energy_uncertainty_j: float | None


def plot_sweep(
    series: Mapping[str, Sequence[SweepPoint]], *, title: str, xlabel: str, throughput_label: str, path: Path
) -> Path:
    """Throughput, average/max power and energy against the swept variable (MIPP Figs 6–8), one line per series.

    Throughput, not time per launch: every launch runs for the same fixed time, so its time only shows noise.
    """
    labels: list[str] = []
    order: dict[str, float] = {}
    for pts in series.values():
        for p in pts:
            if p.x_label not in order:
                order[p.x_label] = p.x if p.x is not None else len(order) + 1e9
    labels = sorted(order, key=lambda k: order[k])
    pos = {lab: i for i, lab in enumerate(labels)}
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax_t, ax_p, ax_e = fig.subplots(1, 3)
    for i, (name, pts) in enumerate(series.items()):
        pts = sorted(pts, key=lambda p: pos[p.x_label])
        xs = [pos[p.x_label] for p in pts]
        color = f"C{i % 10}"
        ax_t.plot(xs, [_f(p.throughput) for p in pts], "o-", color=color, label=name)
        ax_p.plot(xs, [_f(p.avg_power_w) for p in pts], "o-", color=color, label=f"{name} avg")
        ax_p.plot(xs, [_f(p.max_power_w) for p in pts], "s--", color=color, alpha=0.7, label=f"{name} max")
        ax_e.errorbar(
            xs,
            [_f(p.energy_j) for p in pts],
            yerr=[0.0 if p.energy_uncertainty_j is None else _f(p.energy_uncertainty_j) for p in pts],
            fmt="o-",
            color=color,
            capsize=3,
            label=name,
        )
    # Many ticks (the 32 bank-conflict ways) are thinned to every k-th label so they never overlap.
    step = max(1, math.ceil(len(labels) / 12))
    for ax, ylabel in ((ax_t, throughput_label), (ax_p, "board power (W)"), (ax_e, "energy per launch (J)")):
        ax.set_xticks(range(0, len(labels), step), labels[::step])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    ax_p.legend(fontsize=7)
    if len(series) > 1:
        ax_t.legend(fontsize=7)
    fig.suptitle(title)
    return _save(fig, path)


@dataclass(frozen=True)
class ThroughputBar:
    label: str
    measured: float | None
    spec: float | None


def plot_throughput_vs_spec(bars: Sequence[ThroughputBar], *, title: str, unit: str, path: Path) -> Path:
    """Measured throughput as bars, spec as a tick where known (none drawn where unknown), % of spec beside it."""
    n = len(bars)
    fig = Figure(figsize=(9, max(2.5, 0.32 * n + 1.2)), layout="constrained")
    ax = fig.subplots()
    ys = list(range(n))[::-1]
    meas = [_f(b.measured) for b in bars]
    ax.barh(ys, [0.0 if math.isnan(m) else m for m in meas], color="C0", alpha=0.8, label="measured")
    spec_ys = [y for y, b in zip(ys, bars, strict=True) if b.spec is not None]
    ax.plot([b.spec for b in bars if b.spec is not None], spec_ys, "|", color="C3", ms=16, mew=3, label="spec")
    top = max([m for m in meas if not math.isnan(m)] + [b.spec for b in bars if b.spec is not None] + [1.0])
    for y, b, m in zip(ys, bars, meas, strict=True):
        if math.isnan(m):
            text = "not measured"
        elif b.spec:
            text = f"{100.0 * m / b.spec:.0f} % of spec"
        else:
            text = "no spec"
        ax.text(top * 1.02, y, text, va="center", fontsize=8)
    ax.set_yticks(ys, [b.label for b in bars], fontsize=8)
    ax.set_xlim(0, top * 1.25)
    ax.set_xlabel(unit)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(fontsize=8, loc="outside upper right", ncols=2)
    ax.set_title(title)
    return _save(fig, path)


@dataclass(frozen=True)
class BarGroup:
    """One x position: values (with 1σ) of each measured series, and reference values drawn as markers."""

    label: str
    values: Mapping[str, tuple[float | None, float | None]]
    references: Mapping[str, float | None]


def plot_grouped_bars(
    groups: Sequence[BarGroup],
    *,
    series: Sequence[str],
    references: Sequence[str],
    ylabel: str,
    title: str,
    path: Path,
) -> Path:
    """Grouped bars with error bars per series, reference markers; log scale when every value is positive."""
    n_s = max(1, len(series))
    width = 0.8 / n_s
    fig = Figure(figsize=(max(6.0, 0.9 * len(groups) + 2), 4.2), layout="constrained")
    ax = fig.subplots()
    values: list[float] = []
    for j, s in enumerate(series):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(groups))]
        ys = [_f(g.values.get(s, (None, None))[0]) for g in groups]
        es = [_f(g.values.get(s, (None, None))[1]) for g in groups]
        values += [y for y in ys if not math.isnan(y)]
        ax.bar(xs, [0.0 if math.isnan(y) else y for y in ys], width, label=s, color=f"C{j}", alpha=0.85)
        ax.errorbar(xs, ys, yerr=[0.0 if math.isnan(e) else e for e in es], fmt="none", ecolor="k", capsize=2)
    markers = "D^vs*x"
    for k, ref in enumerate(references):
        rx = [i for i, g in enumerate(groups) if g.references.get(ref) is not None]
        ry = [_f(groups[i].references[ref]) for i in rx]
        values += [y for y in ry if not math.isnan(y)]
        if rx:
            ax.plot(rx, ry, markers[k % len(markers)], color=f"C{k + n_s}", mfc="none", ms=8, label=ref)
    if values and min(values) > 0:
        ax.set_yscale("log")
    ax.set_xticks(range(len(groups)), [g.label for g in groups], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    fig.legend(fontsize=7, loc="outside right upper")
    ax.set_title(title)
    return _save(fig, path)


def plot_technique_errors(errors_pct: Mapping[str, Sequence[float]], *, title: str, path: Path) -> Path:
    """Each run's error (%) against the reference, one column of points per technique, with its MAPE."""
    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.subplots()
    for i, errs in enumerate(errors_pct.values()):
        errs = [e for e in errs if math.isfinite(e)]
        jitter = [(k % 7 - 3) * 0.04 for k in range(len(errs))]
        ax.plot([i + j for j in jitter], errs, "o", color=f"C{i}", alpha=0.7)
        if errs:
            mape = sum(abs(e) for e in errs) / len(errs)
            ax.hlines(mape, i - 0.3, i + 0.3, color=f"C{i}", lw=2)
            ax.text(i + 0.32, mape, f"MAPE {mape:.3g} %", va="center", fontsize=8)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xticks(range(len(errors_pct)), list(errors_pct))
    ax.set_xlim(-0.5, len(errors_pct) - 0.5 + 0.6)
    ax.set_ylabel("error against the reference (%)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title)
    return _save(fig, path)

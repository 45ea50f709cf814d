"""Reports of the sensor runs: what the calibration found about each power source, and the validation."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from archline.errors import ArchlineError
from archline.records import RunDir, atomic_write_bytes
from archline.report.doc import Bullets, Document, Figure, Heading, Para, Table
from archline.report.registry import RenderedReport
from archline.report.render import write_document

__all__ = ["render_calibration", "render_validation"]


def _gpu_line(run: RunDir) -> str:
    m = run.manifest
    g = m.gpu
    st = m.state_before
    return (
        f"{g.get('name', '?')} (driver {g.get('driver_version', '?')}, UUID {g.get('uuid', '?')}); "
        f"power limit {st.get('power_limit_w', '?')} W, persistence {st.get('persistence_mode', '?')}, "
        f"{st.get('temperature_c', '?')} °C at the start; run {m.created_utc} … {m.finished_utc}, status {m.status}."
    )


def _ms(v: Any) -> str:
    return "—" if v is None else f"{1e3 * float(v):.2f} ms"


def _load_recording(run: RunDir) -> Any:
    from archline.records.traces import load_recording

    p = run.path / "traces.npz"
    if not p.exists():
        return None
    try:
        return load_recording(p)
    except ArchlineError:
        return None


def _plot_loads(rec: Any, durations_s: tuple[float, ...], path: Path, title: str) -> bool:
    """Readings of every power source around the longest load and the loads nearest the given
    durations, loads shaded."""
    regs = [r for r in rec.regions if r.end_s > r.start_s]
    if not regs:
        return False
    loads = [max(regs, key=lambda r: r.duration_s)]
    for d in durations_s:
        near = min(regs, key=lambda r: abs(r.duration_s - d))
        if near not in loads and abs(near.duration_s - d) < 0.3 * d:
            loads.append(near)
    fig = MplFigure(figsize=(10, 2.6 * len(loads)))
    FigureCanvasAgg(fig)
    for i, r in enumerate(loads):
        ax = fig.add_subplot(len(loads), 1, i + 1)
        a, b = r.start_s - 0.15, r.end_s + 0.25
        for src in ("nvml.buffer", "nvml.instant", "nvml.average"):
            rd = rec.get(src)
            if rd is None or not len(rd):
                continue
            m = (rd.t_s >= a) & (rd.t_s <= b)
            ax.step((rd.t_s[m] - r.start_s) * 1e3, rd.value[m], where="post", label=src, marker=".", ms=3)
        ax.axvspan(0, (r.end_s - r.start_s) * 1e3, color="orange", alpha=0.2, label="kernel running")
        ax.set_ylabel("W")
        ax.set_title(f"{r.name} ({(r.end_s - r.start_s) * 1e3:.0f} ms)", fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    fig.axes[-1].set_xlabel("ms from kernel start (%globaltimer)")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    atomic_write_bytes(path, buf.getvalue())
    return True


def render_calibration(run: RunDir, out_dir: Path) -> RenderedReport:
    """Report of ``archline sensor calibrate``: the fitted profile and findings of each source."""
    data = run.read_json("profiles.json")
    profiles: dict[str, Any] = data.get("profiles", {})
    doc = Document("Power-sensor calibration")
    doc.add(Para(_gpu_line(run)))
    doc.add(
        Para(
            "Known loads (a step, square waves and isolated pulses of an FP32-FMA kernel on every SM, timed by "
            "the kernel's own %globaltimer) were run while every NVML power source was recorded. Each source's "
            "response was fitted: a reading is the mean over a window W of the power after a first-order lag C, "
            "delayed by d (docs/measurement.md)."
        )
    )
    rows = []
    for src, p in profiles.items():
        m = p.get("model", {})
        rows.append(
            (
                src,
                str(m.get("kind", "?")),
                _ms(m.get("period_s")),
                "interval since previous" if m.get("window_s") is None else _ms(m.get("window_s")),
                _ms(m.get("lag_s")),
                _ms(m.get("delay_s")),
                "—" if p.get("coverage") is None else f"{100 * float(p['coverage']):.0f} %",
                "—" if p.get("idle_w") is None else f"{p['idle_w']:.1f} W",
                "—" if p.get("active_idle_w") is None else f"{p['active_idle_w']:.1f} W",
                "—" if p.get("fit_rms_w") is None else f"{p['fit_rms_w']:.2f} W",
            )
        )
    doc.add(
        Table(
            (
                "source",
                "kind",
                "update period",
                "window W",
                "lag C",
                "delay d",
                "coverage",
                "idle",
                "active idle",
                "fit rms",
            ),
            tuple(rows),
            caption="Fitted sensor profiles",
        )
    )
    for src, p in profiles.items():
        doc.add(Heading(f"{src}: findings", 3), Bullets(tuple(p.get("findings", ()))))
    for src, why in data.get("failures", {}).items():
        doc.add(Para(f"{src} could not be fitted: {why}"))
    rec = _load_recording(run)
    figs = []
    if rec is not None and _plot_loads(
        rec, (0.01, 0.05, 0.2), out_dir / "sensor_loads.png", "Power sources around known loads"
    ):
        figs.append(Figure("sensor_loads.png", "Readings of each NVML power source around known loads"))
    doc.add(*figs)
    md, html = write_document(doc, out_dir)
    return RenderedReport("sensor-calibration", md, html, tuple(out_dir / f.path for f in figs), run.manifest.status)


def render_validation(run: RunDir, out_dir: Path) -> RenderedReport:
    """Report of ``archline sensor validate``: each check, its error and the verdict."""
    rows = run.read_csv("validation.csv")
    doc = Document("Power-sensor validation")
    doc.add(Para(_gpu_line(run)))
    model = run.manifest.extra.get("sensor_model", {})
    if model:
        how = model.get("how", "inferred from the recording")
        doc.add(Para(f"Sensor model of {model.get('source', 'nvml.buffer')}: {how}."))
    cells = []
    for r in rows:
        cells.append(
            (
                str(r["check"]),
                f"{float(r['measured']):.5g}",
                f"{float(r['reference']):.5g}",
                f"{float(r['error_pct']):+.2f} %",
                f"{float(r['limit_pct']):.0f} %",
                "n/a (raw, for comparison)" if r["passed"] is None else ("yes" if r["passed"] else "no"),
                str(r.get("n", "")),
                str(r.get("detail") or ""),
            )
        )
    doc.add(
        Table(
            ("check", "measured", "reference", "error", "limit", "passed", "n", "detail"),
            tuple(cells),
            caption="Energies in J (ratios for the doubling and back-to-back tests)",
            notes=(
                "Raw = the readings integrated as they are (trapezoid); corrected = the fitted sensor model's "
                "energy-conserving attribution. The reference for steady kernels is NVML's energy counter over "
                "a long back-to-back run of the same kernel, divided by the number of invocations.",
            ),
        )
    )
    errs = np.array([abs(float(r["error_pct"])) for r in rows if "raw" not in str(r["check"])])
    if errs.size:
        doc.add(Para(f"Largest error among the corrected checks: {errs.max():.2f} %."))
    md, html = write_document(doc, out_dir)
    return RenderedReport("sensor-validation", md, html, (), run.manifest.status)

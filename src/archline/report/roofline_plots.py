"""The roofline section's figures: roofline and arch line (Choi Fig. 2a/4) and power line (Fig. 2b/5), PNG via Agg."""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from archline.model.capped import capped_arch_line, capped_power_line_w, capped_roofline
from archline.model.energy_roofline import (
    RooflineParams,
    arch_line,
    effective_energy_balance_point,
    power_line_w,
    roofline,
)
from archline.model.result import RooflineModel
from archline.model.sweep import SweepRow
from archline.records import atomic_write_bytes

__all__ = ["plot_power_line", "plot_roofline_arch", "roofline_chart"]

_TIME_C = "#c0392b"
_ENERGY_C = "#2166ac"
_CAP_C = "#1b9e77"


def _figure(n_panels: int) -> tuple[Any, list[Any]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A bare Figure on the Agg canvas: no pyplot state, safe in threads and without a display.
    fig = Figure(figsize=(5.2 * n_panels, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, n_panels, k + 1) for k in range(n_panels)]
    return fig, axes


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(path, buf.getvalue())


def _x_grid(rows: Sequence[SweepRow], b_tau: float) -> np.ndarray:
    lo = min([r.measured_intensity for r in rows] + [b_tau]) / 2.0
    hi = max([r.measured_intensity for r in rows] + [b_tau]) * 2.0
    return np.geomspace(lo, hi, 400)


def _log2_axes(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_xlabel("intensity (flop:byte)")


def _vline(ax: Any, x: float, color: str, style: str, label: str) -> None:
    if math.isfinite(x) and x > 0:
        ax.axvline(x, color=color, ls=style, lw=1, label=label)


def plot_roofline_arch(model: RooflineModel, rows: Sequence[SweepRow], path: str | os.PathLike[str]) -> None:
    """Roofline (time) and arch line (energy) per precision, log-log, measured points over the model curves."""
    precs = list(model.parameters.precisions)
    fig, axes = _figure(len(precs))
    cap = model.parameters.power_limit_w
    for ax, prec in zip(axes, precs, strict=True):
        p: RooflineParams = model.parameters.params(prec)
        pts = [r for r in rows if r.precision == prec]
        x = _x_grid(pts, p.b_tau)
        ax.plot(x, roofline(x, p), color=_TIME_C, lw=2, label="roofline (time)")
        ax.plot(x, capped_roofline(x, p, cap), color=_TIME_C, lw=1, ls="--", label=f"roofline, {cap:.0f} W cap")
        ax.plot(x, arch_line(x, p), color=_ENERGY_C, lw=2, label="arch line (energy)")
        ax.plot(x, capped_arch_line(x, p, cap), color=_ENERGY_C, lw=1, ls="--", label=f"arch line, {cap:.0f} W cap")
        i = np.array([r.measured_intensity for r in pts])
        w = np.array([r.flops for r in pts])
        speed = w * p.tau_flop_s / np.array([r.time_s for r in pts])
        eff = w * p.eps_hat_flop_j / np.array([r.energy_j for r in pts])
        ax.plot(i, speed, "o", color=_TIME_C, mfc="none", label="measured time")
        ax.plot(i, eff, "s", color=_ENERGY_C, mfc="none", label="measured energy")
        _vline(ax, p.b_tau, _TIME_C, ":", f"B_τ = {p.b_tau:.3g}")
        _vline(ax, effective_energy_balance_point(p), _ENERGY_C, ":", f"B̂_ε = {effective_energy_balance_point(p):.3g}")
        _vline(ax, p.b_eps, "gray", "-.", f"B_ε (π0 = 0) = {p.b_eps:.3g}")
        _log2_axes(ax)
        ax.set_ylim(1 / 64, 2)
        ax.set_ylabel("relative performance")
        ax.set_title(
            f"{model.device} {prec}\n1 = {1e-12 / p.tau_flop_s:.3g} TFLOP/s or {1e-9 / p.eps_hat_flop_j:.3g} GFLOP/J",
            fontsize=9,
        )
        ax.legend(fontsize=7, loc="lower right")
    _save(fig, path)


def plot_power_line(model: RooflineModel, rows: Sequence[SweepRow], path: str | os.PathLike[str]) -> None:
    """Power line per precision (W against intensity), uncapped and cap-aware, with the power limit drawn."""
    precs = list(model.parameters.precisions)
    fig, axes = _figure(len(precs))
    cap = model.parameters.power_limit_w
    for ax, prec in zip(axes, precs, strict=True):
        p = model.parameters.params(prec)
        pts = [r for r in rows if r.precision == prec]
        x = _x_grid(pts, p.b_tau)
        ax.plot(x, power_line_w(x, p), color=_ENERGY_C, lw=2, label="power line, eq. (7)")
        ax.plot(x, capped_power_line_w(x, p, cap), color=_CAP_C, lw=2, ls="--", zorder=3, label="cap-aware model")
        ax.plot(
            [r.measured_intensity for r in pts], [r.power_w for r in pts], "o", color="k", mfc="none", label="measured"
        )
        ax.axhline(cap, color=_TIME_C, lw=1.5, label=f"power limit {cap:.0f} W")
        ax.axhline(p.pi0_w, color="gray", ls=":", lw=1, label=f"π0 = {p.pi0_w:.0f} W")
        if math.isfinite(model.idle_power_w):
            ax.axhline(model.idle_power_w, color="gray", ls="-.", lw=1, label=f"idle {model.idle_power_w:.0f} W")
        _vline(ax, p.b_tau, _TIME_C, ":", f"B_τ = {p.b_tau:.3g}")
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.set_xlabel("intensity (flop:byte)")
        ax.set_ylabel("average power (W)")
        ax.set_ylim(0, max(cap, float(np.nanmax(power_line_w(x, p)))) * 1.1)
        ax.set_title(f"{model.device} {prec}: power line", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    _save(fig, path)


def roofline_chart(model: RooflineModel, rows: Sequence[SweepRow]) -> dict[str, Any]:
    """The interactive twin of :func:`plot_roofline_arch`: achieved TFLOP/s and GFLOP/J against intensity."""
    from archline.report.interactive import curves_chart

    panels = []
    for prec in model.parameters.precisions:
        p: RooflineParams = model.parameters.params(prec)
        pts = [r for r in rows if r.precision == prec]
        if not pts:
            continue
        x = _x_grid(pts, p.b_tau)[::8]
        tflops = 1e-12 / p.tau_flop_s
        gflop_j = 1e-9 / p.eps_hat_flop_j
        curves = {
            "roofline (TFLOP/s)": list(zip(x.tolist(), (np.asarray(roofline(x, p)) * tflops).tolist(), strict=True)),
            "arch line (GFLOP/J)": list(zip(x.tolist(), (np.asarray(arch_line(x, p)) * gflop_j).tolist(), strict=True)),
        }
        points = {
            "measured TFLOP/s": [(r.measured_intensity, r.flops / r.time_s * 1e-12) for r in pts],
            "measured GFLOP/J": [(r.measured_intensity, r.flops / r.energy_j * 1e-9) for r in pts],
        }
        panels.append((f"{model.device} {prec}", curves, points))
    return curves_chart(panels, "intensity (flop/byte)", "TFLOP/s or GFLOP/J")

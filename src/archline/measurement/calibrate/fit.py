"""Sensor calibration: fit a sensor's response (window, lag, delay) to readings of known loads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize

from archline.core.readings import Readings
from archline.core.recording import Region
from archline.errors import SensorError
from archline.hw.simulated import PiecewisePower
from archline.measurement.calibrate.checks import LoadCheck, isolated, load_checks, stale_repeats, tail_time
from archline.measurement.clean import (
    REPEATS_NOTE,
    drop_repeats,
    estimate_noise_w,
    estimate_quantum_w,
    find_displaced,
    repeat_fraction,
    undisplace,
    update_period,
)
from archline.measurement.idle import IdleLevels, idle_levels
from archline.measurement.lagged import correct_lag, fit_rising_edges
from archline.measurement.sensor_model import SensorModel, classify, lag_from_rises

__all__ = ["LoadCheck", "SensorFit", "fit_sensor"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True)
class SensorFit:
    """A fitted sensor model with the evidence behind it."""

    model: SensorModel
    fit_rms_w: float
    candidates: tuple[dict[str, Any], ...]
    repeat_fraction: float  # after dropping the repeats within 4 ms
    stale_repeat_fraction: float
    repeats_dropped: int
    displaced_fraction: float
    displaced_shift_s: float
    idle: IdleLevels
    tail_s: float | None
    quantum_w: float
    checks: tuple[LoadCheck, ...]
    findings: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


class _Problem:
    """Readings near the loads, grouped, and the unit busy signal of the loads."""

    def __init__(self, t_s: F64, y_w: F64, loads: Sequence[Region], period_s: float) -> None:
        order = sorted(loads, key=lambda r: r.start_s)
        edges: list[float] = [order[0].start_s - 100.0]
        levels: list[float] = [0.0]
        for r in order:
            if r.start_s < edges[-1]:
                raise SensorError(f"calibration loads overlap at {r.name!r} ({r.start_s:.6f} s)")
            edges += [r.start_s, r.end_s]
            levels += [1.0, 0.0]
        edges.append(order[-1].end_s + 100.0)
        self.busy = PiecewisePower(np.array(edges), np.array(levels))
        names = list(dict.fromkeys(r.name for r in order))
        spans = [
            (min(r.start_s for r in order if r.name == n), max(r.end_s for r in order if r.name == n)) for n in names
        ]
        group = -np.ones(t_s.size, dtype=np.int64)
        for g, (a, b) in enumerate(spans):
            nxt = min((s for s, _ in spans if s > b), default=b + 20.0)
            post = min(max(0.3, 0.5 * (nxt - b)), 10.0)
            m = (t_s >= a - 0.3) & (t_s <= b + post) & (group < 0)
            group[m] = g
        keep = group >= 0
        self.t_s, self.y_w, self.group = t_s[keep], y_w[keep], group[keep]
        self.names = names
        self.period_s = period_s
        self.intervals = np.diff(t_s, prepend=t_s[0] - period_s)[keep]

    def response(self, window_s: float | None, delay_s: float, lag_s: float) -> F64:
        u = self.t_s - delay_s
        w = self.intervals if window_s is None else np.full(u.size, window_s)
        point = w <= 1e-6
        out = np.empty(u.size)
        if point.any():
            out[point] = self.busy.lagged(u[point], lag_s)
        if (~point).any():
            ww = w[~point]
            up = u[~point]
            out[~point] = (self.busy.cumulative_j(up, lag_s) - self.busy.cumulative_j(up - ww, lag_s)) / ww
        return out

    def amplitudes(self, r: F64) -> tuple[F64, F64]:
        """Per-group base and amplitude minimising the squared residual (closed form)."""
        g, y, ng = self.group, self.y_w, len(self.names)
        n = np.bincount(g, minlength=ng).astype(float)
        sr = np.bincount(g, r, ng)
        srr = np.bincount(g, r * r, ng)
        sy = np.bincount(g, y, ng)
        sry = np.bincount(g, r * y, ng)
        det = n * srr - sr * sr
        ok = det > 1e-12 * np.maximum(n * srr, 1e-300)
        amp = np.where(ok, (n * sry - sr * sy) / np.where(ok, det, 1.0), 0.0)
        base = np.where(n > 0, (sy - amp * sr) / np.maximum(n, 1), 0.0)
        return base, amp

    def residual(self, window_s: float | None, delay_s: float, lag_s: float) -> F64:
        r = self.response(window_s, delay_s, lag_s)
        base, amp = self.amplitudes(r)
        return np.asarray(self.y_w - base[self.group] - amp[self.group] * r, np.float64)


def _fit_candidate(prob: _Problem, tiling: bool) -> tuple[F64, float, F64]:
    """Best (window, delay, lag) for one candidate; returns params, rms and their 1 σ."""
    p = prob.period_s
    wmax = max(20 * p, 2.0)
    lo = np.array([0.0, -0.5 * p, 0.0])
    hi = np.array([wmax, 3 * p + 0.05, 5.0])

    def res(th: F64) -> F64:
        return prob.residual(None if tiling else float(th[0]), float(th[1]), float(th[2]))

    grid = []
    for w0 in [0.0] if tiling else [0.0, 0.25 * p, 0.5 * p, p, 3 * p, 10 * p]:
        for d0 in (0.0, 0.25 * p):
            for l0 in (0.0, 0.25 * p, p, 5 * p, 50 * p):
                th = np.array([min(w0, wmax), d0, min(l0, 5.0)])
                r = res(th)
                grid.append((float(np.dot(r, r)), th))
    grid.sort(key=lambda x: x[0])
    best: optimize.OptimizeResult | None = None
    free = np.array([not tiling, True, True])
    for _, th0 in grid[:3]:
        x0 = np.clip(th0[free], lo[free], hi[free])

        def rf(x: F64, th0: F64 = th0) -> F64:
            th = th0.copy()
            th[free] = x
            return res(th)

        sol = optimize.least_squares(rf, x0, bounds=(lo[free], hi[free]), x_scale=np.full(x0.size, p), diff_step=1e-3)
        if best is None or sol.cost < best.cost:
            best = sol
            best_th = th0.copy()
            best_th[free] = sol.x
    assert best is not None
    n = best.fun.size
    dof = max(n - int(free.sum()) - 2 * len(prob.names), 1)
    s2 = 2 * best.cost / dof
    sig = np.zeros(3)
    try:
        cov = np.linalg.pinv(best.jac.T @ best.jac) * s2
        sig[free] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        sig[free] = np.inf
    return best_th, math.sqrt(2 * best.cost / n), sig


def _rising_edge_lag(model: SensorModel, prob: _Problem, t_s: F64, y_w: F64, noise_w: float) -> SensorModel:
    """For a strongly lagged sensor, C from the rising edges alone, as ``infer_model`` gets it.

    The joint fit models a load as a rectangle over one idle level; a K20-like GPU holds an
    active-idle level after each load and steps it down over seconds (Burtscher §4.2), which
    that fit mistakes for a longer lag. The rising edges (load start to peak) are free of it,
    so C comes from them (the same function ``analyze --sensor auto`` uses) and the delay is
    refitted with C fixed.
    """
    if not model.correct_lag:
        return model
    got = lag_from_rises(fit_rising_edges(t_s, y_w, noise_w), model.period_s)
    if got is None:
        return model
    lag, lag_sigma = got
    p = model.period_s

    def res(x: F64) -> F64:
        return prob.residual(model.window_s, float(x[0]), lag)

    sol = optimize.least_squares(res, [model.delay_s], bounds=([-0.5 * p], [3 * p + 0.05]), x_scale=[p])
    kind, _ = classify(model.period_s, model.window_s, lag)
    return model.with_(kind=kind, lag_s=lag, lag_sigma_s=lag_sigma, delay_s=float(sol.x[0]))


def fit_sensor(readings: Readings, loads: Sequence[Region], *, max_rel_uncertainty: float = 0.2) -> SensorFit:
    """Fit the sensor model to readings taken while known loads ran.

    ``loads`` are windows during which the GPU was busy at roughly constant power (steps,
    square waves, isolated pulses); loads with the same name form a group sharing one busy
    power. The fit compares four candidates (timestamps as given or moved back onto their
    grid; a fixed averaging window or one that tiles the timeline), each with a fitted delay
    and lag, keeps the best, derives the kind, and then checks, load by load, how well the
    energy of each load is recovered with the fitted model and with a naive one.
    """
    if len(readings) < 20:
        raise SensorError(f"{readings.source}: too few readings ({len(readings)}) to fit a sensor model")
    if not loads:
        raise SensorError("no known loads to fit the sensor model to")
    r = drop_repeats(readings)
    t, y = r.t_s, r.value
    rep = repeat_fraction(y)
    disp = find_displaced(t)
    stamps = {"as stamped": t}
    if disp.count:
        stamps["moved onto grid"] = undisplace(t, disp)
    cands: list[dict[str, Any]] = []
    best: tuple[float, str, bool, F64, F64, float] | None = None
    for label, ts in stamps.items():
        period, _ = update_period(ts)
        prob = _Problem(ts, y, loads, period)
        if prob.t_s.size < 10:
            hint = f" ({r.meta[REPEATS_NOTE]})" if REPEATS_NOTE in r.meta else ""
            raise SensorError(f"{readings.source}: fewer than 10 readings near the loads{hint}")
        for tiling in (False, True):
            th, rms, sig = _fit_candidate(prob, tiling)
            cands.append(
                {
                    "timestamps": label,
                    "window": "tiles" if tiling else "fixed",
                    "rms_w": rms,
                    "window_s": None if tiling else float(th[0]),
                    "delay_s": float(th[1]),
                    "lag_s": float(th[2]),
                }
            )
            if best is None or rms < best[0] * 0.98 or (rms <= best[0] * 1.02 and tiling and not best[2]):
                best = (rms, label, tiling, th, sig, period)
    assert best is not None
    rms, label, tiling, th, sig, _ = best
    ts = stamps[label]
    period, jitter = update_period(ts)
    window = None if tiling else float(th[0])
    kind, coverage = classify(period, window, float(th[2]))
    quantum = estimate_quantum_w(y)
    noise = max(estimate_noise_w(y), quantum / math.sqrt(12.0))
    model = SensorModel(
        kind=kind,
        period_s=period,
        window_s=window,
        lag_s=float(th[2]),
        delay_s=float(th[1]),
        period_jitter_s=jitter,
        undisplace=label != "as stamped",
        noise_w=noise,
        lag_sigma_s=float(sig[2]),
        delay_sigma_s=float(sig[1]),
        window_sigma_s=float(sig[0]),
        edge_sigma_s=None,
        origin="fit",
    )
    prob = _Problem(ts, y, loads, period)
    model = _rising_edge_lag(model, prob, ts, y, noise)
    base, amp = prob.amplitudes(prob.response(window, model.delay_s, model.lag_s))
    checks, edge_sigma = load_checks(readings, loads, model, prob.names, base, amp, max_rel_uncertainty)
    # The fit's covariance assumes the model is exact; the load-by-load errors show how far
    # off its timing really is, so no timing parameter is trusted better than that.
    model = model.with_(
        edge_sigma_s=edge_sigma,
        delay_sigma_s=max(model.delay_sigma_s, edge_sigma),
        lag_sigma_s=max(model.lag_sigma_s, edge_sigma) if model.lag_s > 0 else 0.0,
        window_sigma_s=max(model.window_sigma_s, edge_sigma) if model.window_s is not None else 0.0,
    )
    # Levels and tails are read off the corrected power when the sensor is strongly lagged
    # (Burtscher: the raw readings of a K20 take seconds to settle; the corrected ones do not).
    yc = correct_lag(ts, y, model.lag_s) if model.correct_lag else y
    settle = model.mixing_s + 2 * period
    idle = idle_levels(ts, yc, loads, settle_s=settle)
    tail = tail_time(ts, yc, loads, idle, noise, settle)
    stale = stale_repeats(t, y, prob.busy, model)
    fit = SensorFit(
        model=model,
        fit_rms_w=rms,
        candidates=tuple(cands),
        repeat_fraction=rep,
        stale_repeat_fraction=stale,
        repeats_dropped=len(readings) - len(r),
        displaced_fraction=disp.fraction(t.size),
        displaced_shift_s=disp.typical_shift_s,
        idle=idle,
        tail_s=tail,
        quantum_w=quantum,
        checks=checks,
        extra={
            "coverage": coverage,
            "isolated": sorted({r.name for r, ok in zip(loads, isolated(loads, 5 * period), strict=True) if ok}),
            "groups": {
                n: {"idle_w": float(b), "busy_w": float(b + a)} for n, b, a in zip(prob.names, base, amp, strict=True)
            },
        },
    )
    return SensorFit(**{**fit.__dict__, "findings": tuple(_findings(fit))})


def _findings(fit: SensorFit) -> list[str]:
    """The fit's answers in plain words."""
    m = fit.model
    out = [
        f"updates every {1e3 * m.period_s:.1f} ms (jitter {1e3 * m.period_jitter_s:.1f} ms); "
        f"kind {m.kind}, coverage {100 * m.coverage:.0f} % of each period",
    ]
    if fit.displaced_fraction > 0.02 and m.undisplace:
        out.append(
            f"{100 * fit.displaced_fraction:.0f} % of readings are stamped {1e3 * fit.displaced_shift_s:.0f} ms off a "
            "regular grid; the fit is better with them moved back onto it"
        )
    win = "the interval since the previous reading" if m.window_s is None else f"{1e3 * m.window_s:.1f} ms"
    out.append(
        f"each reading averages {win} of the power after a first-order lag C = {1e3 * m.lag_s:.1f} ms "
        f"(± {1e3 * m.lag_sigma_s:.1f}), delayed {1e3 * m.delay_s:.1f} ms; fit rms {fit.fit_rms_w:.2f} W"
    )
    if fit.repeats_dropped:
        out.append(
            f"{fit.repeats_dropped} readings repeated the previous one within 4 ms (polled faster than the sensor "
            "updates) and were dropped"
        )
    if fit.repeat_fraction > 0:
        what = "stale copies" if fit.stale_repeat_fraction > 0.2 else "a steady power at the sensor's resolution"
        out.append(
            f"{100 * fit.repeat_fraction:.0f} % of the remaining readings repeat the previous value; "
            f"{100 * fit.stale_repeat_fraction:.0f} % of those fall where the power moved, so they are mostly {what}"
        )
    short = [c for c in fit.checks if c.duration_s <= 3 * m.period_s and c.name in fit.extra.get("isolated", ())]
    if short:
        parts = [
            f"{1e3 * c.duration_s:.0f} ms ±{100 * c.naive_spread:.0f} % vs ±{100 * c.model_spread:.0f} %"
            for c in sorted(short, key=lambda c: c.duration_s)
        ]
        out.append(
            "isolated short loads, energy per load taking readings as interval means vs with the fitted model: "
            + "; ".join(parts)
        )
    if m.edge_sigma_s is not None:
        out.append(f"each window edge is uncertain by {1e3 * m.edge_sigma_s:.1f} ms (from the load-by-load errors)")
    return out

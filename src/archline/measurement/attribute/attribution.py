"""Attribute a recording's energy to the kernels that ran in it, with intervals, plus what is left over.

The windows, the design, the fit and the rows that add up to the counter are one estimate whose
steps share their intermediate arrays; the fit's data and priors are in buffer_fit.py, the rows' helpers
in rows.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings
from archline.core.recording import Recording
from archline.errors import SensorError, TooLittleTracedError
from archline.measurement.attribute.buffer_fit import (
    buffer_design,
    power_bounds,
    prior_arrays,
    prior_context_spread,
)
from archline.measurement.attribute.design import GAP_NAMES, design_matrix, long_energy, prepare, search_delay
from archline.measurement.attribute.fit import block_bootstrap, fit_powers
from archline.measurement.attribute.prior import KernelPrior, dominance
from archline.measurement.attribute.prior_fit import fit_priors
from archline.measurement.attribute.rows import exact_row, inside, limit_note, merge_intervals, overlap_s, row_note
from archline.measurement.attribute.windows import BufferIntegral, EnergyWindows, buffer_windows, counter_windows
from archline.measurement.sensor_model import SensorModel
from archline.records.attribution import AttributionResult, KernelRow, LongCall, RowMethod

__all__ = ["GAP_NAMES", "AttributionOptions", "attribute_energy"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True)
class AttributionOptions:
    """Knobs of :func:`attribute_energy` (SI units).

    ``counter_delay_s``: how far the energy counter's value lags its update instant; None
    estimates it from the data (the fit is repeated over a grid of delays in
    ``delay_range_s`` and the delay with the smallest residual wins), falling back to
    ``default_counter_delay_s`` when the data cannot tell.
    ``long_call_min_s``: calls at least this long are integrated from the power samples
    over their own span; None means 10 sample periods of the power buffer.
    ``idle_gap_s``: gaps between activities at least this long count as the GPU idling
    inside the program, shorter ones as launch gaps.
    ``prior_rel_sd``: spread of the prior on each kernel's power around the pooled busy
    power (fraction); it only matters for kernels the data cannot separate.
    ``power_correction``: applied to the power-buffer readings before integration (e.g. a
    sensor-model correction); None uses them as they are.
    ``trace_settle_s``: with duty-cycled tracing, windows starting this soon after tracing was
    switched on are not used (kernels launched just before the switch may still be running).
    ``fit_source``: ``buffer`` fits the kernels' powers on the power buffer's readings (about 5×
    the counter's windows, and they see the mix change inside a step), scaled to the counter;
    ``counter`` on the energy counter's windows. ``buffer_model``: the buffer's sensor
    model (lag, averaging window, delay: :func:`archline.measurement.choose.choose_model`);
    None takes each reading as the mean power since the previous one.
    ``priors``: per kernel name, what replay or a counted model says of its energy per call;
    other kernels get the weak pooled prior. ``prior_scale``: ``fit`` calibrates each source's
    priors on the run's windows (one in-context/isolated scale and one per-kernel spread, by
    marginal likelihood: ``prior_fit.py``), and a row leaning on a calibrated prior whose interval
    is within ``calibrated_max_rel_half`` of its energy is identifiable; ``fixed`` takes them as
    given (replay's with a 15 % floor). ``power_limit_w``: the board's enforced limit; no row's
    power is fitted above it × 1.05.
    """

    counter_source: str = "nvml.energy"
    buffer_source: str = "nvml.buffer"
    counter_delay_s: float | None = None
    default_counter_delay_s: float = 0.0
    delay_range_s: tuple[float, float] = (-0.030, 0.060)
    long_call_min_s: float | None = None
    idle_gap_s: float = 0.002
    confidence: float = 0.95
    ci_method: str = "covariance"
    n_bootstrap: int = 200
    seed: int = 0
    prior_rel_sd: float = 0.5
    min_data_weight: float = 0.8
    power_correction: Callable[[Readings], Readings] | None = None
    trace_settle_s: float = 0.05
    fit_source: str = "buffer"
    buffer_model: SensorModel | None = None
    priors: Mapping[str, KernelPrior] | None = None
    power_limit_w: float | None = None
    prior_scale: str = "fit"
    calibrated_max_rel_half: float = 0.15


def _windows(recording: Recording, opts: AttributionOptions, notes: list[str]) -> EnergyWindows:
    counter = recording.get(opts.counter_source)
    counter_error: SensorError | None = None
    if counter is not None and len(counter) >= 2:
        try:
            return counter_windows(counter)
        except SensorError as exc:
            counter_error = exc
    buf = recording.get(opts.buffer_source)
    if buf is None or len(buf) < 3:
        if counter_error is not None:
            raise counter_error
        raise SensorError(
            f"recording has no usable {opts.counter_source!r} or {opts.buffer_source!r} readings; "
            "cannot attribute energy"
        )
    if counter_error is not None:
        notes.append(f"energy counter unusable ({counter_error}); windows from the power samples instead")
    notes.append(
        "windows come from the power samples, not the energy counter: periodic loads near the "
        "sample period can bias the fit"
    )
    return buffer_windows(buf)


def _buffer_model(opts: AttributionOptions, buf: Readings | None, notes: list[str]) -> SensorModel | None:
    """The power buffer's sensor model when one was given (a calibration or a shipped prior); None fits
    on the counter's windows: a model inferred from the run alone biased short kernels by 3–40 % in tests."""
    if opts.buffer_model is None and opts.fit_source == "buffer" and buf is not None:
        notes.append(
            "no calibrated sensor model for the power buffer: kernel powers fitted on the energy counter's "
            "windows, which a steady loop cannot tell apart (archline calibrate gives one)"
        )
    return opts.buffer_model


def attribute_energy(
    recording: Recording,
    activities: Sequence[ActivityRecord],
    *,
    program_span: tuple[float, float] | None = None,
    options: AttributionOptions | None = None,
    traced: Sequence[tuple[float, float]] | None = None,
) -> AttributionResult:
    """Split the energy measured in ``recording`` among ``activities`` (see docs/attribution.md).

    Calls at least ``long_call_min_s`` long get the integral of the power samples over their
    span (scaled so the power samples agree with the energy counter over the run). Every
    other call gets its name's mean power, fitted across the energy counter's windows: each
    window's energy is regressed on the busy time of each kernel name, copy kind and gap class
    in it (non-negative ridge regression towards the pooled busy/gap power). Gaps, idle time
    before/after ``program_span`` and the residual form their own rows, so the rows add up to
    the counter's total over the analysed span.

    ``traced`` (host-clock intervals) says when kernels were recorded, for duty-cycled tracing:
    only windows inside them (after ``trace_settle_s``) enter the fit and the rows; the energy
    of the other windows is one '(untraced time)' row.
    """
    opts = options or AttributionOptions()
    notes: list[str] = []
    w = _windows(recording, opts, notes)
    t_ref = float(w.edges_s[0])
    edges0 = w.edges_s - t_ref

    buf = recording.get(opts.buffer_source)
    if buf is not None and opts.power_correction is not None and len(buf) > 0:
        buf = opts.power_correction(buf)
    integral = BufferIntegral(buf, t_ref=t_ref) if buf is not None and len(buf) >= 2 else None
    if opts.long_call_min_s is not None:
        long_min = opts.long_call_min_s
    elif integral is not None:
        long_min = 10.0 * integral.period_s
    else:
        long_min = math.inf
    if integral is None:
        long_min = math.inf

    margin = max(abs(opts.delay_range_s[0]), abs(opts.delay_range_s[1])) + 1.0
    d = prepare(
        activities,
        t_ref,
        float(edges0[0]) - margin,
        float(edges0[-1]) + margin,
        program_span,
        long_min,
        opts.idle_gap_s,
    )
    if d.overlapping:
        notes.append("some activities overlap (concurrent streams): their shared time is split equally among them")

    if opts.counter_delay_s is not None:
        delay, identified = float(opts.counter_delay_s), True
    elif len(w) >= 8:
        delay, identified = search_delay(d, w, edges0, integral, opts.delay_range_s)
        if not identified:
            assumed_ms = opts.default_counter_delay_s * 1e3
            notes.append(f"the sensor delay could not be estimated from this workload; assumed {assumed_ms:g} ms")
            delay = opts.default_counter_delay_s
    else:
        delay, identified = opts.default_counter_delay_s, False
    edges = edges0 - delay
    y = w.energy_j.copy()
    total_j = float(y.sum())
    keep = np.ones(len(y), dtype=bool)
    if traced is not None:
        keep[:] = False
        for a, b in traced:
            a0, b0 = a - t_ref + opts.trace_settle_s, b - t_ref
            keep |= (edges[:-1] >= a0) & (edges[1:] <= b0)
        if int(keep.sum()) < 3:
            raise TooLittleTracedError(
                f"only {int(keep.sum())} of the energy counter's {len(y)} windows lie inside the traced "
                "intervals; trace longer (a larger duty cycle or a longer program)"
            )
        notes.append(
            f"duty-cycled tracing: {int(keep.sum())} of {len(y)} counter windows were traced and fitted; "
            "per-kernel rows cover the traced time only"
        )
    kept = merge_intervals(edges[:-1], edges[1:], keep)

    # Power buffer vs counter: a scale for the integrated calls and the spread that sets their interval.
    scale, rel_sd = 1.0, math.nan
    if integral is not None and w.source != opts.buffer_source:
        integral = integral.fit_delay(edges, y)
        b_w = np.diff(integral.cumulative(edges))
        covered = (edges[:-1] >= integral.start_s) & (edges[1:] <= integral.end_s)
        if covered.sum() >= 3 and b_w[covered].sum() > 0:
            scale = float(y[covered].sum() / b_w[covered].sum())
            rel = (scale * b_w[covered] - y[covered]) / np.maximum(y[covered], 1e-12)
            rel_sd = float(1.4826 * np.median(np.abs(rel - np.median(rel))))
            if abs(scale - 1.0) > 0.05:
                notes.append(
                    f"the power samples and the energy counter disagree by {100 * (scale - 1):+.1f} % over the run"
                )
    long_e = long_energy(d, edges, integral, scale)
    y_short = y - long_e.sum(axis=0)

    x = design_matrix(d, edges)[keep]
    y_short = y_short[keep]
    total_kept = float(y[keep].sum())
    n_cols = len(d.col_names)
    col_time = x.sum(axis=0)
    active = np.nonzero(col_time > 0)[0].astype(np.int64)
    xa = x[:, active]
    fit_windows = "counter"
    model = _buffer_model(opts, buf, notes) if integral is not None and w.source != opts.buffer_source else None
    if opts.fit_source == "buffer" and integral is not None and model is not None:
        xb, yb = buffer_design(d, integral, scale, kept, model=model)
        if xb.shape[0] >= max(2 * len(y_short), active.size + 3):
            xa, y_short, fit_windows = xb[:, active], yb, "buffer"
            notes.append(f"kernel powers fitted on {xb.shape[0]} power-buffer windows, scaled to the energy counter")
    elif opts.fit_source not in ("buffer", "counter"):
        raise ValueError(f"unknown fit_source {opts.fit_source!r}")

    # Stage 1: pooled busy / gap / idle powers, weakly anchored at the run's mean power.
    span_s = float(sum(b - a for a, b in kept))
    mean_p = total_kept / span_s if span_s > 0 else 0.0
    n_par = 4
    m = np.zeros((active.size, n_par))
    m[np.arange(active.size), d.col_parent[active]] = 1.0
    x1 = xa @ m
    used_par = np.nonzero(x1.sum(axis=0) > 0)[0]
    fit1 = fit_powers(
        x1[:, used_par], y_short, np.full(used_par.size, mean_p), np.full(used_par.size, max(mean_p, 1.0))
    )
    par_p = np.full(n_par, mean_p)
    par_se = np.full(n_par, mean_p)
    par_p[used_par] = fit1.power_w
    par_se[used_par] = fit1.se_w
    if np.any(used_par == 2) and np.any(used_par == 1) and par_p[1] < par_p[2]:
        # One pooled busy power misfits a loop whose phases differ in power; the GPU waiting inside the
        # program never draws less than idle, so the gaps' prior starts there.
        par_p[1], par_se[1] = par_p[2], max(par_se[1], par_p[2] - par_p[1])
    if np.any(used_par == 2) and np.any(used_par == 3) and par_p[3] < par_p[2]:
        par_p[3], par_se[3] = par_p[2], max(par_se[3], par_p[2] - par_p[3])

    # Stage 2: every column, shrunk towards its pooled power where the data are silent.
    pm = par_p[d.col_parent[active]]
    floor = 0.05 * max(mean_p, 1.0)
    psd = np.sqrt((opts.prior_rel_sd * pm) ** 2 + par_se[d.col_parent[active]] ** 2)
    psd = np.maximum(psd, floor)
    pm, psd, prior_src = prior_arrays(d, active, pm, psd, opts.priors or {})
    ctx = prior_context_spread(d, active, opts.priors or {})
    pm, psd, scale_fits = fit_priors(opts.prior_scale, xa, y_short, pm, psd, prior_src, context_rel_sd=ctx)
    notes += [f.note() for f in scale_fits]
    calibrated = {f.source for f in scale_fits if f.calibrated}
    upper = power_bounds(d, active, opts.power_limit_w)
    fit = fit_powers(xa, y_short, pm, psd, upper_w=upper)
    at_limit = np.zeros(n_cols, bool)
    at_limit[active] = np.isfinite(upper) & (fit.power_w >= 0.999 * upper)
    src_of = dict(zip(active.tolist(), prior_src, strict=True))
    tq = fit.t_quantile(opts.confidence)
    p_lo = fit.power_w - tq * fit.se_w
    p_hi = fit.power_w + tq * fit.se_w
    if opts.ci_method == "bootstrap":
        boot = block_bootstrap(xa, y_short, fit, pm, n_boot=opts.n_bootstrap, seed=opts.seed, upper_w=upper)
        alpha = (1.0 - opts.confidence) / 2.0
        p_lo = np.quantile(boot, alpha, axis=0)
        p_hi = np.quantile(boot, 1.0 - alpha, axis=0)
    elif opts.ci_method != "covariance":
        raise ValueError(f"unknown ci_method {opts.ci_method!r}")

    power = np.full(n_cols, math.nan)
    lo_w = np.full(n_cols, math.nan)
    hi_w = np.full(n_cols, math.nan)
    weight = np.zeros(n_cols)
    power[active], lo_w[active], hi_w[active], weight[active] = fit.power_w, p_lo, p_hi, fit.data_weight

    # Calls and time per column inside the span.
    span_lo, span_hi = float(edges[0]), float(edges[-1])
    if traced is None:
        in_span = (d.act_e > span_lo) & (d.act_s < span_hi)
        g_in = (d.gap_e > span_lo) & (d.gap_s < span_hi)
    else:
        in_span = inside(0.5 * (d.act_s + d.act_e), kept)
        g_in = inside(0.5 * (d.gap_s + d.gap_e), kept)
    calls = np.bincount(d.act_col[in_span], minlength=n_cols)
    calls += np.bincount(d.gap_col[g_in], minlength=n_cols)
    outside = np.clip(np.minimum(d.act_e, span_lo) - d.act_s, 0, None) + np.clip(
        d.act_e - np.maximum(d.act_s, span_hi), 0, None
    )
    clipped_s = float(np.sum(np.minimum(outside, d.act_e - d.act_s)))
    if clipped_s > 0:
        notes.append(
            f"{clipped_s * 1e3:.3g} ms of GPU work ran outside the energy counter's coverage and is not in the table"
        )

    long_time = np.zeros(n_cols)
    long_j = np.zeros(n_cols)
    long_var = np.zeros(n_cols)
    long_calls: list[LongCall] = []
    period = integral.period_s if integral is not None else math.nan
    z = float(stats.norm.ppf(0.5 + opts.confidence / 2.0))
    rs = rel_sd if math.isfinite(rel_sd) else 0.03
    n_cov = max(len(w), 1)
    for j, i in enumerate(d.long_idx):
        c = int(d.act_col[i])
        e_j = float(long_e[j][keep].sum())
        t_in = overlap_s(float(d.act_s[i]), float(d.act_e[i]), kept) * float(d.long_share[j])
        long_time[c] += t_in
        long_j[c] += e_j
        dur_i = float(d.act_e[i] - d.act_s[i])
        rel = math.hypot(rs * math.sqrt(period / max(dur_i, period)), rs / math.sqrt(n_cov))
        # The sample straddling each end of the call may cover only part of its period: allow
        # a quarter period of the step in power at either end.
        step_w = abs(e_j / max(t_in, 1e-12) - par_p[1 if np.any(used_par == 1) else 2]) if t_in > 0 else 0.0
        long_var[c] += (rel * e_j) ** 2 + 2.0 * (0.25 * period * step_w) ** 2
        if t_in > 0 or traced is None:
            long_calls.append(LongCall(d.col_names[c], float(d.act_s[i] + t_ref), float(d.act_e[i] + t_ref), e_j))

    rows: list[KernelRow] = []
    for k in range(n_cols):
        t_short = float(col_time[k])
        t_all = t_short + long_time[k]
        if t_all <= 0 and calls[k] == 0:
            continue
        p = power[k] if t_short > 0 else 0.0
        e_short = p * t_short
        e = e_short + long_j[k]
        half_short_lo = (p - lo_w[k]) * t_short if t_short > 0 else 0.0
        half_short_hi = (hi_w[k] - p) * t_short if t_short > 0 else 0.0
        half_long = z * math.sqrt(long_var[k])
        e_lo = max(e - math.hypot(half_short_lo, half_long), 0.0)
        e_hi = e + math.hypot(half_short_hi, half_long)
        method: RowMethod = "regression" if long_time[k] == 0 else ("integrated" if t_short == 0 else "mixed")
        identifiable = bool(t_short == 0 or weight[k] >= opts.min_data_weight)
        note = "" if identifiable else row_note(k, d.col_names, fit, active, src_of.get(k, "default"))
        if not identifiable and src_of.get(k) in calibrated and e > 0:
            # A prior calibrated on these windows is evidence too: narrow enough, the row is identified.
            half = max(e - e_lo, e_hi - e) / e
            if half <= opts.calibrated_max_rel_half:
                identifiable = True
                note = f"identified by its {src_of[k]} prior, calibrated on this run's windows (±{100 * half:.0f} %)"
        over = limit_note(opts.power_limit_w, bool(at_limit[k]), e / t_all if t_all > 0 else math.nan)
        if over:
            identifiable, note = False, over
        rows.append(
            KernelRow(
                name=d.col_names[k],
                kind=d.col_kinds[k],
                calls=int(calls[k]),
                time_s=t_all,
                energy_j=e,
                energy_lo_j=e_lo,
                energy_hi_j=e_hi,
                share=e / total_j if total_j else math.nan,
                mean_power_w=e / t_all if t_all > 0 else math.nan,
                power_lo_w=e_lo / t_all if t_all > 0 else math.nan,
                power_hi_w=e_hi / t_all if t_all > 0 else math.nan,
                method=method,
                identifiable=identifiable,
                data_weight=float(weight[k]) if t_short > 0 else 1.0,
                note=note,
                dominated_by=dominance(float(weight[k]) if t_short > 0 else 1.0),
            )
        )
    residual = total_kept - sum(r.energy_j for r in rows)
    if traced is not None:
        lo_e, hi_e = edges[:-1], edges[1:]
        untraced_s = float(np.sum((hi_e - lo_e)[~keep]))
        rows.append(exact_row("untraced", float(y[~keep].sum()), total_j, "counter", untraced_s))
    rows.append(exact_row("residual", residual, total_j, "residual"))
    act_rows = sorted(
        (r for r in rows if r.kind in ("kernel", "memcpy", "memset", "program")), key=lambda r: -r.energy_j
    )
    other = [r for r in rows if r.kind not in ("kernel", "memcpy", "memset", "program")]
    whole = bool(activities) and all(a.kind == "program" for a in activities)
    n_unident = sum(1 for r in act_rows if not r.identifiable)
    if n_unident:
        notes.append(f"{n_unident} row(s) not identifiable from this run; their energies lean on their priors")
    return AttributionResult(
        rows=tuple(act_rows + other),
        total_energy_j=total_j,
        span_start_s=span_lo + t_ref,
        span_end_s=span_hi + t_ref,
        window_source=w.source,
        windows=len(w),
        window_period_s=w.period_s,
        counter_delay_s=delay,
        delay_identified=identified,
        residual_rms_j=float(fit.sigma_j),
        confidence=opts.confidence,
        ci_method=opts.ci_method,
        long_call_min_s=long_min,
        idle_gap_s=opts.idle_gap_s,
        buffer_scale=scale if integral is not None and w.source != opts.buffer_source else None,
        buffer_delay_s=integral.delay_s if integral is not None else None,
        buffer_rel_sd=rel_sd if math.isfinite(rel_sd) else None,
        clipped_time_s=clipped_s,
        whole_program_only=whole,
        notes=tuple(notes),
        long_calls=tuple(long_calls),
        extra={
            "pooled_power_w": {n: float(par_p[i]) for i, n in enumerate(("busy", "gaps", "idle"))},
            "counter_regular": w.regular,
            "counter_jitter_s": w.jitter_s,
            "fit_windows": fit_windows,
            "fit_window_count": int(xa.shape[0]),
            "power_limit_w": opts.power_limit_w,
            "priors": {d.col_names[k]: s_ for k, s_ in src_of.items() if s_ != "default"},
            "prior_scale": opts.prior_scale,
            "prior_fit": {f.source: f.to_json() for f in scale_fits},
        },
    )

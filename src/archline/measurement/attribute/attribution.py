"""Attribute a recording's energy to the kernels that ran in it, with intervals, plus what is left over.

The windows, the design, the fit and the rows that add up to the counter are one estimate whose
steps share their intermediate arrays; the fit's data and priors are in buffer_fit.py, its two stages
in column_fit.py, the rows in rows.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings
from archline.core.recording import Recording
from archline.errors import SensorError
from archline.measurement.attribute.buffer_fit import LIMIT_SLACK, buffer_design
from archline.measurement.attribute.ceiling import AtLimit, at_limit
from archline.measurement.attribute.column_fit import ColumnFit, fit_columns
from archline.measurement.attribute.design import GAP_NAMES, Design, design_matrix, long_energy, prepare, search_delay
from archline.measurement.attribute.prior import KernelPrior
from archline.measurement.attribute.rows import (
    LongCalls,
    calls_in_span,
    column_rows,
    long_calls,
    merge_intervals,
    ordered_rows,
)
from archline.measurement.attribute.windows import (
    BufferIntegral,
    EnergyWindows,
    buffer_windows,
    counter_windows,
    traced_windows,
)
from archline.measurement.sensor_model import SensorModel
from archline.records.attribution import AttributionResult, KernelRow

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
    power is fitted above its bound: the limit × 1.05, or with ``power_ceiling_w`` (the most a kernel was
    measured to draw while it ran on such a board, between others) min(ceiling, limit / the row's largest
    share of a window) × 1.05 (``ceiling.py``). ``sensor_sigma``: a fit on the buffer's windows carries the
    buffer model's lag and delay σ into every row's interval (:func:`_model_sensitivity`, since session 31); False
    leaves them out, as before.
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
    power_ceiling_w: float | None = None
    prior_scale: str = "fit"
    calibrated_max_rel_half: float = 0.15
    sensor_sigma: bool = True


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
            "windows, which a steady loop cannot tell apart (archline sensor calibrate gives one)"
        )
    return opts.buffer_model


@dataclass(frozen=True)
class _Span:
    """The windows on the design's clock (s after ``t_ref``, delay-corrected) and the power samples against them.

    ``keep``: the windows that enter the fit and the rows (``kept``: as intervals); ``scaled``: whether the
    power samples were scaled to the energy counter (by ``scale``, agreeing within ``rel_sd`` per window).
    """

    w: EnergyWindows
    t_ref: float
    edges: F64
    delay_s: float
    delay_identified: bool
    keep: NDArray[np.bool_]
    kept: list[tuple[float, float]]
    integral: BufferIntegral | None
    scaled: bool
    scale: float
    rel_sd: float


@dataclass(frozen=True)
class _FitData:
    """What the column fit sees: each column's busy time in the kept counter windows, and the windows it fits."""

    col_time: F64
    active: I64
    x: F64
    y_j: F64
    source: str
    mean_w: float


def _at_limit(activities: Sequence[ActivityRecord], buf: Readings | None, opts: AttributionOptions) -> AtLimit | None:
    """The board at its power limit while kernels ran, from the power buffer (None without a limit or a buffer)."""
    kernels = [a for a in activities if a.kind == "kernel"]
    if not opts.power_limit_w or buf is None or len(buf) == 0 or not kernels:
        return None
    busy = (min(a.start_s for a in kernels), max(a.end_s for a in kernels))
    return at_limit(buf.t_s, buf.value, busy, opts.power_limit_w)


def _power_samples(
    recording: Recording, opts: AttributionOptions, t_ref: float
) -> tuple[Readings | None, BufferIntegral | None, float]:
    """The power buffer (corrected), its integral, and the shortest call integrated from it (inf without one)."""
    buf = recording.get(opts.buffer_source)
    if buf is not None and opts.power_correction is not None and len(buf) > 0:
        buf = opts.power_correction(buf)
    integral = BufferIntegral(buf, t_ref=t_ref) if buf is not None and len(buf) >= 2 else None
    if integral is None:
        long_min = math.inf
    else:
        long_min = opts.long_call_min_s if opts.long_call_min_s is not None else 10.0 * integral.period_s
    return buf, integral, long_min


def _counter_delay(
    d: Design,
    w: EnergyWindows,
    edges0: F64,
    integral: BufferIntegral | None,
    opts: AttributionOptions,
    notes: list[str],
) -> tuple[float, bool]:
    """The energy counter's delay (s) and whether the data identified it (a given delay counts as identified)."""
    if opts.counter_delay_s is not None:
        return float(opts.counter_delay_s), True
    if len(w) >= 8:
        delay, identified = search_delay(d, w, edges0, integral, opts.delay_range_s)
        if not identified:
            assumed_ms = opts.default_counter_delay_s * 1e3
            notes.append(f"the sensor delay could not be estimated from this workload; assumed {assumed_ms:g} ms")
            delay = opts.default_counter_delay_s
        return delay, identified
    return opts.default_counter_delay_s, False


def _span(
    recording: Recording,
    activities: Sequence[ActivityRecord],
    program_span: tuple[float, float] | None,
    traced: Sequence[tuple[float, float]] | None,
    opts: AttributionOptions,
    notes: list[str],
) -> tuple[_Span, Design, Readings | None, float]:
    """Step 1: the windows, the design (with the shortest integrated call, s), the counter delay, the traced
    windows and the power buffer's scale to the counter."""
    w = _windows(recording, opts, notes)
    t_ref = float(w.edges_s[0])
    edges0 = w.edges_s - t_ref
    buf, integral, long_min = _power_samples(recording, opts, t_ref)
    margin = max(abs(opts.delay_range_s[0]), abs(opts.delay_range_s[1])) + 1.0
    lo, hi = float(edges0[0]) - margin, float(edges0[-1]) + margin
    d = prepare(activities, t_ref, lo, hi, program_span, long_min, opts.idle_gap_s)
    if d.overlapping:
        notes.append("some activities overlap (concurrent streams): their shared time is split equally among them")
    delay, identified = _counter_delay(d, w, edges0, integral, opts, notes)
    edges = edges0 - delay
    if traced is None:
        keep = np.ones(len(w), dtype=bool)
    else:
        keep = traced_windows(edges, traced, t_ref, opts.trace_settle_s, notes)
    kept = merge_intervals(edges[:-1], edges[1:], keep)
    # Power buffer vs counter: a scale for the integrated calls and the spread that sets their interval.
    scaled = integral is not None and w.source != opts.buffer_source
    scale, rel_sd = 1.0, math.nan
    if integral is not None and scaled:
        integral, scale, rel_sd = integral.scale_to(edges, w.energy_j.copy())
        if abs(scale - 1.0) > 0.05:
            notes.append(
                f"the power samples and the energy counter disagree by {100 * (scale - 1):+.1f} % over the run"
            )
    span = _Span(w, t_ref, edges, delay, identified, keep, kept, integral, scaled, scale, rel_sd)
    return span, d, buf, long_min


def _buffer_enough(n_buffer: int, n_counter: int, n_active: int) -> bool:
    """Whether the power buffer's readings are enough to fit on instead of the counter's windows."""
    return n_buffer >= max(2 * n_counter, n_active + 3)


def _fit_data(
    d: Design, s: _Span, long_e: F64, buf: Readings | None, opts: AttributionOptions, notes: list[str]
) -> _FitData:
    """Step 2: the design matrix on the kept windows, its active columns, and which windows the fit uses."""
    y = s.w.energy_j.copy()
    x = design_matrix(d, s.edges)[s.keep]
    y_short = (y - long_e.sum(axis=0))[s.keep]
    col_time = x.sum(axis=0)
    active = np.nonzero(col_time > 0)[0].astype(np.int64)
    xa = x[:, active]
    fit_windows = "counter"
    model = _buffer_model(opts, buf, notes) if s.scaled else None
    if opts.fit_source == "buffer" and s.integral is not None and model is not None:
        xb, yb = buffer_design(d, s.integral, s.scale, s.kept, model=model)
        if _buffer_enough(xb.shape[0], len(y_short), active.size):
            xa, y_short, fit_windows = xb[:, active], yb, "buffer"
    elif opts.fit_source not in ("buffer", "counter"):
        raise ValueError(f"unknown fit_source {opts.fit_source!r}")
    span_s = float(sum(b - a for a, b in s.kept))
    total_kept = float(y[s.keep].sum())
    mean_w = total_kept / span_s if span_s > 0 else 0.0
    return _FitData(col_time, active, xa, y_short, fit_windows, mean_w)


def _counter_if_buffer_refuted(
    d: Design,
    s: _Span,
    long_e: F64,
    buf: Readings | None,
    opts: AttributionOptions,
    data: _FitData,
    cols: ColumnFit,
    notes: list[str],
) -> tuple[_FitData, ColumnFit]:
    """Step 3b (session 15): where the power buffer's windows contradict a prior source's measured spread (replay's
    design), and the energy counter's windows calibrate every source with a measured spread without contradicting
    it, fit on the counter's; where they are too few to calibrate one, or contradict one too, the buffer's fit stays.
    A 20 ms window leans on the buffer's assumed delay and response, which a steady loop cannot check (the delay is
    then taken as 0); a 100 ms window hardly does. On H100 GPU-73c8ce09 the transformer's buffer windows asked for a
    spread of ≥ 67 % where its design measured 3.7 % and the counter's windows agreed with the design
    (docs/attribution.md, session 15)."""
    refuted = [f for f in cols.scale_fits if f.refuted]
    if data.source != "buffer" or not refuted:
        return data, cols
    alt = _fit_data(d, s, long_e, buf, replace(opts, fit_source="counter"), [])
    alt_cols = _fit(d, alt, opts)
    # every source with a measured spread must be calibrated on the counter's windows, and not contradicted there
    if any(f.refuted or not f.calibrated for f in alt_cols.scale_fits if math.isfinite(f.rho_measured)):
        return data, cols
    lows = ", ".join(f"{100 * f.rho_low:.1f} %" for f in refuted)
    notes.append(
        f"kernel powers fitted on the energy counter's {alt.x.shape[0]} windows, not the power buffer's "
        f"{data.x.shape[0]}: the buffer's windows contradicted the measured spread of the "
        f"{', '.join(f.source for f in refuted)} priors (their 95 % lower bound on the excess {lows}) where the "
        "counter's windows agree with it; a 20 ms window leans on the buffer's assumed delay and response"
    )
    return alt, alt_cols


#: The sensor model's parameters whose uncertainty :func:`_model_sensitivity` carries into the rows, with their σs.
SENSITIVE = (("lag_s", "lag_sigma_s"), ("delay_s", "delay_sigma_s"))
#: The note names the row whose power moves most among the columns holding at least this share of the fitted energy.
SENSITIVE_NAMED_SHARE = 0.01


def widen(p: F64, lo: F64, hi: F64, sd: F64, z: float, bound: F64 | None = None) -> tuple[F64, F64]:
    """Each power interval ``[lo, hi]`` about ``p`` widened in quadrature by ``z × sd`` on either side, never narrower
    than it was; the high end no higher than ``bound`` unless it already was (NaN powers keep their interval)."""
    ok = np.isfinite(p) & np.isfinite(sd)
    lo2 = np.where(ok, p - np.sqrt((p - lo) ** 2 + (z * sd) ** 2), lo)
    hi2 = np.where(ok, p + np.sqrt((hi - p) ** 2 + (z * sd) ** 2), hi)
    lo2, hi2 = np.minimum(lo2, lo), np.maximum(hi2, hi)
    if bound is not None:
        cap = np.where(np.isfinite(bound), np.maximum(bound, hi), np.inf)
        hi2 = np.minimum(hi2, cap)
    return np.asarray(lo2, np.float64), np.asarray(hi2, np.float64)


def _model_sensitivity(
    d: Design, s: _Span, opts: AttributionOptions, data: _FitData, cols: ColumnFit
) -> tuple[ColumnFit, dict[str, Any] | None]:
    """Step 3c (session 31): the power buffer's sensor model is known only to within its σ (its calibration's, or the
    shipped one's of a board of the same generation), and a 20 ms reading's response to a call of a millisecond leans
    on its lag and delay. The buffer's windows are rebuilt with each of the two moved by +1 σ and by −1 σ (a lag that
    would reach 0 is not moved; a delay may go below 0) and the final fit is redone on them with everything else as it
    was: the same columns, prior means and σ (the priors as calibrated, not calibrated again) and bounds. A column's
    sensitivity to a parameter is the root mean square of its two moves; their root sum of squares (the two parameters
    taken as independent) widens its interval in quadrature at the fit's own quantile, never narrowing it and not past
    its bound (:func:`widen`). On simulated steps fitted through the shipped H200 model, a board whose lag and delay
    are 0.4-0.6 ms off had intervals that held the truth for 5-45 % of the kernel energy at calls of 0.84-8.4 ms, at
    ±0.7-2.2 % half-widths (benchmarks/call_length_sim.py, docs/attribution.md "Session 31"). Only where the fit is on
    the buffer's windows, the model carries a σ and ``opts.sensor_sigma`` is on; a moved model whose windows are too
    few for the buffer's fit is left out. Returns the widened fit and what was done (None: nothing)."""
    from archline.measurement.attribute.fit import fit_powers

    model = opts.buffer_model
    pm, psd, upper = cols.prior_mean_w, cols.prior_sd_w, cols.upper_w
    if data.source != "buffer" or model is None or not opts.sensor_sigma or s.integral is None:
        return cols, None
    if pm is None or psd is None or upper is None:
        return cols, None
    p0 = cols.fit.power_w
    n_counter = int(np.count_nonzero(s.keep))
    parts: list[tuple[str, float, F64]] = []
    for field, sigma_field in SENSITIVE:
        sigma = float(getattr(model, sigma_field))
        value = float(getattr(model, field))
        if not (math.isfinite(sigma) and sigma > 0) or (field == "lag_s" and value - sigma <= 0):
            continue
        moves: list[F64] = []
        for sign in (1.0, -1.0):
            moved = value + sign * sigma
            m = replace(model, lag_s=moved) if field == "lag_s" else replace(model, delay_s=moved)
            # only the buffer's design depends on the model: the counter's windows and the columns stay as they are
            xb, yb = buffer_design(d, s.integral, s.scale, s.kept, model=m)
            if not _buffer_enough(xb.shape[0], n_counter, data.active.size):
                break
            refit = fit_powers(xb[:, data.active], yb, pm, psd, upper_w=upper)
            moves.append(refit.power_w - p0)
        if len(moves) == 2:
            parts.append((field, sigma, np.sqrt(0.5 * (moves[0] ** 2 + moves[1] ** 2))))
    if not parts:
        return cols, None
    sd_active = np.sqrt(sum(j**2 for _, _, j in parts))
    sd = np.full(len(d.col_names), math.nan)
    sd[cols.active] = sd_active
    bound = np.full(len(d.col_names), math.nan)
    bound[cols.active] = upper
    lo, hi = widen(cols.power_w, cols.lo_w, cols.hi_w, sd, cols.fit.t_quantile(opts.confidence), bound)
    # the row named: the largest relative move among the columns that hold a share of the fitted energy
    energy = np.where(np.isfinite(cols.power_w), cols.power_w, 0.0) * data.col_time
    held = energy >= SENSITIVE_NAMED_SHARE * max(float(energy.sum()), 1e-300)
    rel = np.where(held & (cols.power_w > 0), sd / np.where(cols.power_w > 0, cols.power_w, 1.0), 0.0)
    worst = int(np.argmax(np.nan_to_num(rel)))
    info = {
        "parameters": {f: sig for f, sig, _ in parts},
        "power_sd_w": {d.col_names[k]: float(sd[k]) for k in cols.active.tolist() if sd[k] > 0},
        "largest_rel_sd": float(rel[worst]),
        "largest": d.col_names[worst],
    }
    return replace(cols, lo_w=lo, hi_w=hi), info


def _fit(d: Design, data: _FitData, opts: AttributionOptions) -> ColumnFit:
    """Step 3: pooled powers, then every column shrunk towards its pooled power (or prior) where the data are silent."""
    return fit_columns(
        d,
        data.active,
        data.x,
        data.y_j,
        data.mean_w,
        priors=opts.priors or {},
        prior_rel_sd=opts.prior_rel_sd,
        prior_scale=opts.prior_scale,
        power_limit_w=opts.power_limit_w,
        power_ceiling_w=opts.power_ceiling_w,
        confidence=opts.confidence,
        ci_method=opts.ci_method,
        n_bootstrap=opts.n_bootstrap,
        seed=opts.seed,
    )


def _rows(
    d: Design,
    s: _Span,
    data: _FitData,
    cols: ColumnFit,
    long_e: F64,
    duty_cycled: bool,
    opts: AttributionOptions,
    notes: list[str],
) -> tuple[tuple[KernelRow, ...], LongCalls, float]:
    """Step 4: the rows with their energies, intervals, identifiability and notes; the integrated calls; the
    time of work outside the span (s)."""
    calls, clipped_s = calls_in_span(d, s.edges, s.kept, duty_cycled, notes)
    period_s = s.integral.period_s if s.integral is not None else math.nan
    long = long_calls(
        d,
        long_e,
        s.keep,
        s.kept,
        period_s=period_s,
        rel_sd=s.rel_sd,
        n_windows=len(s.w),
        wait_w=cols.wait_w,
        duty_cycled=duty_cycled,
    )
    total_j = float(s.w.energy_j.sum())
    rows = column_rows(
        d,
        data.col_time,
        long,
        calls,
        cols,
        total_j,
        confidence=opts.confidence,
        min_data_weight=opts.min_data_weight,
        calibrated_max_rel_half=opts.calibrated_max_rel_half,
        power_limit_w=opts.power_limit_w,
    )
    return ordered_rows(rows, s.w.energy_j, s.edges, s.keep, total_j, duty_cycled, notes), long, clipped_s


def _bound_rule(opts: AttributionOptions) -> str:
    """The bound on a row's mean power, in words."""
    if not opts.power_limit_w:
        return "none known"
    if opts.power_ceiling_w and opts.power_ceiling_w > opts.power_limit_w:
        return (
            f"min({opts.power_ceiling_w:.0f} W burst ceiling, the {opts.power_limit_w:.0f} W limit / its largest "
            f"share of a window) × {LIMIT_SLACK:g}"
        )
    return f"the {opts.power_limit_w:.0f} W limit × {LIMIT_SLACK:g}"


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
    s, d, buf, long_min = _span(recording, activities, program_span, traced, opts, notes)
    long_e = long_energy(d, s.edges, s.integral, s.scale)
    data = _fit_data(d, s, long_e, buf, opts, notes)
    cols = _fit(d, data, opts)
    data, cols = _counter_if_buffer_refuted(d, s, long_e, buf, opts, data, cols, notes)
    cols, sensitivity = _model_sensitivity(d, s, opts, data, cols)
    if data.source == "buffer":
        notes.append(f"kernel powers fitted on {data.x.shape[0]} power-buffer windows, scaled to the energy counter")
    if sensitivity is not None:
        moved = ", ".join(f"{f.removesuffix('_s')} ±{1e3 * v:.2f} ms" for f, v in sensitivity["parameters"].items())
        notes.append(
            f"the power buffer's sensor model is known to within its σ ({moved}): the fit redone at each moved by "
            "±1 σ, its priors and bounds as they were, widens every row's interval by how far its power moves (of "
            "the rows holding 1 % of the energy or more, the most "
            f"{100 * sensitivity['largest_rel_sd']:.1f} % of its power at 1 σ: {sensitivity['largest'][:60]})"
        )
    notes += [f.note() for f in cols.scale_fits]
    if math.isfinite(cols.time_common):
        notes.append(
            f"priors timed by CUPTI in graph replay, as this run's calls are: the calls here run "
            f"{100 * (math.exp(cols.time_common) - 1):+.1f} % against replay's (the median weighted by energy), "
            "a shift every kernel shares and the priors' scale takes; each such prior widens by its own time "
            "difference beyond it"
        )
    if cols.impossible_priors:
        named = [
            f"{d.col_names[k][:60]} ({w:.0f} W)"
            for k, w in zip(cols.impossible_priors, cols.impossible_prior_w, strict=True)
        ]
        more = len(named) - 3
        tail = f" and {more} more" if more > 0 else ""
        caps = sorted(
            {round(float(cols.bound_w[k])) for k in cols.impossible_priors} if cols.bound_w is not None else []
        )
        at = f"{caps[0]} W" if len(caps) == 1 else (f"its bound ({caps[0]}–{caps[-1]} W)" if caps else "its bound")
        notes.append(
            f"{len(named)} prior(s) impossible in this run (their energy per call over the time per call here "
            f"exceeds the kernel's bound, {_bound_rule(opts)}): {', '.join(named[:3])}{tail}; each is capped at "
            f"{at}, its relative spread combined in quadrature with ln(prior / bound), and left out of the "
            "priors' scale calibration"
        )
        extra_capped = {d.col_names[k]: w for k, w in zip(cols.impossible_priors, cols.impossible_prior_w, strict=True)}
    else:
        extra_capped = {}
    limit = _at_limit(activities, buf, opts)
    if limit is not None and limit.warned:
        notes.append(limit.warning())
    rows, long, clipped_s = _rows(d, s, data, cols, long_e, traced is not None, opts, notes)
    return AttributionResult(
        rows=rows,
        total_energy_j=float(s.w.energy_j.sum()),
        span_start_s=float(s.edges[0]) + s.t_ref,
        span_end_s=float(s.edges[-1]) + s.t_ref,
        window_source=s.w.source,
        windows=len(s.w),
        window_period_s=s.w.period_s,
        counter_delay_s=s.delay_s,
        delay_identified=s.delay_identified,
        residual_rms_j=float(cols.fit.sigma_j),
        confidence=opts.confidence,
        ci_method=opts.ci_method,
        long_call_min_s=long_min,
        idle_gap_s=opts.idle_gap_s,
        buffer_scale=s.scale if s.scaled else None,
        buffer_delay_s=s.integral.delay_s if s.integral is not None else None,
        buffer_rel_sd=s.rel_sd if math.isfinite(s.rel_sd) else None,
        clipped_time_s=clipped_s,
        whole_program_only=bool(activities) and all(a.kind == "program" for a in activities),
        notes=tuple(notes),
        long_calls=tuple(long.calls),
        extra={
            "pooled_power_w": {n: float(cols.pooled_w[i]) for i, n in enumerate(("busy", "gaps", "idle"))},
            "counter_regular": s.w.regular,
            "counter_jitter_s": s.w.jitter_s,
            "fit_windows": data.source,
            "fit_window_count": int(data.x.shape[0]),
            "power_limit_w": opts.power_limit_w,
            "power_ceiling_w": opts.power_ceiling_w,
            "at_limit": limit.to_json() if limit is not None else None,
            "power_bound_w": {
                d.col_names[k]: float(cols.bound_w[k])
                for k in cols.active.tolist()
                if cols.bound_w is not None and math.isfinite(cols.bound_w[k])
            },
            "priors": {d.col_names[k]: s_ for k, s_ in cols.prior_source.items() if s_ != "default"},
            "prior_scale": opts.prior_scale,
            "prior_fit": {f.source: f.to_json() for f in cols.scale_fits},
            "capped_priors_w": extra_capped,
            "prior_time_common": cols.time_common if math.isfinite(cols.time_common) else None,
            "sensor_model_sensitivity": sensitivity,
        },
    )

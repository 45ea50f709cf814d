"""The data and the prior of the per-kernel power fit: the power buffer's short windows, replay/model priors, bounds."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from archline.measurement.attribute.ceiling import LIMIT_SLACK, kernel_bounds
from archline.measurement.attribute.design import Design
from archline.measurement.attribute.prior import KernelPrior
from archline.measurement.attribute.windows import BufferIntegral
from archline.measurement.clean import drop_repeats, find_displaced, undisplace
from archline.measurement.response import kernel_support_s, rect_response
from archline.measurement.sensor_model import SensorModel

__all__ = [
    "LIMIT_SLACK",
    "MIN_COMMON",
    "buffer_design",
    "power_bounds",
    "prior_arrays",
    "prior_context_spread",
    "time_common",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def _intervals(d: Design, integral: BufferIntegral, scale: float) -> tuple[F64, F64, I64, F64]:
    """Every busy/gap interval (relative s) with its column and weight; long calls as column −1 with their power (W)."""
    short = np.ones(d.act_s.size, bool)
    short[d.long_idx] = False
    s, e = d.act_s[short], d.act_e[short]
    wt = np.ones(s.size)
    if d.effective is not None and s.size:
        # Time shared with concurrent work is split equally (as in the counter's design).
        wt = (d.effective(e) - d.effective(s)) / np.maximum(e - s, 1e-300)
    ls, le = d.act_s[d.long_idx], d.act_e[d.long_idx]
    lp = integral.energy(ls, le) * scale * d.long_share / np.maximum(le - ls, 1e-300)
    starts = np.concatenate([s, d.gap_s, ls])
    ends = np.concatenate([e, d.gap_e, le])
    cols = np.concatenate([d.act_col[short], d.gap_col, np.full(ls.size, -1)]).astype(np.int64)
    weights = np.concatenate([wt, np.ones(d.gap_s.size), lp])
    order = np.argsort(starts, kind="stable")
    return starts[order], ends[order], cols[order], weights[order]


def buffer_design(
    d: Design,
    integral: BufferIntegral,
    scale: float,
    kept: Sequence[tuple[float, float]],
    *,
    model: SensorModel | None,
    max_pairs: int = 2_000_000,
) -> tuple[F64, F64]:
    """Response of each power-buffer reading to each column's busy time (readings × columns), and the readings (W).

    With a sensor ``model`` (its lag, averaging window and delay, displaced stamps moved back
    onto their grid) reading ``k`` responds to a unit power over ``[a, b]`` as
    :func:`~archline.measurement.response.rect_response` says; without one, it is the mean over
    the time since the previous reading, shifted by the buffer's fitted delay. Readings are scaled
    to agree with the energy counter; the long calls' share (their integrated power) is removed.
    Only readings whose whole response lies inside one of the ``kept`` intervals are used.
    """
    n_cols = len(d.col_names)
    r = drop_repeats(integral.readings)
    t = np.asarray(r.t_s, np.float64) - integral.t_ref
    p = np.asarray(r.value, np.float64)
    ok = np.isfinite(t) & np.isfinite(p)
    t, p = t[ok], p[ok]
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    if t.size < 3:
        return np.zeros((0, n_cols)), np.zeros(0)
    if model is not None:
        if model.undisplace:
            t = undisplace(t, find_displaced(t))
        delay, lag = model.delay_s, model.lag_s
        w_s = model.window_s if model.window_s is not None else model.period_s
        # A calibrated "instantaneous" sample (window ~1e-10 s) is a point: no division by a vanishing window.
        win = np.full(t.size, w_s if w_s >= 1e-6 else 0.0)
    else:
        delay, lag = integral.delay_s, 0.0
        win = np.concatenate([[float(np.median(np.diff(t)))], np.diff(t)])
    support = kernel_support_s(float(np.max(win)), 0.0, lag)
    u = t - delay
    inside = np.zeros(t.size, bool)
    for a, b in kept:
        inside |= (u - support >= a) & (u <= b)
    u, win, y = u[inside], win[inside], p[inside] * scale
    if u.size == 0:
        return np.zeros((0, n_cols)), np.zeros(0)
    s, e, c, wt = _intervals(d, integral, scale)
    e_max = np.maximum.accumulate(e) if e.size else e
    i0 = np.searchsorted(e_max, u - support, side="right")
    i1 = np.searchsorted(s, u, side="left")
    n_pair = np.maximum(i1 - i0, 0)
    x = np.zeros((u.size, n_cols + 1))
    k0 = 0
    while k0 < u.size:
        k1 = k0 + 1 + int(np.searchsorted(np.cumsum(n_pair[k0:]), max_pairs, side="right"))
        k1 = min(k1, u.size)
        cnt = n_pair[k0:k1]
        rows = np.repeat(np.arange(k0, k1), cnt)
        first = np.repeat(np.cumsum(cnt) - cnt, cnt)
        idx = np.repeat(i0[k0:k1], cnt) + (np.arange(rows.size) - first)
        resp = rect_response(u[rows] + delay, s[idx], e[idx], window_s=win[rows], delay_s=delay, lag_s=lag)
        col = np.where(c[idx] < 0, n_cols, c[idx])
        val = resp * np.where(c[idx] < 0, 1.0, wt[idx])
        x += np.bincount(rows * (n_cols + 1) + col, weights=val, minlength=u.size * (n_cols + 1)).reshape(
            u.size, n_cols + 1
        )
        y_long = np.bincount(rows, weights=np.where(c[idx] < 0, resp * wt[idx], 0.0), minlength=u.size)
        y = y - y_long
        k0 = k1
    return x[:, :n_cols].astype(np.float64), y.astype(np.float64)


def prior_arrays(
    d: Design,
    active: I64,
    pooled_mean_w: F64,
    pooled_sd_w: F64,
    priors: Mapping[str, KernelPrior],
    shift: NDArray[np.bool_] | None = None,
) -> tuple[F64, F64, list[str], F64, float, NDArray[np.bool_]]:
    """Prior mean and 1 σ of each active column's power (W), each column's prior source, what the σ of a prior
    of its own is made of, relative to its mean (columns × 2, NaN where the default holds): the prior's own spread
    where it was measured (graph replay's σ, the in-step σ of a design), and its time part; and the common shift
    (ln) taken out of the time parts of priors timed by CUPTI (NaN where none was), with the positions it was taken
    out of. ``shift`` (by active position): the columns whose common shift may be taken out; None, none (the caller
    allows it only where the priors' scale is calibrated on the windows and the prior is not capped:
    :func:`column_fit.fit_columns`).

    A kernel with a :class:`KernelPrior` gets its energy per call divided by its mean traced
    call time (a model prior: its constant power plus its dynamic energy over that time, :meth:`KernelPrior.power_at`);
    every other column the weakly informative pooled default. A kernel that runs longer or shorter
    here than where its prior was measured is not the same call: its energy may differ by as much, so its prior
    widens by the log of the times' ratio. Where at least :data:`MIN_COMMON` priors carry their kernels' CUPTI busy
    time (``time_source`` ``busy``: timed as the program's calls are) among the ``shift`` columns, the time part of
    each of them is ``|ln(time here / time there) − common|``, ``common`` the median of their log ratios weighted by
    the prior's energy in this run: a shift that every kernel shares (clocks, the tracer) moves every prior alike,
    which the priors' scale calibrated on the windows takes; a kernel's own difference beyond it is its own. The
    others keep
    ``|ln(time here / time there)|`` (a wall-time share of a replay is not a kernel's duration, docs/attribution.md
    "Session 20").
    """
    pm = pooled_mean_w.astype(np.float64).copy()
    psd = pooled_sd_w.astype(np.float64).copy()
    src = ["default"] * active.size
    parts = np.full((active.size, 2), math.nan)
    if not priors:
        return pm, psd, src, parts, math.nan, np.zeros(active.size, bool)
    short = np.ones(d.act_s.size, bool)
    short[d.long_idx] = False
    n_cols = len(d.col_names)
    dur = d.act_e - d.act_s
    calls = np.bincount(d.act_col[short], minlength=n_cols)
    busy = np.bincount(d.act_col[short], weights=dur[short], minlength=n_cols)
    got: list[tuple[int, KernelPrior, float, float]] = []  # (position, prior, mean call time here, ln ratio)
    for j, k in enumerate(active.tolist()):
        pr = priors.get(d.col_names[k])
        if pr is None or d.col_kinds[k] not in ("kernel", "memcpy", "memset") or calls[k] == 0 or busy[k] <= 0:
            continue
        mean_dur = busy[k] / calls[k]
        ln_ratio = math.log(mean_dur / pr.time_per_call_s) if pr.time_per_call_s > 0 else math.nan
        got.append((j, pr, float(mean_dur), ln_ratio))
    timed = [
        (j, pr, r)
        for j, pr, _, r in got
        if shift is not None and shift[j] and pr.time_source == "busy" and math.isfinite(r)
    ]
    common = time_common([r for _, _, r in timed], [pr.energy_per_call_j * calls[active[j]] for j, pr, _ in timed])
    shifted = {j for j, _, _ in timed} if math.isfinite(common) else set()
    for j, pr, mean_dur, ln_ratio in got:
        t_rel = abs(ln_ratio - (common if j in shifted else 0.0)) if math.isfinite(ln_ratio) else 0.0
        # a model prior's power follows the call's time here as the model says (KernelPrior.power_at); every prior,
        # a model's too, widens by the times' ratio (the launches counted may not be the program's mix of them)
        pm[j] = pr.power_at(mean_dur)
        psd[j] = math.hypot(pr.sd_j / pr.energy_per_call_j, t_rel) * pm[j]
        src[j] = pr.source
        parts[j] = (pr.sd_j / pr.energy_per_call_j, t_rel)
    out = np.zeros(active.size, bool)
    out[sorted(shifted)] = True
    return pm, psd, src, parts, common, out


#: The fewest priors timed by CUPTI whose common time shift :func:`prior_arrays` takes out of their time parts.
MIN_COMMON = 5


def time_common(ln_ratios: Sequence[float], weights: Sequence[float]) -> float:
    """The weighted median of the priors' ``ln(time here / time there)`` (the weights: each prior's energy in the
    run) over those with a finite ratio and a positive weight, NaN with fewer than :data:`MIN_COMMON` of them."""
    r = np.asarray(ln_ratios, np.float64)
    w = np.asarray(weights, np.float64)
    ok = np.isfinite(r) & np.isfinite(w) & (w > 0)
    r, w = r[ok], w[ok]
    if r.size < MIN_COMMON:
        return math.nan
    order = np.argsort(r)
    cum = np.cumsum(w[order])
    return float(r[order][int(np.searchsorted(cum, 0.5 * cum[-1]))])


def prior_context_spread(d: Design, active: I64, priors: Mapping[str, KernelPrior], *, fold: bool = False) -> F64:
    """Each active column's measured context spread (:attr:`KernelPrior.context_rel_sd`), or with ``fold`` the part
    of its prior's relative σ that spread makes (:attr:`KernelPrior.context_fold_rel`); NaN where none."""
    out = np.full(active.size, math.nan)
    for j, k in enumerate(active.tolist()):
        pr = priors.get(d.col_names[k])
        if pr is not None and d.col_kinds[k] in ("kernel", "memcpy", "memset"):
            out[j] = pr.context_fold_rel if fold else pr.context_rel_sd
    return out


def power_bounds(
    d: Design, active: I64, power_limit_w: float | None, x: F64 | None = None, ceiling_w: float | None = None
) -> F64:
    """Upper bound on each active column's power (inf where the limit is unknown): the board limit × LIMIT_SLACK,
    or with a measured burst ceiling and the windows' busy times ``x`` (windows × active columns), min(ceiling,
    limit / the column's largest share of a window) × LIMIT_SLACK (ceiling.kernel_bounds)."""
    return kernel_bounds(np.zeros((0, active.size)) if x is None else x, power_limit_w, ceiling_w)

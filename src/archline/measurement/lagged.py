"""Lagged sensors: Burtscher's capacitor-model correction and the fit of its constant C from a step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from archline.errors import SensorError

if TYPE_CHECKING:
    from scipy import sparse

__all__ = ["LagFit", "RiseFit", "correct_lag", "correction_matrix", "fit_lag_step", "fit_rising_edges", "rising_edges"]

F64 = NDArray[np.float64]


def correction_matrix(t_s: F64, lag_s: float) -> sparse.csr_matrix:
    """The linear map L with ``L @ p`` = Burtscher's corrected power (ICPE'14, §5):

    ``P_true(t_i) = P(t_i) + C·(P(t_{i+1}) − P(t_{i−1})) / (t_{i+1} − t_{i−1})``,

    using the real timestamps (never equal intervals). The first and last readings use a
    one-sided difference. Keeping L explicit lets the caller propagate noise through it.
    """
    from scipy import sparse  # only a lagged sensor needs it; keeps the CLI's start-up short

    n = t_s.size
    if n < 2 or lag_s <= 0:
        return sparse.identity(n, format="csr", dtype=np.float64)
    rows: list[F64] = []
    cols: list[F64] = []
    vals: list[F64] = []
    idx = np.arange(n, dtype=np.float64)
    rows.append(idx)
    cols.append(idx)
    vals.append(np.ones(n))
    lo = np.maximum(np.arange(n) - 1, 0)
    hi = np.minimum(np.arange(n) + 1, n - 1)
    span = t_s[hi] - t_s[lo]
    if np.any(span <= 0):
        raise SensorError("lag correction needs strictly increasing timestamps (drop repeated readings first)")
    g = lag_s / span
    rows += [idx, idx]
    cols += [hi.astype(np.float64), lo.astype(np.float64)]
    vals += [g, -g]
    m = sparse.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64))),
        shape=(n, n),
    )
    return m.tocsr()


def correct_lag(t_s: F64, power_w: F64, lag_s: float) -> F64:
    """Burtscher's corrected power at each reading (W)."""
    return np.asarray(correction_matrix(t_s, lag_s) @ power_w, np.float64)


@dataclass(frozen=True)
class LagFit:
    """A first-order step response fitted by least squares.

    ``y(t) = after_w + (before_w − after_w)·exp(−(t − step_s − delay_s)/lag_s)`` for
    ``t ≥ step_s + delay_s``; ``lag_sigma_s`` is the 1 σ from the fit's covariance.
    """

    lag_s: float
    lag_sigma_s: float
    before_w: float
    after_w: float
    delay_s: float
    rms_w: float
    n: int


def fit_lag_step(
    t_s: F64,
    power_w: F64,
    step_s: float,
    *,
    end_s: float | None = None,
    before_w: float | None = None,
    fit_delay: bool = False,
    free_start: bool = False,
) -> LagFit:
    """Fit the lag constant C from the response to a step at ``step_s`` (known time).

    Readings in ``[step_s, end_s]`` are fitted by least squares. ``before_w`` is the level
    before the step (default: the median of the readings in the preceding second). With
    ``fit_delay`` a dead time before the response starts is fitted too; with ``free_start``
    the level at ``step_s`` is fitted instead of fixed (for a response that starts from a
    state that had not settled: a first-order lag still approaches its target exponentially).
    """
    from scipy import optimize  # only a fit needs it; keeps the CLI's start-up short

    end = float(t_s[-1]) if end_s is None else end_s
    m = (t_s >= step_s) & (t_s <= end)
    if m.sum() < 4:
        raise SensorError(f"too few readings ({int(m.sum())}) after the step at {step_s:.6f} s to fit a lag")
    tt = t_s[m] - step_s
    yy = power_w[m]
    if before_w is None and not free_start:
        pre = (t_s < step_s) & (t_s >= step_s - 1.0)
        if not pre.any():
            raise SensorError(f"no readings before the step at {step_s:.6f} s to fix its starting level")
        before_w = float(np.median(power_w[pre]))
    b_fixed = float(yy[0]) if before_w is None else float(before_w)

    def unpack(th: F64) -> tuple[float, float, float, float]:
        c, after = float(th[0]), float(th[1])
        b0 = float(th[2]) if free_start else b_fixed
        d = float(th[-1]) if fit_delay else 0.0
        return c, after, b0, d

    def resid(th: F64) -> F64:
        c, after, b0, d = unpack(th)
        u = np.maximum(tt - d, 0.0)
        return np.asarray(after + (b0 - after) * np.exp(-u / c) - yy, np.float64)

    span = max(float(tt[-1]), 1e-6)
    after0 = float(np.median(yy[-max(3, yy.size // 5) :]))
    best: Any = None
    for c0 in (span / 20, span / 5, span / 2):
        x0: list[float] = [c0, after0]
        lo: list[float] = [1e-6, -np.inf]
        hi: list[float] = [100 * span, np.inf]
        if free_start:
            x0.append(float(yy[0]))
            lo.append(-np.inf)
            hi.append(np.inf)
        if fit_delay:
            x0.append(0.0)
            lo.append(-0.5 * span)
            hi.append(0.5 * span)
        res = optimize.least_squares(resid, x0, bounds=(lo, hi))
        if best is None or res.cost < best.cost:
            best = res
    assert best is not None
    jac = best.jac
    dof = max(yy.size - jac.shape[1], 1)
    s2 = 2 * best.cost / dof
    try:
        cov = np.linalg.pinv(jac.T @ jac) * s2
        sig = float(np.sqrt(max(cov[0, 0], 0.0)))
    except np.linalg.LinAlgError:
        sig = float("inf")
    c, after, b0, d = unpack(best.x)
    return LagFit(
        lag_s=c, lag_sigma_s=sig, before_w=b0, after_w=after, delay_s=d, rms_w=float(np.sqrt(s2)), n=int(yy.size)
    )


@dataclass(frozen=True)
class RiseFit:
    """The lag constant from the rising edges of a trace (Burtscher §5: the curve from a kernel's
    start to its end, before the active-idle hold and the step-downs that follow it).

    ``lag_s`` is the precision-weighted median of the per-edge fits (0 when the edges show no
    lag: an averaging sensor), ``lag_sigma_s`` its 1 σ; ``ramp_window_s`` is set instead when the
    edges are straight ramps ending in a corner (a boxcar average of that length, not a lag).
    ``edges`` counts the rising edges used; ``per_edge_s`` holds each edge's fitted constant;
    ``shape_votes`` is the number of edges that only a ramp fits minus those only an exponential fits;
    of the ``rising`` edges found, ``caught_mid`` had their first reading after the step between 5 %
    and 95 % of the rise (a full-coverage sensor catches ~90 % so, a part-time one its coverage).
    """

    lag_s: float
    lag_sigma_s: float
    edges: int
    per_edge_s: tuple[float, ...]
    ramp_window_s: float | None = None
    shape_votes: int = 0
    rising: int = 0
    caught_mid: int = 0


def rising_edges(t_s: F64, y_w: F64, noise_w: float, *, min_rise_w: float | None = None) -> list[tuple[int, int]]:
    """Rising edges as (first reading above the level before, reading at the peak) index pairs.

    An edge starts where the readings climb by more than 3 σ of noise per reading, for a total
    of at least ``min_rise_w`` (default: 10 σ and 5 % of the trace's range), and ends at the
    highest reading before they fall back by more than 4 σ and 2 % of the rise (the load ended).
    """
    n = y_w.size
    if n < 6:
        return []
    lo, hi = (float(v) for v in np.percentile(y_w, [1, 99]))
    need = max(10 * noise_w, 0.05 * (hi - lo), 1e-9) if min_rise_w is None else min_rise_w
    thr = 3.0 * math.sqrt(2.0) * max(noise_w, 1e-12)
    up = np.diff(y_w) > thr  # up[k]: reading k+1 rose
    out: list[tuple[int, int]] = []
    k = 0
    while k < up.size:
        if not up[k]:
            k += 1
            continue
        i0 = k + 1
        base = float(y_w[k])
        top = float(y_w[i0])
        peak = i0
        j = i0 + 1
        while j < n:
            if y_w[j] > top:
                top, peak = float(y_w[j]), j
            elif top - y_w[j] > max(4 * noise_w, 0.02 * (top - base)):
                break
            j += 1
        if top - base >= need and peak - i0 >= 2:
            out.append((i0, peak))
        k = max(j - 1, k + 1)
    return out


def _edge_fits(t: F64, y: F64, pre_t_s: float, pre_w: float) -> tuple[float, float, float, float, float]:
    """Exponential (lag) and ramp (boxcar) fits of one rising edge; returns
    (lag, lag σ, lag rms, ramp window, ramp rms). The reading before the edge (``pre_*``) pins
    where a ramp starts; the exponential leaves it out (its start level is free)."""
    from scipy import optimize

    tt = t - t[0]
    span = max(float(tt[-1]), 1e-9)
    a0, b0 = float(y[-1]), float(y[0])
    scale = max(abs(a0 - b0), 1e-9)

    def r_exp(th: F64) -> F64:
        return np.asarray(th[0] + (th[1] - th[0]) * np.exp(-tt / th[2]) - y, np.float64) / scale

    best: Any = None
    for c0 in (span / 30, span / 6, span):
        res = optimize.least_squares(
            r_exp, [a0, b0, c0], bounds=([-np.inf, -np.inf, 1e-7], [np.inf, np.inf, 50 * span])
        )
        if best is None or res.cost < best.cost:
            best = res
    dof = max(tt.size - 3, 1)
    s2 = 2 * best.cost / dof
    try:
        cov = np.linalg.pinv(best.jac.T @ best.jac) * s2
        sig = float(np.sqrt(max(cov[2, 2], 0.0)))
    except np.linalg.LinAlgError:
        sig = float("inf")
    lag, rms_exp = float(best.x[2]), math.sqrt(s2) * scale

    tr = np.concatenate([[pre_t_s - t[0]], tt])
    yr = np.concatenate([[pre_w], y])

    def r_ramp(th: F64) -> F64:
        f = np.clip((tr - th[2]) / max(th[3], 1e-9), 0.0, 1.0)
        return np.asarray(th[0] + (th[1] - th[0]) * f - yr, np.float64) / scale

    lo = float(tr[0])
    # the ramp starts half a reading before the edge, but never before the reading before it (the bound): a
    # reading taken shortly before the edge put the guess outside the bounds and scipy refused the fit
    start = min(max(-0.5 * (tt[1] if tt.size > 1 else 0.0), 0.5 * lo), span)
    ramp = optimize.least_squares(
        r_ramp,
        [b0, a0, start, 0.5 * span],
        bounds=([-np.inf, -np.inf, lo, 1e-7], [np.inf, np.inf, span, 2 * span]),
    )
    rms_ramp = math.sqrt(2 * ramp.cost / max(tr.size - 4, 1)) * scale
    return lag, sig, rms_exp, float(ramp.x[3]), rms_ramp


#: An edge is fitted from at most this many readings (a long kernel on a fast meter climbs for 10⁵ readings).
_EDGE_POINTS = 400


def _edge_points(n: int) -> NDArray[np.int64]:
    """Offsets of the readings an edge is fitted from: all of a short edge; of a long one, every reading of its
    start (where a lag shows) and log-spaced ones after, so the fit's cost is bounded and its shape kept."""
    if n <= _EDGE_POINTS:
        return np.arange(n, dtype=np.int64)
    head = _EDGE_POINTS // 4
    tail = np.geomspace(head, n - 1, _EDGE_POINTS - head).astype(np.int64)
    return np.unique(np.concatenate([np.arange(head, dtype=np.int64), tail, [n - 1]]))


def fit_rising_edges(t_s: F64, y_w: F64, noise_w: float, *, max_edges: int = 60) -> RiseFit | None:
    """Fit the lag constant from every rising edge of a cleaned trace (no known loads needed).

    Each edge is fitted from its first reading above the level before it to its peak, with the
    starting level free, so neither the step's time nor the level it started from (an
    unsettled active idle, a previous kernel) matters, and what follows the load (holds,
    step-downs, tails) does not enter. The same edge is also fitted as a straight ramp into a
    corner (a boxcar average); when ramps fit the edges clearly better, the result is a window,
    not a lag. None when the trace has no usable rising edge.
    """
    edges = rising_edges(t_s, y_w, noise_w)
    if not edges:
        return None
    frac = np.array([(y_w[i0] - y_w[i0 - 1]) / max(y_w[pk] - y_w[i0 - 1], 1e-12) for i0, pk in edges])
    mid = int(np.sum((frac > 0.05) & (frac < 0.95)))
    n_rising = len(edges)
    if len(edges) > max_edges:
        pick = np.unique(np.linspace(0, len(edges) - 1, max_edges).astype(np.int64))
        edges = [edges[int(i)] for i in pick]
    lags: list[float] = []
    sigs: list[float] = []
    votes = 0  # edges that are clearly ramps minus edges that are clearly exponentials
    ramps: list[float] = []
    clean = 3.0 * max(noise_w, 1e-12)
    for i0, peak in edges:
        idx = _edge_points(peak + 1 - i0) + i0
        lag, sig, rms_e, win, rms_r = _edge_fits(t_s[idx], y_w[idx], float(t_s[i0 - 1]), float(y_w[i0 - 1]))
        if not (np.isfinite(lag) and np.isfinite(sig)):
            continue
        lags.append(lag)
        sigs.append(max(sig, 1e-3 * lag, 1e-9))
        # Only edges that one shape fits clearly better than the other vote (a ramp of one or two
        # readings fits both); only clean ramps say how long the window is.
        if rms_e >= max(2 * rms_r, clean):
            votes += 1
            if rms_r <= 3 * clean:
                ramps.append(win)
        elif rms_r >= max(2 * rms_e, clean):
            votes -= 1
    if not lags:
        return None
    lag_arr, sig_arr = np.array(lags), np.array(sigs)
    # A boxcar of length W ramps for min(load, W): the longest clean ramp is the window.
    ramp_window = float(np.max(ramps)) if votes > 0 and ramps else None
    w = 1.0 / sig_arr**2
    order = np.argsort(lag_arr)
    cw = np.cumsum(w[order])
    med = float(lag_arr[order][int(np.searchsorted(cw, 0.5 * cw[-1]))])
    # The spread of the edges, or their fit σ, whichever is larger (a robust weighted error).
    near = np.abs(lag_arr - med) <= 5 * np.maximum(sig_arr, 0.05 * med)
    wn = w[near]
    sigma_fit = float(1.0 / math.sqrt(wn.sum())) if wn.sum() > 0 else float("inf")
    spread = float(1.4826 * np.median(np.abs(lag_arr[near] - med)) / math.sqrt(max(near.sum() - 1, 1)))
    return RiseFit(med, max(sigma_fit, spread), int(near.sum()), tuple(lags), ramp_window, votes, n_rising, mid)

"""Lagged sensors: Burtscher's capacitor-model correction and the fit of its constant C from a step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from archline.errors import SensorError

__all__ = ["LagFit", "correct_lag", "correction_matrix", "fit_lag_step"]

F64 = NDArray[np.float64]


def correction_matrix(t_s: F64, lag_s: float) -> sparse.csr_matrix:
    """The linear map L with ``L @ p`` = Burtscher's corrected power (ICPE'14, §5):

    ``P_true(t_i) = P(t_i) + C·(P(t_{i+1}) − P(t_{i−1})) / (t_{i+1} − t_{i−1})``,

    using the real timestamps (never equal intervals). The first and last readings use a
    one-sided difference. Keeping L explicit lets the caller propagate noise through it.
    """
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

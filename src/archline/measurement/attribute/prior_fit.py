"""Empirical-Bayes calibration of replay/model priors: one scale and spread per source, fitted on the run's windows.

The model and its likelihood are in :mod:`archline.measurement.attribute.prior_marginal`. ``ρ`` is profiled
there; the fit uses its one-sided 95 % upper bound, never the maximum itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.measurement.attribute.prior import REPLAY_MIN_REL_SD
from archline.measurement.attribute.prior_marginal import (
    ONE_SIDED_95,
    RHO_GRID,
    GaussianMarginal,
    _excess,
    _variances,
    lower_bound,
    profile_rho,
    upper_bound,
)

__all__ = [
    "ONE_SIDED_95",
    "RHO_GRID",
    "GaussianMarginal",
    "ScaleFit",
    "calibrate_priors",
    "fit_priors",
    "lower_bound",
    "profile_rho",
    "upper_bound",
    "window_noise_var",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Fewer columns of a source than this cannot tell its scale from its spread: its priors stay as given.
MIN_COLUMNS = 3


@dataclass(frozen=True)
class ScaleFit:
    """One source's calibration: ``scale`` ± ``scale_se``, ``rho_hat``, ``rho_up`` (the bound used)."""

    source: str
    columns: int
    scale: float
    scale_se: float
    rho_hat: float
    rho_up: float
    at_grid_top: bool
    calibrated: bool = True
    why: str = ""
    #: ρ measured where the priors came from (replay's randomized design; already folded into each prior's
    #: σ), NaN where none. Unless the windows' one-sided 95 % lower bound ``rho_low`` on the spread beyond
    #: the priors' σ is above the grid's bottom (refuted), the fit adds nothing to those σ.
    rho_measured: float = math.nan
    rho_low: float = math.nan

    @property
    def rho_used(self) -> float:
        """The per-kernel spread of the source's priors in the fit: the measured one (already in each
        prior's σ) unless refuted, else the windows' upper bound on the spread beyond the priors' σ."""
        if math.isfinite(self.rho_measured) and not self.refuted:
            return self.rho_measured
        return self.rho_up

    @property
    def refuted(self) -> bool:
        """The windows need a spread beyond the priors' measured σ (their 95 % lower bound on the excess is above
        the grid's bottom): the measurement does not hold in this run."""
        return math.isfinite(self.rho_measured) and _excess(self.rho_low)

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "scale": self.scale,
            "scale_se": self.scale_se,
            "rho_hat": self.rho_hat,
            "rho_up": self.rho_up,
            "rho_low": self.rho_low,
            "rho_measured": self.rho_measured,
            "rho_used": self.rho_used,
            "refuted": self.refuted,
            "at_grid_top": self.at_grid_top,
            "calibrated": self.calibrated,
        }

    def note(self) -> str:
        measured = math.isfinite(self.rho_measured)
        if not self.calibrated:
            why = self.why or f"too few to calibrate them on the windows (≥ {MIN_COLUMNS} needed)"
            given = (
                f"used as given, with the per-kernel spread {100 * self.rho_measured:.1f} % measured at their source"
                if measured
                else "used as given"
            )
            return f"{self.columns} kernel(s) with {self.source} priors: {why}; their priors are {given}"
        if measured:
            return (
                f"{self.source} priors ({self.columns} kernels) with a measured per-kernel spread: "
                f"{100 * self.rho_measured:.1f} % (replay's randomized design); calibrated on the windows: scale "
                f"{self.scale:.3f} ± {self.scale_se:.3f}, ρ̂ = {100 * self.rho_hat:.1f} %, the windows' 95 % lower "
                f"bound {100 * (self.rho_low if math.isfinite(self.rho_low) else 0.0):.1f} %"
                + (
                    " (the windows cannot bound ρ from above)"
                    if self.at_grid_top
                    else f", upper {100 * self.rho_up:.1f} %"
                )
                + f"; spread used {100 * self.rho_used:.1f} %"
                + (" — the windows contradict the measured spread, so theirs is used" if self.refuted else "")
                + (
                    f"; graph replay's design folds at least √2 × {100 * self.rho_measured:.1f} % = "
                    f"{100 * math.sqrt(2.0) * self.rho_measured:.1f} % (1 σ) into each of these priors, so a row "
                    "that leans on one is at least that uncertain"
                    if not self.refuted
                    else ""
                )
            )
        head = (
            f"{self.source} priors ({self.columns} kernels) calibrated on the windows: in-context/isolated scale "
            f"{self.scale:.3f} ± {self.scale_se:.3f}, per-kernel spread ρ̂ = {100 * self.rho_hat:.1f} %"
        )
        if self.at_grid_top:
            return (
                f"{head}; the windows cannot tell kernels with {self.source} priors apart: ρ's 95 % bound is at "
                f"the grid's top ({100 * self.rho_up:.0f} %)"
            )
        return f"{head}, 95 % bound {100 * self.rho_up:.1f} % (used)"


def calibrate_priors(
    x: F64,
    y: F64,
    sigma2: float,
    prior_mean_w: F64,
    prior_sd_w: F64,
    sources: Sequence[str],
    *,
    grid: F64 = RHO_GRID,
    min_columns: int = MIN_COLUMNS,
    context_rel_sd: F64 | None = None,
) -> tuple[F64, F64, list[ScaleFit]]:
    """Calibrate each non-default source's priors on the windows; returns the fit's prior means, sds and the fits.

    ``x`` (windows × columns), ``y`` the windows, ``sigma2`` one window's noise variance. Columns of
    source ``default`` keep their priors and enter the likelihood as they are; so do the columns of a
    source with fewer than ``min_columns`` columns (reported as not calibrated). A calibrated column
    gets mean ``ŝ μ_k`` and sd ``√((ρ_up ŝ μ_k)² + (ŝ σ_k)² + (se(ŝ) μ_k)²)``.
    """
    mu = np.asarray(prior_mean_w, np.float64)
    sd = np.asarray(prior_sd_w, np.float64)
    ctx = np.full(mu.size, math.nan) if context_rel_sd is None else np.asarray(context_rel_sd, np.float64)
    src = np.asarray(list(sources), dtype=object)
    names = sorted({str(s) for s in sources if s != "default"})
    fits: list[ScaleFit] = []
    groups: list[I64] = []
    used: list[str] = []
    measured: list[float] = []
    for name in names:
        idx = np.nonzero(src == name)[0]
        finite = ctx[idx][np.isfinite(ctx[idx])]
        rho_m = float(np.median(finite)) if finite.size else math.nan
        if idx.size < min_columns:
            fits.append(
                ScaleFit(name, int(idx.size), 1.0, math.nan, math.nan, math.nan, False, False, rho_measured=rho_m)
            )
        else:
            groups.append(idx.astype(np.int64))
            used.append(name)
            measured.append(rho_m)
    if not groups:
        return mu.copy(), sd.copy(), fits
    why = "too few windows to calibrate them" if x.shape[0] <= len(groups) or not (sigma2 > 0) else ""
    if not why:
        try:
            return _calibrate(x, y, sigma2, mu, sd, groups, used, fits, grid, measured)
        except np.linalg.LinAlgError:
            why = "the windows do not inform their common scale"
    fits += [
        ScaleFit(u, int(g.size), 1.0, math.nan, math.nan, math.nan, False, False, why, rho_measured=rm)
        for u, g, rm in zip(used, groups, measured, strict=True)
    ]
    fits.sort(key=lambda f: f.source)
    return mu.copy(), sd.copy(), fits


def _calibrate(
    x: F64,
    y: F64,
    sigma2: float,
    mu: F64,
    sd: F64,
    groups: list[I64],
    used: list[str],
    fits: list[ScaleFit],
    grid: F64,
    measured: Sequence[float],
) -> tuple[F64, F64, list[ScaleFit]]:
    k = mu.size
    a = np.zeros((k, len(groups)))
    m0 = mu.copy()
    v0 = sd**2
    for gi, idx in enumerate(groups):
        a[idx, gi] = mu[idx]
        m0[idx] = 0.0
    lik = GaussianMarginal.of(x, y, sigma2)
    rho = np.full(len(groups), 0.1)
    rho_hat = rho.copy()
    rho_up = rho.copy()
    rho_low = rho.copy()
    top = np.zeros(len(groups), bool)
    s_start = np.ones(len(groups))
    for _ in range(2 if len(groups) > 1 else 1):  # coordinate-wise: each source's ρ with the others at their ρ̂
        for gi in range(len(groups)):
            ll, s_at = profile_rho(lik, m0, a, v0, mu, sd, groups, rho_hat, gi, grid, s_start)
            rho_hat[gi], rho_up[gi], top[gi] = upper_bound(ll, grid)
            rho_low[gi] = lower_bound(ll, grid)
            s_start = np.maximum(np.abs(s_at[int(np.argmax(ll))]), 1e-3)
    # A source whose spread was measured where its priors came from (already in each prior's σ) gets no
    # more, unless the windows' lower bound says they need more (the measurement does not hold in this run);
    # the others take the windows' upper bound on the spread beyond their σ.
    rho_fit = np.array(
        [
            0.0 if math.isfinite(m) and not _excess(float(lo)) else float(up)
            for m, lo, up in zip(measured, rho_low, rho_up, strict=True)
        ]
    )
    # ŝ and its covariance at the spreads used, with the variances' s² at ŝ.
    s_ref = s_start
    for _ in range(3):
        _, s, cov = lik.restricted(m0, a, _variances(v0, mu, sd, groups, rho_fit, s_ref))
        s_ref = np.maximum(np.abs(s), 1e-3)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    pm, psd = mu.copy(), sd.copy()
    for gi, idx in enumerate(groups):
        sg = float(max(s[gi], 1e-3))
        pm[idx] = sg * mu[idx]
        psd[idx] = np.sqrt((rho_fit[gi] * sg * mu[idx]) ** 2 + (sg * sd[idx]) ** 2 + (se[gi] * mu[idx]) ** 2)
        fits.append(
            ScaleFit(
                used[gi],
                int(idx.size),
                float(s[gi]),
                float(se[gi]),
                float(rho_hat[gi]),
                float(rho_up[gi]),
                bool(top[gi]),
                rho_measured=float(measured[gi]),
                rho_low=float(rho_low[gi]),
            )
        )
    return pm, psd, sorted(fits, key=lambda f: f.source)


def window_noise_var(x: F64, y: F64) -> float:
    """One window's noise variance from the unconstrained least-squares residuals (as :func:`fit_powers` starts),
    times their long-run variance ratio when neighbouring windows' errors are positively correlated.

    The marginal likelihood treats windows as independent; errors that persist over several windows (a
    phase the columns misfit, a slow drift) carry less information than their count says. Inflating σ²
    by the Bartlett-weighted sum of the residuals' autocorrelations (lags up to n^⅓, never below 1) counts
    them as the fewer independent windows they are, so the bound on ρ is not too tight.
    """
    n = x.shape[0]
    if n == 0:
        return 1.0
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    r = y - x @ coef
    s2 = float(r @ r) / (n - int(rank)) if n > rank else math.nan
    if not math.isfinite(s2) or s2 <= 0:
        return float((0.02 * float(np.median(np.abs(y)))) ** 2 or 1e-6)
    return float(s2 * _long_run_ratio(r))


def _long_run_ratio(r: F64) -> float:
    """Long-run variance over variance of the series ``r`` (Bartlett weights, lags up to n^⅓), at least 1."""
    n = r.size
    c0 = float(r @ r) / max(n, 1)
    if n < 8 or c0 <= 0:
        return 1.0
    lags = max(1, round(n ** (1.0 / 3.0)))
    f = 1.0 + 2.0 * sum((1.0 - k / (lags + 1.0)) * float(r[:-k] @ r[k:]) / n / c0 for k in range(1, lags + 1))
    return float(max(f, 1.0))


def fit_priors(
    mode: str,
    x: F64,
    y: F64,
    prior_mean_w: F64,
    prior_sd_w: F64,
    sources: Sequence[str],
    *,
    fixed_min_rel_sd: float = REPLAY_MIN_REL_SD,
    context_rel_sd: F64 | None = None,
    uncalibrated: NDArray[np.bool_] | None = None,
) -> tuple[F64, F64, list[ScaleFit]]:
    """The priors the power fit uses: ``fit`` calibrates them (:func:`calibrate_priors`), ``fixed`` takes them as given.

    Replay priors taken as given (``fixed``, a source too small to calibrate, or a column marked in
    ``uncalibrated``, which stays out of its source's calibration) keep the old floor of ``fixed_min_rel_sd``
    of their mean unless they carry a measured context spread.
    """
    if mode not in ("fit", "fixed"):
        raise ValueError(f"unknown prior_scale {mode!r} (fit or fixed)")
    pm = np.asarray(prior_mean_w, np.float64)
    psd = np.asarray(prior_sd_w, np.float64)
    fits: list[ScaleFit] = []
    ctx = np.full(pm.size, math.nan) if context_rel_sd is None else np.asarray(context_rel_sd, np.float64)
    left_out = np.zeros(pm.size, bool) if uncalibrated is None else np.asarray(uncalibrated, bool)
    calib_src = ["default" if out else s for s, out in zip(sources, left_out, strict=True)]
    if mode == "fit" and any(s != "default" for s in calib_src):
        pm, psd, fits = calibrate_priors(x, y, window_noise_var(x, y), pm, psd, calib_src, context_rel_sd=ctx)
    calibrated = {f.source for f in fits if f.calibrated}
    given = np.array(
        [s != "default" and (s not in calibrated or out) for s, out in zip(sources, left_out, strict=True)]
    )
    # Priors taken as given: with a measured context spread their σ already holds it; else replay's old floor.
    with_ctx = given & np.isfinite(ctx)
    floor = given & ~with_ctx & np.array([s == "replay" for s in sources], bool)
    psd = np.where(floor, np.maximum(psd, fixed_min_rel_sd * pm), psd).astype(np.float64)
    return pm.astype(np.float64), psd, fits

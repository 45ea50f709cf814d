"""Non-negative ridge regression of window energies on busy times, with intervals and identifiability."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, stats

__all__ = ["PowerFit", "block_bootstrap", "fit_powers", "ols_rss"]

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class PowerFit:
    """Fitted power per column (W) with its posterior covariance.

    The fit minimises ``|X·p − y|² + Σ λ_k (p_k − μ_k)²`` with ``p ≥ 0``, where
    ``λ_k = σ²/τ_k²`` comes from a prior ``p_k ~ N(μ_k, τ_k²)``. ``data_weight[k]`` (0–1) is
    the diagonal of the shrinkage matrix ``(XᵀX + Λ)⁻¹XᵀX``: how much of ``p_k`` comes from
    the data; a column the data cannot separate from the others stays near its prior.
    """

    power_w: F64
    cov: F64
    data_weight: F64
    sigma_j: float
    dof: float
    residuals_j: F64
    lam: F64

    @property
    def se_w(self) -> F64:
        return np.sqrt(np.maximum(np.diag(self.cov), 0.0)).astype(np.float64)

    def t_quantile(self, confidence: float) -> float:
        return float(stats.t.ppf(0.5 + confidence / 2.0, max(self.dof, 1.0)))

    def correlation(self) -> F64:
        se = self.se_w
        denom = np.outer(se, se)
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.where(denom > 0, self.cov / denom, 0.0)
        return c.astype(np.float64)


def ols_rss(x: F64, y: F64) -> tuple[float, int]:
    """Residual sum of squares and rank of the unconstrained least-squares fit."""
    if y.size == 0:
        return 0.0, 0
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    r = y - x @ coef
    return float(r @ r), int(rank)


def _hac_cov(x: F64, resid: F64, ginv: F64, lam: F64, sigma2: float, *, lags: int) -> F64:
    """``G⁻¹ (S + σ²Λ) G⁻¹``: a Newey–West sandwich plus the spread of the shrinkage bias.

    ``G = XᵀX + Λ``; ``S`` estimates ``Var(Xᵀε)`` from the residuals themselves, because
    window errors are neither equal (busy windows scatter more than idle ones) nor
    independent (a window edge placed a little off moves energy from one window into the
    next, so neighbouring errors cancel in a sum); Bartlett weights over ``lags`` lags keep
    ``S`` positive semi-definite. ``σ²Λ`` is how far the prior may pull a column whose power
    the data cannot pin down; it also widens the intervals of columns confounded with it.
    """
    n, k = x.shape
    xr = x * resid[:, None]
    s = xr.T @ xr
    for lag in range(1, lags + 1):
        if lag >= n:
            break
        c = xr[:-lag].T @ xr[lag:]
        s += (1.0 - lag / (lags + 1.0)) * (c + c.T)
    s *= n / max(n - k, 1)
    out: F64 = (ginv @ (s + sigma2 * np.diag(lam)) @ ginv).astype(np.float64)
    return out


def _solve(x: F64, y: F64, lam: F64, mu: F64, nonneg: bool, upper: F64 | None = None) -> F64:
    sq = np.sqrt(lam)
    a = np.vstack([x, np.diag(sq)])
    b = np.concatenate([y, sq * mu])
    # Columns are scaled to unit norm so the solver sees a well-conditioned problem.
    norm = np.linalg.norm(a, axis=0)
    norm[norm == 0] = 1.0
    an = a / norm
    if nonneg or upper is not None:
        ub = np.full(an.shape[1], np.inf) if upper is None else upper * norm
        lb = np.zeros(an.shape[1]) if nonneg else np.full(an.shape[1], -np.inf)
        res = optimize.lsq_linear(an, b, bounds=(lb, ub), method="bvls" if an.shape[1] <= 60 else "trf")
        z = np.asarray(res.x, np.float64)
    else:
        z = np.linalg.lstsq(an, b, rcond=None)[0]
    out: F64 = (z / norm).astype(np.float64)
    return out


def fit_powers(
    x: F64,
    y: F64,
    prior_mean_w: F64,
    prior_sd_w: F64,
    *,
    sigma_j: float | None = None,
    nonneg: bool = True,
    hac_lags: int = 2,
    upper_w: F64 | None = None,
) -> PowerFit:
    """Fit column powers to window energies (see :class:`PowerFit`).

    ``sigma_j`` is the rms noise of one window's energy; by default it is estimated from
    the unconstrained fit's residuals, then refined once from the ridge fit's. The covariance
    is a Newey–West sandwich over ``hac_lags`` lags plus the shrinkage term (see :func:`_hac_cov`).
    ``upper_w`` bounds each power from above (bounded least squares, e.g. the board's power limit).
    """
    n = x.shape[0]
    mu = np.asarray(prior_mean_w, np.float64)
    tau = np.maximum(np.asarray(prior_sd_w, np.float64), 1e-9)
    if sigma_j is None:
        rss, rank = ols_rss(x, y)
        sigma2 = rss / (n - rank) if n > rank else np.nan
        if not np.isfinite(sigma2) or sigma2 <= 0:
            # Too few windows to judge the noise: take 2 % of a typical window's energy.
            sigma2 = (0.02 * float(np.median(np.abs(y))) if n else 1.0) ** 2 or 1e-6
        refine = True
    else:
        sigma2 = sigma_j**2
        refine = False
    xtx = x.T @ x
    for it in range(2 if refine else 1):
        lam = sigma2 / tau**2
        p = _solve(x, y, lam, mu, nonneg, upper_w) if n else mu.copy()
        g = xtx + np.diag(lam)
        ginv = np.linalg.pinv(g)
        data_weight = np.clip(1.0 - lam * np.diag(ginv), 0.0, 1.0)
        resid = y - x @ p
        dof = max(n - float(data_weight.sum()), 1.0)
        if it == 0 and refine and n > data_weight.sum() + 1:
            s2 = float(resid @ resid) / dof
            if s2 > 0:
                sigma2 = s2
    cov = _hac_cov(x, resid, ginv, lam, sigma2, lags=hac_lags) if n > x.shape[1] else sigma2 * ginv
    return PowerFit(
        power_w=p,
        cov=cov.astype(np.float64),
        data_weight=data_weight.astype(np.float64),
        sigma_j=float(np.sqrt(sigma2)),
        dof=dof,
        residuals_j=resid.astype(np.float64),
        lam=lam.astype(np.float64),
    )


def block_bootstrap(
    x: F64,
    y: F64,
    fit: PowerFit,
    prior_mean_w: F64,
    *,
    n_boot: int = 200,
    block: int | None = None,
    seed: int = 0,
    nonneg: bool = True,
    upper_w: F64 | None = None,
) -> F64:
    """Powers refitted on moving-block resamples of the windows (``n_boot × columns``).

    Blocks of consecutive windows keep the correlation between neighbours (a kernel's tail
    or a misplaced window edge moves energy between adjacent windows).
    """
    n = x.shape[0]
    if n == 0:
        return np.repeat(fit.power_w[None, :], n_boot, axis=0)
    b = block or max(1, round(n ** (1.0 / 3.0)))
    starts_max = max(n - b + 1, 1)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, x.shape[1]), np.float64)
    n_blocks = int(np.ceil(n / b))
    for i in range(n_boot):
        st = rng.integers(0, starts_max, n_blocks)
        idx = (st[:, None] + np.arange(b)[None, :]).ravel()[:n] % n
        out[i] = _solve(x[idx], y[idx], fit.lam, prior_mean_w, nonneg, upper_w)
    return out

"""The windows' Gaussian marginal likelihood of a prior source's scale and spread, and the bounds on ρ it gives.

Model, for the columns ``R_g`` whose prior comes from source ``g`` (replay, a counted model):
``p_k = s_g μ_k + δ_k``, ``δ_k ~ N(0, s_g² (ρ_g² μ_k² + σ_k²))``, with ``μ_k`` the prior's power,
``σ_k`` its own measured spread, ``s_g`` the common in-context/isolated scale (flat prior) and
``ρ_g`` the per-kernel relative spread shared by the source's columns. Every other column keeps
its prior ``N(m_k, v_k)``. The windows give ``y = X p + e``, ``e ~ N(0, σ² I)``, so
``y ~ N(X m, X T Xᵀ + σ² I)``; all of it is computed in the k×k form (Woodbury), never n×n.

``s`` is integrated out under its flat prior (the restricted likelihood, whose maximum in ``s`` is
the GLS estimate): a plain profile over ``s`` would favour small ``ρ`` whenever the windows see
one mix only, because the direction ``s`` fits keeps its ``log det`` term. ``ρ`` is profiled on
a log grid; its one-sided 95 % bounds are read off the profile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import linalg, stats

__all__ = [
    "ONE_SIDED_95",
    "RHO_GRID",
    "GaussianMarginal",
    "lower_bound",
    "profile_rho",
    "upper_bound",
]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Relative per-kernel spreads tried: 0.5 % … 100 %.
RHO_GRID: F64 = np.geomspace(0.005, 1.0, 49).astype(np.float64)
#: 2·Δℓ of a one-sided 95 % bound on one parameter (χ²₁ at 0.90).
ONE_SIDED_95 = float(stats.chi2.ppf(0.90, 1))


@dataclass(frozen=True)
class GaussianMarginal:
    """The windows' marginal likelihood under a Gaussian prior on the columns' powers, in the k×k form.

    ``y ~ N(X m, X diag(v) Xᵀ + σ² I)``; with ``D = diag(√v)`` and ``M = I + D XᵀX D / σ²``,
    ``log|Σ| = n log σ² + log|M|`` and ``Σ⁻¹ = σ⁻² (I − X D M⁻¹ D Xᵀ / σ²)``.
    """

    g: F64
    xty: F64
    yty: float
    n: int
    sigma2: float

    @classmethod
    def of(cls, x: F64, y: F64, sigma2: float) -> GaussianMarginal:
        return cls(x.T @ x, x.T @ y, float(y @ y), int(x.shape[0]), float(sigma2))

    def _factor(self, v: F64) -> tuple[F64, tuple[F64, bool], float]:
        d = np.sqrt(np.maximum(v, 0.0))
        m = np.eye(d.size) + d[:, None] * self.g * d[None, :] / self.sigma2
        cho = linalg.cho_factor(m, lower=True)
        logdet = self.n * math.log(self.sigma2) + 2.0 * float(np.sum(np.log(np.diag(cho[0]))))
        return d, cho, logdet

    def _bilinear(self, d: F64, cho: tuple[F64, bool], uw: F64, xu: F64, xw: F64) -> F64:
        """``uᵀ Σ⁻¹ w`` from ``uᵀw``, ``Xᵀu`` and ``Xᵀw`` (columns are vectors of window space)."""
        a = d[:, None] * xu if xu.ndim == 2 else d * xu
        b = d[:, None] * xw if xw.ndim == 2 else d * xw
        out: F64 = (uw - a.T @ linalg.cho_solve(cho, b) / self.sigma2) / self.sigma2
        return out

    def loglik(self, m: F64, v: F64) -> float:
        """``log N(y; X m, X diag(v) Xᵀ + σ² I)``."""
        d, cho, logdet = self._factor(v)
        xr = self.xty - self.g @ m
        rr = self.yty - 2.0 * float(m @ self.xty) + float(m @ self.g @ m)
        q = float(self._bilinear(d, cho, np.asarray(rr), xr, xr))
        return -0.5 * (self.n * math.log(2.0 * math.pi) + logdet + q)

    def restricted(self, m0: F64, a: F64, v: F64) -> tuple[float, F64, F64]:
        """Mean ``m0 + a s`` with ``s`` (``a``: k × g) under a flat prior: the log of ``∫ N(y; ·) ds``,
        the GLS ``ŝ`` and its covariance."""
        d, cho, logdet = self._factor(v)
        xr = self.xty - self.g @ m0
        rr = self.yty - 2.0 * float(m0 @ self.xty) + float(m0 @ self.g @ m0)
        xz = self.g @ a
        zr = a.T @ xr
        zz = a.T @ xz
        q0 = float(self._bilinear(d, cho, np.asarray(rr), xr, xr))
        h = self._bilinear(d, cho, zr, xz, xr)
        hh = self._bilinear(d, cho, zz, xz, xz)
        hh = 0.5 * (hh + hh.T)
        ch = linalg.cho_factor(hh, lower=True)
        s = linalg.cho_solve(ch, h)
        cov = linalg.cho_solve(ch, np.eye(s.size))
        q = q0 - float(h @ s)
        logdet_h = 2.0 * float(np.sum(np.log(np.diag(ch[0]))))
        ll = -0.5 * ((self.n - s.size) * math.log(2.0 * math.pi) + logdet + q + logdet_h)
        return ll, s.astype(np.float64), cov.astype(np.float64)


def _variances(v0: F64, mu: F64, sd: F64, groups: Sequence[I64], rho: F64, s_ref: F64) -> F64:
    v: F64 = v0.copy()
    for gi, idx in enumerate(groups):
        v[idx] = s_ref[gi] ** 2 * ((rho[gi] * mu[idx]) ** 2 + sd[idx] ** 2)
    return v


def profile_rho(
    lik: GaussianMarginal,
    m0: F64,
    a: F64,
    v0: F64,
    mu: F64,
    sd: F64,
    groups: Sequence[I64],
    rho: F64,
    which: int,
    grid: F64 = RHO_GRID,
    s_start: F64 | None = None,
) -> tuple[F64, F64]:
    """Restricted log-likelihood of source ``which``'s ρ over ``grid`` (others held at ``rho``), and ŝ at each.

    The variance's own ``s²`` is taken at the GLS estimate by two fixed-point steps per grid point.
    """
    s_ref = np.ones(a.shape[1]) if s_start is None else s_start.copy()
    ll = np.empty(grid.size)
    s_at = np.empty((grid.size, a.shape[1]))
    r = rho.copy()
    for i, value in enumerate(grid.tolist()):
        r[which] = value
        for _ in range(2):
            ll[i], s, _ = lik.restricted(m0, a, _variances(v0, mu, sd, groups, r, s_ref))
            s_ref = np.maximum(np.abs(s), 1e-3)
        s_at[i] = s
    return ll, s_at


def upper_bound(ll: F64, grid: F64 = RHO_GRID, level: float = ONE_SIDED_95) -> tuple[float, float, bool]:
    """ρ̂ and the largest ρ above it with ``2 (ℓ(ρ̂) − ℓ(ρ)) ≤ level`` (log-interpolated); True if at the top."""
    i_hat = int(np.argmax(ll))
    drop = 2.0 * (ll[i_hat] - ll)
    above = np.nonzero(drop[i_hat:] > level)[0]
    if above.size == 0:
        return float(grid[i_hat]), float(grid[-1]), True
    j = i_hat + int(above[0])
    lg = np.log(grid[j - 1 : j + 1])
    t = (level - drop[j - 1]) / (drop[j] - drop[j - 1])
    return float(grid[i_hat]), float(np.exp(lg[0] + t * (lg[1] - lg[0]))), False


def _excess(rho_low: float) -> bool:
    """The windows' lower bound on the spread beyond the priors' σ excludes none (is above the grid's bottom)."""
    return math.isfinite(rho_low) and rho_low > float(RHO_GRID[0]) * (1.0 + 1e-9)


def lower_bound(ll: F64, grid: F64 = RHO_GRID, level: float = ONE_SIDED_95) -> float:
    """The smallest ρ below ρ̂ with ``2 (ℓ(ρ̂) − ℓ(ρ)) ≤ level`` (log-interpolated); the grid's bottom if none."""
    i_hat = int(np.argmax(ll))
    drop = 2.0 * (ll[i_hat] - ll)
    below = np.nonzero(drop[: i_hat + 1] > level)[0]
    if below.size == 0:
        return float(grid[0])
    j = int(below[-1])
    lg = np.log(grid[j : j + 2])
    t = (drop[j] - level) / (drop[j] - drop[j + 1])
    return float(np.exp(lg[0] + t * (lg[1] - lg[0])))

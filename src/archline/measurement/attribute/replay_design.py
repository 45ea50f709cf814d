"""Randomized-design replay's arithmetic: drawing on/off configurations, the additive fit, the neighbour ρ.

Each configuration of a design enables every factor (a group of nodes) independently; the
replays' energies are fitted by weighted least squares to the additive model
``E(S) = c0 + Σ_{g∈S} e_g`` (weights 1/σ_S²), so ``e_g`` is the group's energy inside the step
(averaged over the random neighbourhoods the design gave it) and ``c0`` the per-replay fixed
cost (launch, synchronisation, the idle power over them) that every isolated energy carries.

What the additive model misses is measured by ρ: the residual of configuration S is taken to
have the variance ``σ_S² + ρ² Σ_{g∈S} e_g²``, each present group's energy moving by a relative
ρ with its neighbours. ρ is estimated by restricted maximum likelihood (REML: the likelihood of
the residuals, so the fit's own degrees of freedom do not bias it low) on a grid, with a
one-sided 95 % upper bound from the profile (largest ρ with 2Δℓ ≤ 2.706), and √E[ρ²] over that likelihood
with a flat prior (``rho_fold``), which the in-step energies' intervals fold in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.measurement.attribute.prior_marginal import ONE_SIDED_95

__all__ = ["MIN_RESIDUAL_DOF", "RHO_GRID", "DesignFit", "draw_design", "fit_design", "rho_profile"]

#: Residual degrees of freedom a design keeps beyond its parameters (c0 and one energy per factor).
MIN_RESIDUAL_DOF = 5
#: The ρ values the likelihood is evaluated at (0 … 100 %, by 0.1 %).
RHO_GRID = np.linspace(0.0, 1.0, 1001)

Array = NDArray[np.float64]


def draw_design(
    factors: int, configs: int, rng: np.random.Generator, tries: int = 50, p_on: float = 0.5
) -> NDArray[np.bool_]:
    """``configs`` × ``factors`` on/off flags: row 0 all on (the whole step), row 1 all off (the fixed cost),
    the others balanced (each factor on in a share ``p_on`` of them, at random), redrawn until c0 and every
    energy can be fitted. ValueError when ``configs`` leaves fewer than :data:`MIN_RESIDUAL_DOF` residual
    degrees of freedom, or ``p_on`` is not strictly between 0 and 1."""
    if not 0.0 < p_on < 1.0:
        raise ValueError(f"the share of configurations a factor is on in must be between 0 and 1, not {p_on}")
    if factors < 1:
        raise ValueError("a design needs at least one factor")
    if configs < factors + 1 + MIN_RESIDUAL_DOF:
        raise ValueError(
            f"a design of {factors} factors needs at least {factors + 1 + MIN_RESIDUAL_DOF} configurations "
            f"(c0, one energy per factor and {MIN_RESIDUAL_DOF} residual degrees of freedom), not {configs}"
        )
    m = configs - 2
    for _ in range(tries):
        rest = np.zeros((m, factors), dtype=bool)
        for j in range(factors):
            k = p_on * m
            frac = k - int(k)  # a fractional count is rounded up with its probability (one draw, only then)
            col = np.arange(m) < (int(k) + (rng.random() < frac if frac > 0 else 0))
            rest[:, j] = rng.permutation(col)
        x = np.vstack([np.ones(factors, dtype=bool), np.zeros(factors, dtype=bool), rest])
        if np.linalg.matrix_rank(_model_matrix(x)) == factors + 1:
            return x
    raise ValueError(f"no full-rank design of {configs} configurations found for {factors} factors")


def _model_matrix(x: NDArray[Any]) -> Array:
    return np.hstack([np.ones((x.shape[0], 1)), x.astype(np.float64)])


def _gls(a: Array, y: Array, v: Array) -> tuple[Array, Array, Array]:
    """Generalised least squares with diagonal variances ``v``: β, (AᵀV⁻¹A)⁻¹ and the residuals."""
    w = 1.0 / v
    info = a.T @ (a * w[:, None])
    cov = np.linalg.inv(info)
    beta = cov @ (a.T @ (w * y))
    return beta, cov, y - a @ beta


def rho_profile(x: NDArray[Any], y: Array, sigma: Array, e: Array, grid: Array = RHO_GRID) -> Array:
    """The restricted log-likelihood of each ρ of ``grid``: residual variance σ_S² + ρ² Σ_{g∈S} e_g² with the
    groups' energies ``e`` held at the weighted fit's."""
    a = _model_matrix(x)
    load = np.square(x.astype(np.float64)) @ (e**2)  # a share f of a group moves by ρ·f·e (flags: f² = f)
    out = np.empty(len(grid))
    for k, rho in enumerate(grid):
        v = sigma**2 + rho**2 * load
        _, cov, r = _gls(a, y, v)
        _, logdet_cov = np.linalg.slogdet(cov)
        out[k] = -0.5 * (float(np.sum(np.log(v))) + float(np.sum(r**2 / v)) - logdet_cov)
    return out


@dataclass(frozen=True)
class DesignFit:
    """The additive fit of a design: ``c0`` and each factor's energy (J per replay) with 1 σ (the fit's
    covariance, scaled by the reduced χ² where it is above 1), ρ̂ and its upper bound, the residuals."""

    c0_j: float
    c0_se_j: float
    energy_j: tuple[float, ...]
    energy_se_j: tuple[float, ...]
    chi2_red: float
    dof: int
    rho: float
    rho_up: float
    #: √E[ρ²] over ρ's REML likelihood (flat prior on the grid): what the in-step energies' σ fold in since
    #: session 12. The 95 % bound folded into a 95 % interval counted ρ's uncertainty twice.
    rho_fold: float
    residual_rms_pct: float
    noise_rms_pct: float
    sum_j: float
    sum_se_j: float
    all_on_j: float
    all_on_loo_j: float
    all_on_loo_se_j: float

    @property
    def all_on_error_pct(self) -> float:
        """Leave-one-out prediction of the all-on replay (the whole step) less its measurement, in %."""
        return (self.all_on_loo_j / self.all_on_j - 1.0) * 100.0 if self.all_on_j else math.nan

    def summary(self) -> dict[str, Any]:
        return {
            "c0_j": self.c0_j,
            "c0_se_j": self.c0_se_j,
            "chi2_red": self.chi2_red,
            "dof": self.dof,
            "rho": self.rho,
            "rho_up": self.rho_up,
            "rho_fold": self.rho_fold,
            "residual_rms_pct": self.residual_rms_pct,
            "noise_rms_pct": self.noise_rms_pct,
            "sum_j": self.sum_j,
            "sum_se_j": self.sum_se_j,
            "all_on_j": self.all_on_j,
            "all_on_predicted_j": self.all_on_loo_j,
            "all_on_predicted_se_j": self.all_on_loo_se_j,
            "all_on_error_pct": self.all_on_error_pct,
        }


def fit_design(x: NDArray[Any], energy_j: Sequence[float], sigma_j: Sequence[float]) -> DesignFit:
    """Fit ``E(S) = c0 + Σ x_g e_g`` to the configurations ``x`` (rows; row 0 must be all on) and their
    measured energies with 1 σ; ValueError where the design cannot be fitted. ``x`` holds on/off flags, or
    each factor's share of its nodes enabled (a prefix design, replay_context.prefix_rows)."""
    y = np.asarray(energy_j, dtype=np.float64)
    s = np.asarray(sigma_j, dtype=np.float64)
    if x.shape[0] != len(y) or len(y) != len(s):
        raise ValueError("one energy and one σ per configuration")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(s))):
        raise ValueError("every configuration needs a finite energy and σ")
    if not np.all(np.asarray(x[0], np.float64) == 1.0):
        raise ValueError("the design's first configuration must be the whole step (all on)")
    s = np.maximum(s, 1e-9 * max(float(np.max(np.abs(y))), 1e-30))  # a σ of 0 would give infinite weight
    a = _model_matrix(x)
    n, p = a.shape
    if n - p < 1 or np.linalg.matrix_rank(a) < p:
        raise ValueError(f"{n} configurations cannot fit c0 and {p - 1} energies")
    beta, cov, r = _gls(a, y, s**2)
    dof = n - p
    chi2_red = float(np.sum((r / s) ** 2)) / dof
    scale = max(1.0, chi2_red)
    se = np.sqrt(np.diag(cov) * scale)
    ll = rho_profile(x, y, s, beta[1:])
    k = int(np.argmax(ll))
    inside = np.nonzero(2.0 * (ll[k] - ll) <= ONE_SIDED_95)[0]
    rho_up = float(RHO_GRID[int(inside.max())])
    post = np.exp(ll - ll.max())
    rho_fold = math.sqrt(float(np.sum(post * RHO_GRID**2) / np.sum(post)))
    # Leave the whole step out: its prediction from the other configurations (hat matrix of the weighted fit).
    h0 = float(a[0] @ cov @ a[0]) / s[0] ** 2
    pred0 = y[0] - r[0] / (1.0 - h0) if h0 < 1.0 - 1e-12 else math.nan
    pred0_se = math.sqrt(float(a[0] @ cov @ a[0]) * scale / max(1.0 - h0, 1e-12)) if h0 < 1.0 else math.nan
    ones = np.ones(p)
    return DesignFit(
        c0_j=float(beta[0]),
        c0_se_j=float(se[0]),
        energy_j=tuple(float(b) for b in beta[1:]),
        energy_se_j=tuple(float(v) for v in se[1:]),
        chi2_red=chi2_red,
        dof=dof,
        rho=float(RHO_GRID[k]),
        rho_up=rho_up,
        rho_fold=rho_fold,
        residual_rms_pct=float(np.sqrt(np.mean(r**2)) / np.mean(y)) * 100.0,
        noise_rms_pct=float(np.sqrt(np.mean(s**2)) / np.mean(y)) * 100.0,
        sum_j=float(beta.sum()),
        sum_se_j=math.sqrt(float(ones @ cov @ ones) * scale),
        all_on_j=float(y[0]),
        all_on_loo_j=float(pred0),
        all_on_loo_se_j=pred0_se,
    )

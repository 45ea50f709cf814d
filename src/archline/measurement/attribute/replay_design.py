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

**Replicates (session 14).** ρ above takes every misfit beyond σ_S for a neighbour dependence. A configuration
measured twice tells how far one replay's energy moves between two measurements of the same configuration
(the temperature, the clocks, whatever the phase-shifted repetitions inside one measurement do not see): each
measurement is taken to carry a further relative noise τ, variance τ² E², which a replicate does not share,
while a neighbour dependence repeats with its configuration. Given replicates (``repeats``), each configuration
is fitted by the mean of its measurements, and ρ and τ are estimated together: the REML likelihood of the means
with variance σ̄_S² + τ² ⟨E²⟩/k + ρ² Σ e_g², times the likelihood of the replicates' differences,
N(0, σ_1² + σ_2² + τ² (E_1² + E_2²)), on a grid of (τ, ρ). ρ̂ and its bound come from the profile over τ,
``rho_fold`` from ρ's marginal over τ (flat priors). Why: the shipped transformer designs of sessions 9–13
each measured the whole step twice (the design's first configuration, and the step measured minutes later);
the two differ by up to 2.8 % where their combined σ is 0.34–0.57 % (1.83 % on the H200), and the ten pairs
give τ̂ = 1.00 % (95 % bound 1.50 %); with τ at that value the designs' √E[ρ²] falls from 4.2–5.3 % to
1.9–3.9 % (benchmarks/design_replicates.py, docs/data/design_replicates_s14.txt; post hoc: it chose the rule).
Held out on three new boards (session 14, docs/replay.md) the replicates found τ of 0–1.5 % and took
0.0–2.4 points out of √E[ρ²]: on two of them most of ρ is the configurations' own, repeatable non-additivity. Without
replicates τ is not fitted (NaN in the fit, absent from the summary) and the fit is as before. The grid's τ
steps by 0.25 %, so a bound of 0 means below 0.25 %. (Splitting each pair into its mean and difference is
exact where the two measurements' variances are equal; they differ little.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.measurement.attribute.prior_marginal import ONE_SIDED_95

__all__ = [
    "MIN_RESIDUAL_DOF",
    "RHO_GRID",
    "TAU_GRID",
    "TAU_STEP",
    "DesignFit",
    "Repeat",
    "draw_design",
    "fit_design",
    "interaction_load",
    "rho_profile",
    "rho_tau_profile",
]

#: Residual degrees of freedom a design keeps beyond its parameters (c0 and one energy per factor).
MIN_RESIDUAL_DOF = 5
#: The ρ values the likelihood is evaluated at (0 … 100 %, by 0.1 %).
RHO_GRID = np.linspace(0.0, 1.0, 1001)
#: The per-measurement relative noise values τ the likelihood is evaluated at when there are replicates
#: (0 … 5 %, by 0.25 %).
TAU_GRID = np.linspace(0.0, 0.05, 21)
#: The τ grid's step: a bound of 0 means below it.
TAU_STEP = float(TAU_GRID[1])

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


def _model_matrix(x: NDArray[Any], extra: Array | None = None) -> Array:
    cols = [np.ones((x.shape[0], 1)), x.astype(np.float64)]
    if extra is not None and extra.size:
        cols.append(np.asarray(extra, np.float64).reshape(x.shape[0], -1))
    return np.hstack(cols)


def _gls(a: Array, y: Array, v: Array) -> tuple[Array, Array, Array]:
    """Generalised least squares with diagonal variances ``v``: β, (AᵀV⁻¹A)⁻¹ and the residuals."""
    w = 1.0 / v
    info = a.T @ (a * w[:, None])
    cov = np.linalg.inv(info)
    beta = cov @ (a.T @ (w * y))
    return beta, cov, y - a @ beta


def _reml(a: Array, y: Array, v: Array, chunk: int = 128) -> Array:
    """The restricted log-likelihood of ``y`` under the model ``a`` for each row of variances ``v`` (rows × n),
    batched: −½ (Σ log v + rᵀV⁻¹r − log det (AᵀV⁻¹A)⁻¹) with r the GLS residuals."""
    out = np.empty(v.shape[0])
    for lo in range(0, v.shape[0], chunk):
        w = 1.0 / v[lo : lo + chunk]
        aw = a.T[None, :, :] * w[:, None, :]  # rows × p × n
        info = aw @ a
        rhs = aw @ y
        beta = np.linalg.solve(info, rhs[:, :, None])[:, :, 0]
        r = y[None, :] - beta @ a.T
        _, logdet_info = np.linalg.slogdet(info)
        out[lo : lo + chunk] = -0.5 * (
            np.sum(np.log(v[lo : lo + chunk]), axis=1) + np.sum(r**2 * w, axis=1) + logdet_info
        )
    return out


def interaction_load(x: NDArray[Any], e: Array, alpha: float = 2.0) -> Array:
    """Each configuration's Σ_{g∈S} |e_g|^α · e_rms^(2−α) (e_rms the factors' RMS energy): the variance a relative ρ
    gives it where a group's dependence on its neighbours scales as |e_g|^(α/2) (α = 2: Σ e_g², a relative ρ for every
    group, archline's model; benchmarks/design_alpha.py). A share f of a group moves by f (flags: f² = f)."""
    e = np.abs(np.asarray(e, np.float64))
    if alpha == 2.0:
        return np.asarray(np.square(x.astype(np.float64)) @ (e**2), np.float64)
    rms = float(np.sqrt(np.mean(e**2))) if len(e) else 0.0
    return np.asarray(np.square(x.astype(np.float64)) @ (e**alpha) * rms ** (2.0 - alpha), np.float64)


def rho_profile(
    x: NDArray[Any],
    y: Array,
    sigma: Array,
    e: Array,
    grid: Array = RHO_GRID,
    extra: Array | None = None,
    alpha: float = 2.0,
) -> Array:
    """The restricted log-likelihood of each ρ of ``grid``: residual variance σ_S² + ρ² Σ_{g∈S} e_g² (with ``alpha``:
    :func:`interaction_load`) with the groups' energies ``e`` held at the weighted fit's; ``extra``: covariate
    columns of the model beside them."""
    a = _model_matrix(x, extra)
    load = interaction_load(x, e, alpha)
    return _reml(a, y, sigma[None, :] ** 2 + np.square(grid)[:, None] * load[None, :])


def _diff_loglik(d: Array, sd2: Array, yy: Array, grid: Array) -> Array:
    """The log-likelihood of replicate differences ``d`` (variance ``sd2 + τ² yy``) at each τ of ``grid``."""
    v = sd2[None, :] + np.square(grid)[:, None] * yy[None, :]
    return np.asarray(-0.5 * np.sum(np.log(v) + np.square(d)[None, :] / v, axis=1), np.float64)


def rho_tau_profile(
    x: NDArray[Any],
    y: Array,
    sigma: Array,
    e: Array,
    ysq: Array,
    k: Array,
    diff: Array,
    diff_sd2: Array,
    diff_yy: Array,
    rho_grid: Array = RHO_GRID,
    tau_grid: Array = TAU_GRID,
    extra: Array | None = None,
    alpha: float = 2.0,
) -> Array:
    """The joint log-likelihood on (τ, ρ): REML of the configurations' means ``y`` (σ ``sigma`` of the mean,
    ``ysq`` the mean of the squared measured energies, ``k`` measurements each) with variance
    σ² + τ²·ysq/k + ρ²·Σ e², plus the replicates' differences (``diff`` with variance ``diff_sd2 + τ² diff_yy``).
    Rows of the result follow ``tau_grid``, columns ``rho_grid``; ``extra``: covariate columns of the model."""
    a = _model_matrix(x, extra)
    load = interaction_load(x, e, alpha)
    d = _diff_loglik(diff, diff_sd2, diff_yy, tau_grid)
    coarse = _coarse(len(rho_grid))
    out = np.full((len(tau_grid), len(rho_grid)), -np.inf)
    for i, tau in enumerate(tau_grid):
        base = sigma**2 + tau**2 * ysq / k
        out[i, coarse] = _reml(a, y, base[None, :] + np.square(rho_grid[coarse])[:, None] * load[None, :])
    # Only the τ whose coarse profile (with its replicates' term) comes within _REACH of the best are refined: the
    # others stay at their coarse points, below e^-30 of the peak, where they add nothing to a bound or a mean.
    top = float(np.max(out[:, coarse] + d[:, None]))
    for i, tau in enumerate(tau_grid):
        # a NaN anywhere (top or this row) refines every row, as before the pruning
        if not float(np.max(out[i, coarse])) + d[i] < top - _REACH:
            base = sigma**2 + tau**2 * ysq / k
            out[i] = _sparse_profile(a, y, base, load, rho_grid, known=out[i, coarse])
    return out + d[:, None]


#: The coarse grid's stride, and how far (in log-likelihood) below the coarse maximum the fine grid still goes.
_COARSE, _REACH = 10, 30.0


def _coarse(n: int) -> NDArray[np.int64]:
    """The coarse grid's indices among ``n`` points: every :data:`_COARSE`-th and the last."""
    return np.unique(np.r_[np.arange(0, n, _COARSE), n - 1]).astype(np.int64)


def _sparse_profile(a: Array, y: Array, base: Array, load: Array, rho_grid: Array, known: Array | None = None) -> Array:
    """ρ's restricted log-likelihood on ``rho_grid``: every tenth point first, then every point within
    :data:`_REACH` of the coarse maximum (and a coarse step beyond); the rest, where the likelihood is below
    e^-30 of its peak and adds nothing to a bound or a mean, is left at -inf. This assumes the profile is unimodal in
    ρ (it was on every shipped design and on random ones checked in session 14's review). ``known``: the coarse
    points' values where they were computed already."""
    v = base[None, :] + np.square(rho_grid)[:, None] * load[None, :]
    coarse = _coarse(len(rho_grid))
    out = np.full(len(rho_grid), -np.inf)
    out[coarse] = _reml(a, y, v[coarse]) if known is None else known
    near = coarse[out[coarse] >= out[coarse].max() - _REACH]
    lo, hi = max(int(near.min()) - _COARSE, 0), min(int(near.max()) + _COARSE, len(rho_grid) - 1)
    out[lo : hi + 1] = _reml(a, y, v[lo : hi + 1])
    return out


@dataclass(frozen=True)
class Repeat:
    """A second measurement of configuration ``row`` of a design (J, 1 σ)."""

    row: int
    energy_j: float
    sigma_j: float


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
    #: Configurations measured twice, and the per-measurement relative noise τ they give (τ̂, its one-sided 95 %
    #: bound): 0 and NaN without replicates.
    replicates: int = 0
    tau: float = math.nan
    tau_up: float = math.nan
    #: RMS of the replicates' relative differences over √2: one measurement's scatter (NaN without).
    replicate_rms_pct: float = math.nan
    #: Covariates fitted beside the energies (name → coefficient, 1 σ): the "links" model's cost of a broken
    #: producer→consumer link (J per link). Empty for the additive model.
    covariates: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: How a group's neighbour dependence scales with its energy (:func:`interaction_load`): 2, a relative ρ for
    #: every group, unless a fit was asked for another.
    alpha: float = 2.0

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
            **(
                {"replicates": self.replicates, "tau": self.tau, "tau_up": self.tau_up,
                 "replicate_rms_pct": self.replicate_rms_pct}
                if self.replicates
                else {}
            ),
            **(
                {"covariates": {k: {"value": v, "se": se} for k, (v, se) in self.covariates.items()}}
                if self.covariates
                else {}
            ),
            **({"rho_alpha": self.alpha} if self.alpha != 2.0 else {}),
        }  # fmt: skip


def _bound(ll: Array, grid: Array) -> tuple[float, float]:
    """The grid's maximum-likelihood value and its one-sided 95 % upper bound from a profile ``ll``."""
    k = int(np.argmax(ll))
    inside = np.nonzero(2.0 * (ll[k] - ll) <= ONE_SIDED_95)[0]
    return float(grid[k]), float(grid[int(inside.max())])


def _fold(ll: Array) -> float:
    """√E[ρ²] over a likelihood on :data:`RHO_GRID` (flat prior)."""
    post = np.exp(ll - ll.max())
    return math.sqrt(float(np.sum(post * RHO_GRID**2) / np.sum(post)))


def fit_design(
    x: NDArray[Any],
    energy_j: Sequence[float],
    sigma_j: Sequence[float],
    repeats: Sequence[Repeat] = (),
    covariates: Mapping[str, Sequence[float]] | None = None,
    alpha: float = 2.0,
) -> DesignFit:
    """Fit ``E(S) = c0 + Σ x_g e_g`` to the configurations ``x`` (rows; row 0 must be all on) and their
    measured energies with 1 σ; ValueError where the design cannot be fitted. ``x`` holds on/off flags, or
    each factor's share of its nodes enabled (a prefix design, replay_context.prefix_rows). ``repeats``: second
    measurements of some rows (at most one each); a row is then fitted by its measurements' mean and ρ is
    estimated beside a per-measurement noise τ (module docstring). ``covariates``: name → one value per
    configuration, fitted beside c0 and the energies (the "links" model: the broken producer→consumer links of
    each configuration, replay_context.link_breaks); each must be 0 in the whole step, so the energies still add
    up to it."""
    y1 = np.asarray(energy_j, dtype=np.float64)
    s1 = np.asarray(sigma_j, dtype=np.float64)
    if x.shape[0] != len(y1) or len(y1) != len(s1):
        raise ValueError("one energy and one σ per configuration")
    if not (np.all(np.isfinite(y1)) and np.all(np.isfinite(s1))):
        raise ValueError("every configuration needs a finite energy and σ")
    if not np.all(np.asarray(x[0], np.float64) == 1.0):
        raise ValueError("the design's first configuration must be the whole step (all on)")
    floor = 1e-9 * max(float(np.max(np.abs(y1))), 1e-30)
    s1 = np.maximum(s1, floor)  # a σ of 0 would give infinite weight
    rows = [r.row for r in repeats]
    if len(set(rows)) != len(rows) or any(not 0 <= r < len(y1) for r in rows):
        raise ValueError("each repeat must name a different configuration of the design")
    if not all(math.isfinite(r.energy_j) and math.isfinite(r.sigma_j) for r in repeats):
        raise ValueError("every repeat needs a finite energy and σ")
    k = np.ones(len(y1))
    y, s, ysq = y1.copy(), s1.copy(), y1**2
    idx = np.asarray(rows, dtype=np.int64)
    y2 = np.asarray([r.energy_j for r in repeats], np.float64)
    s2 = np.maximum(np.asarray([r.sigma_j for r in repeats], np.float64), floor)
    if len(idx):
        k[idx] = 2.0
        y[idx] = (y1[idx] + y2) / 2.0
        s[idx] = np.sqrt(s1[idx] ** 2 + s2**2) / 2.0
        ysq[idx] = (y1[idx] ** 2 + y2**2) / 2.0
    names = list(covariates or {})
    extra = np.array([np.asarray((covariates or {})[name], np.float64) for name in names]).T if names else None
    if extra is not None and (extra.shape[0] != len(y) or not np.all(extra[0] == 0.0)):
        raise ValueError("each covariate needs one value per configuration, 0 in the whole step")
    a = _model_matrix(x, extra)
    n, p = a.shape
    f = x.shape[1]
    if n - p < 1 or np.linalg.matrix_rank(a) < p:
        raise ValueError(f"{n} configurations cannot fit c0, {f} energies and {len(names)} covariates")
    beta, cov, r = _gls(a, y, s**2)
    dof = n - p
    chi2_red = float(np.sum((r / s) ** 2)) / dof
    scale = max(1.0, chi2_red)
    se = np.sqrt(np.diag(cov) * scale)
    tau = tau_up = rep_rms = math.nan
    if len(idx):
        ll2 = rho_tau_profile(
            x,
            y,
            s,
            beta[1 : 1 + f],
            ysq,
            k,
            y1[idx] - y2,
            s1[idx] ** 2 + s2**2,
            y1[idx] ** 2 + y2**2,
            extra=extra,
            alpha=alpha,
        )
        ll = ll2.max(axis=0)  # ρ's profile over τ
        rho, rho_up = _bound(ll, RHO_GRID)
        tau, tau_up = _bound(ll2.max(axis=1), TAU_GRID)
        m = ll2.max()
        with np.errstate(divide="ignore"):  # ρ left at -inf for every τ (_sparse_profile) stays there
            rho_fold = _fold(m + np.log(np.sum(np.exp(ll2 - m), axis=0)))  # ρ's marginal over τ
        rel = (y1[idx] - y2) / ((y1[idx] + y2) / 2.0)
        rep_rms = float(np.sqrt(np.mean(rel**2) / 2.0)) * 100.0
    else:
        ll = rho_profile(x, y, s, beta[1 : 1 + f], extra=extra, alpha=alpha)
        rho, rho_up = _bound(ll, RHO_GRID)
        rho_fold = _fold(ll)
    # Leave the whole step out: its prediction from the other configurations (hat matrix of the weighted fit).
    h0 = float(a[0] @ cov @ a[0]) / s[0] ** 2
    pred0 = y[0] - r[0] / (1.0 - h0) if h0 < 1.0 - 1e-12 else math.nan
    pred0_se = math.sqrt(float(a[0] @ cov @ a[0]) * scale / max(1.0 - h0, 1e-12)) if h0 < 1.0 else math.nan
    ones = np.r_[np.ones(1 + f), np.zeros(p - 1 - f)]  # c0 + Σ e: the whole step, where every covariate is 0
    return DesignFit(
        c0_j=float(beta[0]),
        c0_se_j=float(se[0]),
        energy_j=tuple(float(b) for b in beta[1 : 1 + f]),
        energy_se_j=tuple(float(v) for v in se[1 : 1 + f]),
        chi2_red=chi2_red,
        dof=dof,
        rho=rho,
        rho_up=rho_up,
        rho_fold=rho_fold,
        residual_rms_pct=float(np.sqrt(np.mean(r**2)) / np.mean(y)) * 100.0,
        noise_rms_pct=float(np.sqrt(np.mean(s**2)) / np.mean(y)) * 100.0,
        sum_j=float(ones @ beta),
        sum_se_j=math.sqrt(float(ones @ cov @ ones) * scale),
        all_on_j=float(y[0]),
        all_on_loo_j=float(pred0),
        all_on_loo_se_j=pred0_se,
        replicates=len(idx),
        tau=tau,
        tau_up=tau_up,
        replicate_rms_pct=rep_rms,
        covariates={name: (float(beta[1 + f + j]), float(se[1 + f + j])) for j, name in enumerate(names)},
        alpha=alpha,
    )

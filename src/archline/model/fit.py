"""Least-squares fit of Choi et al.'s eq. (9), E/W = ε_s + ε_mem·Q/W + π0·T/W + Δ_d·R, with t-intervals and R²."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from archline.errors import InputError
from archline.model.sweep import SweepRow
from archline.model.uncertainty import DEFAULT_CONFIDENCE, Estimate, t_quantile

__all__ = ["FIT_PARAMS", "EnergyFit", "Weighting", "fit_energy"]

Weighting = Literal["auto", "uncertainty", "none"]

#: Coefficients of eq. (9), in the order of the design matrix's columns (SI units).
FIT_PARAMS: tuple[str, ...] = ("eps_s_j", "eps_mem_j_per_b", "pi0_w", "delta_d_j")


@dataclass(frozen=True)
class EnergyFit:
    """The fitted coefficients of eq. (9) with their covariance, intervals and fit quality.

    ``names`` lists the coefficients actually fitted (``delta_d_j`` only when both precisions
    are present); ``covariance`` is in the same order. Intervals are ``value ± t·stderr`` with
    the two-sided Student-t quantile at ``confidence`` for ``dof = n_rows − len(names)``; the
    covariance is scaled by the residual variance (the reduced χ² for weighted fits), so it
    does not trust the stated energy uncertainties' absolute size. ``r2`` is the (weighted)
    coefficient of determination of E/W; ``rel_residuals`` are (E_fit − E)/E per row, in
    input order.
    """

    names: tuple[str, ...]
    values: tuple[float, ...]
    covariance: tuple[tuple[float, ...], ...]
    estimates: dict[str, Estimate]
    confidence: float
    dof: int
    n_rows: int
    r2: float
    r2_adjusted: float
    residual_scale: float
    weighting: Literal["uncertainty", "none"]
    rel_residuals: tuple[float, ...]
    rms_rel_residual: float

    def value(self, name: str) -> float:
        """A fitted coefficient by name; 0 for ``delta_d_j`` when only one precision was fitted."""
        if name in self.estimates:
            return self.estimates[name].value
        if name == "delta_d_j":
            return 0.0
        raise KeyError(name)


def _design(rows: Sequence[SweepRow], with_double: bool) -> tuple[np.ndarray, np.ndarray]:
    w = np.array([r.flops for r in rows])
    cols = [
        np.ones(len(rows)),
        np.array([r.bytes for r in rows]) / w,
        np.array([r.time_s for r in rows]) / w,
    ]
    if with_double:
        cols.append(np.array([1.0 if r.precision == "double" else 0.0 for r in rows]))
    x = np.column_stack(cols)
    y = np.array([r.energy_j for r in rows]) / w
    return x, y


def fit_energy(
    rows: Sequence[SweepRow], weighting: Weighting = "auto", confidence: float = DEFAULT_CONFIDENCE
) -> EnergyFit:
    """Fit eq. (9) jointly over both precisions by (weighted) linear least squares.

    ``weighting='uncertainty'`` weights each row by 1/σ² with σ = energy_uncertainty_j/W (the
    rows' E/W spread grows with Q/W, so unweighted least squares lets memory-bound rows
    dominate); ``'none'`` is the paper's ordinary least squares; ``'auto'`` weights when every
    row carries a positive uncertainty. Columns are scaled before solving (T/W is ~1e-13).
    """
    if not rows:
        raise InputError("sweep: no rows to fit")
    with_double = {r.precision for r in rows} == {"single", "double"}
    names = FIT_PARAMS if with_double else FIT_PARAMS[:3]
    n, k = len(rows), len(names)
    if n <= k:
        raise InputError(f"sweep: {n} rows cannot fit {k} coefficients with an error estimate (need ≥ {k + 1})")
    has_unc = all(math.isfinite(r.energy_uncertainty_j) and r.energy_uncertainty_j > 0 for r in rows)
    if weighting == "uncertainty" and not has_unc:
        raise InputError("sweep: weighting by uncertainty needs a positive energy_uncertainty_j on every row")
    use_w = weighting == "uncertainty" or (weighting == "auto" and has_unc)

    x, y = _design(rows, with_double)
    sigma = np.array([r.energy_uncertainty_j / r.flops for r in rows]) if use_w else np.ones(n)
    xw, yw = x / sigma[:, None], y / sigma
    scale = np.sqrt((xw**2).sum(axis=0))
    if np.any(scale == 0.0):
        raise InputError("sweep: a regressor of eq. (9) is zero on every row")
    coef_s, _, rank, _ = np.linalg.lstsq(xw / scale, yw, rcond=None)
    if rank < k:
        raise InputError(
            "sweep: eq. (9) is not identifiable from these rows (the sweep must span memory- and compute-bound points)"
        )
    beta = coef_s / scale
    resid_w = yw - xw @ beta
    rss = float(resid_w @ resid_w)
    dof = n - k
    s2 = rss / dof
    xs = xw / scale
    cov = np.linalg.inv(xs.T @ xs) / np.outer(scale, scale) * s2

    ybar = float(np.sum(yw / sigma) / np.sum(1.0 / sigma**2))
    tss = float(np.sum(((y - ybar) / sigma) ** 2))
    r2 = 1.0 - rss / tss if tss > 0.0 else math.nan
    r2_adj = 1.0 - (1.0 - r2) * (n - 1) / dof if math.isfinite(r2) else math.nan

    mult = t_quantile(confidence, dof)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    estimates = {nm: Estimate.from_stderr(float(b), float(s), mult) for nm, b, s in zip(names, beta, se, strict=True)}
    e_fit = (x @ beta) * np.array([r.flops for r in rows])
    e_meas = np.array([r.energy_j for r in rows])
    rel = (e_fit - e_meas) / e_meas
    return EnergyFit(
        names=tuple(names),
        values=tuple(float(b) for b in beta),
        covariance=tuple(tuple(float(c) for c in row) for row in cov),
        estimates=estimates,
        confidence=confidence,
        dof=dof,
        n_rows=n,
        r2=r2,
        r2_adjusted=r2_adj,
        residual_scale=math.sqrt(s2),
        weighting="uncertainty" if use_w else "none",
        rel_residuals=tuple(float(v) for v in rel),
        rms_rel_residual=float(np.sqrt(np.mean(rel**2))),
    )

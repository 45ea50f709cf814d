"""The two-stage power fit of an attribution: pooled busy/gap/idle powers, then each column's power with its prior."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.measurement.attribute.buffer_fit import power_bounds, prior_arrays, prior_context_spread
from archline.measurement.attribute.design import Design
from archline.measurement.attribute.fit import PowerFit, block_bootstrap, fit_powers
from archline.measurement.attribute.prior import KernelPrior
from archline.measurement.attribute.prior_fit import ScaleFit, fit_priors

__all__ = ["ColumnFit", "PriorParts", "cap_impossible_priors", "fit_columns"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The pooled powers of stage 1, indexed by :attr:`Design.col_parent`: busy, gaps inside the program, idle
#: before/after it, launch gaps.
N_POOLED = 4


@dataclass(frozen=True)
class PriorParts:
    """What a column's prior σ is made of, each relative to the prior's mean (1 σ), combined in quadrature: the
    prior's own spread where it was measured (``measured``; graph replay's in-step σ where ``in_step``), the widening
    for a call time here unlike there (``time``), the spread the run's windows add beyond it (``spread``, 0 unless
    they refute the measured one), the uncertainty of its source's scale calibrated on the windows (``scale``) and
    what a replay prior taken as given without a measured spread gets from the floor of 15 % of its mean
    (``floor``, :func:`archline.measurement.attribute.prior_fit.fit_priors`). ``total`` is the prior's σ as the fit
    took it."""

    measured: float
    time: float
    spread: float
    scale: float
    total: float
    in_step: bool
    floor: float = 0.0
    #: The calls' common ln(time here / time there) that ``time`` is beyond (priors timed by CUPTI); NaN: none.
    common: float = math.nan
    #: The part of ``measured`` that is the replay design's neighbour dependence (a longer design narrows it only as
    #: far as ρ's own uncertainty goes; :attr:`KernelPrior.context_fold_rel`); NaN where unknown.
    neighbour: float = math.nan

    def note(self, source: str) -> str:
        """One clause for a row that leans on this prior: its σ and what it is made of, the largest first."""
        kind = "in-step σ" if self.in_step else "σ"
        named = [
            (self.measured, f"{source}'s {kind}"),
            (
                self.time,
                f"its time per call here against {source}'s"
                + (
                    f" beyond the calls' common {100 * math.expm1(self.common):+.1f} %"
                    if math.isfinite(self.common)
                    else ""
                ),
            ),
            (self.spread, "the spread the windows add"),
            (self.scale, "the priors' scale"),
            (self.floor, "the floor of a prior taken as given"),
        ]
        # a part that rounds to nothing is not named
        kept = sorted(((v, name) for v, name in named if round(100 * v, 1) > 0), key=lambda t: -t[0])
        parts = ", ".join(f"{name} {100 * v:.1f} %" for v, name in kept)
        hint = ""
        if self.in_step and source == "replay":
            hint = "; a longer replay design narrows part of the in-step σ"
            if math.isfinite(self.neighbour):
                own = math.sqrt(max(self.measured**2 - self.neighbour**2, 0.0))
                hint = (
                    f"; of {source}'s in-step σ, {100 * self.neighbour:.1f} % is the neighbour dependence, which a "
                    f"longer design narrows only as far as ρ's own uncertainty goes, and {100 * own:.1f} % the "
                    "design's own noise, which it narrows"
                )
        return f"its {source} prior's 1 σ: {100 * self.total:.1f} % ({parts}, in quadrature{hint})"


@dataclass(frozen=True)
class ColumnFit:
    """Every column's fitted power (W) with its interval, NaN where it has no short-call time (``active``: the rest).

    ``pooled_w``: stage 1's powers (:data:`N_POOLED`); ``wait_w``: the pooled power the GPU draws between
    calls (the gaps', else idle). ``prior_source`` names each active column's prior; ``calibrated`` the sources
    whose priors were calibrated on the run's windows (``scale_fits``).
    """

    fit: PowerFit
    active: I64
    pooled_w: F64
    wait_w: float
    power_w: F64
    lo_w: F64
    hi_w: F64
    data_weight: F64
    at_limit: NDArray[np.bool_]
    prior_source: dict[int, str]
    calibrated: set[str]
    scale_fits: list[ScaleFit]
    #: Columns whose prior was impossible here (its energy per call over this run's time per call above the
    #: power limit × slack): capped at the bound and widened (:func:`cap_impossible_priors`), and left out of
    #: the scale's calibration; ``impossible_prior_w`` their prior power (W) before the cap.
    impossible_priors: tuple[int, ...] = ()
    impossible_prior_w: tuple[float, ...] = ()
    #: Every column's bound on its mean power (W; NaN where not active, inf where the limit is unknown):
    #: :func:`archline.measurement.attribute.buffer_fit.power_bounds`.
    bound_w: F64 | None = None
    #: What each column's prior σ is made of (columns with a replay or model prior of their own, not capped).
    prior_parts: dict[int, PriorParts] | None = None
    #: The common ln(time here / time there) taken out of the time parts of the priors timed by CUPTI
    #: (:func:`archline.measurement.attribute.buffer_fit.time_common`); NaN where none was.
    time_common: float = math.nan
    #: The final fit's prior means and σ (W) and upper bounds, by position in ``active``: what a refit of the same
    #: columns on other windows takes to be the same fit but for its data (attribution._model_sensitivity).
    prior_mean_w: F64 | None = None
    prior_sd_w: F64 | None = None
    upper_w: F64 | None = None


def impossible_priors(pm: F64, src: list[str], upper: F64) -> list[int]:
    """The positions of priors of their own (not the pooled default) whose mean power is above their bound."""
    return [j for j in range(pm.size) if src[j] != "default" and np.isfinite(upper[j]) and pm[j] > upper[j]]


def cap_impossible_priors(pm: F64, psd: F64, src: list[str], upper: F64) -> tuple[F64, F64, list[int]]:
    """Priors whose mean power is above ``upper`` (each column's bound) at this run's time per call cannot hold here.

    Their energy per call came from elsewhere (a replay, a model): divided by the time the kernel takes in this
    run it would draw more than the board can. The kernel still ran, and the prior still says it draws much:
    its mean is capped at the bound, and its relative spread widens by ``ln(prior / bound)``, as a prior
    measured at another call time widens by the log of the times' ratio (:func:`prior_arrays`). A prior just
    above the bound stays informative at the bound; one far above it says little. Session 9 dropped such
    priors for the pooled default; on the calibration run of session 10 (H100 GPU-9abc3476, docs/attribution.md)
    that left the transformer's largest GEMMs without a prior and the priors' common scale at ±7.7 % instead
    of ±4.0 %. Returns the priors and the positions capped.
    """
    bad = impossible_priors(pm, src, upper)
    if not bad:
        return pm, psd, bad
    pm, psd = pm.copy(), psd.copy()
    for j in bad:
        rel = math.hypot(psd[j] / pm[j], math.log(pm[j] / upper[j]))
        pm[j] = upper[j]
        psd[j] = rel * upper[j]
    return pm, psd, bad


def _pooled(d: Design, active: I64, x: F64, y_j: F64, mean_w: float) -> tuple[F64, F64, float]:
    """Stage 1: pooled powers and their standard errors, weakly anchored at the run's mean power; and ``wait_w``."""
    m = np.zeros((active.size, N_POOLED))
    m[np.arange(active.size), d.col_parent[active]] = 1.0
    x1 = x @ m
    used_par = np.nonzero(x1.sum(axis=0) > 0)[0]
    fit1 = fit_powers(x1[:, used_par], y_j, np.full(used_par.size, mean_w), np.full(used_par.size, max(mean_w, 1.0)))
    par_p = np.full(N_POOLED, mean_w)
    par_se = np.full(N_POOLED, mean_w)
    par_p[used_par] = fit1.power_w
    par_se[used_par] = fit1.se_w
    if np.any(used_par == 2) and np.any(used_par == 1) and par_p[1] < par_p[2]:
        # One pooled busy power misfits a loop whose phases differ in power; the GPU waiting inside the
        # program never draws less than idle, so the gaps' prior starts there.
        par_p[1], par_se[1] = par_p[2], max(par_se[1], par_p[2] - par_p[1])
    if np.any(used_par == 2) and np.any(used_par == 3) and par_p[3] < par_p[2]:
        # Launch gaps (shorter than idle_gap_s) have a pool of their own since session 8: pooled with the long
        # gaps, whose idle power dominates, they could not show a higher power; never below idle either.
        par_p[3], par_se[3] = par_p[2], max(par_se[3], par_p[2] - par_p[3])
    return par_p, par_se, float(par_p[1 if np.any(used_par == 1) else 2])


def _intervals(
    x: F64, y_j: F64, fit: PowerFit, pm: F64, upper: F64, confidence: float, ci_method: str, n_bootstrap: int, seed: int
) -> tuple[F64, F64]:
    """Each active column's power interval (W) at ``confidence``: from the fit's covariance, or a block bootstrap."""
    tq = fit.t_quantile(confidence)
    p_lo = fit.power_w - tq * fit.se_w
    p_hi = fit.power_w + tq * fit.se_w
    if ci_method == "bootstrap":
        boot = block_bootstrap(x, y_j, fit, pm, n_boot=n_bootstrap, seed=seed, upper_w=upper)
        alpha = (1.0 - confidence) / 2.0
        p_lo = np.quantile(boot, alpha, axis=0)
        p_hi = np.quantile(boot, 1.0 - alpha, axis=0)
    elif ci_method != "covariance":
        raise ValueError(f"unknown ci_method {ci_method!r}")
    return p_lo, p_hi


def fit_columns(
    d: Design,
    active: I64,
    x: F64,
    y_j: F64,
    mean_w: float,
    *,
    priors: Mapping[str, KernelPrior],
    prior_rel_sd: float,
    prior_scale: str,
    power_limit_w: float | None,
    confidence: float,
    power_ceiling_w: float | None = None,
    ci_method: str,
    n_bootstrap: int,
    seed: int,
) -> ColumnFit:
    """Fit the ``active`` columns' powers to the window energies ``y_j`` on their busy times ``x``.

    Stage 2 shrinks every column towards its pooled power (or its prior from ``priors``) where the data are
    silent; ``ci_method`` (``covariance`` or ``bootstrap``) sets the intervals at ``confidence``.
    """
    par_p, par_se, wait_w = _pooled(d, active, x, y_j, mean_w)
    n_cols = len(d.col_names)
    pm = par_p[d.col_parent[active]]
    floor = 0.05 * max(mean_w, 1.0)
    psd = np.sqrt((prior_rel_sd * pm) ** 2 + par_se[d.col_parent[active]] ** 2)
    psd = np.maximum(psd, floor)
    base = (pm, psd)
    pm, psd, prior_src, raw_parts, common, moved = prior_arrays(d, active, *base, priors)
    ctx = prior_context_spread(d, active, priors)
    fold = prior_context_spread(d, active, priors, fold=True)
    upper = power_bounds(d, active, power_limit_w, x, power_ceiling_w)
    over_w = pm.copy()

    def calibrate(pm: F64, psd: F64) -> tuple[F64, F64, list[int], list[ScaleFit]]:
        # Capped before the scale is calibrated, on purpose: a prior the board cannot draw would pull its source's
        # scale down. A capped prior then stays out of the calibration, taken as given (with replay's floor where
        # it carries no measured spread): scaled, its mean would go back over the bound and pin its row there.
        pm, psd, bad = cap_impossible_priors(pm, psd, prior_src, upper)
        left_out = np.isin(np.arange(pm.size), bad)
        pm, psd, fits = fit_priors(prior_scale, x, y_j, pm, psd, prior_src, context_rel_sd=ctx, uncalibrated=left_out)
        return pm, psd, bad, fits

    # The calls' common time shift comes out of the CUPTI-timed priors' time parts only where their source's scale
    # is calibrated on the windows (which takes a shift every kernel shares) and only for priors not capped (left out
    # of that calibration); where the calibration does not happen the unshifted time parts stand (prior_arrays).
    shifted = None
    if prior_scale == "fit":
        # the priors cap_impossible_priors will cap (the shift moves no mean)
        shift = np.ones(active.size, bool)
        shift[impossible_priors(pm, prior_src, upper)] = False
        got = prior_arrays(d, active, *base, priors, shift=shift)
        if math.isfinite(got[4]):
            cal = calibrate(got[0], got[1])
            ok = {f.source for f in cal[3] if f.calibrated}
            # the sources of the priors the shift was taken out of, each of which must be calibrated
            if {prior_src[j] for j in np.flatnonzero(got[5])} <= ok:
                shifted = (got, cal)
    if shifted is not None:
        (_, _, _, raw_parts, common, moved), (pm, psd, bad, scale_fits) = shifted
    else:
        common = math.nan
        pm, psd, bad, scale_fits = calibrate(pm, psd)
    parts = _parts(raw_parts, ctx, pm, psd, prior_src, scale_fits, bad, active, common, moved, fold)
    fit = fit_powers(x, y_j, pm, psd, upper_w=upper)
    at_limit = np.zeros(n_cols, bool)
    at_limit[active] = np.isfinite(upper) & (fit.power_w >= 0.999 * upper)
    p_lo, p_hi = _intervals(x, y_j, fit, pm, upper, confidence, ci_method, n_bootstrap, seed)

    power = np.full(n_cols, math.nan)
    lo_w = np.full(n_cols, math.nan)
    hi_w = np.full(n_cols, math.nan)
    weight = np.zeros(n_cols)
    power[active], lo_w[active], hi_w[active], weight[active] = fit.power_w, p_lo, p_hi, fit.data_weight
    bound = np.full(n_cols, math.nan)
    bound[active] = upper
    return ColumnFit(
        fit=fit,
        active=active,
        pooled_w=par_p,
        wait_w=wait_w,
        power_w=power,
        lo_w=lo_w,
        hi_w=hi_w,
        data_weight=weight,
        at_limit=at_limit,
        prior_source=dict(zip(active.tolist(), prior_src, strict=True)),
        calibrated={f.source for f in scale_fits if f.calibrated},
        scale_fits=scale_fits,
        impossible_priors=tuple(int(active[j]) for j in bad),
        impossible_prior_w=tuple(float(over_w[j]) for j in bad),
        bound_w=bound,
        prior_parts=parts,
        time_common=common,
        prior_mean_w=pm,
        prior_sd_w=psd,
        upper_w=upper,
    )


def _parts(
    raw: F64,
    ctx: F64,
    pm: F64,
    psd: F64,
    src: list[str],
    fits: list[ScaleFit],
    bad: list[int],
    active: I64,
    common: float = math.nan,
    moved: NDArray[np.bool_] | None = None,
    fold: F64 | None = None,
) -> dict[int, PriorParts]:
    """Each column's :class:`PriorParts` (by column index), from :func:`prior_arrays`' measured and time parts and its
    source's scale fit: a calibrated source's prior σ is √(spread² + measured² + time² + scale²) of its mean
    (:func:`archline.measurement.attribute.prior_fit.calibrate_priors`), an uncalibrated one's √(measured² + time²),
    raised to replay's floor where it has no measured spread (the rest of its σ is then ``floor``). Capped priors
    (``bad``) are left out: their rows say they were capped (rows.column_rows). A prior whose time part is beyond the
    ``common`` shift (``moved``, by position: :func:`prior_arrays`) says so, and one whose measured part holds a
    design's neighbour dependence (``fold``, by position: :func:`prior_context_spread`) says how much."""
    by_source = {f.source: f for f in fits if f.calibrated}
    out: dict[int, PriorParts] = {}
    for j, k in enumerate(active.tolist()):
        if j in bad or not (np.isfinite(raw[j, 0]) and pm[j] > 0):
            continue
        f = by_source.get(src[j])
        spread = scale = 0.0
        if f is not None:
            spread = 0.0 if math.isfinite(f.rho_measured) and not f.refuted else float(f.rho_up)
            scale = float(f.scale_se / max(f.scale, 1e-3)) if math.isfinite(f.scale_se) else 0.0
        total = float(psd[j] / pm[j])
        known = math.sqrt(float(raw[j, 0]) ** 2 + float(raw[j, 1]) ** 2 + spread**2 + scale**2)
        floor = math.sqrt(total**2 - known**2) if total > known * (1.0 + 1e-9) else 0.0
        beyond = common if moved is not None and moved[j] else math.nan
        nb = float(min(fold[j], raw[j, 0])) if fold is not None and np.isfinite(fold[j]) else math.nan
        out[int(k)] = PriorParts(
            float(raw[j, 0]), float(raw[j, 1]), spread, scale, total, bool(np.isfinite(ctx[j])), floor, beyond, nb
        )
    return out

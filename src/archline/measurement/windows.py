"""Energy of each window with a 1 σ uncertainty, and whether the sensor resolves it at all."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Readings
from archline.core.recording import Region
from archline.errors import SensorError
from archline.measurement.batched import Cluster, solve_many
from archline.measurement.clean import drop_repeats, estimate_noise_w, estimate_quantum_w, find_displaced, undisplace
from archline.measurement.deconvolve import Series, Solution
from archline.measurement.integrate import integrate_windows_j
from archline.measurement.sensor_model import SensorModel
from archline.measurement.uncertainty import misfit_excess_w2, misfit_variance_j2
from archline.measurement.window_groups import ClusterPlan, clusters, fold_weak, layers, observed, plan_cluster

__all__ = ["DEFAULT_MAX_REL_UNCERTAINTY", "DEFAULT_SHAPE_KAPPA", "WindowEnergy", "prepare_series", "window_energies"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: A window whose 1 σ exceeds this fraction of its energy is reported as not resolvable.
DEFAULT_MAX_REL_UNCERTAINTY = 0.2
#: Below this many readings a window's unobserved part is charged a share of its excess energy.
_FEW_READINGS = 4
#: Share of the excess energy in the unobserved part of a window charged as its 1 σ.
DEFAULT_SHAPE_KAPPA = 0.5


@dataclass(frozen=True)
class WindowEnergy:
    """The energy (J) of one window, its 1 σ uncertainty (J) and whether the sensor resolves it.

    ``raw_energy_j`` is the plain trapezoid integral of the readings over the window, for
    comparison. ``observed_fraction`` is the share of the window that some reading responds
    to; ``readings`` counts those readings. An unresolvable window still carries the best
    estimate, with an uncertainty that says how little it is worth.
    """

    name: str
    start_s: float
    end_s: float
    energy_j: float
    energy_uncertainty_j: float
    resolvable: bool
    raw_energy_j: float = float("nan")
    observed_fraction: float = 1.0
    readings: int = 0
    note: str = ""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def mean_power_w(self) -> float:
        return self.energy_j / self.duration_s if self.duration_s > 0 else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "duration_s": self.duration_s,
            "energy_j": self.energy_j,
            "energy_uncertainty_j": self.energy_uncertainty_j,
            "mean_power_w": self.mean_power_w,
            "resolvable": self.resolvable,
            "raw_energy_j": self.raw_energy_j,
            "observed_fraction": self.observed_fraction,
            "readings": self.readings,
            "note": self.note,
        }


def prepare_series(readings: Readings, model: SensorModel) -> tuple[Series, float]:
    """Clean the readings for the model (repeats dropped, displaced stamps moved back, equal
    stamps merged) and return them on relative time with the reading noise (1 σ, W)."""
    r = drop_repeats(readings)
    t, y = r.t_s.astype(np.float64), r.value.astype(np.float64)
    if t.size == 0:
        raise SensorError(f"{readings.source}: no readings")
    if not np.all(np.isfinite(t)) or not np.all(np.isfinite(y)):
        raise SensorError(f"{readings.source}: readings contain NaN or infinity")
    if np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, y = t[order], y[order]
    if t.size > 1 and np.any(np.diff(t) == 0):
        t, inv = np.unique(t, return_inverse=True)
        y = np.bincount(inv, weights=y) / np.bincount(inv)
    if model.undisplace:
        t = undisplace(t, find_displaced(t))
    t0 = float(t[0])
    rel = t - t0
    if model.window_s is None:
        iv = np.diff(rel)
        first = float(np.median(iv)) if iv.size else model.period_s
        win = np.concatenate([[first], iv])
    else:
        win = np.full(rel.size, float(model.window_s))
    if rel.size > 2:
        wts = np.empty(rel.size)
        wts[1:-1] = 0.5 * (rel[2:] - rel[:-2])
        wts[0] = rel[1] - rel[0]
        wts[-1] = rel[-1] - rel[-2]
    else:
        wts = np.full(rel.size, model.period_s)
    noise = model.noise_w
    if noise is None:
        noise = max(estimate_noise_w(y), estimate_quantum_w(y) / math.sqrt(12.0), 1e-6)
    return Series(t0, rel, y, win, wts), float(noise)


def _unseen_span_w(series: Series, level_w: float, noise_w: float) -> float:
    """How far (W) the power of a window no reading saw may lie from the estimate: the trace's
    range, and at least three times the estimate (a GPU's busy power reaches several times its
    idle power, and a missed kernel leaves no trace in the readings' range)."""
    lo, hi = series.range_w
    if not np.isfinite(level_w):
        return max(hi - lo, 3 * abs(hi), noise_w)
    return max(hi - level_w, level_w - lo, 3 * abs(level_w), noise_w)


def _edge_sigma_s(model: SensorModel) -> float:
    """1 σ of where an edge is seen (s): the model's, else the update period's jitter."""
    return model.edge_sigma_s if model.edge_sigma_s is not None else model.period_jitter_s


def _chunk_s(model: SensorModel) -> float:
    """Gap chunk length: longer than the span over which a reading mixes a window with the
    gap next to it, so that the readings further out pin each gap level down."""
    w = model.period_s if model.window_s is None else model.window_s
    # Bounded below by a fraction of the raw response's reach: every reading's response is
    # evaluated on every segment it reaches, and a long lag must not make that count explode.
    return max(2 * model.period_s, model.mixing_s + model.period_s, 0.5 * w, model.support_s / 40, 0.002)


def window_energies(
    readings: Readings,
    model: SensorModel,
    windows: Sequence[Region],
    *,
    groups: Sequence[str | None] | None = None,
    max_rel_uncertainty: float = DEFAULT_MAX_REL_UNCERTAINTY,
    shape_kappa: float = DEFAULT_SHAPE_KAPPA,
) -> list[WindowEnergy]:
    """Energy of every window (J) with its 1 σ, from one power series under ``model``.

    Windows may be shorter than the sensor period and may touch each other; overlapping
    windows are estimated separately. Windows with the same ``groups`` label are assumed to
    draw the same power (repetitions of one call) and share one level. Returned in the order
    given. See docs/measurement.md for the method and the terms of the uncertainty.
    """
    if not windows:
        return []
    series, noise = prepare_series(readings, model)
    starts = np.array([w.start_s for w in windows], np.float64) - series.t0_s
    ends = np.array([w.end_s for w in windows], np.float64) - series.t0_s
    if np.any(ends <= starts):
        bad = int(np.nonzero(ends <= starts)[0][0])
        raise SensorError(f"window {windows[bad].name!r} ends at or before its start")
    glabels = [str(g) if g is not None else f"\x00{i}" for i, g in enumerate(groups or [None] * len(windows))]
    chunk = _chunk_s(model)
    reach = model.support_s + (model.period_s if model.correct_lag else 0.0)
    out: list[WindowEnergy | None] = [None] * len(windows)
    plans = [
        plan_cluster(cl, starts, ends, glabels, chunk)
        for layer in layers(starts, ends)
        for cl in clusters(layer, starts, ends, glabels, 2 * (3 * chunk + reach))
    ]
    plans, sols, dparams = _solve_plans(plans, series, noise, model, reach)
    for plan, sol, dparam in zip(plans, sols, dparams, strict=True):
        for i, we in _cluster_energies(
            plan, sol, dparam, windows, starts, ends, series, noise, model, max_rel_uncertainty, shape_kappa
        ):
            out[i] = we
    raw = integrate_windows_j(series.t_s, series.y_w, starts, ends)
    res: list[WindowEnergy] = []
    for i, got in enumerate(out):
        assert got is not None
        we = got
        res.append(
            WindowEnergy(
                we.name,
                we.start_s,
                we.end_s,
                we.energy_j,
                we.energy_uncertainty_j,
                we.resolvable,
                float(raw[i]),
                we.observed_fraction,
                we.readings,
                we.note,
            )
        )
    return res


def _run(
    plans: list[ClusterPlan],
    series: Series,
    noise: float,
    model: SensorModel,
    reach: float,
    p: dict[str, float | None],
    *,
    variances: bool,
) -> list[Solution]:
    """Every plan's levels under the parameters ``p`` (delay, lag, window), solved as one batch."""
    s = series
    window_s = p["window_s"]
    if window_s is not None and model.window_s is not None:
        s = Series(series.t0_s, series.t_s, series.y_w, np.full(series.t_s.size, max(window_s, 0.0)), series.weight_s)
    none = np.empty(0, np.int64)
    return solve_many(
        s,
        [
            Cluster(q.seg_a, q.seg_b, q.seg_c, q.n_cols, np.arange(q.n_groups, dtype=np.int64) if variances else none)
            for q in plans
        ],
        delay_s=float(p["delay_s"] or 0.0),
        lag_s=max(float(p["lag_s"] or 0.0), 0.0),
        correct=model.correct_lag,
        noise_w=noise,
        reach_s=reach,
    )


def _solve_plans(
    plans: list[ClusterPlan], series: Series, noise: float, model: SensorModel, reach: float
) -> tuple[list[ClusterPlan], list[Solution], list[F64]]:
    """Every cluster's levels (weak windows folded, then solved again) and each level's variance
    from the sensor model's parameters (W², per column), each step one batch over all clusters."""
    kw: dict[str, float | None] = {"delay_s": model.delay_s, "lag_s": model.lag_s, "window_s": model.window_s}
    sols = _run(plans, series, noise, model, reach, kw, variances=True)
    plans = [fold_weak(q, sol) for q, sol in zip(plans, sols, strict=True)]
    again = [k for k, q in enumerate(plans) if q.weak.any()]
    if again:
        redone = _run([plans[k] for k in again], series, noise, model, reach, kw, variances=True)
        for k, sol in zip(again, redone, strict=True):
            sols[k] = sol
    # Parameter uncertainty: re-solve with each fitted parameter moved by its 1 σ. The edge
    # timing error moved coherently shows how much a badly conditioned cluster amplifies it.
    edge_sigma = _edge_sigma_s(model)
    dparams = [np.zeros(q.n_cols) for q in plans]
    perturb = (
        ("delay_s", model.delay_sigma_s),
        ("lag_s", model.lag_sigma_s),
        ("window_s", model.window_sigma_s),
        ("delay_s", edge_sigma),
    )
    for key, sig in perturb:
        if sig > 0 and kw[key] is not None:
            kw2 = dict(kw)
            kw2[key] = float(kw[key] or 0.0) + sig
            alts = _run(plans, series, noise, model, reach, kw2, variances=False)
            for dparam, alt, sol in zip(dparams, alts, sols, strict=True):
                dparam += np.nan_to_num(alt.levels_w - sol.levels_w) ** 2
    return plans, sols, dparams


def _edge_shape_terms(
    plan: ClusterPlan,
    sol: Solution,
    col_of: dict[int, int],
    pos_of: dict[int, int],
    starts: F64,
    ends: F64,
    series: Series,
    model: SensorModel,
    kappa: float,
) -> tuple[F64, F64, F64, dict[int, tuple[float, int]]]:
    """Per tied group: the edge and shape variances (W²·s²) and the duration (s); per window: the share the
    readings observe and how many do."""
    seg_c = plan.seg_c
    # A timing error common to every edge (where a reading looks relative to its stamp) is
    # charged coherently by the re-solve with the delay moved (_solve_plans); only the part that
    # differs edge by edge (stamp jitter) is charged to each edge on its own.
    edge_random = model.period_jitter_s if model.edge_coherent else _edge_sigma_s(model)
    edge2 = np.zeros(plan.n_groups)
    shape2 = np.zeros(plan.n_groups)
    dur = np.zeros(plan.n_groups)
    info: dict[int, tuple[float, int]] = {}
    for w in plan.cl:
        g = col_of[w]
        k = pos_of[w]
        lev = sol.levels_w[seg_c[k]]
        left = sol.levels_w[seg_c[k - 1]] if k > 0 else lev
        right = sol.levels_w[seg_c[k + 1]] if k + 1 < seg_c.size else lev
        d = ends[w] - starts[w]
        edge2[g] += (edge_random**2) * ((lev - left) ** 2 + (lev - right) ** 2)
        obs, n_read = observed(series, model, starts[w], ends[w])
        base = 0.5 * (left + right)
        if n_read < _FEW_READINGS:
            # Too few readings for their scatter (the misfit below) to show power moving in the
            # parts of the window they miss: charge those parts a share of the excess instead.
            shape2[g] += ((1 - obs) * kappa * abs(lev - base) * d) ** 2 / max(n_read, 1)
        shape2[g] += misfit_variance_j2(sol, series, model, starts[w], ends[w])
        dur[g] += d
        info[w] = (obs, n_read)
    return edge2, shape2, dur, info


def _cluster_energies(
    plan: ClusterPlan,
    sol: Solution,
    dparam: F64,
    windows: Sequence[Region],
    starts: F64,
    ends: F64,
    series: Series,
    noise: float,
    model: SensorModel,
    max_rel: float,
    kappa: float,
) -> list[tuple[int, WindowEnergy]]:
    """Every window of a solved cluster: its energy, its 1 σ (noise, misfit, parameters, edges and
    shape) and whether it is resolvable."""
    cl, cols, n_groups, seg_c, weak = plan.cl, plan.cols, plan.n_groups, plan.seg_c, plan.weak
    col_of = {w: int(c) for w, c in zip(cl, cols, strict=True)}
    # Segments are contiguous and each window is one of them, so its start finds it.
    pos_of = {w: int(k) for w, k in zip(cl, np.searchsorted(plan.seg_a, starts[cl]), strict=True)}
    edge2, shape2, dur, info = _edge_shape_terms(plan, sol, col_of, pos_of, starts, ends, series, model, kappa)
    # Short windows packed close together alias with the sampling (a train at the sensor's own
    # period is seen at one phase only): trust them only as a tied group, never one by one.
    guard = model.mixing_s + model.period_s
    tied = np.bincount(cols, minlength=n_groups) > 1
    crowded = {
        w: bool(
            ends[w] - starts[w] < 2 * model.period_s
            and not tied[col_of[w]]
            and any(o != w and starts[o] < ends[w] + guard and ends[o] > starts[w] - guard for o in cl)
        )
        for w in cl
    }
    res: list[tuple[int, WindowEnergy]] = []
    for w in cl:
        g = col_of[w]
        k = pos_of[w]
        d = ends[w] - starts[w]
        lev = float(sol.levels_w[seg_c[k]])
        seen = not weak[g]
        var_level = sol.variance_w2[g] if seen else np.inf
        # Scatter the model cannot explain propagates like extra reading noise, correlated over
        # W/P readings when each averages a window W longer than the period P.
        corr = max(1.0, (model.window_s or 0.0) / model.period_s)
        var_level *= 1.0 + corr * misfit_excess_w2(sol, series, model, starts[w], ends[w]) / max(noise, 1e-9) ** 2
        sig_level2 = var_level + dparam[g] + (edge2[g] + shape2[g]) / dur[g] ** 2
        obs, n_read = info[w]
        energy = lev * d
        if not seen or not np.isfinite(sig_level2):
            # Nothing says what the window drew: it may have been anywhere in the trace's range.
            sigma = float(_unseen_span_w(series, lev, noise) * d)
            note = "not seen by the sensor: the estimate is the power around the window"
            ok = False
        else:
            sigma = float(math.sqrt(max(sig_level2, 0.0)) * d)
            ok = bool(sigma <= max_rel * abs(energy))
            note = "" if ok else f"uncertainty above {100 * max_rel:.0f} % of the energy"
            if not model.identified and d < 2 * model.period_s:
                # The sensor may not have seen it at all (part-time).
                sigma = max(sigma, float(_unseen_span_w(series, lev, noise) * d))
                ok = False
                note = "sensor model assumed, not identified from the data: too short to trust"
            if ok and crowded[w]:
                ok = False
                note = "shorter than two sensor periods and crowded by other windows: aliases with the sampling"
            if model.coverage < 1.0 and d < model.period_s and not tied[g]:
                # What the readings missed of it may have drawn anything: half the plausible span.
                sigma = max(sigma, float(0.5 * (1.0 - obs) * _unseen_span_w(series, lev, noise) * d))
                ok = False
                note = "part-time sensor: a window shorter than its period hinges on one reading; repeat it"
        res.append(
            (
                w,
                WindowEnergy(
                    windows[w].name,
                    windows[w].start_s,
                    windows[w].end_s,
                    float(energy),
                    sigma,
                    ok,
                    observed_fraction=obs,
                    readings=n_read,
                    note=note,
                ),
            )
        )
    return res

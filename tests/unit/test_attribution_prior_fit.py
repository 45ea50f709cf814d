"""Replay priors calibrated on the run's own windows (empirical Bayes): the likelihood, and what it does to the rows."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from scipy import integrate, stats

from archline.measurement.attribute.attribution import AttributionOptions, attribute_energy
from archline.measurement.attribute.prior import KernelPrior
from archline.measurement.attribute.prior_fit import calibrate_priors
from archline.measurement.attribute.prior_marginal import RHO_GRID, GaussianMarginal, lower_bound, upper_bound
from archline.records.attribution import AttributionResult, KernelRow
from tests.helpers.attrib_sim import SimKernel, SimRun
from tests.helpers.attrib_steady import LAGGED_BUFFER, LoopSpec, steady_loop


def _k(name: str, ms: float, w: float) -> SimKernel:
    return SimKernel(name, ms * 1e-3, w)


#: A training step of 20 kernels: layers of interleaved kernels (conv, norm, activation) the windows
#: cannot split on their own, in forward, loss, backward and optimizer phases of different mixes.
KERNELS = [
    _k("c1", 0.30, 450), _k("c2", 0.25, 480), _k("c3", 0.35, 500), _k("b1", 0.08, 300), _k("b2", 0.09, 320),
    _k("relu", 0.05, 260), _k("add", 0.04, 280), _k("c1g", 0.30, 470), _k("c1w", 0.28, 430),
    _k("c2g", 0.25, 510), _k("c2w", 0.22, 440), _k("c3g", 0.35, 520), _k("c3w", 0.33, 460),
    _k("b1g", 0.10, 330), _k("b2g", 0.11, 350), _k("adam", 0.04, 210), _k("cast", 0.03, 380),
    _k("norm", 0.06, 240), _k("softmax", 0.07, 290), _k("fill", 0.02, 200),
]  # fmt: skip
NAMES = [k.name for k in KERNELS]


def _rep(names: list[str], n: int) -> list[tuple[str, int]]:
    return [(k, 1) for k in names] * n


FORWARD = [*_rep(["c1", "b1", "relu"], 12), *_rep(["c2", "b1", "relu"], 12), *_rep(["c3", "b2", "relu", "add"], 10)]
LOSS = _rep(["softmax", "fill"], 5)
BACKWARD = [
    *_rep(["c3g", "c3w", "b2g", "relu"], 10),
    *_rep(["c2g", "c2w", "b1g"], 12),
    *_rep(["c1g", "c1w", "b1g"], 12),
]
OPTIMIZER = [*_rep(["adam", "cast"], 80), ("norm", 10)]
PHASED = LoopSpec(KERNELS, [FORWARD, LOSS, BACKWARD, OPTIMIZER], steps=80)
SEEDS = range(4)
#: Replay's isolated energies run this much above the in-context ones (a common factor).
ISOLATED = 1.12


@cache
def _run(seed: int) -> SimRun:
    return steady_loop(PHASED, seed=seed)


def _priors(run: SimRun, scatter: float, seed: int) -> dict[str, KernelPrior]:
    rng = np.random.default_rng(100 + seed)
    out = {}
    for n in NAMES:
        e = run.truth_per_call_j(n)
        f = max(0.25, 1.0 + scatter * float(rng.standard_normal()))
        out[n] = KernelPrior(ISOLATED * e * f, 0.01 * e)  # replay's own σ: 1 %
    return out


def _attribute(run: SimRun, priors: dict[str, KernelPrior], **kw: object) -> AttributionResult:
    opts = AttributionOptions(buffer_model=LAGGED_BUFFER, priors=priors, **kw)  # type: ignore[arg-type]
    return attribute_energy(run.recording, run.activities, program_span=run.program_span, options=opts)


def _half(r: KernelRow) -> float:
    return max(r.energy_j - r.energy_lo_j, r.energy_hi_j - r.energy_j) / r.energy_j if r.energy_j > 0 else math.inf


def _identified_share(res: AttributionResult) -> float:
    """Kernel energy in identifiable rows with ±15 % intervals (the real-run benchmark's target)."""
    e = sum(r.energy_j for r in res.kernels)
    return sum(r.energy_j for r in res.kernels if r.identifiable and _half(r) <= 0.15) / e


def _summary(scatter: float) -> tuple[list[float], int, int, list[float], list[dict[str, float]]]:
    shares, hits, cases, halves, fits = [], 0, 0, [], []
    for seed in SEEDS:
        run = _run(seed)
        res = _attribute(run, _priors(run, scatter, seed))
        shares.append(_identified_share(res))
        for r in res.kernels:
            cases += 1
            hits += r.energy_lo_j <= run.truth_energy_j[r.name] <= r.energy_hi_j
            halves.append(_half(r))
        fits.append(res.extra["prior_fit"]["replay"])
        assert sum(r.energy_j for r in res.rows) == pytest.approx(res.total_energy_j, rel=1e-9)
    return shares, hits, cases, halves, fits


# -- the likelihood


def _problem(seed: int = 0, n: int = 14, k: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, k))
    m = rng.uniform(100.0, 300.0, k)
    v = rng.uniform(5.0, 40.0, k) ** 2
    y = x @ (m + np.sqrt(v) * rng.standard_normal(k)) + 3.0 * rng.standard_normal(n)
    return x, y, m, v, 9.0


def test_the_marginal_likelihood_matches_the_dense_gaussian():
    x, y, m, v, s2 = _problem()
    lik = GaussianMarginal.of(x, y, s2)
    for vv in (v, np.where(np.arange(v.size) == 1, 0.0, v)):  # a column with no spread at all
        dense = stats.multivariate_normal.logpdf(y, x @ m, x @ np.diag(vv) @ x.T + s2 * np.eye(y.size))
        assert lik.loglik(m, vv) == pytest.approx(dense, rel=1e-10)


def test_the_restricted_likelihood_integrates_the_scale_out_and_its_maximum_is_gls():
    x, y, m, v, s2 = _problem(1)
    lik = GaussianMarginal.of(x, y, s2)
    a = np.zeros((m.size, 1))
    a[1:, 0] = m[1:]  # three columns share one scale; the first keeps its own prior
    m0 = np.where(np.arange(m.size) == 0, m, 0.0)
    ll, s, cov = lik.restricted(m0, a, v)
    sigma = x @ np.diag(v) @ x.T + s2 * np.eye(y.size)
    si = np.linalg.inv(sigma)
    z, r0 = x @ a, y - x @ m0
    h = z.T @ si @ z
    assert s[0] == pytest.approx(float(np.linalg.solve(h, z.T @ si @ r0)[0]), rel=1e-9)
    assert cov[0, 0] == pytest.approx(1.0 / float(h[0, 0]), rel=1e-9)
    top = lik.loglik(m0 + a[:, 0] * s[0], v)
    sd = math.sqrt(cov[0, 0])
    area, _ = integrate.quad(lambda t: math.exp(lik.loglik(m0 + a[:, 0] * t, v) - top), s[0] - 12 * sd, s[0] + 12 * sd)
    assert ll == pytest.approx(top + math.log(area), abs=1e-7)


def test_the_upper_bound_walks_up_from_the_maximum_and_says_when_it_hits_the_top():
    grid = RHO_GRID
    ll = -0.5 * ((np.log(grid) - math.log(0.05)) / 0.3) ** 2  # 2Δℓ = ((ln ρ − ln 0.05)/0.3)²
    rho_hat, rho_up, top = upper_bound(ll, grid)
    assert rho_hat == pytest.approx(0.05, rel=0.06) and not top
    assert rho_up == pytest.approx(0.05 * math.exp(0.3 * math.sqrt(2.706)), rel=0.03)
    assert upper_bound(np.zeros(grid.size), grid)[1:] == (1.0, True)


def test_windows_of_one_mix_leave_the_spread_unbounded():
    rng = np.random.default_rng(3)
    k = 6
    mix = rng.uniform(0.05, 0.3, k)
    x = np.vstack([np.tile(mix, (200, 1)), np.zeros((20, k))])
    x = np.hstack([x, np.r_[np.zeros(200), np.ones(20)][:, None]])  # idle windows: one more column
    mu = np.r_[rng.uniform(200.0, 500.0, k), 120.0]
    truth = np.r_[mu[:k] * 0.9 * (1 + 0.03 * rng.standard_normal(k)), 121.0]
    y = x @ truth + rng.normal(0.0, 1.0, x.shape[0])
    src = ["replay"] * k + ["default"]
    pm, psd, fits = calibrate_priors(x, y, 1.0, mu, np.r_[0.01 * mu[:k], 60.0], src)
    (f,) = fits
    assert f.at_grid_top and f.rho_up == 1.0 and "grid's top" in f.note()
    assert np.all(psd[:k] >= pm[:k])  # priors as wide as the kernels' powers: nothing is claimed
    assert psd[k] == 60.0 and pm[k] == 120.0


# -- attribution of simulated steady loops


def test_calibrated_replay_priors_identify_the_kernels_the_windows_cannot_split():
    shares, hits, cases, halves, fits = _summary(0.03)
    for f in fits:
        assert f["columns"] == 20 and not f["at_grid_top"]
        assert abs(f["scale"] - 1 / ISOLATED) <= 2.5 * f["scale_se"] + 0.01
        assert f["rho_up"] < 0.12
    assert min(shares) >= 0.75 and np.mean(shares) >= 0.85, shares
    assert hits >= 0.9 * cases, f"{hits} of {cases} intervals held the truth"
    assert np.median(halves) < 0.15

    # Without the calibration (today's fixed 15 % floor) the same priors identify far less.
    run = _run(0)
    fixed = _attribute(run, _priors(run, 0.03, 0), prior_scale="fixed")
    assert fixed.extra["prior_fit"] == {} and _identified_share(fixed) < shares[0] - 0.3


def test_priors_the_windows_contradict_are_not_claimed():
    shares, hits, cases, halves, fits = _summary(0.40)
    for f in fits:
        assert f["rho_up"] > 0.4
    assert max(shares) < 0.5, shares
    assert hits >= 0.85 * cases, f"{hits} of {cases} intervals held the truth"
    assert np.median(halves) > 0.2


def test_a_loop_whose_windows_all_hold_one_mix_leaves_its_rows_unidentified():
    # Every kernel of fixed length and power, interleaved, one step per 20 ms sample: every window the same.
    per_step = 6 * sum(k.duration_s for k in KERNELS)
    steady = [replace(k, duration_s=k.duration_s * 0.020 / per_step, duration_cv=0.0, power_cv=0.0) for k in KERNELS]
    spec = LoopSpec(steady, [_rep(NAMES, 6)], steps=150, host_wait_s=0.0, launch_gap_s=0.0, stamp_jitter_s=0.0)
    run = steady_loop(spec, seed=0)
    priors = _priors(run, 0.03, 0)
    on_counter = _attribute(run, priors, fit_source="counter")
    f = on_counter.extra["prior_fit"]["replay"]
    assert f["at_grid_top"] and f["rho_up"] == 1.0
    assert any("cannot tell kernels with replay priors apart" in n for n in on_counter.notes)
    on_buffer = _attribute(run, priors)
    assert on_buffer.extra["prior_fit"]["replay"]["rho_up"] > 0.4  # the program's edges are its only other mixes
    for res in (on_counter, on_buffer):
        assert not any(r.identifiable for r in res.kernels)
        assert all(r.energy_lo_j <= run.truth_energy_j[r.name] <= r.energy_hi_j for r in res.kernels)


def test_the_calibration_is_reported_and_survives_json():
    run = _run(1)
    res = _attribute(run, _priors(run, 0.03, 1))
    assert any(n.startswith("replay priors (20 kernels) calibrated on the windows") for n in res.notes)
    assert res.extra["prior_scale"] == "fit"
    back = json.loads(json.dumps(res.to_json()))
    assert back["extra"]["prior_fit"]["replay"]["rho_up"] == pytest.approx(res.extra["prior_fit"]["replay"]["rho_up"])
    ident = [r for r in res.kernels if r.identifiable and r.dominated_by != "data"]
    assert ident and all("calibrated on this run's windows" in r.note for r in ident)
    # Two replay priors are too few to calibrate: they are used as given, with the old floor.
    few = {n: p for n, p in _priors(run, 0.03, 1).items() if n in ("adam", "cast")}
    res2 = _attribute(run, few)
    assert res2.extra["prior_fit"]["replay"]["calibrated"] is False
    assert any("too few to calibrate" in n for n in res2.notes)
    with pytest.raises(ValueError, match="prior_scale"):
        _attribute(run, few, prior_scale="guess")


def test_priors_the_windows_never_see_are_used_as_given():
    x = np.hstack([np.zeros((30, 3)), np.ones((30, 1))])
    mu, sd = np.array([300.0, 200.0, 100.0, 120.0]), np.array([3.0, 2.0, 1.0, 60.0])
    pm, psd, (f,) = calibrate_priors(x, np.full(30, 120.0), 1.0, mu, sd, ["replay"] * 3 + ["default"])
    assert not f.calibrated and "do not inform" in f.note()
    assert np.array_equal(pm, mu) and np.array_equal(psd, sd)


def test_each_source_gets_its_own_scale_and_spread():
    rng = np.random.default_rng(7)
    k = 16
    x = rng.uniform(0.0, 0.1, (600, k)) * (rng.uniform(0, 1, (600, k)) < 0.5)
    mu = rng.uniform(150.0, 500.0, k)
    scale = np.r_[np.full(8, 0.9), np.full(8, 1.2)]
    truth = mu * scale * (1 + 0.03 * rng.standard_normal(k))
    y = x @ truth + rng.normal(0.0, 0.5, 600)
    pm, psd, fits = calibrate_priors(x, y, 0.25, mu, 0.01 * mu, ["replay"] * 8 + ["model"] * 8)
    by = {f.source: f for f in fits}
    assert by["replay"].scale == pytest.approx(0.9, abs=3 * by["replay"].scale_se + 0.01)
    assert by["model"].scale == pytest.approx(1.2, abs=3 * by["model"].scale_se + 0.01)
    assert all(f.calibrated and f.rho_up < 0.1 for f in fits)
    assert np.all(np.abs(truth - pm) <= 2 * psd)


# -- priors whose per-kernel spread was measured where they came from (replay's randomized design)


def test_the_lower_bound_walks_down_from_the_maximum():
    grid = RHO_GRID
    ll = -0.5 * ((np.log(grid) - math.log(0.2)) / 0.3) ** 2
    assert lower_bound(ll, grid) == pytest.approx(0.2 * math.exp(-0.3 * math.sqrt(2.706)), rel=0.03)
    assert lower_bound(np.zeros(grid.size), grid) == grid[0]  # flat: nothing excluded


def _one_mix_windows(seed: int, off: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Windows that all hold one mix (plus idle ones), kernels truly ``off`` × their priors ± 3 %."""
    rng = np.random.default_rng(seed)
    k = 6
    mix = rng.uniform(0.05, 0.3, k)
    x = np.vstack([np.tile(mix, (200, 1)), np.zeros((20, k))])
    x = np.hstack([x, np.r_[np.zeros(200), np.ones(20)][:, None]])
    mu = np.r_[rng.uniform(200.0, 500.0, k), 120.0]
    truth = np.r_[mu[:k] * off * (1 + 0.03 * rng.standard_normal(k)), 121.0]
    y = x @ truth + rng.normal(0.0, 1.0, x.shape[0])
    return x, y, mu, truth, ["replay"] * k + ["default"]


def test_a_measured_spread_is_kept_where_the_windows_cannot_tell():
    # The same windows of one mix: alone they bound nothing (previous test); with replay's measured 4 %
    # (folded into each prior's σ, as priors_from_replay does) the priors keep it, scaled by what the
    # windows say of their common level.
    x, y, mu, truth, src = _one_mix_windows(3, 0.9)
    k = len(src) - 1
    ctx = np.r_[np.full(k, 0.04), np.nan]
    sd = np.r_[math.hypot(0.01, 0.04) * mu[:k], 60.0]  # replay's σ with its measured 4 % folded in
    pm, psd, fits = calibrate_priors(x, y, 1.0, mu, sd, src, context_rel_sd=ctx)
    (f,) = fits
    assert f.rho_measured == 0.04 and f.rho_used == pytest.approx(0.04) and f.at_grid_top
    assert "measured per-kernel spread" in f.note() and "cannot bound ρ from above" in f.note()
    assert "at least √2 × 4.0 % = 5.7 % (1 σ)" in f.note()  # the floor replay's fold puts on a leaning row
    assert abs(f.scale - 0.9) <= 3 * f.scale_se + 0.01
    rel = psd[:k] / pm[:k]
    assert np.all(rel < 0.08) and np.all(rel > 0.04)
    # The truth lies within 2.5 σ of every prior the fit would use.
    assert np.all(np.abs(truth[:k] - pm[:k]) <= 2.5 * psd[:k])


def test_windows_that_contradict_a_measured_spread_widen_it():
    # Phased windows with priors 40 % off but claiming a 3 % spread: the windows' lower bound on ρ exceeds
    # 3 %, so the measurement is refuted and the windows' own upper bound is used; the note says so.
    run = _run(0)
    priors = {
        n: replace(p, sd_j=0.03 * p.energy_per_call_j, context_rel_sd=0.03) for n, p in _priors(run, 0.40, 0).items()
    }
    res = _attribute(run, priors)
    f = res.extra["prior_fit"]["replay"]
    assert f["rho_measured"] == 0.03 and f["rho_low"] > 0.1 and f["refuted"] and f["rho_used"] == f["rho_up"]
    assert any("contradict the measured spread" in n for n in res.notes)
    hits = sum(r.energy_lo_j <= run.truth_energy_j[r.name] <= r.energy_hi_j for r in res.kernels)
    assert hits >= 0.85 * len(res.kernels)


def test_a_prior_measured_at_another_call_time_is_widened():
    run = _run(1)
    base = _priors(run, 0.0, 1)
    measured = {n: replace(p, sd_j=0.02 * p.energy_per_call_j, context_rel_sd=0.02) for n, p in base.items()}
    res0 = _attribute(run, measured)
    slow = {n: replace(p, time_per_call_s=run.mean_call_s(n) * 1.25) for n, p in measured.items()}
    res1 = _attribute(run, slow)
    h0 = np.median([_half(r) for r in res0.kernels])
    h1 = np.median([_half(r) for r in res1.kernels])
    assert h1 > h0 * 1.5, (h0, h1)  # |ln 1.25| = 22 % more spread on every prior


def test_a_row_that_leans_on_its_prior_says_what_the_priors_sigma_is_made_of():
    """Each prior-led row's note gives its prior's 1 σ and the parts it is made of, largest first, which add up to it
    in quadrature (here the priors carry no measured spread, so the windows' upper bound on it is used)."""
    import re

    run = _run(0)
    res = _attribute(run, _priors(run, 0.03, 0))
    led = [r for r in res.kernels if r.dominated_by != "data"]
    assert led
    for r in led:
        m = re.search(r"its replay prior's 1 σ: ([\d.]+) % \(([^)]*), in quadrature\)", r.note)
        assert m is not None, r.note
        parts = [float(v) for v in re.findall(r"([\d.]+) %", m.group(2))]
        # replay's own σ, 1 % of the true energy, is 0.8-1.0 % of the prior's mean (isolated, scattered by 3 %)
        assert parts == sorted(parts, reverse=True) and re.search(r"replay's σ (0\.[89]|1\.0) %", m.group(2))
        assert "the spread the windows add" in m.group(2) and "in-step" not in m.group(2)
        assert float(m.group(1)) == pytest.approx(float(np.sqrt(np.sum(np.square(parts)))), abs=0.15)
    assert not any("its replay prior's 1 σ" in r.note for r in res.kernels if r.dominated_by == "data")


def test_priors_taken_as_given_name_replays_floor_in_their_breakdown():
    """prior_scale="fixed": replay priors without a measured spread are floored at 15 % of their mean, and the note's
    parts (replay's own σ and the floor) still add up to the prior's σ."""
    import re

    run = _run(0)
    res = _attribute(run, _priors(run, 0.03, 0), prior_scale="fixed")
    led = [r for r in res.kernels if r.dominated_by != "data"]
    assert led
    for r in led:
        m = re.search(r"its replay prior's 1 σ: ([\d.]+) % \(([^)]*), in quadrature\)", r.note)
        assert m is not None, r.note
        assert float(m.group(1)) == pytest.approx(15.0, abs=0.05) and "the floor of a prior taken as given" in r.note
        parts = [float(v) for v in re.findall(r"([\d.]+) %", m.group(2))]
        assert float(m.group(1)) == pytest.approx(float(np.sqrt(np.sum(np.square(parts)))), abs=0.15)


def test_the_prior_parts_note_names_a_design_and_what_narrows_it():
    from archline.measurement.attribute.column_fit import PriorParts

    p = PriorParts(measured=0.048, time=0.079, spread=0.0, scale=0.027, total=0.096, in_step=True)
    assert p.note("replay") == (
        "its replay prior's 1 σ: 9.6 % (its time per call here against replay's 7.9 %, replay's in-step σ 4.8 %, the "
        "priors' scale 2.7 %, in quadrature; a longer replay design narrows part of the in-step σ)"
    )
    q = PriorParts(measured=0.1, time=0.0, spread=0.0, scale=0.0, total=0.1, in_step=False)
    assert q.note("model") == "its model prior's 1 σ: 10.0 % (model's σ 10.0 %, in quadrature)"
    # with the part of the in-step σ that is the design's neighbour dependence: what a longer design would narrow
    n = PriorParts(measured=0.063, time=0.009, spread=0.0, scale=0.026, total=0.069, in_step=True, neighbour=0.059)
    assert n.note("replay") == (
        "its replay prior's 1 σ: 6.9 % (replay's in-step σ 6.3 %, the priors' scale 2.6 %, its time per call here "
        "against replay's 0.9 %, in quadrature; of replay's in-step σ, 5.9 % is the neighbour dependence, which a "
        "longer design narrows only as far as ρ's own uncertainty goes, and 2.2 % the design's own noise, which it "
        "narrows)"
    )


def test_time_common_is_the_energy_weighted_median_of_at_least_five():
    from archline.measurement.attribute.buffer_fit import MIN_COMMON, time_common

    assert MIN_COMMON == 5
    assert time_common([0.1, -0.2, 0.0, 0.05, 0.3], [1, 1, 1, 1, 1]) == pytest.approx(0.05)
    assert time_common([0.1, -0.2, 0.0, 0.05, 0.3], [1, 10, 1, 1, 1]) == pytest.approx(-0.2)
    assert math.isnan(time_common([0.1, 0.2, 0.3, 0.4], [1, 1, 1, 1]))
    assert math.isnan(time_common([0.1, 0.2, 0.3, 0.4, 0.5], [0, 0, 0, 0, 0]))


def test_a_shift_every_cupti_timed_prior_shares_does_not_widen_them_but_a_kernels_own_does():
    """Priors timed as the program's calls are (CUPTI, time_source busy) whose times are all 25 % longer than here:
    the common shift is taken out, so they stay as narrow as at the right time and the note names the shift; the
    same shift on priors timed by the replays' wall time (time_source step) widens each by |ln 1.25|. A kernel 10 %
    slower than the others beyond the shift keeps that 10 % in its breakdown."""
    import re

    run = _run(1)
    base = _priors(run, 0.0, 1)
    measured = {n: replace(p, sd_j=0.02 * p.energy_per_call_j, context_rel_sd=0.02) for n, p in base.items()}
    res0 = _attribute(run, {n: replace(p, time_per_call_s=run.mean_call_s(n), time_source="busy")
                            for n, p in measured.items()})  # fmt: skip
    busy = {n: replace(p, time_per_call_s=run.mean_call_s(n) * 1.25, time_source="busy") for n, p in measured.items()}
    res1 = _attribute(run, busy)
    step = {n: replace(p, time_source="step") for n, p in busy.items()}
    res2 = _attribute(run, step)
    h0, h1, h2 = (np.median([_half(r) for r in res.kernels]) for res in (res0, res1, res2))
    assert h1 == pytest.approx(h0, rel=0.02) and h2 > 1.5 * h1, (h0, h1, h2)
    assert res1.extra["prior_time_common"] == pytest.approx(-math.log(1.25), abs=1e-6)
    assert any("calls here run -20.0 % against replay's" in n for n in res1.notes)
    assert res0.extra["prior_time_common"] == pytest.approx(0.0, abs=1e-9) and res2.extra["prior_time_common"] is None
    odd = next(r.name for r in res1.kernels if r.dominated_by == "prior")  # a row its prior sets
    busy[odd] = replace(busy[odd], time_per_call_s=busy[odd].time_per_call_s * 1.1)
    res3 = _attribute(run, busy)
    row = next(r for r in res3.kernels if r.name == odd)
    m = re.search(r"its time per call here against replay's beyond the calls' common -20\.0 % ([\d.]+) %", row.note)
    assert m is not None and float(m.group(1)) == pytest.approx(100 * math.log(1.1), abs=0.1), row.note
    others = [r for r in res3.kernels if r.name != odd and "prior's 1 σ" in r.note]
    assert others
    for r in others:  # the others' own time part is nothing (a part of 0 is not named) or under 0.1 %
        m = re.search(r"beyond the calls' common -20\.0 % ([\d.]+) %", r.note)
        assert m is None or float(m.group(1)) < 0.1, r.note


def test_the_common_shift_is_taken_out_only_where_the_priors_scale_is_calibrated_and_not_from_a_capped_prior():
    """Review of session 20: with prior_scale "fixed" nothing takes a shift every prior shares, so CUPTI-timed priors
    keep their whole |ln ratio| (as wide as the same priors timed by wall time) and no note claims otherwise; a
    prior capped at its bound (left out of the calibration) keeps its unshifted width and stays out of the median."""
    run = _run(1)
    base = _priors(run, 0.0, 1)
    measured = {n: replace(p, sd_j=0.02 * p.energy_per_call_j, context_rel_sd=0.02) for n, p in base.items()}
    busy = {n: replace(p, time_per_call_s=run.mean_call_s(n) * 1.25, time_source="busy") for n, p in measured.items()}
    step = {n: replace(p, time_source="step") for n, p in busy.items()}
    fixed_busy, fixed_step = (_attribute(run, pr, prior_scale="fixed") for pr in (busy, step))
    assert fixed_busy.extra["prior_time_common"] is None
    assert not any("calls here run" in n for n in fixed_busy.notes)
    for a, b in zip(fixed_busy.kernels, fixed_step.kernels, strict=True):
        assert a.name == b.name and _half(a) == pytest.approx(_half(b), rel=1e-9)
    # a prior 40 times its kernel's energy draws more than its bound (the 600 W limit × 1.05): capped; no other is
    hot = max(NAMES, key=lambda n: run.truth_per_call_j(n) / run.mean_call_s(n))
    capped_busy = dict(busy)
    capped_busy[hot] = replace(busy[hot], energy_per_call_j=40 * busy[hot].energy_per_call_j,
                               time_per_call_s=run.mean_call_s(hot) * 0.5)  # fmt: skip
    capped_step = dict(capped_busy)
    capped_step[hot] = replace(capped_busy[hot], time_source="step")
    res_b, res_s = (_attribute(run, pr, power_limit_w=600.0) for pr in (capped_busy, capped_step))
    assert list(res_b.extra["capped_priors_w"]) == [hot] == list(res_s.extra["capped_priors_w"])
    assert res_b.extra["prior_time_common"] == pytest.approx(-math.log(1.25), abs=1e-6)  # the others' shift only
    row_b, row_s = (next(r for r in res.kernels if r.name == hot) for res in (res_b, res_s))
    assert _half(row_b) == pytest.approx(_half(row_s), rel=1e-6)


def test_time_common_drops_priors_without_a_finite_ratio_or_a_positive_weight():
    from archline.measurement.attribute.buffer_fit import time_common

    r = [0.1, -0.2, 0.0, 0.05, 0.3, 9.0, math.nan]
    assert time_common(r, [1, 1, 1, 1, 1, 0, 1]) == pytest.approx(0.05)  # the zero weight and the NaN ratio drop out
    assert time_common(r, [1, 1, 1, 1, 1, math.inf, 1]) == pytest.approx(0.05)
    assert math.isnan(time_common([0.1, 0.2, 0.3, 0.4, 9.0], [1, 1, 1, 1, 0]))  # four left: too few


def test_parts_carry_each_columns_neighbour_part_and_never_more_than_its_measured_sigma():
    """column_fit._parts takes each column's fold part (prior_context_spread(..., fold=True), by position) into
    PriorParts.neighbour, at most the prior's measured σ; a column without one keeps NaN and the old hint."""
    from archline.measurement.attribute.column_fit import _parts

    raw = np.array([[0.063, 0.009], [0.05, 0.0], [0.04, 0.01]])
    ctx = np.array([0.04, 0.04, math.nan])
    pm = np.array([800.0, 400.0, 300.0])
    psd = pm * np.hypot(raw[:, 0], raw[:, 1])
    fold = np.array([0.059, 0.07, math.nan])  # the second above its measured σ (numerically): capped at it
    got = _parts(raw, ctx, pm, psd, ["replay"] * 3, [], [], np.array([3, 5, 8]), fold=fold)
    assert got[3].neighbour == pytest.approx(0.059) and got[5].neighbour == pytest.approx(0.05)
    assert math.isnan(got[8].neighbour)
    a, b = got[3].note("replay"), got[5].note("replay")
    assert "5.9 % is the neighbour dependence" in a and "2.2 % the design's own noise" in a
    assert "5.0 % is the neighbour dependence" in b and "0.0 % the design's own noise" in b
    assert got[8].note("replay").endswith("in quadrature)")

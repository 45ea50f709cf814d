"""The fit of eq. (9) recovers a synthetic GPU's parameters, with honest intervals and a sensible R²."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from archline.errors import InputError
from archline.model.fit import fit_energy
from archline.model.time_costs import measure_time_costs
from tests.helpers.roofline_synth import H100_LIKE, SyntheticGPU, sweep_intensities

TRUE = {
    "eps_s_j": H100_LIKE.eps_flop_j["single"],
    "eps_mem_j_per_b": H100_LIKE.eps_mem_j_per_b,
    "pi0_w": H100_LIKE.pi0_w,
    "delta_d_j": H100_LIKE.eps_flop_j["double"] - H100_LIKE.eps_flop_j["single"],
}


def test_fit_recovers_parameters_within_their_intervals() -> None:
    fit = fit_energy(H100_LIKE.sweep(np.random.default_rng(11)))
    assert fit.names == ("eps_s_j", "eps_mem_j_per_b", "pi0_w", "delta_d_j")
    assert fit.weighting == "uncertainty"
    assert fit.dof == 24 - 4
    for name, truth in TRUE.items():
        est = fit.estimates[name]
        assert est.contains(truth), (name, est, truth)
        assert est.ci_low < est.value < est.ci_high


def test_noise_free_fit_is_exact() -> None:
    gpu = dataclasses.replace(H100_LIKE, energy_rel_sigma=1e-9, time_cv=0.0)
    fit = fit_energy(gpu.sweep(np.random.default_rng(0)))
    for name, truth in TRUE.items():
        assert fit.value(name) == pytest.approx(truth, rel=1e-5)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)


def test_intervals_have_roughly_nominal_coverage() -> None:
    n_seeds = 300
    hits = dict.fromkeys(TRUE, 0)
    for seed in range(n_seeds):
        fit = fit_energy(H100_LIKE.sweep(np.random.default_rng(1000 + seed)))
        for name, truth in TRUE.items():
            hits[name] += fit.estimates[name].contains(truth)
    for name, h in hits.items():
        # 95 % nominal; binomial sd over 300 seeds is 1.3 %, so this band is about ±4σ.
        assert 0.89 <= h / n_seeds <= 0.995, (name, h / n_seeds)


def test_r2_falls_as_noise_grows() -> None:
    r2 = []
    for rel in (0.002, 0.02, 0.2):
        gpu = dataclasses.replace(H100_LIKE, energy_rel_sigma=rel)
        r2.append(np.mean([fit_energy(gpu.sweep(np.random.default_rng(s))).r2 for s in range(5)]))
    assert r2[0] > 0.9999
    assert r2[0] > r2[1] > r2[2]
    assert r2[2] < 0.99


def test_ordinary_least_squares_when_no_uncertainty() -> None:
    rows = [
        dataclasses.replace(r, energy_uncertainty_j=float("nan")) for r in H100_LIKE.sweep(np.random.default_rng(5))
    ]
    fit = fit_energy(rows)
    assert fit.weighting == "none"
    assert fit.value("eps_mem_j_per_b") == pytest.approx(TRUE["eps_mem_j_per_b"], rel=0.15)
    with pytest.raises(InputError, match="energy_uncertainty_j"):
        fit_energy(rows, weighting="uncertainty")


def test_single_precision_only_fits_three_coefficients() -> None:
    fit = fit_energy(H100_LIKE.sweep(np.random.default_rng(3), precisions=("single",)))
    assert fit.names == ("eps_s_j", "eps_mem_j_per_b", "pi0_w")
    assert fit.value("delta_d_j") == 0.0
    assert fit.estimates["eps_s_j"].contains(TRUE["eps_s_j"])


def test_a_sweep_that_never_leaves_the_compute_bound_end_is_refused() -> None:
    # Without memory-bound points T/W is constant per precision: π0 cannot be told from ε_s and Δ_d.
    gpu = dataclasses.replace(H100_LIKE, time_cv=0.0, overlap_k=math.inf)
    rows = gpu.sweep(np.random.default_rng(1), intensities=[256.0, 512.0, 1024.0, 2048.0])
    with pytest.raises(InputError, match="not identifiable"):
        fit_energy(rows)


def test_too_few_rows_is_refused() -> None:
    rows = H100_LIKE.sweep(np.random.default_rng(1), intensities=[0.25, 512.0], precisions=("single",))
    with pytest.raises(InputError, match="cannot fit"):
        fit_energy(rows)


def test_time_costs_come_from_the_sweep_ends() -> None:
    gpu = dataclasses.replace(H100_LIKE, tau_mem_s_per_b=1 / 2.6e12)  # slower than the "peaks" say
    rows = gpu.sweep(np.random.default_rng(2), intensities=sweep_intensities(per_octave=2))
    tc = measure_time_costs(rows, H100_LIKE.peaks())
    assert tc.tau_mem_s_per_b.contains(gpu.tau_mem_s_per_b)
    assert tc.bandwidth_fraction == pytest.approx(2.6 / 3.0, rel=0.02)
    for p in ("single", "double"):
        assert tc.tau_flop_s[p].contains(gpu.tau_flop_s[p])
        assert tc.compute_bound_rows[p] >= 2
    assert tc.notes == ()


def test_time_costs_fall_back_to_extreme_rows_with_a_note() -> None:
    rows = SyntheticGPU().sweep(np.random.default_rng(2), intensities=[1.0, 2.0, 8.0, 64.0], precisions=("single",))
    tc = measure_time_costs(rows, H100_LIKE.peaks())
    assert tc.memory_bound_rows == 2
    assert any("τ_mem taken from the 2 lowest-intensity rows" in n for n in tc.notes)

"""The cap-aware model: power never exceeds the cap, time stretches to match, and it explains a capped GPU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from archline.model.build import build_model
from archline.model.capped import capped_arch_line, capped_power_line_w, capped_roofline, capped_time_s, compare_capped
from archline.model.energy_roofline import RooflineParams, energy_j, power_line_w, time_s
from tests.helpers.roofline_synth import H100_LIKE

P = RooflineParams(
    tau_flop_s=1 / 60e12, tau_mem_s_per_b=1 / 3e12, eps_flop_j=8e-12, eps_mem_j_per_b=150e-12, pi0_w=150.0
)
CAP_W = 700.0


def test_capped_time_makes_average_power_equal_the_cap() -> None:
    w, q = 20.0 * 1e9, 1e9  # I = 20 ≈ B_τ, where the uncapped power is ~1100 W
    t = capped_time_s(w, q, P, CAP_W)
    assert t > time_s(w, q, P)
    assert energy_j(w, q, t, P) / t == pytest.approx(CAP_W)
    # By hand: T = (W·ε_flop + Q·ε_mem)/(P_cap − π0) = (0.16 + 0.15)/550 s.
    assert t == pytest.approx((w * 8e-12 + q * 150e-12) / 550.0)


def test_cap_does_not_bind_where_power_is_below_it() -> None:
    for i in (0.25, 512.0):
        w, q = i * 1e9, 1e9
        assert power_line_w(i, P) < CAP_W
        assert capped_time_s(w, q, P, CAP_W) == time_s(w, q, P)


def test_capped_curves() -> None:
    i = np.geomspace(0.1, 1000, 200)
    assert np.all(capped_power_line_w(i, P, CAP_W) <= CAP_W + 1e-9)
    assert np.all(capped_roofline(i, P, CAP_W) <= 1.0)
    assert np.all(capped_arch_line(i, P, CAP_W) > 0)
    near = capped_power_line_w(P.b_tau, P, CAP_W)
    assert near == pytest.approx(CAP_W)
    # A cap above the peak power changes nothing.
    np.testing.assert_allclose(capped_roofline(i, P, 1e6), np.minimum(1, i / P.b_tau))


def test_cap_at_or_below_constant_power_gives_infinite_time() -> None:
    assert capped_time_s(1e9, 1e9, P, 100.0) == float("inf")


def test_capped_model_explains_a_capped_gpu_better() -> None:
    rows = H100_LIKE.sweep(np.random.default_rng(21))
    params = {p: H100_LIKE.params(p) for p in ("single", "double")}
    cmp_ = compare_capped(rows, params, H100_LIKE.power_limit_w)
    assert cmp_.capped_better is True
    assert cmp_.capped_rows > 0
    assert cmp_.rms_time_capped < 0.05 < cmp_.rms_time_uncapped
    assert cmp_.rms_power_capped < 0.05 < cmp_.rms_power_uncapped
    for r in cmp_.rows:
        assert H100_LIKE.params(r.precision).b_tau / 4 <= r.intensity <= H100_LIKE.params(r.precision).b_tau * 4
        assert r.power_capped_w <= H100_LIKE.power_limit_w + 1e-6


def test_uncapped_gpu_shows_no_difference() -> None:
    gpu = dataclasses.replace(H100_LIKE, power_limit_w=5000.0)
    rows = gpu.sweep(np.random.default_rng(22))
    cmp_ = compare_capped(rows, {p: gpu.params(p) for p in ("single", "double")}, gpu.power_limit_w)
    assert cmp_.capped_rows == 0
    assert cmp_.rms_time_capped == pytest.approx(cmp_.rms_time_uncapped)


def test_no_rows_near_b_tau() -> None:
    rows = H100_LIKE.sweep(np.random.default_rng(1), intensities=[0.25, 0.5, 512.0, 1024.0])
    cmp_ = compare_capped(rows, {p: H100_LIKE.params(p) for p in ("single", "double")}, 700.0)
    assert cmp_.rows == ()
    assert cmp_.capped_better is None


def test_full_model_on_capped_gpu_recovers_parameters_and_prefers_the_cap() -> None:
    gpu = H100_LIKE
    model = build_model(gpu.sweep(np.random.default_rng(23)), gpu.peaks())
    assert model.capped.capped_better is True
    assert model.fit.estimates["pi0_w"].contains(gpu.pi0_w)
    assert model.balances["single"].b_tau == pytest.approx(gpu.params("single").b_tau, rel=0.03)
    assert model.balances["single"].max_power_w > gpu.power_limit_w  # why the cap binds near B_τ


def test_nonsense_fit_is_flagged_in_the_notes() -> None:
    # Rows whose energy falls as flops grow: the fitted ε_s is negative and the model says so.
    gpu = dataclasses.replace(H100_LIKE, eps_flop_j={"single": -1e-12, "double": 1e-12}, energy_rel_sigma=1e-4)
    model = build_model(gpu.sweep(np.random.default_rng(24)), gpu.peaks())
    assert model.fit.value("eps_s_j") < 0
    assert any("eps_s_j" in n and "not positive" in n for n in model.notes)
    assert not any("pi0_w" in n for n in model.notes)

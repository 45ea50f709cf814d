"""Derived balances against hand-computed values, the paper's race-to-halt argument, and the verdict."""

from __future__ import annotations

import pytest

from archline.model.balance import balances_from_params, race_to_halt
from archline.model.energy_roofline import RooflineParams
from archline.model.reference import GTX_580, I7_950


def test_gtx_580_single_by_hand() -> None:
    b = balances_from_params("single", GTX_580.params("single"))
    tau_flop = 1 / 1581.06e9
    eps0 = 122.0 * tau_flop  # 77.16 pJ
    assert b.tau_flop_s == pytest.approx(tau_flop)
    assert b.b_tau == pytest.approx(1581.06 / 192.4)  # 8.218 flop/B
    assert b.b_eps == pytest.approx(513 / 99.7)  # 5.145 flop/B
    assert b.eps0_j == pytest.approx(eps0)
    assert b.eps0_j == pytest.approx(77.16e-12, rel=1e-3)
    assert b.eta_flop == pytest.approx(99.7e-12 / (99.7e-12 + eps0))
    assert b.pi_flop_w == pytest.approx(99.7e-12 * 1581.06e9)
    assert b.balance_gap == pytest.approx((513 / 99.7) / (1581.06 / 192.4))
    # η·B_ε = 2.90 < B_τ, so I* = (η·B_ε + (1−η)·B_τ)/(2−η).
    eta = b.eta_flop
    i_star = (eta * b.b_eps + (1 - eta) * b.b_tau) / (2 - eta)
    assert b.b_eps_hat_point == pytest.approx(i_star)
    assert b.effective_gap == pytest.approx(i_star / b.b_tau)
    assert b.race_to_halt


def test_paper_fig_4_gpu_double_gap_is_reversed_only_without_constant_power() -> None:
    # Fig. 4 caption: the GPU double-precision case has B_ε > B_τ, yet the effective B̂_ε is below B_τ.
    b = balances_from_params("double", GTX_580.params("double"))
    assert b.b_eps > b.b_tau
    assert b.b_eps_hat_point < b.b_tau
    assert b.race_to_halt
    no_const = GTX_580.params("double")
    b0 = balances_from_params(
        "double",
        RooflineParams(
            no_const.tau_flop_s, no_const.tau_mem_s_per_b, no_const.eps_flop_j, no_const.eps_mem_j_per_b, 0.0
        ),
    )
    assert not b0.race_to_halt  # "were π0 → 0, the situation could reverse"


def test_paper_i7_gap_is_not_reversed_even_without_constant_power() -> None:
    # §V-B: "for the Intel platform, even having π0 = 0 does not invert the balance gap".
    for prec in ("single", "double"):
        p = I7_950.params(prec)
        b0 = balances_from_params(
            prec, RooflineParams(p.tau_flop_s, p.tau_mem_s_per_b, p.eps_flop_j, p.eps_mem_j_per_b, 0)
        )
        assert b0.b_eps < b0.b_tau


def test_verdict_compares_with_the_reference() -> None:
    gpu = RooflineParams(1 / 60e12, 1 / 3e12, 8e-12, 150e-12, 150.0)
    energy_hungry = RooflineParams(1 / 60e12, 1 / 3e12, 1e-12, 150e-12, 0.0)  # B_ε = 150 ≫ B_τ = 20
    ref = {"single": balances_from_params("single", GTX_580.params("single"))}
    ok = race_to_halt({"single": balances_from_params("single", gpu)}, ref, "GTX 580")
    bad = race_to_halt({"single": balances_from_params("single", energy_hungry)}, ref, "GTX 580")
    assert ok.holds == {"single": True}
    assert bad.holds == {"single": False}
    assert "does not hold" in bad.verdict["single"]
    assert "GTX 580" in ok.verdict["single"]
    assert ok.reference_effective_gap["single"] == pytest.approx(ref["single"].effective_gap)
    assert "larger than the GTX 580" in bad.verdict["single"]

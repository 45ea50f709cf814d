"""The energy-roofline equations against hand-computed values and the paper's own figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from archline.model.energy_roofline import (
    RooflineParams,
    arch_line,
    effective_energy_balance,
    effective_energy_balance_point,
    energy_j,
    power_line_w,
    roofline,
    time_s,
)
from archline.model.reference import FERMI_TABLE_II

P = RooflineParams(tau_flop_s=1e-12, tau_mem_s_per_b=8e-12, eps_flop_j=10e-12, eps_mem_j_per_b=200e-12, pi0_w=50.0)


def test_time_is_the_max_of_flop_and_memory_time() -> None:
    assert time_s(1e12, 1e10, P) == pytest.approx(1.0)  # W·τ_flop = 1 s > Q·τ_mem = 0.08 s
    assert time_s(1e9, 1e12, P) == pytest.approx(8.0)  # memory-bound
    assert time_s(1e12, 1e10, P, overlap="none") == pytest.approx(1.08)


def test_energy_is_flops_plus_bytes_plus_constant_power() -> None:
    # 1e12·10 pJ + 1e10·200 pJ + 50 W·2 s = 10 + 2 + 100 J
    assert energy_j(1e12, 1e10, 2.0, P) == pytest.approx(112.0)


def test_vectorised_inputs_give_arrays() -> None:
    out = time_s(np.array([1e12, 1e9]), np.array([1e10, 1e12]), P)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, [1.0, 8.0])


def test_table_ii_balances() -> None:
    # Table II: B_τ ≈ 6.9/1.9 ≈ 3.6 flop/B, B_ε = 360/25 = 14.4 flop/B.
    assert FERMI_TABLE_II.b_tau == pytest.approx(515 / 144, rel=1e-12)
    assert FERMI_TABLE_II.b_tau == pytest.approx(3.6, abs=0.05)
    assert FERMI_TABLE_II.b_eps == pytest.approx(14.4)


def test_fig_2b_power_line_levels() -> None:
    # Fig. 2b (π0 = 0), normalised to π_flop: memory-bound limit B_ε/B_τ ≈ 4.0, peak 1 + B_ε/B_τ ≈ 5.0, →1 at high I.
    p = FERMI_TABLE_II

    def rel(i: float) -> float:
        return float(power_line_w(i, p)) / p.pi_flop_w

    assert rel(1e-6) == pytest.approx(p.b_eps / p.b_tau, rel=1e-5)
    assert rel(1e-6) == pytest.approx(4.0, abs=0.05)
    assert rel(p.b_tau) == pytest.approx(1 + p.b_eps / p.b_tau)
    assert rel(p.b_tau) == pytest.approx(5.0, abs=0.05)
    assert rel(1e9) == pytest.approx(1.0, rel=1e-6)
    assert p.max_power_w == pytest.approx(power_line_w(p.b_tau, p))


def test_power_line_matches_eq_7_written_out() -> None:
    i = np.geomspace(0.05, 500, 57)
    eta, b_tau = P.eta_flop, P.b_tau
    b_hat = eta * P.b_eps + (1 - eta) * np.maximum(0.0, b_tau - i)
    eq7 = P.pi_flop_w / eta * (np.minimum(i, b_tau) / b_tau + b_hat / np.maximum(i, b_tau))
    np.testing.assert_allclose(power_line_w(i, P), eq7, rtol=1e-12)


def test_eq_5_equals_eq_4() -> None:
    # E = W·ε̂_flop·(1 + B̂_ε(I)/I) must equal W·ε_flop + Q·ε_mem + π0·T for every intensity.
    q = 1e9
    for i in (0.1, 1.0, P.b_tau, 30.0, 1000.0):
        w = i * q
        e4 = energy_j(w, q, time_s(w, q, P), P)
        e5 = w * P.eps_hat_flop_j * (1 + effective_energy_balance(i, P) / i)
        assert e5 == pytest.approx(e4, rel=1e-12)


def test_arch_line_is_half_at_the_effective_balance_point() -> None:
    for p in (P, FERMI_TABLE_II, RooflineParams(1e-12, 2e-12, 5e-12, 400e-12, 10.0)):
        i_star = effective_energy_balance_point(p)
        assert effective_energy_balance(i_star, p) == pytest.approx(i_star)
        assert arch_line(i_star, p) == pytest.approx(0.5)


def test_arch_line_with_no_constant_power_uses_b_eps() -> None:
    # π0 = 0: η = 1 and B̂_ε = B_ε everywhere (§II-C).
    p = FERMI_TABLE_II
    assert p.eta_flop == 1.0
    assert effective_energy_balance_point(p) == pytest.approx(p.b_eps)
    assert arch_line(p.b_eps, p) == pytest.approx(0.5)


def test_roofline_shape() -> None:
    assert roofline(P.b_tau / 4, P) == pytest.approx(0.25)
    assert roofline(P.b_tau * 4, P) == 1.0
    assert math.isclose(float(roofline(P.b_tau, P)), 1.0)

"""Repeated readings, displaced timestamps, integration with real timestamps, Burtscher's correction."""

from __future__ import annotations

import numpy as np
import pytest

from archline.core.readings import Readings
from archline.errors import SensorError
from archline.hw.simulated import SimulatedSensor, simulate_polled, simulate_power
from archline.measurement.clean import (
    drop_repeats,
    estimate_noise_w,
    find_displaced,
    repeat_fraction,
    undisplace,
    update_period,
)
from archline.measurement.integrate import cumulative_j, integrate_j, integrate_windows_j
from archline.measurement.lagged import correct_lag, correction_matrix, fit_lag_step
from tests.helpers.signals import T0_S, kernels, step


def _r(t: list[float], v: list[float]) -> Readings:
    return Readings("s", "power", np.array(t), np.array(v))


def test_drop_repeats_keeps_first_of_each_run_within_4_ms() -> None:
    r = _r([0.0, 0.001, 0.002, 0.010, 0.0105, 0.020], [5.0, 5.0, 5.0, 5.0, 6.0, 6.0])
    out = drop_repeats(r)
    # 0.001 and 0.002 repeat within 4 ms; 0.010 is 8 ms after its predecessor: new data.
    assert out.t_s.tolist() == [0.0, 0.010, 0.0105, 0.020]
    assert out.value.tolist() == [5.0, 5.0, 6.0, 6.0]


def test_polled_k20_after_dropping_repeats_recovers_the_update_rate() -> None:
    sc = kernels([(0.0, 1.0)])
    polled = simulate_polled(sc.signal, SimulatedSensor.k20(noise_w=0.5), poll_interval_s=0.001, seed=2)
    clean = drop_repeats(polled)
    period, _ = update_period(clean.t_s)
    assert period == pytest.approx(0.015, abs=0.0011)
    assert repeat_fraction(clean.value) < 0.1 < repeat_fraction(polled.value)


def test_displaced_stamps_are_moved_back_to_their_empty_slot() -> None:
    t = T0_S + 0.02 * np.arange(200, dtype=np.float64)
    late = np.arange(5, 195, 7)
    t_obs = t.copy()
    t_obs[late] += 0.01  # stamped 10 ms late: intervals read 30 ms then 10 ms
    disp = find_displaced(t_obs)
    assert sorted(disp.index.tolist()) == late.tolist()
    assert disp.typical_shift_s == pytest.approx(0.01, abs=1e-6)
    assert np.allclose(undisplace(t_obs, disp), t, atol=1e-6)
    assert find_displaced(t).count == 0


def test_noise_estimate_ignores_steps() -> None:
    rng = np.random.default_rng(0)
    y = np.where(np.arange(5000) % 500 < 250, 100.0, 300.0) + rng.normal(0, 0.7, 5000)
    assert estimate_noise_w(y) == pytest.approx(0.7, rel=0.1)


def test_integration_uses_real_timestamps_not_equal_intervals() -> None:
    # Burtscher §4.3: irregular intervals; equal-interval averaging would give 2/3·(100+400)+...
    t = np.array([0.0, 0.1, 0.11, 0.12, 1.0])
    p = np.array([100.0, 100.0, 400.0, 100.0, 100.0])
    exact_linear = 100 * 1.0 + 0.5 * 300 * 0.02
    assert integrate_j(t, p, 0.0, 1.0) == pytest.approx(exact_linear)
    assert np.mean(p) * 1.0 != pytest.approx(exact_linear)
    # Hold-back: each reading covers the interval before it.
    assert integrate_j(t, p, 0.0, 1.0, "hold-back") == pytest.approx(100 * 0.1 + 400 * 0.01 + 100 * 0.01 + 100 * 0.88)
    # Partial windows interpolate inside the intervals.
    assert integrate_j(t, p, 0.105, 0.11) == pytest.approx(0.005 * (250 + 400) / 2)


def test_many_windows_at_once_match_one_by_one() -> None:
    rng = np.random.default_rng(1)
    t = np.cumsum(rng.uniform(0.005, 0.03, 500))
    p = rng.uniform(50, 300, 500)
    a = rng.uniform(t[0], t[-1] - 0.5, 40)
    b = a + rng.uniform(0.001, 0.5, 40)
    got = integrate_windows_j(t, p, a, b)
    want = [integrate_j(t, p, x, y) for x, y in zip(a, b, strict=True)]
    assert np.allclose(got, want)
    assert cumulative_j(t, p, np.array([t[0]]))[0] == 0.0


def test_burtscher_correction_formula_with_unequal_intervals() -> None:
    t = np.array([0.0, 0.01, 0.03, 0.06])
    p = np.array([100.0, 110.0, 130.0, 140.0])
    c = 0.84
    got = correct_lag(t, p, c)
    assert got[1] == pytest.approx(110 + c * (130 - 100) / (0.03 - 0.0))
    assert got[2] == pytest.approx(130 + c * (140 - 110) / (0.06 - 0.01))
    assert got[0] == pytest.approx(100 + c * (110 - 100) / 0.01)  # one-sided at the ends
    assert correction_matrix(t, 0.0).nnz == 4  # no lag: identity


def test_correction_rejects_unsorted_times() -> None:
    with pytest.raises(SensorError, match="increasing"):
        correction_matrix(np.array([0.0, 0.0, 0.1]), 0.5)


def test_correction_recovers_a_step_from_a_lagged_sensor() -> None:
    r = simulate_power(step(t_on_s=2.0), SimulatedSensor.k20())
    corr = correct_lag(r.t_s, r.value, 0.84)
    settled = r.t_s > T0_S + 2.05
    assert np.allclose(corr[settled], 300.0, atol=1.0)
    assert np.all(r.value[(r.t_s > T0_S + 2.05) & (r.t_s < T0_S + 3.0)] < 290.0)


def test_lag_constant_fitted_from_a_step_by_least_squares() -> None:
    r = simulate_power(step(t_on_s=2.0), SimulatedSensor.k20(noise_w=0.2), seed=4)
    fit = fit_lag_step(r.t_s, r.value, T0_S + 2.0)
    assert fit.lag_s == pytest.approx(0.84, rel=0.01)
    assert fit.lag_sigma_s < 0.01
    assert fit.after_w == pytest.approx(300.0, abs=0.5)

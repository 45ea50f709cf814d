"""Burtscher's anomalies reproduced on simulated sensors, and removed by the correction (ICPE'14, §4, §6)."""

from __future__ import annotations

import numpy as np
import pytest

from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.calibrate.fit import fit_sensor
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import WindowEnergy, window_energies
from tests.helpers.signals import Scenario, calibration_loads, isolated_pulses, kernels

K20 = SimulatedSensor.k20(noise_w=0.05)
AVG = SimulatedSensor.averaging(0.02, noise_w=0.3, quantum_w=0.01, period_jitter_s=0.0002)


@pytest.fixture(scope="module")
def k20_model() -> SensorModel:
    """The K20's model as a calibration run finds it (steps and pulses of known timing)."""
    cal = calibration_loads(busy_w=150.0, idle_w=50.0)
    return fit_sensor(simulate_power(cal.signal, K20, seed=11), cal.windows).model


@pytest.fixture(scope="module")
def avg_model() -> SensorModel:
    cal = calibration_loads()
    return fit_sensor(simulate_power(cal.signal, AVG, seed=12), cal.windows).model


def _measure(sc: Scenario, sensor: SimulatedSensor, model: SensorModel, seed: int = 0) -> list[WindowEnergy]:
    return window_energies(simulate_power(sc.signal, sensor, seed=seed), model, sc.windows)


def test_calibration_recovers_the_k20_capacitance(k20_model: SensorModel) -> None:
    assert k20_model.kind == "lagged"
    assert k20_model.lag_s == pytest.approx(0.84, rel=0.02)


def test_raw_integration_undercounts_a_short_kernel(k20_model: SensorModel) -> None:
    sc = kernels([(0.0, 0.3)], busy_w=150.0, idle_w=50.0, trail_s=6.0)
    (w,) = _measure(sc, K20, k20_model)
    truth = sc.true_energy_j[0]
    assert w.raw_energy_j < 0.75 * truth
    assert w.energy_j == pytest.approx(truth, rel=0.02)
    assert w.resolvable


def test_doubling_the_runtime_doubles_the_corrected_energy_only(k20_model: SensorModel) -> None:
    sc = kernels([(0.0, 1.0), (8.0, 2.0)], busy_w=150.0, idle_w=50.0, trail_s=8.0)
    one, two = _measure(sc, K20, k20_model)
    assert two.raw_energy_j / one.raw_energy_j > 2.1
    assert two.energy_j / one.energy_j == pytest.approx(2.0, rel=0.02)


def test_a_kernel_soon_after_another_reads_higher_raw_energy_only(k20_model: SensorModel) -> None:
    sc = kernels([(0.0, 1.0), (1.5, 1.0)], busy_w=150.0, idle_w=50.0, trail_s=8.0)
    first, second = _measure(sc, K20, k20_model)
    assert second.raw_energy_j > 1.1 * first.raw_energy_j
    assert second.energy_j == pytest.approx(first.energy_j, rel=0.02)


@pytest.mark.parametrize("which", ["lagged", "averaging"])
def test_windows_of_half_a_second_or_more_within_2_percent(
    which: str, k20_model: SensorModel, avg_model: SensorModel
) -> None:
    rng = np.random.default_rng(5)
    durs = rng.uniform(0.5, 4.0, 8)
    spans, t = [], 0.0
    for d in durs:
        spans.append((t, float(d)))
        t += d + rng.uniform(0.3, 3.0)
    sc = kernels(spans, busy_w=rng.uniform(150, 400, 8).tolist(), idle_w=80.0, trail_s=6.0)
    sensor, model = (K20, k20_model) if which == "lagged" else (AVG, avg_model)
    res = _measure(sc, sensor, model, seed=7)
    got = np.array([w.energy_j for w in res])
    assert np.all(np.abs(got / sc.true_energy_j - 1) < 0.02)
    assert all(w.resolvable for w in res)


def test_averaging_sensor_resolves_isolated_windows_down_to_a_quarter_period(avg_model: SensorModel) -> None:
    sc = isolated_pulses([0.005, 0.01, 0.02, 0.05], repeat=6, seed=3)
    res = _measure(sc, AVG, avg_model, seed=9)
    got = np.array([w.energy_j for w in res])
    sig = np.array([w.energy_uncertainty_j for w in res])
    err = got - sc.true_energy_j
    assert np.all(np.abs(err / sc.true_energy_j) < 0.05)
    assert all(w.resolvable for w in res)
    # The uncertainty is honest: the errors sit within 3 σ.
    assert np.all(np.abs(err) <= 3 * sig)


def test_raw_energy_of_short_windows_is_far_off_on_the_averaging_sensor(avg_model: SensorModel) -> None:
    sc = isolated_pulses([0.005], repeat=6, seed=4)
    res = _measure(sc, AVG, avg_model)
    raw = np.array([w.raw_energy_j for w in res])
    assert np.all(np.abs(raw / sc.true_energy_j - 1) > 0.2)

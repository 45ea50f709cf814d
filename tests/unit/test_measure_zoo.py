"""Issue 11's targets on a reduced simulated zoo, ``--sensor auto`` (the model from each recording alone)."""

from __future__ import annotations

import numpy as np
import pytest

from archline.hw.sensor_zoo import SENSOR_ZOO
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import window_energies
from tests.helpers.signals import kernels
from tests.helpers.zoo import WindowCheck, Workload, check_sensor, isolated, training_loop

FULL = ["kepler", "ga10x", "hopper-buffer", "one-second"]
PART = ["volta", "a100", "hopper-instant"]


def _zoo() -> list[Workload]:
    return [
        isolated(110.0, [700.0, 405.0], [0.005, 0.5, 2.0, 1.0]),
        training_loop(110.0, 700.0, seconds=20.0),
    ]


def _honest(rows: list[WindowCheck], worst_z: float) -> None:
    z = np.array([abs(r.z) for r in rows])
    assert np.mean(z <= 2.0) >= 0.9, sorted(z)[-5:]
    assert z.max() <= worst_z


@pytest.mark.parametrize("name", FULL)
def test_full_coverage_sensors_meet_the_targets(name: str) -> None:
    rows = check_sensor(SENSOR_ZOO[name], _zoo(), seed=5)
    for r in rows:
        if r.label == "kernel" and r.duration_s >= 0.5:
            assert r.resolvable and abs(r.rel_error) <= 0.02, r
        if r.label in ("loop", "loop10"):
            assert abs(r.rel_error) <= 0.01, r
        if r.label == "loop1":
            assert abs(r.rel_error) <= 0.02, r
    # Kepler's 1 s loop pieces reach 3.1 σ: power moving inside them that its 0.84 s lag hides.
    _honest(rows, 3.2)


@pytest.mark.parametrize("name", PART)
def test_part_time_sensors_meet_the_long_window_targets_and_stay_honest(name: str) -> None:
    rows = check_sensor(SENSOR_ZOO[name], _zoo(), seed=5)
    for r in rows:
        if r.label == "kernel" and r.duration_s >= 2.0:
            assert abs(r.rel_error) <= 0.02, r
        if r.label in ("loop", "loop10"):
            assert abs(r.rel_error) <= 0.01, r
        if r.duration_s < SENSOR_ZOO[name].sensor.period_s:
            assert not r.resolvable
    _honest(rows, 3.5)


def test_long_windows_on_a_boxcar_sensor_are_sharp() -> None:
    # Issue 11: 2–5 s windows on exact boxcar means carried σ of 2.7–4.9 % for errors of 0.01–0.1 %.
    rows = check_sensor(SENSOR_ZOO["ga10x"], _zoo(), seed=5)
    long = [r for r in rows if r.duration_s >= 2.0 and r.label == "kernel"]
    assert long and all(r.rel_sigma <= 0.02 for r in long)


def test_a_kernel_shorter_than_a_part_time_period_is_unresolvable_with_an_honest_sigma() -> None:
    # Issue 11: a 40 ms kernel on a 25-of-100 ms sensor came back −62 % with σ 17 % (3.5 σ off).
    sensor = SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3)
    model = SensorModel(kind="part-time", period_s=0.1, window_s=0.025, noise_w=0.3, edge_sigma_s=0.002)
    z = []
    for seed in range(12):
        sc = kernels([(0.0075 * seed, 0.04)], busy_w=300.0, idle_w=100.0)
        (w,) = window_energies(simulate_power(sc.signal, sensor, seed=seed), model, sc.windows)
        assert not w.resolvable
        z.append(abs(w.energy_j - sc.true_energy_j[0]) / w.energy_uncertainty_j)
    assert max(z) <= 2.0

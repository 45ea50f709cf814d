"""Per-window energy: resolvability, tied repetitions, overlapping and adjacent windows, honest σ."""

from __future__ import annotations

import numpy as np
import pytest

from archline.core.recording import Region
from archline.errors import SensorError
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import window_energies
from tests.helpers.signals import T0_S, isolated_pulses, kernels

PT = SimulatedSensor.part_time(period_s=0.1, window_s=0.025, noise_w=0.3)
PT_MODEL = SensorModel(kind="part-time", period_s=0.1, window_s=0.025, edge_sigma_s=0.0005)
AVG = SimulatedSensor.averaging(0.02, noise_w=0.3)
AVG_MODEL = SensorModel(kind="averaging", period_s=0.02, edge_sigma_s=0.0002)


def test_part_time_sensor_marks_short_windows_unresolvable() -> None:
    sc = isolated_pulses([0.01], repeat=12, seed=1)
    res = window_energies(simulate_power(sc.signal, PT, seed=2), PT_MODEL, sc.windows)
    assert not any(w.resolvable for w in res)
    # Never false confidence: every estimate is within 3 σ of the truth.
    err = np.array([w.energy_j for w in res]) - sc.true_energy_j
    assert np.all(np.abs(err) <= 3 * np.array([w.energy_uncertainty_j for w in res]))
    assert any(w.observed_fraction == 0.0 for w in res)  # some fell entirely in the blind part


def test_part_time_sensor_resolves_long_windows() -> None:
    sc = kernels([(0.0, 3.0), (5.0, 2.0)], busy_w=[250.0, 320.0])
    res = window_energies(simulate_power(sc.signal, PT, seed=3), PT_MODEL, sc.windows)
    got = np.array([w.energy_j for w in res])
    assert np.allclose(got, sc.true_energy_j, rtol=0.02)
    assert all(w.resolvable for w in res)
    assert all(0.2 < w.observed_fraction < 0.4 for w in res)


def test_tied_repetitions_at_shifted_phases_recover_a_call_part_time_misses() -> None:
    # 20 repetitions of a 30 ms call, each shifted by 5 ms within the 100 ms period.
    spans = [(0.5 * j + 0.005 * j, 0.03) for j in range(20)]
    sc = kernels(spans)
    r = simulate_power(sc.signal, PT, seed=4)
    alone = window_energies(r, PT_MODEL, sc.windows)
    tied = window_energies(r, PT_MODEL, sc.windows, groups=["call"] * len(spans))
    assert sum(w.resolvable for w in alone) < len(alone)
    assert all(w.resolvable for w in tied)
    assert tied[0].energy_j == pytest.approx(sc.true_energy_j[0], rel=0.03)


def test_back_to_back_windows_share_the_readings_fairly() -> None:
    sc = kernels([(0.0, 0.3), (0.3, 0.2)], busy_w=[300.0, 200.0])
    res = window_energies(simulate_power(sc.signal, AVG, seed=5), AVG_MODEL, sc.windows)
    assert np.allclose([w.energy_j for w in res], sc.true_energy_j, rtol=0.01)


def test_two_windows_inside_one_reading_cannot_be_told_apart() -> None:
    sc = kernels([(0.0, 0.004), (0.004, 0.004)], busy_w=[300.0, 200.0])
    res = window_energies(simulate_power(sc.signal, AVG, seed=6), AVG_MODEL, sc.windows)
    assert not any(w.resolvable for w in res)


def test_overlapping_windows_are_each_estimated() -> None:
    sc = kernels([(0.0, 1.0)])
    a = sc.windows[0]
    outer = Region("outer", a.start_s - 0.5, a.end_s + 0.5)
    inner = Region("inner", a.start_s + 0.25, a.start_s + 0.75)
    res = window_energies(simulate_power(sc.signal, AVG, seed=7), AVG_MODEL, [outer, inner, a])
    assert [w.name for w in res] == ["outer", "inner", "k0"]
    assert res[0].energy_j == pytest.approx(sc.signal.energy_j(outer.start_s, outer.end_s), rel=0.01)
    assert res[1].energy_j == pytest.approx(150.0, rel=0.01)
    assert res[2].energy_j == pytest.approx(300.0, rel=0.01)


def test_uncertainty_covers_the_error_at_about_its_nominal_rate() -> None:
    sc = isolated_pulses([0.02, 0.05, 0.2], repeat=15, seed=8)
    model = AVG_MODEL.with_(noise_w=1.0, edge_sigma_s=0.0)
    res = window_energies(
        simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=1.0), seed=9), model, sc.windows
    )
    z = (np.array([w.energy_j for w in res]) - sc.true_energy_j) / np.array([w.energy_uncertainty_j for w in res])
    assert 0.6 < np.sqrt(np.mean(z**2)) < 1.5


def test_windows_that_end_before_they_start_are_refused() -> None:
    sc = kernels([(0.0, 1.0)])
    r = simulate_power(sc.signal, AVG)
    with pytest.raises(SensorError, match="ends at or before"):
        window_energies(r, AVG_MODEL, [Region("bad", T0_S + 2.0, T0_S + 1.0)])


def test_to_json_has_the_documented_keys() -> None:
    sc = kernels([(0.0, 0.5)])
    (w,) = window_energies(simulate_power(sc.signal, AVG), AVG_MODEL, sc.windows)
    d = w.to_json()
    for k in (
        "name",
        "start_s",
        "end_s",
        "duration_s",
        "energy_j",
        "energy_uncertainty_j",
        "mean_power_w",
        "resolvable",
    ):
        assert k in d
    assert d["mean_power_w"] == pytest.approx(d["energy_j"] / d["duration_s"])

"""Simulated sensors: exact signal maths, each sensor kind's readings, the counter and the polled source."""

from __future__ import annotations

import numpy as np
import pytest

from archline.core.readings import PowerSource
from archline.hw.simulated import (
    PiecewisePower,
    SimulatedPowerSource,
    SimulatedSensor,
    simulate_energy,
    simulate_polled,
    simulate_power,
)
from tests.helpers.fake_gpu import FakeClock
from tests.helpers.signals import T0_S, kernels, step


def test_piecewise_energy_is_exact() -> None:
    sig = PiecewisePower(np.array([0.0, 1.0, 1.5, 4.0]), np.array([100.0, 300.0, 50.0]))
    assert sig.energy_j(0.0, 4.0) == pytest.approx(100 + 150 + 125)
    assert sig.energy_j(0.9, 1.1) == pytest.approx(10 + 30)
    # Outside the edges the end levels continue.
    assert sig.energy_j(-1.0, 0.0) == pytest.approx(100.0)
    assert sig.mean_w(1.0, 1.5) == pytest.approx(300.0)


def test_lagged_signal_follows_first_order_response() -> None:
    sig = step(t_on_s=1.0, before_w=100.0, after_w=300.0)
    c = 0.84
    t = T0_S + 1.0 + np.array([0.0, 0.84, 2.0])
    want = 300.0 - 200.0 * np.exp(-(t - T0_S - 1.0) / c)
    assert np.allclose(sig.lagged(t, c), want)
    # The lag conserves energy: the integral of the lagged signal trails the true one by C·ΔP.
    late = T0_S + 7.9
    lost = sig.cumulative_j(np.array([late]))[0] - sig.cumulative_j(np.array([late]), c)[0]
    assert lost == pytest.approx(c * 200.0, rel=1e-3)


def test_averaging_sensor_reads_the_mean_since_its_previous_update() -> None:
    sc = kernels([(0.0, 0.005)], busy_w=300.0, idle_w=100.0)
    sen = SimulatedSensor.averaging(0.02)
    r = simulate_power(sc.signal, sen)
    prev = np.concatenate([[r.t_s[0] - 0.02], r.t_s[:-1]])
    means = np.array([sc.signal.mean_w(a, b) for a, b in zip(prev, r.t_s, strict=True)])
    assert np.allclose(r.value, means)
    # The readings' intervals tile the time: their energy is the signal's.
    assert np.sum(r.value[1:] * np.diff(r.t_s)) == pytest.approx(sc.signal.energy_j(r.t_s[0], r.t_s[-1]))


def test_part_time_sensor_sees_only_its_window() -> None:
    sen = SimulatedSensor.part_time(period_s=0.1, window_s=0.025)
    # A 10 ms pulse in the unobserved 75 ms of a period leaves no trace at all.
    sc = kernels([(0.03, 0.01)], lead_s=1.0)
    r = simulate_power(sc.signal, sen, T0_S, T0_S + 3.0)
    assert np.allclose(r.value, 100.0)
    # The same pulse inside the window is seen, diluted over 25 ms.
    sc2 = kernels([(0.08, 0.01)], lead_s=1.0)
    r2 = simulate_power(sc2.signal, sen, T0_S, T0_S + 3.0)
    assert r2.value.max() == pytest.approx(100.0 + 200.0 * 0.01 / 0.025, rel=1e-4)


def test_k20_sensor_quantises_and_lags() -> None:
    sen = SimulatedSensor.k20(noise_w=0.3)
    r = simulate_power(step(), sen, seed=1)
    assert np.allclose(r.value / 0.01, np.round(r.value / 0.01))
    after = (r.t_s > T0_S + 2.0) & (r.t_s < T0_S + 2.84)
    assert r.value[after].max() < 300.0 - 200.0 * np.exp(-1.0) + 2.0
    assert np.median(np.diff(r.t_s)) == pytest.approx(0.015, abs=1e-6)


def test_noise_and_jitter_are_as_configured() -> None:
    sig = PiecewisePower.constant(200.0, T0_S, T0_S + 60.0)
    sen = SimulatedSensor.averaging(0.02, noise_w=1.5, jitter_s=0.001)
    r = simulate_power(sig, sen, seed=3)
    assert np.std(r.value) == pytest.approx(1.5, rel=0.1)
    dev = r.t_s - (T0_S + 0.02 * np.round((r.t_s - T0_S) / 0.02))
    assert np.std(dev) == pytest.approx(0.001, rel=0.15)


def test_polling_faster_than_updates_repeats_values() -> None:
    sc = kernels([(0.0, 0.5)])
    r = simulate_polled(sc.signal, SimulatedSensor.k20(), poll_interval_s=0.001)
    same = np.mean(np.diff(r.value) == 0)
    assert same > 0.9  # ~14 of every 15 polls repeat the latest update
    assert np.allclose(np.diff(r.t_s), 0.001, atol=1e-6)


def test_energy_counter_is_the_true_cumulative_energy() -> None:
    sc = kernels([(0.2, 0.3), (1.0, 0.05)])
    sen = SimulatedSensor.averaging(0.02, energy_period_s=0.1)
    e = simulate_energy(sc.signal, sen)
    assert e.quantity == "energy"
    assert np.median(np.diff(e.t_s)) == pytest.approx(0.1)
    got = e.value[-1] - e.value[0]
    assert got == pytest.approx(sc.signal.energy_j(e.t_s[0], e.t_s[-1]), abs=2e-3)


def test_power_source_delivers_buffer_batches_on_an_injected_clock() -> None:
    sc = kernels([(0.0, 0.2)])
    clock = FakeClock(T0_S)
    src = SimulatedPowerSource(sc.signal, SimulatedSensor.averaging(0.02), clock)
    assert isinstance(src, PowerSource)
    got = []
    for _ in range(20):
        clock.sleep(0.05)
        got.append(src.read())
    t = np.concatenate([g.t_s for g in got])
    assert np.all(np.diff(t) > 0)  # no reading delivered twice
    assert t[-1] <= clock.now_s()
    assert len(t) == pytest.approx(1.0 / 0.02, abs=1)
    src.close()
    clock.sleep(1.0)
    assert len(src.read()) == 0


def test_polled_power_source_returns_latest_value_stamped_now() -> None:
    sc = kernels([(0.0, 0.2)])
    clock = FakeClock(T0_S + 1.1)
    src = SimulatedPowerSource(sc.signal, SimulatedSensor.averaging(0.02), clock, mode="polled")
    a = src.read()
    b = src.read()
    assert a.t_s[0] == b.t_s[0] == clock.now_s()
    assert a.value[0] == b.value[0] == pytest.approx(300.0)
    energy = SimulatedPowerSource(sc.signal, SimulatedSensor.averaging(0.02), clock, quantity="energy")
    assert energy.blocking and energy.quantity == "energy"


def test_part_time_sensor_requires_a_short_window() -> None:
    with pytest.raises(ValueError, match="shorter"):
        SimulatedSensor(kind="part-time", period_s=0.1, window_s=0.2)

"""SMA, MTSM and end-instant on the same recording; repetition planning and the one-call estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from archline.core.readings import Readings
from archline.core.recording import Recording, Region
from archline.errors import InputError, SensorError
from archline.hw.simulated import PiecewisePower, SimulatedSensor, simulate_power
from archline.measurement.repetition import estimate_call_energy, plan_repetitions, updates_for
from archline.measurement.sensor_model import SensorModel
from archline.measurement.techniques import compare_techniques, end_instant, mtsm, sma
from tests.helpers.signals import T0_S, kernels


def _ramp_recording() -> tuple[Recording, Region]:
    # Power ramps 100 → 300 W over the region, read every 10 ms: easy closed forms.
    t = T0_S + np.arange(0, 2.0, 0.01)
    p = 100.0 + 200.0 * np.clip((t - T0_S - 0.5) / 1.0, 0.0, 1.0)
    rec = Recording({"p": Readings("p", "power", t, p)}, start_s=T0_S, end_s=T0_S + 2.0)
    return rec, Region("ramp", T0_S + 0.5, T0_S + 1.5)


def test_mtsm_is_the_area_over_exactly_the_region() -> None:
    rec, reg = _ramp_recording()
    assert mtsm(rec, reg, "p").energy_j == pytest.approx(200.0, rel=1e-3)


def test_end_instant_takes_the_last_reading_times_the_duration() -> None:
    rec, reg = _ramp_recording()
    est = end_instant(rec, reg, "p")
    assert est.mean_power_w == pytest.approx(300.0, abs=2.0)
    assert est.energy_j == pytest.approx(est.mean_power_w * 1.0)
    assert est.energy_j > 1.4 * mtsm(rec, reg, "p").energy_j  # PAPI over-reads a rising kernel


def test_sma_samples_at_a_fixed_unsynchronised_rate() -> None:
    rec, reg = _ramp_recording()
    est = sma(rec, reg, "p", rate_hz=66.7)
    assert est.samples == pytest.approx(66.7, abs=1.5)
    assert est.energy_j == pytest.approx(200.0, rel=0.03)
    short = sma(rec, Region("tiny", T0_S + 0.5001, T0_S + 0.501), "p", rate_hz=66.7)
    assert short.samples == 0 and math.isnan(short.energy_j)


def test_all_three_from_one_recording_disagree_on_a_lagged_sensor() -> None:
    sc = kernels([(0.0, 0.5)], busy_w=150.0, idle_w=50.0)
    rec = Recording({"k20": simulate_power(sc.signal, SimulatedSensor.k20())}, start_s=T0_S)
    got = compare_techniques(rec, sc.windows[0], "k20")
    assert set(got) == {"sma", "mtsm", "end-instant"}
    truth = sc.true_energy_j[0]
    assert got["mtsm"].energy_j < truth and got["end-instant"].energy_j < truth
    assert got["end-instant"].energy_j > got["mtsm"].energy_j  # the sensor is still rising at the end


def test_techniques_need_a_power_source() -> None:
    rec, reg = _ramp_recording()
    with pytest.raises(SensorError, match="no source"):
        mtsm(rec, reg, "nope")


def test_burtscher_ten_updates_for_five_percent() -> None:
    assert updates_for(0.05) == 10
    assert updates_for(0.01) == 50


def test_plan_spans_enough_updates_and_spreads_phases_for_part_time() -> None:
    pt = SensorModel(kind="part-time", period_s=0.1, window_s=0.025, edge_sigma_s=0.001)
    plan = plan_repetitions(0.002, pt, 0.05)
    assert plan.repetition_s >= 10 * 0.1 - 1e-9
    assert plan.calls_per_repetition == math.ceil(1.0 / 0.002 - 1e-9)
    shifts = sorted(set(plan.phase_shifts_s))
    assert len(shifts) >= 8  # at least 2 / coverage phases
    assert shifts[0] == 0.0 and shifts[-1] < 0.1
    assert plan.expected_rel_error <= 0.05
    avg = plan_repetitions(0.002, SensorModel(kind="averaging", period_s=0.02, edge_sigma_s=0.0005), 0.05)
    assert avg.total_s < plan.total_s


def test_plan_refuses_nonsense() -> None:
    m = SensorModel(kind="averaging", period_s=0.02)
    with pytest.raises(InputError):
        plan_repetitions(0.0, m)
    with pytest.raises(InputError):
        plan_repetitions(0.01, m, 1.5)


@pytest.mark.parametrize(
    ("sensor", "model"),
    [
        (
            SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3),
            SensorModel(kind="part-time", period_s=0.1, window_s=0.025, edge_sigma_s=0.0005),
        ),
        (
            SimulatedSensor.averaging(0.02, noise_w=0.3),
            SensorModel(kind="averaging", period_s=0.02, edge_sigma_s=0.0002),
        ),
    ],
)
def test_one_call_energy_from_planned_repetitions(sensor: SimulatedSensor, model: SensorModel) -> None:
    call_s, busy_w, idle_w = 0.0007, 320.0, 100.0
    plan = plan_repetitions(call_s, model, 0.05)
    edges, levels, regs = [T0_S], [idle_w], []
    t = T0_S + 1.0
    for gap in plan.gaps_s:
        t += gap
        edges += [t, t + plan.repetition_s]
        levels += [busy_w, idle_w]
        regs.append(Region("rep", t, t + plan.repetition_s))
        t += plan.repetition_s
    sig = PiecewisePower(np.array([*edges, t + 2.0]), np.array(levels))
    rec = Recording({"nvml.buffer": simulate_power(sig, sensor, seed=3)})
    ce = estimate_call_energy(rec, regs, plan.calls_per_repetition, model)
    truth = busy_w * call_s
    assert ce.energy_j == pytest.approx(truth, rel=0.05)
    assert abs(ce.energy_j - truth) <= 3 * ce.energy_uncertainty_j
    assert ce.resolvable and ce.repetitions == plan.repetitions
    assert ce.mean_power_w == pytest.approx(busy_w, rel=0.05)

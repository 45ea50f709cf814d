"""Attribution against truth: interval coverage over many simulated programs, and real H200 sensor data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings
from archline.core.recording import Recording
from archline.measurement.attribute.attribution import attribute_energy
from tests.helpers.attrib_sim import SensorSim, SimKernel, simulate_program

DATA = Path(__file__).resolve().parents[1] / "data"

KERNELS = [
    SimKernel("fma", 0.00030, 420.0),
    SimKernel("stream", 0.00070, 260.0),
    SimKernel("small", 0.00012, 330.0),
]


def test_intervals_cover_the_truth_at_roughly_their_nominal_rate():
    covered, errors = [], []
    for seed in range(24):
        run = simulate_program(KERNELS, seed=1000 + seed, program_s=6.0)
        res = attribute_energy(run.recording, run.activities, program_span=run.program_span)
        assert res.confidence == 0.95
        for k in KERNELS:
            row = res.table[k.name]
            truth = run.truth_energy_j[k.name]
            covered.append(row.energy_lo_j <= truth <= row.energy_hi_j)
            errors.append(row.energy_per_call_j / run.truth_per_call_j(k.name) - 1.0)
        assert abs(sum(r.energy_j for r in res.rows) - res.total_energy_j) < 1e-6 * res.total_energy_j
    rate = float(np.mean(covered))
    # 72 intervals at a nominal 95 %: the binomial spread alone is about ±2.6 %.
    assert 0.86 <= rate <= 1.0, rate
    assert max(abs(e) for e in errors) < 0.10


def test_part_time_sensor_and_longer_counter_delay():
    # A buffer that sees 10 ms of every 20 ms and a counter lagging 25 ms: per-call energies still hold.
    sens = SensorSim(buffer_window_s=0.010, counter_delay_s=0.025)
    run = simulate_program(KERNELS, seed=77, program_s=15.0, sensors=sens)
    res = attribute_energy(run.recording, run.activities, program_span=run.program_span)
    assert res.counter_delay_s == pytest.approx(0.025, abs=0.002)
    for k in KERNELS:
        assert res.table[k.name].energy_per_call_j == pytest.approx(run.truth_per_call_j(k.name), rel=0.10)


def _probe():
    d = np.load(DATA / "h200_probe_sensor.npz")
    events = json.loads((DATA / "h200_probe_events.json").read_text())
    buf, e = d["buf"], d["energy"]
    rec = Recording(
        {
            "nvml.buffer": Readings("nvml.buffer", "power", buf[:, 0] / 1e6, buf[:, 1] / 1e3),
            "nvml.energy": Readings("nvml.energy", "energy", (e[:, 0] + e[:, 1]) / 2e9, e[:, 2] / 1e3),
        },
        (),
        float(e[0, 0] / 1e9),
        float(e[-1, 1] / 1e9),
    )

    def group(label: str) -> str:
        if label.startswith("sq"):
            return "square_5_to_100ms"
        if label.startswith("pulse") and int(label[5:]) < 200:
            return "pulse_2_to_100ms"
        return "long_200ms_to_3s"

    acts = [ActivityRecord(group(n), g0 / 1e9, g1 / 1e9) for n, _h0, _h1, g0, g1 in events]
    return rec, acts


def test_real_h200_data_short_pulses_match_long_steps():
    """On an H200, a busy kernel ran as 5–100 ms square waves, 2–100 ms pulses and 0.2–3 s steps.

    The steps are integrated from the 20 ms samples; the short ones come from the counter
    regression. They are the same kernel, so their powers must agree.
    """
    rec, acts = _probe()
    span = (acts[0].start_s - 0.5, acts[-1].end_s + 0.5)
    res = attribute_energy(rec, acts, program_span=span)
    long_row = res.table["long_200ms_to_3s"]
    square = res.table["square_5_to_100ms"]
    pulse = res.table["pulse_2_to_100ms"]
    assert long_row.method == "integrated"
    assert square.method == "regression" and pulse.method == "regression"
    assert square.mean_power_w == pytest.approx(long_row.mean_power_w, rel=0.03)
    assert pulse.mean_power_w == pytest.approx(long_row.mean_power_w, rel=0.03)
    assert square.identifiable and pulse.identifiable
    idle = res.table["(GPU idle inside the program)"]
    assert 100.0 < idle.mean_power_w < 130.0
    assert abs(res.table["(unexplained residual)"].energy_j) < 0.01 * res.total_energy_j
    assert res.delay_identified and 0.0 < res.counter_delay_s < 0.03
    assert res.buffer_scale == pytest.approx(1.0, abs=0.02)

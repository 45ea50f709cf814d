"""The real-GPU sensor experiments, run on a fake GPU with simulated sensors, and their reports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from archline.core.recording import Recording, Region
from archline.hw.simulated import PiecewisePower, SimulatedSensor, simulate_energy, simulate_power
from archline.measurement.calibrate.experiments import (
    analyze_validation,
    checks_passed,
    run_calibration_loads,
    run_validation_loads,
)
from archline.measurement.calibrate.load_runs import BusyLoad
from archline.measurement.calibrate.run import fit_all
from archline.measurement.energy import WindowEstimate, WindowEstimator, estimate_window
from archline.records import Manifest, RunDir
from archline.records.traces import save_recording
from archline.report.sensor import render_calibration, render_validation
from tests.helpers import h200_probe
from tests.helpers.fake_gpu import FakeClock, FakeExecutor


def _signal(ex: FakeExecutor, t0: float, t1: float) -> PiecewisePower:
    edges = [t0]
    levels: list[float] = []
    t = t0
    for act in sorted(ex.activity, key=lambda a: a.start_s):
        if act.start_s > t:
            edges.append(act.start_s)
            levels.append(ex.idle_power_w)
        edges.append(act.end_s)
        levels.append(act.power_w)
        t = act.end_s
    edges.append(max(t1, t + 1e-6))
    levels.append(ex.idle_power_w)
    return PiecewisePower(np.array(edges), np.array(levels))


def _record(ex: FakeExecutor, regions: list[Region], t0: float, sensor: SimulatedSensor) -> Recording:
    t1 = ex.clock.now_s() + 0.5
    sig = _signal(ex, t0 - 1.0, t1)
    buf = simulate_power(sig, sensor, t0, t1, seed=3)
    buf = type(buf)("nvml.buffer", "power", buf.t_s, buf.value)
    en = simulate_energy(sig, sensor, t0, t1)
    en = type(en)("nvml.energy", "energy", en.t_s, en.value)
    return Recording({"nvml.buffer": buf, "nvml.energy": en}, tuple(regions), t0, t1)


def test_validation_passes_on_an_averaging_sensor() -> None:
    clock = FakeClock()
    ex = FakeExecutor(clock, busy_power_w=300.0, idle_power_w=100.0, dur_ns_index=0)
    t0 = clock.now_s()
    load = BusyLoad(ex, clock=clock)  # type: ignore[arg-type]
    ex.activity.clear()  # forget the warm-up pulse
    regions = run_validation_loads(load, durations_s=(0.1, 1.0), repeated_total_s=3.0)
    rec = _record(ex, regions, t0, SimulatedSensor.averaging(0.02, noise_w=0.5))
    model = WindowEstimator()

    def raw(r: Recording, g: Region) -> WindowEstimate:
        e = estimate_window(r, g, estimator=model)
        return WindowEstimate(**{**e.__dict__, "energy_j": e.raw_energy_j})

    rows = analyze_validation(rec, model, raw)
    checks = {r.check: r for r in rows}
    assert any("steady 100 ms" in c for c in checks)
    corrected = [r for r in rows if "raw" not in r.check]
    assert corrected and all(r.passed for r in corrected), [(r.check, r.error_pct) for r in corrected]
    doubling = next(r for r in rows if r.check.startswith("doubling") and "corrected" in r.check)
    assert doubling.measured == pytest.approx(2.0, rel=0.02)


def test_no_validation_check_is_not_reported_as_all_passed() -> None:
    # A recording without the energy counter yields no steady check and no loads: nothing passed.
    rows = analyze_validation(Recording({}, ()))
    assert rows == []
    assert checks_passed(rows) is None


def test_calibration_loads_cover_every_kind_of_load() -> None:
    clock = FakeClock()
    ex = FakeExecutor(clock, dur_ns_index=0)
    load = BusyLoad(ex, clock=clock)  # type: ignore[arg-type]
    regions = run_calibration_loads(load, periods_s=(0.04,), pulses_s=(0.01, 0.1), pulse_reps=2, square_s=0.2)
    names = {r.name for r in regions}
    assert {"step", "square_40ms", "pulse_10ms", "pulse_100ms"} <= names
    assert sum(r.name == "pulse_10ms" for r in regions) == 2
    assert all(r.end_s > r.start_s for r in regions)


def test_calibration_fit_and_report_on_the_h200_probe(tmp_path: Path) -> None:
    rec = Recording(
        {"nvml.buffer": h200_probe.buffer(), "nvml.instant": h200_probe.field(186), "nvml.energy": h200_probe.energy()},
        h200_probe.loads(),
    )
    cal = fit_all(rec, h200_probe.loads(), gpu_uuid="GPU-test", driver_version="580.159.04", save=False)
    assert set(cal.profiles) == {"nvml.buffer", "nvml.instant"}
    assert cal.profiles["nvml.buffer"].model.period_s == pytest.approx(0.02, rel=0.05)
    assert cal.profiles["nvml.instant"].model.period_s == pytest.approx(0.1, rel=0.05)
    rd = RunDir.create(tmp_path / "cal", Manifest.new("sensor-calibration", gpu={"name": "H200"}))
    rd.write_json("profiles.json", {"profiles": {k: p.to_json() for k, p in cal.profiles.items()}, "failures": {}})
    save_recording(rd.path / "traces.npz", rec)
    rep = render_calibration(rd, rd.path)
    text = rep.markdown.read_text()
    assert "nvml.buffer" in text and "nvml.instant" in text
    assert "20.00 ms" in text  # the buffer's update period
    assert (rd.path / "sensor_loads.png").stat().st_size > 1000


def test_validation_report_lists_every_check(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path / "val", Manifest.new("sensor-validation", gpu={"name": "H100"}))
    rd.write_csv(
        "validation.csv",
        [
            {
                "check": "doubling (corrected)",
                "measured": 2.01,
                "reference": 2.0,
                "error_pct": 0.5,
                "limit_pct": 2.0,
                "passed": True,
                "n": 3,
                "detail": "",
            },
            {
                "check": "doubling (raw)",
                "measured": 2.3,
                "reference": 2.0,
                "error_pct": 15.0,
                "limit_pct": 2.0,
                "passed": True,
                "n": 3,
                "detail": "",
            },
        ],
    )
    text = render_validation(rd, rd.path).markdown.read_text()
    assert "doubling (corrected)" in text and "+0.50 %" in text
    assert "Largest error among the corrected checks: 0.50 %" in text


def test_busy_load_moves_globaltimer_stamps_onto_the_host_clock() -> None:
    from typing import Any

    class Stamping(FakeExecutor):
        """Writes %globaltimer stamps that run 2.5 ms behind the host clock."""

        def launch(self, kernel: Any, grid: int, block: int, args: Any, **kw: Any) -> Any:
            res = super().launch(kernel, grid, block, args, **kw)
            act = self.activity[-1]
            stamps = np.array([round((act.start_s - 0.0025) * 1e9), round((act.end_s - 0.0025) * 1e9)], np.uint64)
            self.upload(args[1][1], stamps)
            return res

    clock = FakeClock()
    ex = Stamping(clock, dur_ns_index=0)
    load = BusyLoad(ex, clock=clock)  # type: ignore[arg-type]
    assert load.gt_offset_s == pytest.approx(-0.0025, abs=1e-6)
    r = load.pulse(0.1, "p")
    act = ex.activity[-1]
    assert r.how == "globaltimer"
    assert r.start_s == pytest.approx(act.start_s, abs=1e-6) and r.end_s == pytest.approx(act.end_s, abs=1e-6)
    assert r.meta["globaltimer_start_s"] == pytest.approx(act.start_s - 0.0025, abs=1e-6)

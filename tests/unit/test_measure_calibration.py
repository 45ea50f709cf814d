"""The calibration fit on simulated sensors and on the H200 probe data, and sensor-profile persistence."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from archline.core.recording import Recording
from archline.errors import ModelFileError, SensorError
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.calibrate.fit import SensorFit, fit_sensor
from archline.measurement.calibrate.profile import (
    SensorProfile,
    fit_profile,
    load_profile,
    profile_path,
    save_profile,
    sensor_cache_dir,
)
from archline.measurement.windows import window_energies
from tests.helpers import h200_probe
from tests.helpers.signals import calibration_loads, kernels


@pytest.mark.parametrize(
    ("sensor", "kind"),
    [
        (SimulatedSensor.averaging(0.02, noise_w=0.3), "averaging"),
        (SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3), "part-time"),
        (SimulatedSensor.k20(noise_w=0.05), "lagged"),
    ],
)
def test_fit_finds_each_simulated_sensor(sensor: SimulatedSensor, kind: str) -> None:
    cal = calibration_loads()
    fit = fit_sensor(simulate_power(cal.signal, sensor, seed=1), cal.windows)
    m = fit.model
    assert m.kind == kind
    assert m.period_s == pytest.approx(sensor.period_s, rel=0.01)
    if kind == "part-time":
        assert m.window_s == pytest.approx(0.025, abs=0.002)
    if kind == "lagged":
        assert m.lag_s == pytest.approx(0.84, rel=0.02)
    assert fit.idle.idle_w == pytest.approx(100.0, abs=1.0)


def test_fit_recovers_delay_and_a_short_lag() -> None:
    cal = calibration_loads()
    sensor = SimulatedSensor.averaging(0.02, noise_w=0.3, delay_s=0.004, lag_s=0.003)
    m = fit_sensor(simulate_power(cal.signal, sensor, seed=2), cal.windows).model
    assert m.delay_s == pytest.approx(0.004, abs=0.001)
    assert m.lag_s == pytest.approx(0.003, abs=0.001)


def test_fit_sees_active_idle_and_the_tail() -> None:
    cal = calibration_loads()
    spans = [(w.start_s - cal.windows[0].start_s, w.duration_s) for w in cal.windows]
    sc = kernels(spans, names=[w.name for w in cal.windows], active_idle_w=130.0, active_hold_s=2.0)
    fit = fit_sensor(simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=0.3), seed=3), sc.windows)
    assert fit.idle.active_idle_w == pytest.approx(130.0, abs=1.0)
    assert fit.idle.idle_w == pytest.approx(100.0, abs=1.0)


def test_fit_needs_loads_and_readings() -> None:
    cal = calibration_loads()
    r = simulate_power(cal.signal, SimulatedSensor.averaging(0.02))
    with pytest.raises(SensorError, match="no known loads"):
        fit_sensor(r, [])


# --------------------------------------------------------------------------- the H200 probe data


@pytest.fixture(scope="module")
def h200_buffer_fit() -> SensorFit:
    return fit_sensor(h200_probe.buffer(), h200_probe.loads())


def test_h200_buffer_is_a_20ms_grid_with_late_stamps_and_a_short_lag(h200_buffer_fit: SensorFit) -> None:
    fit = h200_buffer_fit
    m = fit.model
    assert m.period_s == pytest.approx(0.020, abs=0.0002)
    # About one sample in five is stamped 10 ms late; the model is much better with them moved.
    assert m.undisplace
    assert 0.1 < fit.displaced_fraction < 0.3
    assert fit.displaced_shift_s == pytest.approx(0.010, abs=0.001)
    # Not a K20 capacitor, not a 20 ms box: a point sample of a ~13 ms first-order lag.
    assert m.kind == "lagged"
    assert 0.008 < m.lag_s < 0.02
    assert m.coverage == 1.0
    assert fit.fit_rms_w < 3.0
    assert fit.stale_repeat_fraction < 0.1  # repeats are a steady power, not stale copies


def test_h200_buffer_levels(h200_buffer_fit: SensorFit) -> None:
    assert h200_buffer_fit.idle.idle_w == pytest.approx(75.0, abs=3.0)
    assert h200_buffer_fit.idle.active_idle_w == pytest.approx(116.0, abs=2.0)
    busy = h200_buffer_fit.extra["groups"]["pulse1000"]["busy_w"]
    assert 285.0 < busy < 305.0


def test_h200_short_pulses_conserve_energy_with_the_fitted_model(h200_buffer_fit: SensorFit) -> None:
    checks = {c.name: c for c in h200_buffer_fit.checks}
    for name in ("pulse5", "pulse10", "pulse20", "pulse50"):
        c = checks[name]
        assert abs(c.model_median_error) < 0.05
        assert c.model_spread < c.naive_spread or c.model_spread < 0.02


def test_h200_doubling_and_back_to_back_anomalies_are_absent(h200_buffer_fit: SensorFit) -> None:
    loads = {w.name: w for w in h200_probe.loads() if w.name in ("dbl_a", "dbl_b", "b2b_1", "b2b_2")}
    order = ["dbl_a", "dbl_b", "b2b_1", "b2b_2"]
    res = dict(
        zip(order, window_energies(h200_probe.buffer(), h200_buffer_fit.model, [loads[k] for k in order]), strict=True)
    )
    assert res["dbl_b"].energy_j / res["dbl_a"].energy_j == pytest.approx(2.0, rel=0.02)
    assert res["b2b_2"].energy_j / res["b2b_1"].energy_j == pytest.approx(1.0, rel=0.02)
    assert all(w.resolvable for w in res.values())


def test_h200_instant_field_is_part_time_and_average_field_is_a_1s_average() -> None:
    loads = h200_probe.loads()
    inst = fit_sensor(h200_probe.field(186), loads).model
    assert inst.period_s == pytest.approx(0.1, abs=0.002)
    assert inst.kind == "part-time"
    assert inst.window_s is not None and inst.window_s < 0.05
    avg = fit_sensor(h200_probe.field(185), [w for w in loads if w.duration_s >= 0.1]).model
    assert avg.kind == "averaging"
    assert avg.window_s == pytest.approx(1.0, abs=0.05)


# --------------------------------------------------------------------------- persistence


def _profile(uuid: str = "GPU-1234", driver: str = "580.159.04") -> SensorProfile:
    cal = calibration_loads()
    rec = Recording(
        {"nvml.buffer": simulate_power(cal.signal, SimulatedSensor.averaging(0.02), seed=5)},
        meta={"gpu_uuid": uuid, "driver_version": driver},
    )
    return fit_profile(rec, cal.windows)


def test_profiles_round_trip_through_the_cache(tmp_path: Path) -> None:
    p = _profile()
    path = save_profile(p, tmp_path)
    assert path == profile_path("GPU-1234", tmp_path)
    back = load_profile("GPU-1234", "580.159.04", "nvml.buffer", tmp_path)
    assert back is not None
    assert back.model.kind == p.model.kind and back.model.period_s == pytest.approx(p.model.period_s)
    assert back.model.window_s is None
    assert back.idle_w == pytest.approx(p.idle_w)
    # Another driver is another calibration.
    assert load_profile("GPU-1234", "999.0", "nvml.buffer", tmp_path) is None
    assert load_profile("GPU-none", "580.159.04", "nvml.buffer", tmp_path) is None


def test_cache_dir_follows_xdg(tmp_path: Path) -> None:
    assert sensor_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "archline" / "sensors"
    assert sensor_cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/archline/sensors")


def test_corrupt_or_foreign_profile_files_are_refused(tmp_path: Path) -> None:
    path = profile_path("GPU-x", tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{nope")
    with pytest.raises(ModelFileError, match="corrupt"):
        load_profile("GPU-x", "1", "nvml.buffer", tmp_path)
    path.write_text(json.dumps({"schema": "archline.sensor_profiles", "schema_version": 99, "profiles": {}}))
    with pytest.raises(ModelFileError, match="schema version 99"):
        load_profile("GPU-x", "1", "nvml.buffer", tmp_path)
    path.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(ModelFileError, match="not an archline sensor profile"):
        save_profile(_profile("GPU-x"), tmp_path)


def test_profile_from_malformed_json_names_the_problem() -> None:
    with pytest.raises(ModelFileError, match="malformed"):
        SensorProfile.from_json({"gpu_uuid": "x"}, where="here")
    assert np.isfinite(_profile().model.coverage)

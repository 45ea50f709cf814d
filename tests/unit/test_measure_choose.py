"""One sensor-model choice for every entry point, and regions that are never left without an energy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archline.core.recording import Recording
from archline.errors import ArchlineError
from archline.hw.sensor_zoo import SENSOR_ZOO
from archline.hw.simulated import simulate_counter_polls
from archline.measurement.calibrate.profile import SensorProfile, save_profile
from archline.measurement.choose import GpuIdentity, choose_model, generation, shipped_priors
from archline.measurement.energy import WindowEstimator
from archline.measurement.sensor_model import SensorModel
from tests.helpers.signals import kernels

REPO_RESULTS = Path(__file__).resolve().parents[2] / "results"
H100 = GpuIdentity("GPU-00000000-test", "580.159.04", "NVIDIA H100 80GB HBM3")


def _profile(uuid: str, model: SensorModel) -> SensorProfile:
    shipped = json.loads((REPO_RESULTS / "h100/sensor/calibration/profiles.json").read_text())
    entry = dict(shipped["profiles"]["nvml.buffer"])
    entry["gpu_uuid"] = uuid
    entry["model"] = {**entry["model"], "lag_s": model.lag_s}
    return SensorProfile.from_json(entry)


def test_generations_group_boards() -> None:
    assert generation("NVIDIA H100 80GB HBM3") == generation("NVIDIA H200") == "Hopper"
    assert generation("NVIDIA A100-SXM4-80GB") == "Ampere"
    assert generation("Some Future GPU") is None


def test_override_wins_over_everything() -> None:
    m = SensorModel(kind="averaging", period_s=0.1, window_s=0.1, origin="given")
    c = choose_model("nvml.buffer", None, override=m, identity=H100)
    assert c.how == "override" and c.model is m and "override" in c.describe


def test_calibration_of_this_board_then_a_shipped_prior_then_the_recording(tmp_path: Path) -> None:
    roots = (REPO_RESULTS,)
    # No calibration stored: the shipped H100 calibration is this H100's prior, and an H200's.
    c = choose_model("nvml.buffer", None, identity=H100, cache_dir=tmp_path, roots=roots)
    assert c.how == "prior" and c.model.kind == "lagged" and "Hopper" in c.detail
    h200 = GpuIdentity("GPU-1", "580.159.04", "NVIDIA H200")
    assert choose_model("nvml.buffer", None, identity=h200, cache_dir=tmp_path, roots=roots).how == "prior"
    assert shipped_priors("NVIDIA H100 80GB HBM3", "nvml.buffer", roots)
    # A calibration of this very board and driver wins.
    save_profile(_profile(H100.uuid, SensorModel(kind="lagged", period_s=0.02, lag_s=0.0123)), tmp_path)
    c = choose_model("nvml.buffer", None, identity=H100, cache_dir=tmp_path, roots=roots)
    assert c.how == "calibration" and c.model.lag_s == pytest.approx(0.0123) and H100.uuid[:12] in c.detail
    # An unknown generation with no readings has nothing to go on: one clear error.
    odd = GpuIdentity("GPU-2", "1.0", "Mystery GPU")
    with pytest.raises(ArchlineError, match="no nvml.buffer readings"):
        choose_model("nvml.buffer", None, identity=odd, cache_dir=tmp_path, roots=roots)


def test_isolated_one_second_kernels_each_get_an_energy_with_the_prior() -> None:
    """Issue 11: three 1 s kernels, each after 1 s idle, used to get energy None (no transition to fit)."""
    sc = kernels([(1.0, 1.0), (3.0, 1.0), (5.0, 1.0)], busy_w=250.0, idle_w=120.0)
    buf = SENSOR_ZOO["hopper-buffer"].readings(sc.signal, seed=3)
    counter = simulate_counter_polls(sc.signal, seed=3)
    rec = Recording({"nvml.buffer": buf, "nvml.energy": counter}, sc.windows, sc.signal.start_s, sc.signal.end_s)
    est = WindowEstimator(identity=H100)
    for w, truth in zip(sc.windows, sc.true_energy_j, strict=True):
        e = est(rec, w)
        assert e.energy_j is not None and e.energy_uncertainty_j is not None
        assert abs(e.energy_j / truth - 1) < 0.02
        assert abs(e.energy_j - truth) <= 3 * e.energy_uncertainty_j
        assert e.notes[0].startswith("sensor model:")
    assert est.choice is not None and est.choice.how in {"prior", "calibration"}


def test_without_power_readings_a_long_region_falls_back_to_the_counter() -> None:
    sc = kernels([(0.5, 2.0)], busy_w=400.0, idle_w=100.0)
    counter = simulate_counter_polls(sc.signal, seed=5)
    rec = Recording({"nvml.energy": counter}, sc.windows, sc.signal.start_s, sc.signal.end_s)
    e = WindowEstimator()(rec, sc.windows[0])
    truth = float(sc.true_energy_j[0])
    assert e.energy_j is not None and e.energy_uncertainty_j is not None
    assert abs(e.energy_j / truth - 1) < 0.02 and abs(e.energy_j - truth) <= 3 * e.energy_uncertainty_j
    assert e.resolvable and any("energy counter" in n for n in e.notes)

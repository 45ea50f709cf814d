"""Sensor calibration on a real GPU: run known loads, fit each power source's profile, store it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from archline.core.executor import Executor
from archline.core.recording import Recording, Region
from archline.errors import ArchlineError
from archline.measurement.calibrate.experiments import run_calibration_loads
from archline.measurement.calibrate.load_runs import BusyLoad
from archline.measurement.calibrate.profile import SensorProfile, fit_profile, load_profile, save_profile
from archline.measurement.choose import GpuIdentity
from archline.measurement.energy import WindowEstimator
from archline.measurement.sampler import Sampler

__all__ = ["CALIBRATED_SOURCES", "Calibration", "calibrate", "estimator_for"]

#: Power sources calibrated, and the shortest load each is fitted on (the 1 s average field
#: cannot see anything shorter than about its update period).
CALIBRATED_SOURCES: dict[str, float] = {"nvml.buffer": 0.0, "nvml.instant": 0.0, "nvml.average": 0.1}


@dataclass(frozen=True)
class Calibration:
    """Fitted profiles by source, the loads they were fitted on, and sources that could not be fitted."""

    profiles: dict[str, SensorProfile]
    loads: tuple[Region, ...]
    failures: dict[str, str]


def calibrate(
    ex: Executor,
    sampler: Sampler,
    *,
    gpu_uuid: str,
    driver_version: str,
    quick: bool = False,
    save: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Run the calibration loads under ``sampler`` and fit a profile for each power source.

    ``quick`` runs a 15 s schedule (a step and pulses of 5 ms … 1 s) instead of the full one
    (~45 s: a step, square waves of 10–200 ms periods and pulses of 2 ms … 1 s, 5 each).
    """
    load = BusyLoad(ex)
    try:
        if quick:
            loads = run_calibration_loads(
                load,
                step_s=1.5,
                periods_s=(),
                pulses_s=(0.005, 0.01, 0.02, 0.05, 0.1, 0.3, 1.0),
                pulse_reps=3,
                gap_s=0.4,
                progress=progress,
            )
        else:
            loads = run_calibration_loads(load, progress=progress)
        load.idle(0.4)
    finally:
        load.close()
    rec = sampler.recording()
    return fit_all(rec, loads, gpu_uuid=gpu_uuid, driver_version=driver_version, save=save)


def fit_all(
    rec: Recording, loads: Sequence[Region], *, gpu_uuid: str, driver_version: str, save: bool = True
) -> Calibration:
    """Fit every calibrated source present in ``rec`` (pure; saves to the user cache if ``save``)."""
    profiles: dict[str, SensorProfile] = {}
    failures: dict[str, str] = {}
    for source, min_s in CALIBRATED_SOURCES.items():
        if rec.get(source) is None or len(rec.readings[source]) < 10:
            continue
        use = [r for r in loads if r.duration_s >= min_s]
        try:
            p = fit_profile(rec, use, source, gpu_uuid=gpu_uuid, driver_version=driver_version)
        except ArchlineError as exc:
            failures[source] = str(exc)
            continue
        profiles[source] = p
        if save:
            save_profile(p)
    return Calibration(profiles, tuple(loads), failures)


def estimator_for(
    ex: Executor,
    sampler: Sampler,
    *,
    gpu_uuid: str,
    driver_version: str,
    source: str = "nvml.buffer",
    progress: Callable[[str], None] | None = None,
) -> tuple[WindowEstimator, dict[str, Any]]:
    """The window estimator for ``source``: the stored profile of this GPU and driver, or, if
    there is none, a quick calibration made now (and stored). Returns it with a description."""
    prof = load_profile(gpu_uuid, driver_version, source)
    how = "stored profile"
    if prof is None:
        cal = calibrate(ex, sampler, gpu_uuid=gpu_uuid, driver_version=driver_version, quick=True, progress=progress)
        prof = cal.profiles.get(source)
        how = "quick calibration at the start of this run"
    if prof is None:  # the calibration failed: a shipped prior for this generation, else the recording
        identity = GpuIdentity(gpu_uuid, driver_version, ex.device.name)
        return WindowEstimator(None, source, identity=identity), {"source": source, "model": "prior or recording"}
    return WindowEstimator(prof.model, source), {"source": source, "model": prof.to_json(), "how": how}

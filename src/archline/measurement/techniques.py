"""The three sampling techniques of the literature (SMA, MTSM, end-instant), computed from one recording."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from archline.core.readings import Readings
from archline.core.recording import Recording, Region
from archline.errors import SensorError
from archline.measurement.clean import drop_repeats
from archline.measurement.integrate import integrate_j

__all__ = ["SMA_RATE_HZ", "Technique", "TechniqueEstimate", "compare_techniques", "end_instant", "mtsm", "sma"]

Technique = Literal["sma", "mtsm", "end-instant"]

#: SMA's sampling rate: Burtscher et al.'s 66.7 Hz (ICPE'14, §4.3), used by Arafa et al. (§III-A).
SMA_RATE_HZ = 66.7


@dataclass(frozen=True)
class TechniqueEstimate:
    """One technique's energy (J) and mean power (W) for one region; ``samples`` it used."""

    technique: Technique
    region: str
    energy_j: float
    mean_power_w: float
    samples: int
    duration_s: float


def _power(rec: Recording, source: str) -> Readings:
    r = rec.get(source)
    if r is None:
        raise SensorError(f"the recording has no source {source!r}")
    if r.quantity != "power":
        raise SensorError(f"source {source!r} measures {r.quantity}, not power")
    if len(r) == 0:
        raise SensorError(f"source {source!r} has no readings")
    return drop_repeats(r)


def _held(r: Readings, t_s: np.ndarray) -> np.ndarray:
    """The value a poller sees at each time: the latest reading at or before it (NaN before any)."""
    k = np.searchsorted(r.t_s, t_s, side="right") - 1
    out = np.where(k >= 0, r.value[np.maximum(k, 0)], np.nan)
    return np.asarray(out, np.float64)


def sma(
    rec: Recording, region: Region, source: str, *, rate_hz: float = SMA_RATE_HZ, phase_s: float = 0.0
) -> TechniqueEstimate:
    """Sampling Monitoring Approach: a background poller reads the sensor at a fixed rate,
    unsynchronised with the region; the samples that fall in the region, each held for one
    sampling interval, are summed (Arafa et al., §III-A). A region shorter than the interval
    may catch no sample: then the energy is NaN."""
    r = _power(rec, source)
    dt = 1.0 / rate_hz
    origin = rec.start_s if rec.start_s else float(r.t_s[0])
    k0 = math.ceil((region.start_s - origin - phase_s) / dt)
    k1 = math.floor((region.end_s - origin - phase_s) / dt)
    if k1 < k0:
        return TechniqueEstimate("sma", region.name, float("nan"), float("nan"), 0, region.duration_s)
    grid = origin + phase_s + dt * np.arange(k0, k1 + 1)
    vals = _held(r, grid)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return TechniqueEstimate("sma", region.name, float("nan"), float("nan"), 0, region.duration_s)
    mean = float(np.mean(vals))
    return TechniqueEstimate("sma", region.name, float(vals.size * dt * mean), mean, int(vals.size), region.duration_s)


def mtsm(rec: Recording, region: Region, source: str) -> TechniqueEstimate:
    """Multi-Threaded Synchronized Monitoring: the area under the readings over exactly the
    region, with the real timestamps and the curve interpolated at its ends (Arafa et al., §III-C)."""
    r = _power(rec, source)
    e = integrate_j(r.t_s, r.value, region.start_s, region.end_s, "linear")
    n = int(np.sum((r.t_s >= region.start_s) & (r.t_s <= region.end_s)))
    d = region.duration_s
    return TechniqueEstimate("mtsm", region.name, e, e / d if d > 0 else float("nan"), n, d)


def end_instant(rec: Recording, region: Region, source: str) -> TechniqueEstimate:
    """PAPI's way: the single reading available when the region ends, times the elapsed time
    (Arafa et al., §III-B)."""
    r = _power(rec, source)
    v = _held(r, np.array([region.end_s]))[0]
    d = region.duration_s
    if not np.isfinite(v):
        return TechniqueEstimate("end-instant", region.name, float("nan"), float("nan"), 0, d)
    return TechniqueEstimate("end-instant", region.name, float(v * d), float(v), 1, d)


def compare_techniques(
    rec: Recording, region: Region, source: str, *, rate_hz: float = SMA_RATE_HZ
) -> dict[Technique, TechniqueEstimate]:
    """All three techniques on the same data, for comparison."""
    return {
        "sma": sma(rec, region, source, rate_hz=rate_hz),
        "mtsm": mtsm(rec, region, source),
        "end-instant": end_instant(rec, region, source),
    }

"""Per-region figures from a Recording: corrected energy with uncertainty, power, clocks, throttling, idle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from archline.core.readings import Readings
from archline.core.recording import Recording, Region
from archline.errors import SensorError
from archline.hw.nvml import decode_throttle
from archline.measurement.choose import GpuIdentity, ModelChoice, choose_model
from archline.measurement.counter import counter_window_energies
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import window_energies

__all__ = ["ClockState", "WindowEstimate", "WindowEstimator", "clock_state", "counter_energy_j", "estimate_window"]

#: Readings this far around a region are enough for the model's baseline chunks and lag tail.
_MARGIN_BEFORE_S = 3.0
_MARGIN_AFTER_S = 1.0


@dataclass(frozen=True)
class WindowEstimate:
    """What the sensors say about one region. Energies in J, powers in W, clocks in MHz."""

    energy_j: float | None
    energy_uncertainty_j: float | None
    mean_power_w: float | None
    max_power_w: float | None
    idle_power_w: float | None
    counter_energy_j: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    temperature_c: float | None
    throttle_reasons: tuple[str, ...]
    throttled: bool | None
    resolvable: bool
    source: str
    raw_energy_j: float | None = None
    notes: tuple[str, ...] = ()
    extra: dict[str, float] = field(default_factory=dict)


def counter_energy_j(r: Readings, a_s: float, b_s: float) -> float | None:
    """Energy between a and b from a cumulative counter, interpolating between its updates.

    The counter's value changes only at its updates (~100 ms on H100/H200); each distinct
    value is placed at the first time it was seen and the counter is interpolated linearly
    between those points. None if [a, b] is not inside the span of updates.
    """
    t, e = r.t_s, r.value
    if t.size < 2:
        return None
    first = np.concatenate([[True], np.diff(e) != 0])
    tu, eu = t[first], e[first]
    if tu.size < 2 or a_s < tu[0] or b_s > tu[-1]:
        return None
    return float(np.interp(b_s, tu, eu) - np.interp(a_s, tu, eu))


def _counter(en: Readings, region: Region, notes: list[str]) -> tuple[float | None, float | None]:
    """The window's energy and 1 σ from the energy counter, corrected for its update grid."""
    try:
        (w,) = counter_window_energies(en, [Region(region.name, region.start_s, region.end_s)], max_rel_uncertainty=1.0)
    except SensorError as exc:
        notes.append(f"energy counter: {exc}")
        return None, None
    if not np.isfinite(w.energy_j) or not w.resolvable:
        return None, None
    return float(w.energy_j), float(w.energy_uncertainty_j)


def _slice(r: Readings, a_s: float, b_s: float) -> Readings:
    m = (r.t_s >= a_s) & (r.t_s <= b_s)
    return Readings(r.source, r.quantity, r.t_s[m], r.value[m], r.meta)


def _mean_in(r: Readings | None, a_s: float, b_s: float) -> float | None:
    if r is None or len(r) == 0:
        return None
    m = (r.t_s >= a_s) & (r.t_s <= b_s)
    if not m.any():
        return None
    return float(np.mean(r.value[m]))


@dataclass(frozen=True)
class ClockState:
    """The SM clock (MHz, mean of its finite readings, taken at 20 Hz: a slowdown shorter than that can fall between
    two) and the NVML clock-event reasons (any reading's, "gpu_idle" left out) over some spans of a recording;
    ``throttled``: whether a reason that slows the clocks was set (a power cap, a thermal or hardware slowdown). None
    and () where the recording holds no reading inside the spans: unknown, not "not throttled"."""

    sm_clock_mhz: float | None
    reasons: tuple[str, ...]
    throttled: bool | None


def clock_state(rec: Recording, spans: Sequence[tuple[float, float]]) -> ClockState:
    """What the board's clocks did over ``spans`` ((start, end) in s): ``nvml.sm_clock`` and ``nvml.throttle``."""
    clk, thr = rec.get("nvml.sm_clock"), rec.get("nvml.throttle")

    def inside(r: Readings) -> np.ndarray:
        m = np.zeros(len(r), dtype=bool)
        for a, b in spans:
            m |= (r.t_s >= a) & (r.t_s <= b)
        return m

    mhz = None
    if clk is not None and len(clk):
        m = inside(clk) & np.isfinite(clk.value)
        mhz = float(np.mean(clk.value[m])) if m.any() else None
    reasons: tuple[str, ...] = ()
    throttled = None
    if thr is not None and len(thr):
        m = inside(thr) & np.isfinite(thr.value)
        if m.any():
            names, throttled = decode_throttle(int(np.bitwise_or.reduce(thr.value[m].astype(np.int64))))
            reasons = tuple(n for n in names if n != "gpu_idle")
    return ClockState(mhz, reasons, throttled)


class WindowEstimator:
    """Computes a :class:`WindowEstimate` for regions of a recording under one sensor model.

    The model is chosen once per estimator by :func:`~archline.measurement.choose.choose_model`:
    ``model`` (an override) if given; else this GPU's stored calibration, a shipped prior for
    its generation, or the recording itself (``identity`` names the GPU; without it, only the
    recording). :attr:`choice` says which was used.
    """

    def __init__(
        self, model: SensorModel | None = None, source: str = "nvml.buffer", identity: GpuIdentity | None = None
    ) -> None:
        self.model = model
        self.source = source
        self.identity = identity
        self.choice: ModelChoice | None = None

    def model_for(self, r: Readings) -> SensorModel:
        if self.choice is None:
            self.choice = choose_model(self.source, r, override=self.model, identity=self.identity)
            self.model = self.choice.model
        return self.choice.model

    def __call__(self, rec: Recording, region: Region) -> WindowEstimate:
        return estimate_window(rec, region, self.source, self)


def _energy(
    buf: Readings, region: Region, est: WindowEstimator | None, notes: list[str]
) -> tuple[float | None, float | None, float | None, bool]:
    a, b = region.start_s, region.end_s
    near = _slice(buf, a - _MARGIN_BEFORE_S, b + _MARGIN_AFTER_S)
    if len(near) < 4 or near.t_s[-1] < b:
        notes.append("power readings do not cover the whole window")
        return None, None, None, False
    try:
        model = (est or WindowEstimator()).model_for(buf)
        (we,) = window_energies(near, model, [Region(region.name, a, b)])
    except SensorError as exc:
        notes.append(str(exc))
        return None, None, None, False
    if we.note:
        notes.append(we.note)
    return we.energy_j, we.energy_uncertainty_j, we.raw_energy_j, we.resolvable


def estimate_window(
    rec: Recording, region: Region, source: str = "nvml.buffer", estimator: WindowEstimator | None = None
) -> WindowEstimate:
    """Energy and context of one region: corrected energy (sensor model), energy counter,
    max power, idle level before it, SM clock, temperature and throttle reasons."""
    a, b = region.start_s, region.end_s
    buf = rec.get(source)
    notes: list[str] = []
    energy = unc = raw = mean_p = max_p = idle = None
    resolvable = False
    if buf is not None and len(buf) >= 3:
        energy, unc, raw, resolvable = _energy(buf, region, estimator, notes)
        dur = b - a
        if energy is not None and dur > 0:
            mean_p = energy / dur
        period = float(np.median(np.diff(buf.t_s))) if len(buf) > 1 else 0.02
        inside = (buf.t_s > a) & (buf.t_s <= b + period)
        if inside.any():
            max_p = float(np.max(buf.value[inside]))
        pre = (buf.t_s > a - 0.3) & (buf.t_s < a - 0.05)
        if pre.any():
            idle = float(np.median(buf.value[pre]))
    else:
        notes.append(f"no {source} readings")
    counter = counter_sigma = None
    en = rec.get("nvml.energy")
    if en is not None and b - a >= 0.5:  # shorter windows: the counter's 100 ms steps dominate
        counter, counter_sigma = _counter(en, region, notes)
        if (
            counter is not None
            and counter_sigma is not None
            and (energy is None or unc is None or (not resolvable and counter_sigma < unc))
        ):
            why = notes[-1] if notes else "the power readings could not resolve it"
            notes.append(f"energy from the energy counter ({counter_sigma / max(counter, 1e-12):.1%} 1σ): {why}")
            energy, unc, resolvable = counter, counter_sigma, True
            mean_p = energy / (b - a)
    if estimator is not None and estimator.choice is not None:
        notes.insert(0, estimator.choice.describe)
    clocks = clock_state(rec, [(a, b)])  # no reading inside the window: unknown, not "not throttled"
    temp = rec.get("nvml.temperature")
    t_c = None
    if temp is not None and len(temp):
        k = int(np.searchsorted(temp.t_s, b)) - 1
        t_c = float(temp.value[max(k, 0)])
    return WindowEstimate(
        energy_j=energy,
        energy_uncertainty_j=unc,
        mean_power_w=mean_p,
        max_power_w=max_p,
        idle_power_w=idle,
        counter_energy_j=counter,
        sm_clock_mhz=clocks.sm_clock_mhz,
        mem_clock_mhz=_mean_in(rec.get("nvml.mem_clock"), a, b),
        temperature_c=t_c,
        throttle_reasons=clocks.reasons,
        throttled=clocks.throttled,
        resolvable=resolvable,
        source=source,
        raw_energy_j=raw,
        notes=tuple(notes),
    )

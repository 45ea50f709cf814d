"""Per-region figures from a Recording: energy with uncertainty, power, clocks, throttling, idle level."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from archline.measure.recording import Recording, Region
from archline.sensors.base import Readings
from archline.sensors.nvml import decode_throttle

__all__ = ["WindowEstimate", "counter_energy_j", "estimate_window", "hold_integral_j"]


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
    notes: tuple[str, ...] = ()
    extra: dict[str, float] = field(default_factory=dict)


def hold_integral_j(r: Readings, a_s: float, b_s: float) -> tuple[float, float]:
    """Integral of a power series over [a, b] when each reading is the mean since the previous one.

    Returns (energy_j, covered_s): only time covered by the readings counts, so a window past
    the last reading is visibly short rather than extrapolated.
    """
    t, p = r.t_s, r.value
    if t.size < 2:
        return 0.0, 0.0
    lo = np.maximum(t[:-1], a_s)
    hi = np.minimum(t[1:], b_s)
    ov = np.clip(hi - lo, 0.0, None)
    return float(np.sum(ov * p[1:])), float(np.sum(ov))


def counter_energy_j(r: Readings, a_s: float, b_s: float) -> float | None:
    """Energy between a and b from a cumulative counter, interpolating between its updates.

    The counter's value changes only at its updates (~100 ms); each distinct value is placed at
    the first time it was seen, and the counter is interpolated linearly between those points.
    """
    t, e = r.t_s, r.value
    if t.size < 2:
        return None
    first = np.concatenate([[True], np.diff(e) != 0])
    tu, eu = t[first], e[first]
    if tu.size < 2 or a_s < tu[0] or b_s > tu[-1]:
        return None
    return float(np.interp(b_s, tu, eu) - np.interp(a_s, tu, eu))


def _mean_in(r: Readings | None, a_s: float, b_s: float) -> float | None:
    if r is None or len(r) == 0:
        return None
    m = (r.t_s >= a_s) & (r.t_s <= b_s)
    if not m.any():
        return None
    return float(np.mean(r.value[m]))


def estimate_window(rec: Recording, region: Region, source: str = "nvml.buffer") -> WindowEstimate:
    """Energy and context of one region, from the 20 ms sample buffer and the energy counter.

    The buffer's readings are treated as means over the interval since the previous reading
    (the averaging model); the uncertainty combines the scatter of the readings inside the
    window with the error of attributing the two partly covered edge samples.
    """
    a, b = region.start_s, region.end_s
    buf = rec.get(source)
    notes: list[str] = []
    energy = unc = mean_p = max_p = idle = None
    resolvable = False
    if buf is not None and len(buf) >= 3:
        e, covered = hold_integral_j(buf, a, b)
        dur = b - a
        dt = np.diff(buf.t_s)
        period = float(np.median(dt)) if dt.size else 0.02
        if covered >= 0.999 * dur and dur > 0:
            energy = e
            mean_p = e / dur
            inside = (buf.t_s > a) & (buf.t_s <= b + period)
            pin = buf.value[inside]
            max_p = float(np.max(pin)) if pin.size else None
            n = max(round(dur / period), 1)
            spread = float(np.std(pin)) if pin.size > 1 else 0.0
            # Each partly covered edge sample may belong to the window or not: ±half its excess.
            edge = 0.0
            for t_edge in (a, b):
                j = int(np.searchsorted(buf.t_s, t_edge))
                if 0 < j < len(buf):
                    neighbours = buf.value[max(j - 2, 0) : j + 2]
                    edge += (0.5 * period * float(np.ptp(neighbours))) ** 2
            unc = float(np.sqrt(edge + (spread * period) ** 2 * n / max(n, 1)))
            resolvable = dur >= 2 * period
            if not resolvable:
                notes.append(f"window {dur * 1e3:.1f} ms is shorter than two sensor periods ({period * 1e3:.0f} ms)")
        else:
            notes.append("power samples do not cover the whole window")
        pre = (buf.t_s > a - 0.3) & (buf.t_s < a - 0.05)
        if pre.any():
            idle = float(np.median(buf.value[pre]))
    else:
        notes.append(f"no {source} readings")
    counter = None
    en = rec.get("nvml.energy")
    if en is not None and b - a >= 1.0:
        counter = counter_energy_j(en, a, b)
    thr = rec.get("nvml.throttle")
    reasons: tuple[str, ...] = ()
    throttled: bool | None = None
    if thr is not None and len(thr):
        m = (thr.t_s >= a) & (thr.t_s <= b)
        mask = int(np.bitwise_or.reduce(thr.value[m].astype(np.int64))) if m.any() else 0
        names, throttled = decode_throttle(mask)
        reasons = tuple(n for n in names if n != "gpu_idle")
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
        sm_clock_mhz=_mean_in(rec.get("nvml.sm_clock"), a, b),
        mem_clock_mhz=_mean_in(rec.get("nvml.mem_clock"), a, b),
        temperature_c=t_c,
        throttle_reasons=reasons,
        throttled=throttled,
        resolvable=resolvable,
        source=source,
        notes=tuple(notes),
    )

"""Window energies from NVML's cumulative energy counter, without the bias of interpolating its updates.

The counter (``nvmlDeviceGetTotalEnergyConsumption``) changes only at its updates (~100 ms on
H100/H200) and is read by a blocking call of 2.4–4 ms, so a poller sees each new value some time
after the update. Placing each value at the first poll that saw it and interpolating linearly
between those points (the old ``energy.counter_energy_j``) is biased low for any window that
draws more than its surroundings, on two counts:

* **Edge interpolation**: inside the update interval that holds a window's start, linear
  interpolation spreads the interval's energy evenly, so the busy part after the start is partly
  charged before it; at the end, the idle part after the end is partly charged inside. Each edge
  loses on average ``P_u/6 · ΔP`` (``P_u`` the update period, ``ΔP`` the step at the edge): with
  100 ms updates, ~33 ms of the step per window, −4 to −7 % for the 0.5 s repetitions of
  ``measure_callable``, −2 % at 1 s.
* **Late placement**: the first poll that sees a value comes after the update by up to one poll
  interval plus half a call: every window is read shifted late, losing ``δ·ΔP`` more.

Here the update instants are estimated from the brackets (last poll with the old value, first
with the new one) on the counter's regular grid, each update interval becomes one reading of its
mean power stamped at its end (an averaging sensor whose windows tile the timeline), and the
windows are solved through the energy-conserving deconvolution of
:func:`~archline.measurement.windows.window_energies`. Over whole update intervals this equals the
counter exactly; at a window's edges the interval's energy is split by the levels fitted to its
neighbours, not evenly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Readings
from archline.core.recording import Region
from archline.errors import SensorError
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import WindowEnergy, window_energies

__all__ = [
    "CounterUpdates",
    "counter_call_energy",
    "counter_energy",
    "counter_model",
    "counter_power",
    "counter_updates",
    "counter_window_energies",
]

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class CounterUpdates:
    """The counter's updates: instants (s, host clock), values (J), and the 1 σ of each instant (s).

    ``on_grid`` is True when the updates were placed on a fitted regular grid (period
    ``period_s``), False when each was put at the middle of its bracket.
    """

    t_s: F64
    energy_j: F64
    sigma_s: float
    period_s: float
    on_grid: bool


def counter_updates(r: Readings, *, call_s: float = 0.004) -> CounterUpdates:
    """Where the counter's updates happened, from the polls that saw it (stamped at mid-call).

    An update lies between the last poll that still saw the old value and the first that saw
    the new one. The counter updates on a regular grid, so a grid is fitted to the middles of
    those brackets and its phase is narrowed to what every bracket allows; when the brackets
    do not agree with one grid (an irregular counter), each update is put at its bracket's
    middle, uncertain by the bracket's width / √12. A poll is stamped at the middle of its
    blocking call but may have read the counter anywhere inside it, so each bracket is widened
    by half of ``call_s``, the longest call.
    """
    t, e = np.asarray(r.t_s, np.float64), np.asarray(r.value, np.float64)
    if t.size < 3:
        raise SensorError(f"{r.source}: too few counter readings ({t.size})")
    k = np.nonzero(np.diff(e) != 0)[0] + 1
    if k.size < 2:
        raise SensorError(f"{r.source}: the counter changed fewer than twice")
    lo, hi = t[k - 1] - 0.5 * call_s, t[k] + 0.5 * call_s
    mid = 0.5 * (lo + hi)
    width = float(np.median(hi - lo))
    period = float(np.median(np.diff(mid)))
    fallback = CounterUpdates(mid, e[k], width / math.sqrt(12.0), period, False)
    if k.size < 4 or period <= 0:
        return fallback
    # Update counts between brackets, one interval at a time (a slightly wrong period must not
    # accumulate over hundreds of updates), then the grid by least squares.
    steps = np.round(np.diff(mid) / period)
    if np.any(steps < 1):
        return fallback
    n = np.concatenate([[0.0], np.cumsum(steps)])
    slope, icpt = np.polyfit(n, mid, 1)
    pred = icpt + slope * n
    off_lo, off_hi = float(np.max(lo - pred)), float(np.min(hi - pred))
    if off_lo > off_hi + 1e-4:  # no single grid passes through every bracket
        return fallback
    shift = 0.5 * (off_lo + off_hi)
    sigma = max(off_hi - off_lo, 0.0) / math.sqrt(12.0)
    return CounterUpdates(pred + shift, e[k], sigma, float(slope), True)


def counter_power(r: Readings) -> tuple[Readings, CounterUpdates]:
    """The counter as a power series: each update interval's mean power (W), stamped at its end."""
    u = counter_updates(r)
    dt = np.diff(u.t_s)
    if np.any(dt <= 0):
        raise SensorError(f"{r.source}: counter updates out of order")
    p = np.diff(u.energy_j) / dt
    return Readings(r.source, "power", u.t_s[1:].copy(), p, {"from": "energy counter"}), u


def counter_model(u: CounterUpdates) -> SensorModel:
    """The averaging model of the counter's power series: windows tile the timeline, no lag, each
    update instant uncertain by ``u.sigma_s``."""
    return SensorModel(
        kind="averaging",
        period_s=u.period_s,
        window_s=None,
        noise_w=None,
        edge_sigma_s=u.sigma_s,
        delay_sigma_s=u.sigma_s,
        origin="counter",
        notes=(f"energy counter updates every {1e3 * u.period_s:.1f} ms, instants ±{1e3 * u.sigma_s:.2f} ms",),
    )


def counter_window_energies(
    r: Readings,
    windows: Sequence[Region],
    *,
    groups: Sequence[str | None] | None = None,
    max_rel_uncertainty: float = 0.2,
) -> list[WindowEnergy]:
    """Energy (J, with 1 σ) of each window from the energy counter's readings ``r``.

    ``groups`` ties windows that draw the same power (repetitions of one call), as in
    :func:`~archline.measurement.windows.window_energies`. Windows need counter updates on both
    sides; a window inside one update interval is estimated from its neighbours and reported
    unresolvable when the counter cannot tell it apart.
    """
    power, u = counter_power(r)
    return window_energies(power, counter_model(u), windows, groups=groups, max_rel_uncertainty=max_rel_uncertainty)


def counter_call_energy(r: Readings, repetitions: Sequence[Region], calls_per_repetition: int) -> tuple[float, float]:
    """One call's energy (J) and its 1 σ (J) from the counter, over repetitions of the call.

    The repetitions share one level (they draw the same power), so the counter's 100 ms
    intervals that hold their edges are split by the idle level of the gaps between them, not
    evenly; the result matches a counter reference taken over a long back-to-back run between
    the counter's own updates (``measure_callable``'s cross-check).
    """
    if calls_per_repetition < 1 or not repetitions:
        raise SensorError("the counter cross-check needs repetitions of at least one call")
    res = counter_window_energies(r, repetitions, groups=["call"] * len(repetitions), max_rel_uncertainty=1.0)
    calls = calls_per_repetition * len(repetitions)
    energy = sum(w.energy_j for w in res) / calls
    # The tied level's error is common to every repetition: σ adds linearly, not in quadrature.
    sigma = sum(w.energy_uncertainty_j for w in res) / calls
    return float(energy), float(sigma)


def counter_energy(r: Readings, a_s: float, b_s: float) -> float | None:
    """Energy (J) over [a, b] from the energy counter, corrected for its update grid; None if the
    counter does not bracket the span or cannot resolve it (the unbiased successor of
    :func:`archline.measurement.energy.counter_energy_j`)."""
    try:
        (w,) = counter_window_energies(r, [Region("span", a_s, b_s)], max_rel_uncertainty=1.0)
    except SensorError:
        return None
    return float(w.energy_j) if w.resolvable and np.isfinite(w.energy_j) else None

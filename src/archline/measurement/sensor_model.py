"""The sensor model (kind, period, window, lag, delay) and its automatic choice from a trace."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, get_args

import numpy as np
from numpy.typing import NDArray

from archline.core.readings import Readings
from archline.errors import SensorError, UnknownNameError
from archline.hw.simulated import SensorKind
from archline.measurement.clean import (
    REPEATS_NOTE,
    drop_repeats,
    estimate_noise_w,
    estimate_quantum_w,
    find_displaced,
    update_period,
)
from archline.measurement.edges import EdgeStats, edge_stats, kind_from_edges, lag_from_rises
from archline.measurement.lagged import fit_rising_edges
from archline.measurement.response import kernel_support_s

__all__ = [
    "SENSOR_KINDS",
    "EdgeStats",
    "SensorModel",
    "classify",
    "edge_stats",
    "infer_model",
    "lag_from_rises",
    "parse_kind",
]

F64 = NDArray[np.float64]
SENSOR_KINDS: tuple[str, ...] = get_args(SensorKind)

#: A reading whose lag tail decays to 10 % of its weight spans this many time constants.
_TENTH = math.log(10.0)


def parse_kind(kind: str) -> SensorKind:
    """Validate a sensor kind name (``lagged``, ``averaging``, ``part-time``)."""
    k = kind.strip().lower().replace("_", "-")
    if k == "parttime":
        k = "part-time"
    if k not in SENSOR_KINDS:
        raise UnknownNameError(f"unknown sensor kind {kind!r} (expected one of: {', '.join(SENSOR_KINDS)})")
    return k  # type: ignore[return-value]


def classify(period_s: float, window_s: float | None, lag_s: float) -> tuple[SensorKind, float]:
    """The kind of a sensor with this response, and its coverage.

    Coverage is the fraction of each update period that a reading responds to by at least
    10 % of its peak weight: the window plus ln(10)·C of lag tail (capped at 1). Below 0.6
    the sensor is part-time; otherwise it is lagged when the lag dominates the window (and
    is at least a quarter period), else averaging.
    """
    w = period_s if window_s is None else window_s
    coverage = min(1.0, (w + _TENTH * lag_s) / period_s) if period_s > 0 else 1.0
    if coverage < 0.6:
        return "part-time", coverage
    if lag_s > w and lag_s >= 0.25 * period_s:
        return "lagged", coverage
    return "averaging", coverage


@dataclass(frozen=True)
class SensorModel:
    """How one sensor channel turns true power into readings; all times in s, powers in W.

    Reading ``k`` stamped ``t_k`` is the mean of the true power, after a first-order lag
    ``lag_s`` (Burtscher's C), over ``(t_k − delay_s − W, t_k − delay_s]``, where ``W`` is
    ``window_s`` or, when None, the interval since the previous reading. ``undisplace``
    moves readings stamped off their regular grid back onto it first. ``edge_sigma_s`` is the
    timing uncertainty of one window edge as seen through this sensor (from a calibration, or
    the timestamp jitter); ``noise_w`` the reading noise (None: estimated from the data).
    ``identified`` is False when the data could not show the kind and it was assumed; windows
    shorter than two update periods are then never reported as resolved. ``edge_coherent``:
    ``edge_sigma_s`` is one unknown offset shared by every edge (where a reading looks relative
    to its stamp, when nothing calibrated it), charged through the delay, not edge by edge.
    """

    kind: SensorKind
    period_s: float
    window_s: float | None = None
    lag_s: float = 0.0
    delay_s: float = 0.0
    period_jitter_s: float = 0.0
    undisplace: bool = False
    noise_w: float | None = None
    lag_sigma_s: float = 0.0
    delay_sigma_s: float = 0.0
    window_sigma_s: float = 0.0
    edge_sigma_s: float | None = None
    identified: bool = True
    edge_coherent: bool = False
    origin: str = "auto"
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def coverage(self) -> float:
        return classify(self.period_s, self.window_s, self.lag_s)[1]

    @property
    def correct_lag(self) -> bool:
        """Whether Burtscher's correction is applied before attribution.

        Only when the lag is at least one update period: for a shorter lag the symmetric
        difference over two periods is a poor derivative, and the response model already
        accounts for the lag exactly.
        """
        return self.kind == "lagged" and self.lag_s >= self.period_s

    @property
    def mixing_s(self) -> float:
        """Span (s) over which one reading mixes the power of neighbouring times by more than
        1 % (after Burtscher's correction, when it is applied)."""
        w = self.period_s if self.window_s is None else self.window_s
        if self.lag_s <= 0:
            return max(self.delay_s, 0.0) + w
        if self.correct_lag:
            x = self.period_s / self.lag_s
            resid = abs(1.0 - math.sinh(x) / x)
            tail = self.lag_s * max(math.log(resid / 0.01), 0.0) if resid > 0 else 0.0
        else:
            tail = self.lag_s * math.log(100.0)
        return max(self.delay_s, 0.0) + w + tail

    @property
    def support_s(self) -> float:
        """How far back from its stamp a reading responds to the true power."""
        w = self.period_s + 3 * self.period_jitter_s if self.window_s is None else self.window_s
        return kernel_support_s(w, self.delay_s, self.lag_s)

    def with_(self, **changes: Any) -> SensorModel:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "origin": self.origin,
            "update_period_s": self.period_s,
            "update_jitter_s": self.period_jitter_s,
            "lag_constant_s": self.lag_s,
            "lag_constant_sigma_s": self.lag_sigma_s,
            "averaging_window_s": self.period_s if self.window_s is None else self.window_s,
            "window_tiles_timeline": self.window_s is None,
            "delay_s": self.delay_s,
            "coverage": self.coverage,
            "undisplace_timestamps": self.undisplace,
            "noise_w": self.noise_w,
            "edge_sigma_s": self.edge_sigma_s,
            "identified": self.identified,
            "edge_sigma_coherent": self.edge_coherent,
            "notes": list(self.notes),
            **self.extra,
        }


#: Rising edges :func:`infer_model` fits (evenly spread over the trace): the lag is their weighted
#: median, which 24 edges pin down as well as 60 at 40 % of the cost on long traces.
INFER_EDGES = 24


def infer_model(
    readings: Readings,
    *,
    kind: str | None = None,
    capacitance_s: float | None = None,
) -> SensorModel:
    """Choose the sensor model from the data alone (no known loads), with optional overrides.

    The update period and its jitter come from the timestamps (after dropping repeats and
    moving displaced readings back onto their grid); the kind from how transitions look
    (see :func:`edge_stats`); the lag constant from exponential fits to lagged transitions.
    ``kind`` and ``capacitance_s`` override what the data says.
    """
    if len(readings) < 3:
        raise SensorError(f"{readings.source}: too few readings ({len(readings)}) to model the sensor")
    r = drop_repeats(readings)
    t, y = r.t_s, r.value
    notes: list[str] = [str(r.meta[REPEATS_NOTE])] if REPEATS_NOTE in r.meta else []
    disp = find_displaced(t)
    undisplace = False
    if disp.fraction(t.size) >= 0.05 and disp.typical_shift_s >= 0.25 * disp.period_s:
        undisplace = True
        t = t.copy()
        t[disp.index] += disp.shift_s
        notes.append(
            f"{disp.count} readings ({100 * disp.fraction(t.size):.0f} %) stamped "
            f"{1e3 * disp.typical_shift_s:.1f} ms off the {1e3 * disp.period_s:.1f} ms grid; moved back"
        )
    period, jitter = update_period(t)
    noise = max(estimate_noise_w(y), estimate_quantum_w(y) / math.sqrt(12.0))
    stats = edge_stats(t, y, noise, fit_lag=False)
    rise = fit_rising_edges(t, y, noise, max_edges=INFER_EDGES)
    lag, lag_sigma, window, guessed, identified, edge_sigma = kind_from_edges(stats, rise, period, jitter, notes)
    chosen: SensorKind = guessed
    origin = "auto"
    if kind is not None and kind != "auto":
        chosen = parse_kind(kind)
        origin = "override"
        if chosen != guessed:
            notes.append(f"kind overridden: {chosen} (the data suggested {guessed})")
            window = 0.0 if chosen == "lagged" else None
    if capacitance_s is not None:
        if capacitance_s < 0:
            raise SensorError(f"capacitance must be >= 0 s, got {capacitance_s}")
        lag, lag_sigma = float(capacitance_s), 0.0
        origin = "override"
    if chosen == "lagged" and lag <= 0:
        raise SensorError("lagged sensor without a lag constant: no lagged transition to fit; pass --capacitance")
    if chosen == "lagged":
        window = 0.0
    if chosen != "lagged" and capacitance_s is None:
        lag = 0.0
    window_sigma = 0.1 * period if chosen == "averaging" and window is not None else 0.0
    if chosen == "part-time" and window is None:
        window = 0.25 * period
        identified = False
        notes.append("part-time window not identifiable from the trace alone: assumed 25 % of the period")
    return SensorModel(
        kind=chosen,
        period_s=period,
        window_s=window,
        lag_s=lag,
        delay_s=0.0,
        period_jitter_s=jitter,
        undisplace=undisplace,
        noise_w=noise,
        lag_sigma_s=lag_sigma,
        window_sigma_s=window_sigma,
        edge_sigma_s=edge_sigma,
        identified=identified or origin == "override",
        edge_coherent=True,
        origin=origin,
        notes=tuple(notes),
        extra={"edges": stats.n_edges, "readings": len(readings), "repeats_dropped": len(readings) - len(r)},
    )

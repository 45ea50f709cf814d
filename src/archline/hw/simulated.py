"""Simulated power sensors: turn a known true-power signal into the readings a real sensor would give."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from archline.core.readings import Clock, Quantity, Readings, empty_readings

__all__ = [
    "PiecewisePower",
    "SensorKind",
    "SimulatedPowerSource",
    "SimulatedSensor",
    "simulate_counter_polls",
    "simulate_energy",
    "simulate_polled",
    "simulate_power",
    "update_times",
]

#: The three sensor behaviours archline models (see docs/measurement.md).
SensorKind = Literal["lagged", "averaging", "part-time"]

F64 = NDArray[np.float64]

#: Lags shorter than this (s) are treated as none (avoids overflow in the exponentials).
_MIN_LAG_S = 1e-9


@dataclass(frozen=True)
class PiecewisePower:
    """A true-power signal that is constant between edges.

    ``power_w[k]`` holds on ``[edges_s[k], edges_s[k+1])``. Before the first edge the signal
    is ``power_w[0]`` and after the last edge it stays at ``power_w[-1]``, so every query time
    is defined. Integrals and first-order-lag responses are exact (closed form).
    """

    edges_s: F64
    power_w: F64

    def __post_init__(self) -> None:
        e = np.asarray(self.edges_s, dtype=np.float64)
        p = np.asarray(self.power_w, dtype=np.float64)
        if e.ndim != 1 or p.ndim != 1 or e.size != p.size + 1 or p.size < 1:
            raise ValueError("PiecewisePower needs n+1 edges and n levels (n >= 1)")
        if np.any(np.diff(e) < 0):
            raise ValueError("PiecewisePower edges must be non-decreasing")
        object.__setattr__(self, "edges_s", e)
        object.__setattr__(self, "power_w", p)

    @classmethod
    def constant(cls, power_w: float, start_s: float, end_s: float) -> PiecewisePower:
        return cls(np.array([start_s, end_s]), np.array([power_w]))

    @property
    def start_s(self) -> float:
        return float(self.edges_s[0])

    @property
    def end_s(self) -> float:
        return float(self.edges_s[-1])

    def _breaks(self) -> tuple[F64, F64]:
        # Level k starts at breaks[k]; the last level extends to +inf.
        return self.edges_s[:-1], self.power_w

    def value(self, t_s: ArrayLike) -> F64:
        """Power at ``t_s`` (W), right-continuous at edges."""
        b, lv = self._breaks()
        k = np.clip(np.searchsorted(b, np.asarray(t_s, np.float64), side="right") - 1, 0, lv.size - 1)
        return lv[k]

    def _lag_states(self, lag_s: float) -> F64:
        """Lagged output at each break, starting in steady state at the first level."""
        b, lv = self._breaks()
        z = np.empty(b.size)
        z[0] = lv[0]
        decay = np.exp(-np.diff(b) / lag_s)
        for k in range(1, b.size):
            z[k] = lv[k - 1] + (z[k - 1] - lv[k - 1]) * decay[k - 1]
        return z

    def lagged(self, t_s: ArrayLike, lag_s: float) -> F64:
        """Output of a first-order lag with time constant ``lag_s`` (s) at ``t_s``."""
        if lag_s <= _MIN_LAG_S:
            return self.value(t_s)
        b, lv = self._breaks()
        q = np.asarray(t_s, np.float64)
        k = np.clip(np.searchsorted(b, q, side="right") - 1, 0, lv.size - 1)
        u = np.maximum(q - b[k], 0.0)
        z = self._lag_states(lag_s)
        return np.asarray(lv[k] + (z[k] - lv[k]) * np.exp(-u / lag_s), np.float64)

    def cumulative_j(self, t_s: ArrayLike, lag_s: float = 0.0) -> F64:
        """Integral (J) of the (optionally lagged) signal from the first edge to ``t_s``.

        Times before the first edge give negative values (the first level extends backwards).
        """
        b, lv = self._breaks()
        q = np.asarray(t_s, np.float64)
        dt = np.diff(b)
        if lag_s > _MIN_LAG_S:
            z = self._lag_states(lag_s)
            seg = lv[:-1] * dt + (z[:-1] - lv[:-1]) * lag_s * (-np.expm1(-dt / lag_s))
        else:
            seg = lv[:-1] * dt
        base = np.concatenate([[0.0], np.cumsum(seg)])
        k = np.clip(np.searchsorted(b, q, side="right") - 1, 0, lv.size - 1)
        u = q - b[k]
        out = base[k] + lv[k] * u
        if lag_s > _MIN_LAG_S:
            up = np.maximum(u, 0.0)
            out = out + (z[k] - lv[k]) * lag_s * (-np.expm1(-up / lag_s))
        return np.asarray(out, np.float64)

    def energy_j(self, a_s: float, b_s: float) -> float:
        """Exact energy of the true signal over ``[a_s, b_s]`` (J)."""
        c = self.cumulative_j(np.array([a_s, b_s]))
        return float(c[1] - c[0])

    def mean_w(self, a_s: float, b_s: float) -> float:
        return self.energy_j(a_s, b_s) / (b_s - a_s)


@dataclass(frozen=True)
class SimulatedSensor:
    """What a simulated sensor does to the true power.

    Reading ``k``, taken at the update instant ``τ_k``, is the mean of the lagged true power
    (first-order lag, time constant ``lag_s`` = Burtscher's C) over ``(τ_k − delay_s − W, τ_k −
    delay_s]``, where ``W`` is ``window_s`` or, when ``window_s`` is None, the time since the
    previous update (an averaging sensor whose windows tile the timeline). ``window_s = 0``
    gives an instantaneous sample. Then Gaussian noise (``noise_w``, W) is added and the value
    is rounded to ``quantum_w`` (W). The reading is stamped at ``τ_k`` plus Gaussian
    ``jitter_s``; the update instants themselves are ``period_s`` apart plus Gaussian
    ``period_jitter_s``. The energy counter (J, cumulative, exact true energy) updates every
    ``energy_period_s`` and is rounded to ``energy_quantum_j``.
    """

    kind: SensorKind
    period_s: float
    window_s: float | None = None
    lag_s: float = 0.0
    delay_s: float = 0.0
    quantum_w: float = 0.0
    noise_w: float = 0.0
    jitter_s: float = 0.0
    period_jitter_s: float = 0.0
    energy_period_s: float = 0.1
    energy_quantum_j: float = 0.001
    energy_offset_j: float = 1000.0
    name: str = "sim.power"

    def __post_init__(self) -> None:
        if self.period_s <= 0:
            raise ValueError("period_s must be positive")
        if self.kind == "part-time" and (self.window_s is None or self.window_s >= self.period_s):
            raise ValueError("a part-time sensor needs window_s shorter than period_s")

    @classmethod
    def k20(cls, **kw: float) -> SimulatedSensor:
        """The K20's lagged sensor (Burtscher et al., ICPE'14, §4.3, §5): C = 0.84 s, a fresh
        reading every 15 ms, 10 mW resolution. Reference constants from that paper."""
        args: dict[str, float] = {"period_s": 0.015, "lag_s": 0.84, "quantum_w": 0.01, "window_s": 0.0}
        args.update(kw)
        return cls(kind="lagged", **args)  # type: ignore[arg-type]

    @classmethod
    def averaging(cls, period_s: float = 0.02, **kw: float) -> SimulatedSensor:
        """Each reading is the mean since the previous one (e.g. a 20 ms sample buffer)."""
        return cls(kind="averaging", period_s=period_s, **kw)  # type: ignore[arg-type]

    @classmethod
    def part_time(cls, period_s: float = 0.1, window_s: float = 0.025, **kw: float) -> SimulatedSensor:
        """Each reading is the mean over only ``window_s`` of every ``period_s`` (Yang et al., SC'24)."""
        return cls(kind="part-time", period_s=period_s, window_s=window_s, **kw)  # type: ignore[arg-type]


def update_times(sensor: SimulatedSensor, t0_s: float, t1_s: float, rng: np.random.Generator) -> F64:
    """The sensor's update instants in ``[t0_s, t1_s]``: a regular grid plus period jitter."""
    n = math.floor((t1_s - t0_s) / sensor.period_s) + 1
    tau = t0_s + sensor.period_s * np.arange(n, dtype=np.float64)
    if sensor.period_jitter_s > 0:
        tau = tau + rng.normal(0.0, sensor.period_jitter_s, n)
        tau = np.sort(tau)
    return tau[(tau >= t0_s) & (tau <= t1_s)]


def _values_at(signal: PiecewisePower, sensor: SimulatedSensor, tau: F64, rng: np.random.Generator) -> F64:
    end = tau - sensor.delay_s
    if sensor.window_s is None:
        w = np.diff(tau, prepend=tau[0] - sensor.period_s) if tau.size else tau
    else:
        w = np.full(tau.shape, float(sensor.window_s))
    point = w <= 1e-12
    vals = np.empty(tau.shape)
    if np.any(point):
        vals[point] = signal.lagged(end[point], sensor.lag_s)
    if np.any(~point):
        e, ww = end[~point], w[~point]
        vals[~point] = (signal.cumulative_j(e, sensor.lag_s) - signal.cumulative_j(e - ww, sensor.lag_s)) / ww
    if sensor.noise_w > 0:
        vals = vals + rng.normal(0.0, sensor.noise_w, vals.shape)
    if sensor.quantum_w > 0:
        vals = np.round(vals / sensor.quantum_w) * sensor.quantum_w
    return np.asarray(vals, np.float64)


def _stamp(sensor: SimulatedSensor, tau: F64, rng: np.random.Generator) -> F64:
    if sensor.jitter_s > 0:
        return np.sort(tau + rng.normal(0.0, sensor.jitter_s, tau.shape))
    return tau


def simulate_power(
    signal: PiecewisePower,
    sensor: SimulatedSensor,
    t0_s: float | None = None,
    t1_s: float | None = None,
    *,
    seed: int | np.random.Generator = 0,
) -> Readings:
    """Every reading the sensor produces over ``[t0_s, t1_s]`` (default: the signal's span),
    each with its own timestamp, as NVML's sample buffer would deliver them."""
    rng = np.random.default_rng(seed)
    a = signal.start_s if t0_s is None else t0_s
    b = signal.end_s if t1_s is None else t1_s
    tau = update_times(sensor, a, b, rng)
    vals = _values_at(signal, sensor, tau, rng)
    return Readings(sensor.name, "power", _stamp(sensor, tau, rng), vals, {"simulated": sensor.kind})


def simulate_polled(
    signal: PiecewisePower,
    sensor: SimulatedSensor,
    poll_interval_s: float,
    t0_s: float | None = None,
    t1_s: float | None = None,
    *,
    seed: int | np.random.Generator = 0,
) -> Readings:
    """Readings as a program polling every ``poll_interval_s`` sees them: each query returns
    the latest update, stamped at the query time, so polling faster than the sensor updates
    repeats values (Burtscher §4.3)."""
    rng = np.random.default_rng(seed)
    a = signal.start_s if t0_s is None else t0_s
    b = signal.end_s if t1_s is None else t1_s
    tau = update_times(sensor, a, b, rng)
    vals = _values_at(signal, sensor, tau, rng)
    q = a + poll_interval_s * np.arange(math.floor((b - a) / poll_interval_s) + 1)
    k = np.searchsorted(tau, q, side="right") - 1
    ok = k >= 0
    return Readings(sensor.name, "power", q[ok].astype(np.float64), vals[k[ok]], {"simulated": sensor.kind})


def simulate_energy(
    signal: PiecewisePower,
    sensor: SimulatedSensor,
    t0_s: float | None = None,
    t1_s: float | None = None,
) -> Readings:
    """The cumulative energy counter (J) at each of its updates: the exact true energy since
    ``t0_s`` plus ``energy_offset_j``, rounded to ``energy_quantum_j``."""
    a = signal.start_s if t0_s is None else t0_s
    b = signal.end_s if t1_s is None else t1_s
    n = math.floor((b - a) / sensor.energy_period_s) + 1
    tu = a + sensor.energy_period_s * np.arange(n, dtype=np.float64)
    e = signal.cumulative_j(tu) - signal.cumulative_j(np.array([a]))[0] + sensor.energy_offset_j
    if sensor.energy_quantum_j > 0:
        e = np.round(e / sensor.energy_quantum_j) * sensor.energy_quantum_j
    return Readings(sensor.name.replace("power", "energy"), "energy", tu, np.asarray(e, np.float64))


def simulate_counter_polls(
    signal: PiecewisePower,
    *,
    period_s: float = 0.1,
    phase_s: float = 0.037,
    poll_gap_s: float = 0.01,
    call_s: tuple[float, float] = (0.0024, 0.004),
    quantum_j: float = 0.001,
    offset_j: float = 1000.0,
    seed: int | np.random.Generator = 0,
) -> Readings:
    """NVML's energy counter as a poller on its own thread sees it: the counter (exact true energy,
    rounded to ``quantum_j``) updates every ``period_s`` at ``phase_s`` past the signal's start;
    each blocking call lasts uniformly ``call_s`` (s), reads the counter at a random instant
    inside itself and is stamped at its middle; the poller sleeps ``poll_gap_s`` between calls."""
    rng = np.random.default_rng(seed)
    a, b = signal.start_s, signal.end_s
    ups = a + phase_s + period_s * np.arange(math.floor((b - a - phase_s) / period_s) + 1)
    at_up = signal.cumulative_j(ups) - signal.cumulative_j(np.array([a]))[0] + offset_j
    if quantum_j > 0:
        at_up = np.round(at_up / quantum_j) * quantum_j
    n = math.ceil((b - a) / (poll_gap_s + call_s[0])) + 1
    dur = rng.uniform(call_s[0], call_s[1], n)
    start = a + np.concatenate([[0.0], np.cumsum(dur[:-1] + poll_gap_s)])
    read = start + rng.uniform(0.0, 1.0, n) * dur
    k = np.searchsorted(ups, read, side="right") - 1
    ok = (k >= 0) & (start + dur <= b)
    stamp = start + 0.5 * dur
    return Readings("sim.energy", "energy", stamp[ok], at_up[k[ok]], {"simulated": "counter"})


@dataclass
class SimulatedPowerSource:
    """A :class:`~archline.core.readings.PowerSource` backed by a simulated sensor and an
    injected :class:`~archline.core.readings.Clock`, so a sampler can poll it in tests.

    ``mode="buffer"`` returns every update since the previous ``read()`` with its own
    timestamp (like NVML's sample buffer); ``mode="polled"`` returns one reading per call:
    the latest update, stamped at the clock's time (like ``nvmlDeviceGetPowerUsage``).
    ``quantity="energy"`` gives the cumulative counter instead of power. All updates over
    ``[signal.start_s, signal.end_s]`` are computed up front from ``seed``.
    """

    signal: PiecewisePower
    sensor: SimulatedSensor
    clock: Clock
    mode: Literal["buffer", "polled"] = "buffer"
    quantity: Quantity = "power"
    poll_interval_s: float = 0.005
    blocking: bool = False
    seed: int = 0
    name: str = ""
    nominal_period_s: float | None = None
    _t: F64 = field(init=False, repr=False)
    _v: F64 = field(init=False, repr=False)
    _last_s: float = field(init=False, repr=False, default=-math.inf)
    _closed: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        if self.quantity == "energy":
            r = simulate_energy(self.signal, self.sensor)
            self.blocking = True
            self.nominal_period_s = self.nominal_period_s or self.sensor.energy_period_s
        else:
            r = simulate_power(self.signal, self.sensor, seed=self.seed)
            self.nominal_period_s = self.nominal_period_s or self.sensor.period_s
        self.name = self.name or r.source
        self._t, self._v = r.t_s, r.value

    def read(self) -> Readings:
        if self._closed:
            return empty_readings(self.name, self.quantity)
        now = self.clock.now_s()
        if self.mode == "polled":
            k = int(np.searchsorted(self._t, now, side="right")) - 1
            self._last_s = now
            if k < 0:
                return empty_readings(self.name, self.quantity)
            return Readings(self.name, self.quantity, np.array([now]), np.array([self._v[k]]))
        lo = int(np.searchsorted(self._t, self._last_s, side="right"))
        hi = int(np.searchsorted(self._t, now, side="right"))
        self._last_s = now
        return Readings(self.name, self.quantity, self._t[lo:hi].copy(), self._v[lo:hi].copy())

    def close(self) -> None:
        self._closed = True

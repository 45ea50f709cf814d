"""The PowerSource interface: every sensor, real, simulated or recorded, yields timestamped Readings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

__all__ = ["Clock", "PowerSource", "Quantity", "Readings", "SystemClock", "empty_readings"]

#: What a source measures. Units are fixed per quantity:
#: ``power`` in W, ``energy`` in J (a cumulative counter), ``sm_clock`` in MHz,
#: ``mem_clock`` in MHz, ``temperature`` in °C, ``throttle`` a bit mask (NVML clock event
#: reasons), ``memory_used`` in bytes.
Quantity = Literal["power", "energy", "sm_clock", "mem_clock", "temperature", "throttle", "memory_used"]


@dataclass(frozen=True)
class Readings:
    """A batch of readings from one source, in time order.

    ``t_s`` is on the common clock: seconds of host wall-clock time (CLOCK_REALTIME, Unix
    epoch), float64. For a sensor that reports its own timestamps (NVML's sample buffer) it is
    that timestamp; for a polled value it is the host time of the query (mid-point of the call).
    ``value`` is in the unit of ``quantity`` (see :data:`Quantity`).
    """

    source: str
    quantity: Quantity
    t_s: NDArray[np.float64]
    value: NDArray[np.float64]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.t_s.shape != self.value.shape or self.t_s.ndim != 1:
            raise ValueError("Readings.t_s and .value must be 1-D arrays of the same length")

    def __len__(self) -> int:
        return int(self.t_s.shape[0])

    @staticmethod
    def concat(parts: list[Readings]) -> Readings:
        """Join batches of one source, in time order, keeping the first batch's metadata.

        A batch may hold a reading older than the previous batch's last (a driver that files a
        sample late); the result is sorted by time (stable, so equal stamps keep their order).
        """
        if not parts:
            raise ValueError("nothing to concatenate")
        first = parts[0]
        t = np.concatenate([p.t_s for p in parts]).astype(np.float64)
        v = np.concatenate([p.value for p in parts]).astype(np.float64)
        if t.size > 1 and np.any(np.diff(t) < 0):
            order = np.argsort(t, kind="stable")
            t, v = t[order], v[order]
        return Readings(first.source, first.quantity, t, v, dict(first.meta))


def empty_readings(source: str, quantity: Quantity) -> Readings:
    """A batch with no readings."""
    return Readings(source, quantity, np.empty(0, np.float64), np.empty(0, np.float64))


@runtime_checkable
class Clock(Protocol):
    """A source of time on the common clock (Unix-epoch seconds), injectable for tests."""

    def now_s(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The host's wall clock (``time.time_ns``), the clock NVML's sample buffer and CUPTI use."""

    def now_s(self) -> float:
        import time

        return time.time_ns() * 1e-9

    def sleep(self, seconds: float) -> None:
        import time

        if seconds > 0:
            time.sleep(seconds)


@runtime_checkable
class PowerSource(Protocol):
    """One sensor channel.

    ``read()`` returns the readings produced since the previous call (possibly none). A
    sampler thread calls it every ``poll_interval_s`` seconds; a source whose call is slow
    (``blocking`` True, e.g. NVML's energy counter at 2–4 ms a call) gets a thread of its own.
    ``nominal_period_s`` is the update period the driver documents, if any; archline measures
    the real one from the data rather than trusting it.
    """

    name: str
    quantity: Quantity
    poll_interval_s: float
    blocking: bool
    nominal_period_s: float | None

    def read(self) -> Readings: ...

    def close(self) -> None: ...

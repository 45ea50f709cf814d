"""A simulated GPU on an injected clock: code marks itself busy, and an averaging sensor reports the mean power.

The clock is the fake one of tests/helpers (it moves only when slept), so every test is deterministic."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from archline.core.readings import Clock, Quantity, Readings, empty_readings
from tests.helpers.fake_gpu import FakeClock


class LiveGPU:
    """True power: ``idle_w``, or ``busy_w`` while a ``busy()`` block runs (on ``clock``)."""

    def __init__(self, idle_w: float = 100.0, busy_w: float = 300.0, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or FakeClock()
        self.idle_w = idle_w
        self.busy_w = busy_w
        self.intervals: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    @contextmanager
    def busy(self) -> Iterator[None]:
        t0 = self.clock.now_s()
        with self._lock:  # open interval: the sensor sees the load while it runs
            k = len(self.intervals)
            self.intervals.append((t0, float("inf")))
        try:
            yield
        finally:
            with self._lock:
                self.intervals[k] = (t0, self.clock.now_s())

    def energy_j(self, a_s: float, b_s: float) -> float:
        """Exact integral of the true power over [a, b]."""
        with self._lock:
            iv = list(self.intervals)
        busy = sum(max(0.0, min(b, b_s, self.clock.now_s()) - max(a, a_s)) for a, b in iv)
        return self.idle_w * (b_s - a_s) + (self.busy_w - self.idle_w) * busy


class AveragingLiveSensor:
    """A PowerSource: every ``period_s`` a reading equal to the mean true power over the period."""

    def __init__(self, gpu: LiveGPU, period_s: float = 0.02, name: str = "nvml.buffer") -> None:
        self.gpu = gpu
        self.name = name
        self.quantity: Quantity = "power"
        self.poll_interval_s = 0.05
        self.blocking = False
        self.nominal_period_s = period_s
        self.period_s = period_s
        self._next = gpu.clock.now_s() + period_s

    def read(self) -> Readings:
        now = self.gpu.clock.now_s()
        ts = []
        while self._next <= now - 0.002:  # a period is reported once it is over
            ts.append(self._next)
            self._next += self.period_s
        if not ts:
            return empty_readings(self.name, self.quantity)
        t = np.array(ts)
        p = np.array([self.gpu.energy_j(x - self.period_s, x) / self.period_s for x in ts])
        return Readings(self.name, self.quantity, t, p)

    def close(self) -> None:
        pass

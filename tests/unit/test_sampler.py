"""The background sampler: every reading collected, regions marked, errors surfaced after stop."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from archline.core.readings import PowerSource, Quantity, Readings, empty_readings
from archline.errors import SensorError
from archline.measurement.sampler import Sampler
from tests.helpers.fake_gpu import FakeClock


class CountingSource:
    """Produces one reading per poll: its value is the poll number."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        blocking: bool = False,
        fail_after: int | None = None,
        clock: FakeClock | None = None,
    ) -> None:
        self.name = name
        self.clock = clock
        self.polled = threading.Event()
        self.quantity: Quantity = "power"
        self.poll_interval_s = interval_s
        self.blocking = blocking
        self.nominal_period_s = None
        self.n = 0
        self.fail_after = fail_after
        self.closed = False
        self.threads: set[str] = set()

    def read(self) -> Readings:
        self.threads.add(threading.current_thread().name)
        if self.fail_after is not None and self.n >= self.fail_after:
            raise SensorError(f"{self.name}: sensor went away")
        self.n += 1
        if self.n >= 10:
            self.polled.set()
        if self.n % 2 == 0:  # every other poll: nothing new (like a drained buffer)
            return empty_readings(self.name, self.quantity)
        now = self.clock.now_s() if self.clock is not None else time.time()
        return Readings(self.name, self.quantity, np.array([now]), np.array([float(self.n)]))

    def close(self) -> None:
        self.closed = True


def test_sources_are_polled_and_readings_kept_in_order() -> None:
    fast = CountingSource("fast", 0.002)
    slow = CountingSource("slow", 0.02, blocking=True)
    assert isinstance(fast, PowerSource)
    s = Sampler([fast, slow], settle_s=0.01)
    with s:  # real threads on the host clock: wait for the polls, not for a time
        assert fast.polled.wait(30) and slow.polled.wait(30)
    rec = s.stop()
    f = rec.readings["fast"]
    assert len(f) == (fast.n + 1) // 2  # every odd poll produced a reading, none lost
    assert np.all(np.diff(f.t_s) >= 0)
    assert rec.meta["polls"]["fast"] == fast.n
    assert len(rec.readings["slow"]) >= 5
    # the blocking source has a thread of its own
    assert slow.threads.isdisjoint(fast.threads)


def test_regions_are_marked_on_the_sampler_clock() -> None:
    clock = FakeClock()
    s = Sampler([CountingSource("a", 0.005, clock=clock)], clock, settle_s=0.0).start()
    with s.region("work", step=1):
        clock.sleep(0.02)
    s.mark("explicit", 10.0, 11.0, how="event")
    rec = s.stop()
    work = rec.region("work")
    assert work.duration_s == pytest.approx(0.02) and work.meta == {"step": 1}
    assert rec.region("explicit").how == "event"
    with pytest.raises(ValueError):
        s.mark("bad", 2.0, 1.0)


def test_a_failing_source_keeps_data_and_raises_on_stop() -> None:
    clock = FakeClock()
    bad = CountingSource("bad", 0.002, fail_after=5, clock=clock)
    s = Sampler([bad], clock, settle_s=0.0).start()
    for _ in range(5):
        clock.sleep(0.002)
        s.flush()
    with pytest.raises(SensorError, match="sensor went away"):
        s.stop()
    assert len(s.recording().readings["bad"]) == 3


def test_a_failing_telemetry_source_is_dropped_and_the_recording_goes_on() -> None:
    """Review of session 22: a clock or throttle source the driver refuses (NVML's clock-event reasons before driver
    535, a vGPU) ended every recording that opened it; such a source is now dropped, its error in the meta."""
    clock = FakeClock()
    power = CountingSource("power", 0.002, clock=clock)
    throttle = CountingSource("nvml.throttle", 0.002, fail_after=3, clock=clock)
    throttle.quantity = "throttle"
    s = Sampler([power, throttle], clock, settle_s=0.0).start()
    for _ in range(8):
        clock.sleep(0.002)
        s.flush()
    rec = s.stop()  # no error: the recording goes on without it
    assert rec.meta["dropped"] == {"nvml.throttle": "nvml.throttle: sensor went away"}
    assert len(rec.readings["nvml.throttle"]) == 2 and throttle.n == 3  # its readings so far kept, never read again
    assert rec.meta["polls"]["power"] == 9 and len(rec.readings["power"]) == 5


def test_an_injected_clock_means_no_thread_and_a_deterministic_recording() -> None:
    clock = FakeClock()
    a = CountingSource("a", 0.01, clock=clock)
    s = Sampler([a], clock, settle_s=0.05).start()
    clock.sleep(1.0)
    rec = s.stop()  # settle_s advanced the fake clock; one final read
    assert a.threads == {threading.current_thread().name}
    assert rec.end_s - rec.start_s == pytest.approx(1.05)
    assert rec.meta["polls"] == {"a": 1}


def test_duplicate_source_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Sampler([CountingSource("a", 0.1), CountingSource("a", 0.1)])


def test_close_closes_sources() -> None:
    a = CountingSource("a", 0.01)
    s = Sampler([a]).start()
    s.close()
    assert a.closed

"""Background sampling: poll every PowerSource on its own schedule and assemble a Recording."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from archline.core.readings import Clock, PowerSource, Readings, SystemClock, empty_readings
from archline.core.recording import Recording, Region
from archline.errors import ArchlineError, SensorError

__all__ = ["OPTIONAL_QUANTITIES", "Sampler"]

#: What a recording can do without: a source of one of these that fails with an ArchlineError (a driver without the
#: call, a vGPU that refuses it) is dropped, its readings so far kept and its error in the recording's meta
#: (``dropped``: source → message), rather than ending the recording. Power and energy sources stay fatal.
OPTIONAL_QUANTITIES: frozenset[str] = frozenset({"sm_clock", "mem_clock", "temperature", "throttle", "memory_used"})


class Sampler:
    """Polls sources on background threads (SMA-style) while the caller marks regions (MTSM).

    Cheap sources share one thread that wakes at the earliest due time; each ``blocking``
    source (NVML's energy counter, 2–4 ms a call) gets a thread of its own so it never delays
    the others. ``stop()`` waits ``settle_s`` so that readings covering the end of the last
    region (a 20 ms buffer sample is stamped at the end of its period) are collected, then
    reads every source a last time.

    Regions are marked on the same clock as the readings (the host's CLOCK_REALTIME), so a
    region's energy can be integrated from any source afterwards.

    ``background=False`` starts no thread: sources are read by :meth:`flush` and :meth:`stop`
    only. That is the mode for an injected clock (a simulated GPU whose sources report
    everything since their last read), where it makes every recording deterministic; it is the
    default whenever ``clock`` is not the host's :class:`SystemClock`.
    """

    def __init__(
        self,
        sources: Sequence[PowerSource],
        clock: Clock | None = None,
        *,
        settle_s: float = 0.1,
        meta: dict[str, Any] | None = None,
        background: bool | None = None,
    ) -> None:
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate source names: {names}")
        self._sources = list(sources)
        self._clock: Clock = clock or SystemClock()
        self._background = isinstance(self._clock, SystemClock) if background is None else background
        self._settle_s = settle_s
        self._meta = dict(meta or {})
        self._parts: dict[str, list[Readings]] = {s.name: [] for s in sources}
        self._regions: list[Region] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._errors: list[BaseException] = []
        self._dropped: dict[str, str] = {}
        self._start_s = 0.0
        self._end_s = 0.0
        self._polls: dict[str, int] = {s.name: 0 for s in sources}
        self._source_locks: dict[str, threading.Lock] = {s.name: threading.Lock() for s in sources}
        self._running = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Sampler:
        if self._running:
            return self
        self._running = True
        self._stop.clear()
        self._start_s = self._clock.now_s()
        if not self._background:
            return self
        cheap = [s for s in self._sources if not s.blocking]
        if cheap:
            self._threads.append(threading.Thread(target=self._loop, args=(cheap,), daemon=True, name="archline-poll"))
        for s in self._sources:
            if s.blocking:
                self._threads.append(
                    threading.Thread(target=self._loop, args=([s],), daemon=True, name=f"archline-{s.name}")
                )
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> Recording:
        """Stop polling and return everything recorded. Raises the first source error, if any."""
        if self._running:
            self._halt(settle=True)
            for s in self._sources:
                self._poll(s)
        if self._errors:
            err = self._errors[0]
            if isinstance(err, ArchlineError):
                raise err
            raise SensorError(f"sampler: a source failed ({err!r})")
        return self.recording()

    def close(self) -> None:
        """Stop if running, and close every source."""
        if self._running:
            self._halt(settle=False)
        for s in self._sources:
            s.close()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self._running:
            self._halt(settle=True)

    def _halt(self, *, settle: bool) -> None:
        """Stop the threads (after ``settle_s`` when ``settle``, so the end is covered)."""
        if settle:
            self._clock.sleep(self._settle_s)
            self._end_s = self._clock.now_s()
        self._stop.set()
        for t in self._threads:
            t.join()
        self._threads.clear()
        self._running = False

    # ------------------------------------------------------------------ regions
    def now_s(self) -> float:
        return self._clock.now_s()

    def mark(self, name: str, start_s: float, end_s: float, how: str = "host", **meta: Any) -> Region:
        """Record a region measured by the caller (times on the common clock)."""
        if end_s < start_s:
            raise ValueError(f"region {name!r}: end {end_s} before start {start_s}")
        r = Region(name, start_s, end_s, how, dict(meta))
        with self._lock:
            self._regions.append(r)
        return r

    @contextmanager
    def region(self, name: str, **meta: Any) -> Iterator[None]:
        """Mark the wall-clock span of the ``with`` block (the caller synchronises the GPU)."""
        t0 = self._clock.now_s()
        try:
            yield
        finally:
            self.mark(name, t0, self._clock.now_s(), "host", **meta)

    # ------------------------------------------------------------------ data
    def recording(self) -> Recording:
        """What has been recorded so far (a consistent snapshot)."""
        with self._lock:
            for parts in self._parts.values():
                if len(parts) > 1:  # compact, so later snapshots only join what is new
                    parts[:] = [Readings.concat(parts)]
            readings = {
                name: parts[0] if parts else empty_readings(name, self._quantity(name))
                for name, parts in self._parts.items()
            }
            regions = tuple(self._regions)
        end = self._end_s if self._end_s else self._clock.now_s()
        meta = dict(self._meta)
        meta["polls"] = dict(self._polls)
        if self._dropped:
            meta["dropped"] = dict(self._dropped)
        return Recording(readings, regions, self._start_s, end, meta)

    def _quantity(self, name: str) -> Any:
        for s in self._sources:
            if s.name == name:
                return s.quantity
        return "power"

    # ------------------------------------------------------------------ threads
    def flush(self, names: tuple[str, ...] | None = None) -> None:
        """Read the cheap sources now, from the calling thread (e.g. before estimating a region
        that just ended, so the readings covering its end are in the recording)."""
        for s in self._sources:
            if not s.blocking and (names is None or s.name in names):
                self._poll(s)

    def _poll(self, s: PowerSource) -> None:
        with self._source_locks[s.name]:
            if s.name not in self._dropped:
                self._poll_locked(s)

    def _poll_locked(self, s: PowerSource) -> None:
        try:
            r = s.read()
        except ArchlineError as exc:
            with self._lock:
                if s.quantity in OPTIONAL_QUANTITIES:  # telemetry: drop the source, keep recording
                    self._dropped[s.name] = str(exc)
                    return
                self._errors.append(exc)
            self._stop.set()
            return
        except BaseException as exc:  # keep what was recorded; stop() reports the error
            with self._lock:
                self._errors.append(exc)
            self._stop.set()
            return
        with self._lock:
            self._polls[s.name] += 1
            if len(r):
                self._parts[s.name].append(r)

    def _loop(self, sources: list[PowerSource]) -> None:
        due = {s.name: 0.0 for s in sources}
        while not self._stop.is_set():
            now = self._clock.now_s()
            for s in sources:
                if now >= due[s.name]:
                    self._poll(s)
                    due[s.name] = now + s.poll_interval_s
            wait = min(due.values()) - self._clock.now_s()
            if wait > 0:
                self._stop.wait(wait)

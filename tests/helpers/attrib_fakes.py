"""Fakes for attribution tests: a fake GPU whose 'kernels' draw known power, its sensors, its tracer, a fake cupti."""

from __future__ import annotations

import enum
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings, empty_readings
from archline.errors import CUPTIUnavailableError, GPUUnavailableError
from archline.hw.cupti.inject import ACTIVITY_DTYPE, CHUNK_HEADER, MAGIC, ActivityType, ChunkType
from archline.measurement.attribute.api import Backend

#: The FakeGPU a test installed, so that a program run in-process can launch 'kernels' on it.
CURRENT: list[FakeGPU] = []


class FakeGPU:
    """A GPU that draws ``idle_w`` at rest and a kernel's power while one 'runs' (time.sleep).

    Its energy counter updates every ``counter_period_s``; its buffer samples every
    ``buffer_period_s`` (each the mean power since the last). All on the real wall clock.
    """

    def __init__(self, idle_w: float = 100.0, counter_period_s: float = 0.02, buffer_period_s: float = 0.005) -> None:
        self.idle_w = idle_w
        self.counter_period_s = counter_period_s
        self.buffer_period_s = buffer_period_s
        self.t0 = time.time()
        self._lock = threading.Lock()
        self.kernels: list[tuple[str, float, float, float]] = []

    def launch(self, name: str, duration_s: float, power_w: float) -> None:
        # Registered before it 'runs', so sensors read while it runs see its power.
        s = time.time()
        e = s + duration_s
        with self._lock:
            self.kernels.append((name, s, e, power_w))
        time.sleep(max(0.0, e - time.time()))
        while time.time() < e:
            pass

    def energy_j(self, t: float) -> float:
        with self._lock:
            ks = list(self.kernels)
        e = self.idle_w * (t - self.t0)
        for _, s, end, p in ks:
            e += (p - self.idle_w) * max(0.0, min(end, t) - s)
        return e

    def backend(self, *, fail_tracer: bool = False, no_gpu: bool = False, injection: Path | None = None) -> Backend:
        """Sensors and tracer of this GPU. ``injection``: the path the injection build returns
        (None: the build fails, as on a machine without CUPTI)."""

        def open_sources(gpu: int) -> list[Any]:
            if no_gpu:
                raise GPUUnavailableError("no NVIDIA GPU found (fake)")
            return [CounterSource(self), BufferSource(self)]

        def tracer(on_batch: Callable[[list[Any]], None] | None) -> Any:
            return FakeTracer(self, on_batch, fail=fail_tracer)

        def build_injection() -> Path:
            if injection is None:
                raise CUPTIUnavailableError("CUPTI headers and library not found (fake GPU)")
            return injection

        return Backend(
            open_sources,
            lambda gpu: {"name": "Fake GPU", "uuid": "GPU-fake"},
            lambda gpu: {"power_limit_w": 700.0},
            tracer,
            pre_s=0.15,
            post_s=0.15,
            injection=build_injection,
        )


class _Source:
    quantity: Any = "power"
    poll_interval_s = 0.003
    blocking = False
    nominal_period_s: float | None = None
    name = ""

    def __init__(self, gpu: FakeGPU) -> None:
        self.gpu = gpu
        self._last = gpu.t0

    def close(self) -> None:
        pass


class CounterSource(_Source):
    """A cumulative energy counter (J), updated on a regular grid, read at the time of the query."""

    name = "nvml.energy"
    quantity = "energy"

    def read(self) -> Readings:
        now = time.time()
        period = self.gpu.counter_period_s
        last_update = self.gpu.t0 + np.floor((now - self.gpu.t0) / period) * period
        return Readings(self.name, "energy", np.array([now]), np.array([1e6 + self.gpu.energy_j(last_update)]))


class BufferSource(_Source):
    """An averaging power sensor: one reading per period, the mean power since the previous one."""

    name = "nvml.buffer"

    def read(self) -> Readings:
        now = time.time()
        p = self.gpu.buffer_period_s
        k0 = int(np.floor((self._last - self.gpu.t0) / p)) + 1
        k1 = int(np.floor((now - self.gpu.t0) / p))
        if k1 < k0:
            return empty_readings(self.name, "power")
        ts = self.gpu.t0 + np.arange(k0, k1 + 1) * p
        vals = np.array([(self.gpu.energy_j(t) - self.gpu.energy_j(t - p)) / p for t in ts])
        self._last = float(ts[-1])
        return Readings(self.name, "power", ts, vals)


class FakeTracer:
    """Returns the FakeGPU's kernels launched while it was running, as CUPTI would."""

    def __init__(self, gpu: FakeGPU, on_batch: Callable[[list[Any]], None] | None, *, fail: bool = False) -> None:
        self.gpu = gpu
        self.on_batch = on_batch
        self.fail = fail
        self.records: list[ActivityRecord] = []
        self.batch_errors: list[str] = []
        self.clock_map = None
        self._start = 0.0

    def start(self) -> FakeTracer:
        if self.fail:
            raise CUPTIUnavailableError("CUPTI cannot enable activity tracing (ERROR_INSUFFICIENT_PRIVILEGES)")
        self._start = time.time()
        return self

    def stop(self) -> list[ActivityRecord]:
        ks = [k for k in self.gpu.kernels if k[1] >= self._start]
        raw = [("kernel", n, int(s * 1e9), int(e * 1e9), 7, i, 0, 0) for i, (n, s, e, _) in enumerate(ks)]
        if self.on_batch is not None and raw:
            self.on_batch(raw)
        self.records = [ActivityRecord(n, s, e, stream=7, correlation_id=i) for i, (n, s, e, _) in enumerate(ks)]
        return self.records


# --------------------------------------------------------------------------- a fake cupti module


class FakeActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    CONCURRENT_KERNEL = 10
    DRIVER = 5


class FakeResult(enum.IntEnum):
    ERROR_INSUFFICIENT_PRIVILEGES = 35
    ERROR_NOT_INITIALIZED = 15


class FakeCuptiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"CUPTI error {status}")
        self.status = status


class FakeRecord:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class FakeCupti:
    """Enough of ``cupti.cupti`` for KernelTracer: callbacks, enable/disable, flush, timestamps.

    Its clock runs ``offset_ns`` ahead of the host clock and drifts by ``drift_ppm``.
    ``pending`` records are delivered at the next flush; ``refuse`` makes enabling fail.
    """

    ActivityKind = FakeActivityKind
    Result = FakeResult
    cuptiError = FakeCuptiError

    def __init__(self, *, offset_ns: int = 5_000_000, drift_ppm: float = 0.0, refuse: int | None = None) -> None:
        self.offset_ns = offset_ns
        self.drift_ppm = drift_ppm
        self.refuse = refuse
        self.host_ns = 1_795_000_000_000_000_000
        self.enabled: set[int] = set()
        self.callbacks: tuple[Callable[..., Any], Callable[..., Any]] | None = None
        self.pending: list[FakeRecord] = []
        self.registrations = 0

    def tick(self, ns: int) -> None:
        self.host_ns += ns

    def host_clock(self) -> int:
        self.host_ns += 200
        return self.host_ns

    def get_timestamp(self) -> int:
        self.host_ns += 50
        return int(self.host_ns + self.offset_ns + (self.host_ns - 1_795_000_000_000_000_000) * self.drift_ppm * 1e-6)

    def device_time(self, host_ns: int) -> int:
        return int(host_ns + self.offset_ns + (host_ns - 1_795_000_000_000_000_000) * self.drift_ppm * 1e-6)

    def activity_register_callbacks(self, requested: Callable[..., Any], completed: Callable[..., Any]) -> None:
        self.registrations += 1
        self.callbacks = (requested, completed)

    def activity_enable(self, kind: int) -> None:
        if self.refuse is not None:
            raise FakeCuptiError(self.refuse)
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag: int) -> None:
        assert self.callbacks is not None
        batch = [r for r in self.pending if r.kind in self.enabled or r.kind == FakeActivityKind.KERNEL]
        self.pending = []
        if batch:
            self.callbacks[1](batch)

    def kernel(self, name: str, start_host_ns: int, end_host_ns: int, **kw: Any) -> None:
        self.pending.append(
            FakeRecord(
                kind=int(FakeActivityKind.CONCURRENT_KERNEL),
                name=name,
                start=self.device_time(start_host_ns),
                end=self.device_time(end_host_ns),
                stream_id=kw.get("stream", 7),
                correlation_id=kw.get("corr", 1),
                device_id=0,
            )
        )


# --------------------------------------------------------------------------- injection library output


def injection_chunk(kind: int, count: int, payload: bytes) -> bytes:
    """One chunk of the injection library's binary format (payload padded to 8 bytes)."""
    payload += b"\0" * (-len(payload) % 8)
    return CHUNK_HEADER.pack(MAGIC, kind, count, len(payload)) + payload


def injection_output(
    kernels: Sequence[tuple[str, int, int]],
    *,
    clock: tuple[int, int] = (0, 0),
    memcpys: Sequence[tuple[int, int, int, int]] = (),
    dropped: int = 0,
    end: bool = True,
) -> bytes:
    """What cupti_inject.c writes for ``kernels`` (name, start_ns, end_ns on the device clock).

    ``clock`` is the (host, device) reading of the start clock pairs (the end pairs keep the same
    offset); ``memcpys`` are (copy kind, bytes, start_ns, end_ns); ``end=False`` leaves out the end
    pairs, as when the process was killed.
    """
    host0, dev0 = clock
    pairs = struct.pack("<3Q", host0, dev0, host0 + 40)
    out = injection_chunk(ChunkType.CLOCK_START, 1, pairs)
    ids: dict[str, int] = {}
    names = b""
    for name, _, _ in kernels:
        if name not in ids:
            ids[name] = len(ids) + 1
            raw = name.encode()
            names += struct.pack("<II", ids[name], len(raw)) + raw + b"\0" * (-len(raw) % 8)
    acts = np.zeros(len(kernels) + len(memcpys), ACTIVITY_DTYPE)
    for i, (name, s, e) in enumerate(kernels):
        acts[i] = (ActivityType.KERNEL, 0, 0, ids[name], s, e, 7, i + 1, 0, 0, 0)
    for j, (copy_kind, nbytes, s, e) in enumerate(memcpys, start=len(kernels)):
        acts[j] = (ActivityType.MEMCPY, copy_kind, 0, 0, s, e, 7, j + 1, 0, 0, nbytes)
    if ids:
        out += injection_chunk(ChunkType.NAMES, len(ids), names)
    if len(acts):
        out += injection_chunk(ChunkType.ACTIVITIES, len(acts), acts.tobytes())
    if dropped:
        out += injection_chunk(ChunkType.DROPPED, 0, struct.pack("<Q", dropped))
    if end:
        last = max((e for _, _, e in kernels), default=dev0) + 1_000_000
        pairs = struct.pack("<3Q", host0 + (last - dev0), last, host0 + (last - dev0) + 40)
        out += injection_chunk(ChunkType.CLOCK_END, 1, pairs)
    return out

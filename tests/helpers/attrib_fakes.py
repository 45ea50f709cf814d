"""Fakes for attribution tests: a fake GPU whose 'kernels' draw known power, its sensors, its tracer, a fake cupti.

Everything runs on the fake clock of tests/helpers (it moves only when a kernel 'runs' or the
code sleeps), so every recording, and every attribution computed from it, is deterministic.
"""

from __future__ import annotations

import enum
import os
import struct
import tempfile
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings, empty_readings
from archline.errors import CUPTIUnavailableError, GPUUnavailableError
from archline.hw.cupti.inject import ACTIVITY_DTYPE, CHUNK_HEADER, MAGIC, ActivityType, ChunkType
from archline.measurement.attribute.backend import Backend
from archline.measurement.attribute.program import ProgramSpec, run_binary
from tests.helpers.fake_gpu import FakeClock

#: The module name under which a test installs a FakeGPU (``monkeypatch.setitem(sys.modules, ...)``)
#: so that a program run in-process can ``import`` it and launch 'kernels' on it, as a real one imports torch.
PROGRAM_MODULE = "archline_fake_cuda"

#: Environment variables a child program reads to run on the fake clock: its start (ns) and the file
#: where it writes the fake time (ns) at which it ended.
CHILD_START_NS = "ARCHLINE_FAKE_CLOCK_NS"
CHILD_END_FILE = "ARCHLINE_FAKE_CLOCK_END"


class FakeGPU:
    """A GPU that draws ``idle_w`` at rest and a kernel's power while one 'runs' (the fake clock moves on).

    Its energy counter updates every ``counter_period_s``; its buffer samples every
    ``buffer_period_s`` (each the mean power since the last).
    """

    def __init__(
        self,
        idle_w: float = 100.0,
        counter_period_s: float = 0.02,
        buffer_period_s: float = 0.005,
        clock: FakeClock | None = None,
        child_default_s: float = 0.2,
    ) -> None:
        self.clock = clock or FakeClock()
        self.idle_w = idle_w
        self.counter_period_s = counter_period_s
        self.buffer_period_s = buffer_period_s
        #: How long a child program that does not say when it ended 'runs' on the fake clock.
        self.child_default_s = child_default_s
        self.t0 = self.clock.now_s()
        self.kernels: list[tuple[str, float, float, float]] = []

    def launch(self, name: str, duration_s: float, power_w: float) -> None:
        s = self.clock.now_s()
        self.clock.sleep(duration_s)
        self.kernels.append((name, s, self.clock.now_s(), power_w))

    def module(self) -> types.ModuleType:
        """This GPU as a module a program imports (installed in sys.modules as :data:`PROGRAM_MODULE`)."""
        m = types.ModuleType(PROGRAM_MODULE)
        m.launch = self.launch  # type: ignore[attr-defined]
        return m

    def energy_j(self, t: float) -> float:
        e = self.idle_w * (t - self.t0)
        for _, s, end, p in self.kernels:
            e += (p - self.idle_w) * max(0.0, min(end, t) - s)
        return e

    def run_child(self, spec: ProgramSpec, env: Mapping[str, str], *, stdout_to_stderr: bool = False) -> int:
        """Run the child for real, telling it the fake time; then move the fake clock to when it says it ended."""
        fd, end_file = tempfile.mkstemp(prefix="archline-fake-end-")
        os.close(fd)
        try:
            env = {**env, CHILD_START_NS: str(round(self.clock.now_s() * 1e9)), CHILD_END_FILE: end_file}
            code = run_binary(spec, env, stdout_to_stderr=stdout_to_stderr)
            text = Path(end_file).read_text().strip()
        finally:
            os.unlink(end_file)
        end_s = int(text) * 1e-9 if text else self.clock.now_s() + self.child_default_s
        self.clock.sleep(end_s - self.clock.now_s())
        return code

    def backend(self, *, fail_tracer: bool = False, no_gpu: bool = False, injection: Path | None = None) -> Backend:
        """Sensors, tracer and clock of this GPU. ``injection``: the path the injection build returns
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
            clock=self.clock,
            pre_s=0.15,
            post_s=0.15,
            injection=build_injection,
            run_child=self.run_child,
        )


class FakeSource:
    """What the fake sensors share: a reader that returns everything since its last read (the sampler
    reads a source on an injected clock only when flushed or stopped)."""

    quantity: Any = "power"
    poll_interval_s = 0.003
    blocking = False
    nominal_period_s: float | None = None
    name = ""

    def __init__(self, gpu: FakeGPU) -> None:
        self.gpu = gpu
        self.last_s = gpu.t0

    def close(self) -> None:
        pass


class CounterSource(FakeSource):
    """A cumulative energy counter (J), updated on a regular grid, polled every ``poll_interval_s``:
    each poll reads the value of the counter's latest update."""

    name = "nvml.energy"
    quantity = "energy"

    def read(self) -> Readings:
        now = self.gpu.clock.now_s()
        step = self.poll_interval_s
        k0 = int(np.floor((self.last_s - self.gpu.t0) / step + 1e-9)) + 1
        k1 = int(np.floor((now - self.gpu.t0) / step + 1e-9))
        if k1 < k0:
            return empty_readings(self.name, "energy")
        polls = self.gpu.t0 + np.arange(k0, k1 + 1) * step
        period = self.gpu.counter_period_s
        updates = self.gpu.t0 + np.floor((polls - self.gpu.t0) / period + 1e-9) * period
        self.last_s = float(polls[-1])
        return Readings(self.name, "energy", polls, np.array([1e6 + self.gpu.energy_j(u) for u in updates]))


class BufferSource(FakeSource):
    """An averaging power sensor: one reading per period, the mean power since the previous one."""

    name = "nvml.buffer"

    def read(self) -> Readings:
        now = self.gpu.clock.now_s()
        p = self.gpu.buffer_period_s
        k0 = int(np.floor((self.last_s - self.gpu.t0) / p + 1e-9)) + 1
        k1 = int(np.floor((now - self.gpu.t0) / p + 1e-9))
        if k1 < k0:
            return empty_readings(self.name, "power")
        ts = self.gpu.t0 + np.arange(k0, k1 + 1) * p
        vals = np.array([(self.gpu.energy_j(t) - self.gpu.energy_j(t - p)) / p for t in ts])
        self.last_s = float(ts[-1])
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
        self.start_s = 0.0

    def start(self) -> FakeTracer:
        if self.fail:
            raise CUPTIUnavailableError("CUPTI cannot enable activity tracing (ERROR_INSUFFICIENT_PRIVILEGES)")
        self.start_s = self.gpu.clock.now_s()
        return self

    def stop(self) -> list[ActivityRecord]:
        ks = [k for k in self.gpu.kernels if k[1] >= self.start_s]
        raw = [("kernel", n, round(s * 1e9), round(e * 1e9), 7, i, 0, 0) for i, (n, s, e, _) in enumerate(ks)]
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

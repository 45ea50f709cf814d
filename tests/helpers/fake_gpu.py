"""A fake GPU for CPU tests: executor, clock and sampler whose true power and timing are known."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.core.executor import DeviceInfo, LaunchResult
from archline.core.readings import Readings
from archline.core.recording import Recording, Region


class FakeClock:
    """A clock that only moves when slept (or advanced by the fake GPU)."""

    def __init__(self, start_s: float = 1_700_000_000.0) -> None:
        self.t = start_s

    def now_s(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.t += seconds


@dataclass
class FakeKernel:
    name: str
    opt_level: int
    ptx: str


@dataclass
class Activity:
    start_s: float
    end_s: float
    power_w: float


@dataclass
class FakeExecutor:
    """Runs 'kernels' instantly on a FakeClock: a launch takes ``s_per_iter × iters`` seconds.

    The first ``u32`` argument named by ``iters_index`` is the trip count. Outputs are written
    by ``writer(args) -> dict[buffer index, bytes]`` if given, else left as uploaded.
    """

    clock: FakeClock
    s_per_iter: float = 1e-6
    busy_power_w: float = 300.0
    idle_power_w: float = 100.0
    device: DeviceInfo = field(
        default_factory=lambda: DeviceInfo(index=0, name="Fake H100", compute_capability=(9, 0), sm_count=132)
    )
    writer: Any = None
    iters_index: int | None = None
    #: index (among non-pointer arguments) of a ``u64`` duration in ns that sets the launch time
    dur_ns_index: int | None = None
    activity: list[Activity] = field(default_factory=list)
    buffers: dict[int, NDArray[np.uint8]] = field(default_factory=dict)
    loads: list[tuple[str, int]] = field(default_factory=list)
    _next: int = 0

    def load(self, ptx: str, entry: str, *, opt_level: int = 3) -> FakeKernel:
        self.loads.append((entry, opt_level))
        return FakeKernel(entry, opt_level, ptx)

    def alloc(self, nbytes: int) -> int:
        self._next += 1
        self.buffers[self._next] = np.zeros(nbytes, dtype=np.uint8)
        return self._next

    def upload(self, buf: int, data: NDArray[np.generic]) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        self.buffers[buf][: raw.size] = raw

    def download(self, buf: int, nbytes: int) -> NDArray[np.uint8]:
        return self.buffers[buf][:nbytes].copy()

    def fill(self, buf: int, nbytes: int, byte: int) -> None:
        self.buffers[buf][:nbytes] = byte

    def free(self, buf: int) -> None:
        self.buffers.pop(buf, None)

    def launch(
        self,
        kernel: FakeKernel,
        grid: int,
        block: int,
        args: Sequence[tuple[str, Any]],
        *,
        shared_bytes: int = 0,
        repeat: int = 1,
        per_launch_timing: bool = False,
    ) -> LaunchResult:
        iters = 1
        scalars = [v for k, v in args if k != "ptr"]
        if self.iters_index is not None:
            iters = int(scalars[self.iters_index])
        per = self.s_per_iter * iters
        if self.dur_ns_index is not None:
            per = float(scalars[self.dur_ns_index]) * 1e-9
        h0 = self.clock.now_s()
        for _ in range(repeat):
            a = self.clock.now_s()
            self.clock.sleep(per)
            self.activity.append(Activity(a, self.clock.now_s(), self.busy_power_w))
        if self.writer is not None:
            for buf, data in self.writer(args).items():
                self.upload(buf, data)
        return LaunchResult(repeat, per * repeat, h0, self.clock.now_s(), (per,) * repeat if per_launch_timing else ())

    def synchronize(self) -> None:
        return None

    def true_power(self, t_s: NDArray[np.float64]) -> NDArray[np.float64]:
        p = np.full(t_s.shape, self.idle_power_w)
        for act in self.activity:
            p[(t_s >= act.start_s) & (t_s < act.end_s)] = act.power_w
        return p


class FakeSampler:
    """Synthesises an ideal averaging sensor (mean over each 20 ms period) from a FakeExecutor."""

    def __init__(self, ex: FakeExecutor, period_s: float = 0.02, sm_clock_mhz: float = 1980.0) -> None:
        self.ex = ex
        self.period_s = period_s
        self.sm_clock_mhz = sm_clock_mhz
        self.t0 = ex.clock.now_s() - 1.0
        self.regions: list[Region] = []

    def mark(self, name: str, start_s: float, end_s: float, how: str = "host", **meta: Any) -> Region:
        r = Region(name, start_s, end_s, how, dict(meta))
        self.regions.append(r)
        return r

    def recording(self) -> Recording:
        t1 = self.ex.clock.now_s()
        edges = np.arange(self.t0, t1, self.period_s)
        fine = 1e-4
        vals = []
        for a in edges[:-1]:
            ts = np.arange(a, a + self.period_s, fine)
            vals.append(float(np.mean(self.ex.true_power(ts))))
        t = edges[1:]
        buf = Readings("nvml.buffer", "power", t.astype(np.float64), np.array(vals))
        clk = Readings("nvml.sm_clock", "sm_clock", t.astype(np.float64), np.full(t.shape, self.sm_clock_mhz))
        return Recording({"nvml.buffer": buf, "nvml.sm_clock": clk}, tuple(self.regions), self.t0, t1)

"""Known loads for sensor experiments: busy pulses, steps and square waves with exact GPU timestamps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from archline.core.arch import VOLTA_NOTE, arch_for_cc, ptx_for
from archline.core.executor import Executor
from archline.core.readings import Clock, SystemClock
from archline.core.recording import Region
from archline.errors import UnsupportedArchitectureError
from archline.measurement.calibrate.loads import busy_spec

__all__ = ["BusyLoad"]


class BusyLoad:
    """Runs the timed busy kernel (kernels/load.py) and returns each pulse as a Region.

    The region's ends are the kernel's own %globaltimer stamps (``how="globaltimer"``) moved
    onto the host clock. %globaltimer runs at the host's rate but not at its origin: in the
    shipped runs it stood 2.3 ms behind CLOCK_REALTIME on one H100 and 2.7 ms ahead on an H200
    (results/*/sensor/validation). The offset is measured at start-up from a few short pulses,
    matching the middle of each kernel to the middle of the host's launch-to-sync span (their
    difference is half the launch latency minus half the wake-up latency: tens of µs). The raw
    stamps and host times are kept in each region's meta so the alignment can be checked.
    """

    def __init__(self, ex: Executor, *, blocks_per_sm: int = 8, block: int = 256, clock: Clock | None = None) -> None:
        self.ex = ex
        self.clock: Clock = clock or SystemClock()
        self.spec = busy_spec(blocks_per_sm=blocks_per_sm, block=block)
        arch = arch_for_cc(ex.device.compute_capability)
        if arch is None:
            raise UnsupportedArchitectureError(f"{ex.device.name}: {VOLTA_NOTE}")
        self.kernel = ex.load(ptx_for(self.spec, arch), self.spec.entry, opt_level=3)
        self.grid = self.spec.launch.grid_for(ex.device.sm_count)
        self.block = block
        threads = self.grid * block
        self._out = ex.alloc(4 * threads)
        self._stamps = ex.alloc(16)
        self.gt_offset_s: float | None = None
        offs = [self._raw(0.005)[2] for _ in range(5)]
        good = [o for o in offs if o is not None]
        self.gt_offset_s = float(np.median(good)) if good else None

    def _args(self, dur_s: float) -> list[tuple[str, Any]]:
        return [
            ("ptr", self._out),
            ("ptr", self._stamps),
            ("u64", int(dur_s * 1e9)),
            ("f32", 0.9999999),
            ("f32", 1e-7),
            ("f32", -1.0),
        ]

    def _raw(self, dur_s: float) -> tuple[Any, tuple[float, float], float | None]:
        """Launch once; the launch result, the %globaltimer stamps (s) and their offset from the
        host clock estimated from this launch alone (None if the stamps are unusable)."""
        res = self.ex.launch(self.kernel, self.grid, self.block, self._args(dur_s))
        st = self.ex.download(self._stamps, 16).view(np.uint64)
        g0, g1 = int(st[0]) * 1e-9, int(st[1]) * 1e-9
        host = res.host_end_s - res.host_start_s
        if not (0 < g1 - g0 <= host + 1e-3):
            return res, (g0, g1), None
        return res, (g0, g1), 0.5 * (g0 + g1) - 0.5 * (res.host_start_s + res.host_end_s)

    def pulse(self, dur_s: float, name: str = "pulse", **meta: Any) -> Region:
        """One busy launch of ``dur_s`` seconds; returns its span on the common clock."""
        res, (g0, g1), _ = self._raw(dur_s)
        m = {
            "host_start_s": res.host_start_s,
            "host_end_s": res.host_end_s,
            "event_s": res.event_s,
            "requested_s": dur_s,
            "globaltimer_start_s": g0,
            "globaltimer_end_s": g1,
            "globaltimer_offset_s": self.gt_offset_s,
        }
        m.update(meta)
        off = self.gt_offset_s
        if off is None or not (res.host_start_s - 0.01 < g0 - off < g1 - off < res.host_end_s + 0.01):
            # No usable %globaltimer: the event time of the launch, ending at the sync.
            return Region(name, res.host_end_s - res.event_s, res.host_end_s, "event", m)
        return Region(name, g0 - off, g1 - off, "globaltimer", m)

    def back_to_back(self, durations_s: Sequence[float], name: str = "b2b") -> list[Region]:
        """Pulses with no idle between them (each still its own launch)."""
        return [self.pulse(d, f"{name}_{i + 1}") for i, d in enumerate(durations_s)]

    def square_wave(self, period_s: float, total_s: float, name: str) -> list[Region]:
        """Busy half a period, idle half a period, for ``total_s`` seconds."""
        out: list[Region] = []
        end = self.clock.now_s() + total_s
        while self.clock.now_s() < end:
            out.append(self.pulse(period_s / 2, name, period_s=period_s))
            self.clock.sleep(period_s / 2)
        return out

    def idle(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def close(self) -> None:
        self.ex.free(self._out)
        self.ex.free(self._stamps)

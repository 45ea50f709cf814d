"""Known loads for sensor experiments: busy pulses, steps and square waves with exact GPU timestamps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from archline.gpu.base import Executor
from archline.kernels.load import busy_spec
from archline.measurement.recording import Region
from archline.sensors.base import Clock, SystemClock

__all__ = ["BusyLoad"]


class BusyLoad:
    """Runs the timed busy kernel (kernels/load.py) and returns each pulse as a Region.

    The region's ends are the kernel's own %globaltimer stamps (``how="globaltimer"``), which
    on H100/H200 follow the host's CLOCK_REALTIME to well under a millisecond; the host times
    around the launch are kept in the region's meta so the alignment can be checked.
    """

    def __init__(self, ex: Executor, *, blocks_per_sm: int = 8, block: int = 256, clock: Clock | None = None) -> None:
        self.ex = ex
        self.clock: Clock = clock or SystemClock()
        self.spec = busy_spec(blocks_per_sm=blocks_per_sm, block=block)
        self.kernel = ex.load(self.spec.ptx, self.spec.entry, opt_level=3)
        self.grid = self.spec.launch.grid_for(ex.device.sm_count)
        self.block = block
        threads = self.grid * block
        self._out = ex.alloc(4 * threads)
        self._stamps = ex.alloc(16)
        self.pulse(0.01, "warmup")

    def _args(self, dur_s: float) -> list[tuple[str, Any]]:
        return [
            ("ptr", self._out),
            ("ptr", self._stamps),
            ("u64", int(dur_s * 1e9)),
            ("f32", 0.9999999),
            ("f32", 1e-7),
            ("f32", -1.0),
        ]

    def pulse(self, dur_s: float, name: str = "pulse", **meta: Any) -> Region:
        """One busy launch of ``dur_s`` seconds; returns its span on the common clock."""
        res = self.ex.launch(self.kernel, self.grid, self.block, self._args(dur_s))
        st = self.ex.download(self._stamps, 16).view(np.uint64)
        g0, g1 = int(st[0]) * 1e-9, int(st[1]) * 1e-9
        m = {
            "host_start_s": res.host_start_s,
            "host_end_s": res.host_end_s,
            "event_s": res.event_s,
            "requested_s": dur_s,
        }
        m.update(meta)
        if not (res.host_start_s - 0.05 < g0 < g1 < res.host_end_s + 0.05):
            # %globaltimer is not on the host clock here: fall back to event time before sync.
            m["globaltimer_offset_s"] = g0 - res.host_start_s
            return Region(name, res.host_end_s - res.event_s, res.host_end_s, "event", m)
        return Region(name, g0, g1, "globaltimer", m)

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

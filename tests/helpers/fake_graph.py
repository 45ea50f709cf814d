"""A fake captured step for CPU tests: nodes of known time and board power, replayed on the fake clock."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from archline.hw.graph import GraphNode
from tests.helpers.fake_gpu import FakeClock


@dataclass(frozen=True)
class FakeNode:
    name: str
    time_s: float
    power_w: float
    kind: str = "kernel"


class FakeGraphGPU:
    """Replays its nodes in order on a fake clock; the board draws ``idle_w`` between replays."""

    def __init__(self, nodes: Sequence[FakeNode], idle_w: float = 100.0) -> None:
        self.clock = FakeClock()
        self.idle_w = idle_w
        self.fake_nodes = list(nodes)
        self.nodes = [GraphNode(i, n.kind, n.name) for i, n in enumerate(nodes)]
        self.enabled = set(range(len(nodes)))
        self.intervals: list[tuple[float, float, float]] = []
        self._lock = threading.Lock()

    def set_enabled(self, indices: Sequence[int] | None) -> None:
        self.enabled = set(range(len(self.nodes)) if indices is None else indices)

    def replay(self) -> None:
        for i, n in enumerate(self.fake_nodes):
            if i in self.enabled:
                a = self.clock.now_s()
                self.clock.sleep(n.time_s)
                with self._lock:
                    self.intervals.append((a, self.clock.now_s(), n.power_w))

    def synchronize(self) -> None:
        return None

    def energy_j(self, a_s: float, b_s: float) -> float:
        """Exact board energy over [a, b]."""
        with self._lock:
            iv = list(self.intervals)
        extra = sum((p - self.idle_w) * max(0.0, min(b, b_s) - max(a, a_s)) for a, b, p in iv)
        return self.idle_w * (b_s - a_s) + extra

    def truth_j(self, indices: Sequence[int]) -> float:
        """One replay's board energy with only ``indices`` enabled."""
        return sum(self.fake_nodes[i].time_s * self.fake_nodes[i].power_w for i in indices)

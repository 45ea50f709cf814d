"""A fake captured step for CPU tests: nodes of known time and board power, replayed on the fake clock.

It also plays the driver's refusals seen on an H100 (CUDA error 912, cluster misconfiguration,
on cluster-launched kernels): ``fixed_by`` names the first switch mode (of ``toggle``,
``toggle+optin``, ``rebuild``) under which cluster nodes switch; ``None`` means none does, and
then in ``rebuild`` instantiation blames a cluster node each time one is left out.
``fail_on`` says whether disabling or enabling again is refused in the toggle modes.

For the randomized design (replay_context.py) a replay can also cost a fixed ``fixed_s`` at
``fixed_w`` (launch and synchronisation: the c0 every isolated replay carries), nodes can
interact (``interactions``: node i draws (1 + ε) its power while node j is enabled; ``slowdowns``: node i
runs (1 + ε) its time, at its own power, while node j is switched off), and
:class:`NoisyMeasure` measures a replay as its exact energy plus Gaussian noise of known σ.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from archline.hw.graph import SWITCH_MODES, GraphError, GraphNode, SwitchError
from tests.helpers.fake_gpu import FakeClock

E912 = "CUDA error 912 (a kernel launch error has occurred due to cluster misconfiguration)"


@dataclass(frozen=True)
class FakeNode:
    name: str
    time_s: float
    power_w: float
    kind: str = "kernel"
    cluster: tuple[int, int, int] = (1, 1, 1)


class FakeGraphGPU:
    """Replays its nodes in order on a fake clock; the board draws ``idle_w`` between replays."""

    switch_modes = SWITCH_MODES

    def __init__(
        self,
        nodes: Sequence[FakeNode],
        idle_w: float = 100.0,
        *,
        fixed_by: str | None = "toggle",
        fail_on: str = "disable",
        fixed_s: float = 0.0,
        fixed_w: float | None = None,
        interactions: Mapping[int, tuple[int, float]] | None = None,
        slowdowns: Mapping[int, tuple[int, float]] | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.idle_w = idle_w
        self.fake_nodes = list(nodes)
        self.nodes = [GraphNode(i, n.kind, n.name, n.cluster) for i, n in enumerate(nodes)]
        self.enabled = set(range(len(nodes)))
        self.intervals: list[tuple[float, float, float]] = []
        # energy_j's index of self.intervals (which only grows, by append): their starts and ends, while both are
        # in order (None once one is not: then every interval is summed, as before)
        self._starts: list[float] | None = []
        self._ends: list[float] = []
        self._lock = threading.Lock()
        self.mode = "toggle"
        self.fixed_by = fixed_by
        self.fail_on = fail_on
        self.modes_set: list[str] = []
        self.builds = 0  # executables instantiated (rebuild mode)
        self.fixed_s, self.fixed_w = fixed_s, idle_w if fixed_w is None else fixed_w
        self.interactions = dict(interactions or {})
        self.slowdowns = dict(slowdowns or {})
        #: Every node run, in order: (kernel name, seconds); what :meth:`busy_times` reads.
        self.ran: list[tuple[str, float]] = []

    # -- the driver's behaviour ------------------------------------------------------------
    def _refuses(self, i: int, on: bool) -> bool:
        """Whether switching node i (to ``on``) is refused in the current (toggle) mode."""
        if self.nodes[i].cluster_blocks <= 1 or (self.fail_on == "disable") == on:
            return False
        if self.fixed_by is None:
            return True
        return SWITCH_MODES.index(self.mode) < SWITCH_MODES.index(self.fixed_by)

    def set_switch_mode(self, mode: str) -> None:
        if mode not in SWITCH_MODES:
            raise ValueError(mode)
        self.modes_set.append(mode)
        self.mode = mode
        self.enabled = set(range(len(self.nodes)))  # a fresh executable

    def set_enabled(self, indices: Sequence[int] | None) -> None:
        want = set(range(len(self.nodes)) if indices is None else indices)
        if self.mode == "rebuild":
            self.builds += 1
            if self.fixed_by is None:
                left_out = sorted(
                    i for i in range(len(self.nodes)) if i not in want and self.nodes[i].cluster_blocks > 1
                )
                if left_out:
                    raise SwitchError({left_out[0]: f"instantiate: {E912}"})
            self.enabled = want
            return
        failed: dict[int, str] = {}
        for i in range(len(self.nodes)):
            on = i in want
            if on != (i in self.enabled):
                if self._refuses(i, on):
                    failed[i] = f"{'enable' if on else 'disable'}: {E912}"
                elif on:
                    self.enabled.add(i)
                else:
                    self.enabled.discard(i)
        if failed:
            raise SwitchError(failed)

    def check_switchable(self, indices: Sequence[int]) -> dict[int, str]:
        if self.mode == "rebuild":
            failed: dict[int, str] = {}
            for _ in range(len(self.nodes) + 1):
                try:
                    self.set_enabled([i for i in range(len(self.nodes)) if i not in indices or i in failed])
                    break
                except SwitchError as exc:
                    failed.update(exc.failed)
            self.enabled = set(range(len(self.nodes)))
            return failed
        failed = {}
        for i in indices:
            if self._refuses(i, False):
                failed[i] = f"disable: {E912}"
            elif self._refuses(i, True):
                if self.mode == "toggle":
                    raise GraphError(f"node {i} of PyTorch's executable could not be enabled again (enable: {E912})")
                failed[i] = f"enable: {E912}"
        return failed

    def describe(self, index: int) -> dict[str, Any]:
        n = self.nodes[index]
        return {"index": index, "kind": n.kind, "name": n.name, "cluster": list(n.cluster)}

    # -- replay ----------------------------------------------------------------------------
    def power_w(self, i: int, enabled: Sequence[int] | set[int]) -> float:
        """Node i's power with ``enabled`` nodes in the replay (its interaction partner on or off)."""
        p = self.fake_nodes[i].power_w
        j, eps = self.interactions.get(i, (-1, 0.0))
        return p * (1.0 + eps) if j in enabled else p

    def time_s(self, i: int, enabled: Sequence[int] | set[int]) -> float:
        """Node i's time with ``enabled`` nodes in the replay (longer while its slowdown's partner is off)."""
        t = self.fake_nodes[i].time_s
        j, eps = self.slowdowns.get(i, (-1, 0.0))
        return t * (1.0 + eps) if j >= 0 and j not in enabled else t

    def replay(self) -> None:
        if self.fixed_s > 0:
            a = self.clock.now_s()
            self.clock.sleep(self.fixed_s)
            with self._lock:
                self.intervals.append((a, self.clock.now_s(), self.fixed_w))
        enabled = set(self.enabled)
        for i in range(len(self.fake_nodes)):
            if i in enabled:
                a = self.clock.now_s()
                self.clock.sleep(self.time_s(i, enabled))
                with self._lock:
                    self.intervals.append((a, self.clock.now_s(), self.power_w(i, enabled)))
                    self.ran.append((self.fake_nodes[i].name, self.clock.now_s() - a))

    def busy_times(self, fn: Callable[[], None]) -> dict[str, float]:
        """A busy timer (replay_busy.BusyTimer): run ``fn`` and return each kernel name's time in it, as CUPTI's
        kernel records would (the nodes that ran, by name; the fixed cost is no kernel)."""
        n0 = len(self.ran)
        fn()
        out: dict[str, float] = {}
        for name, sec in self.ran[n0:]:
            out[name] = out.get(name, 0.0) + sec
        return out

    def synchronize(self) -> None:
        return None

    def energy_j(self, a_s: float, b_s: float) -> float:
        """Exact board energy over [a, b]."""
        with self._lock:
            iv = self._overlapping(a_s, b_s)
        extra = sum((p - self.idle_w) * max(0.0, min(b, b_s) - max(a, a_s)) for a, b, p in iv)
        return self.idle_w * (b_s - a_s) + extra

    def _overlapping(self, a_s: float, b_s: float) -> list[tuple[float, float, float]]:
        """The intervals that may overlap [a_s, b_s], in their order: the sum over them is the sum over all of them
        bit for bit (the others add exactly zero), without a sensor's every reading scanning the whole history."""
        starts, ends = self._starts, self._ends
        if starts is not None:
            for a, b, _ in self.intervals[len(starts) :]:
                if starts and (a < starts[-1] or b < ends[-1]):
                    self._starts = starts = None
                    break
                starts.append(a)
                ends.append(b)
        if starts is None:
            return list(self.intervals)
        return self.intervals[bisect.bisect_right(ends, a_s) : bisect.bisect_left(starts, b_s)]

    def truth_j(self, indices: Sequence[int]) -> float:
        """One replay's board energy with only ``indices`` enabled."""
        return sum(self.fake_nodes[i].time_s * self.fake_nodes[i].power_w for i in indices)

    @property
    def c0_j(self) -> float:
        """The fixed energy of every replay."""
        return self.fixed_s * self.fixed_w

    def in_replay_j(self, nodes: Sequence[int], enabled: Sequence[int] | set[int]) -> float:
        """Energy of ``nodes`` in a replay of ``enabled`` (interactions included, the fixed cost not)."""
        on = set(enabled)
        return sum(self.time_s(i, on) * self.power_w(i, on) for i in nodes if i in on)

    def replay_j(self, enabled: Sequence[int] | set[int]) -> float:
        """One replay's exact board energy with ``enabled`` nodes: the fixed cost and their energies."""
        return self.c0_j + self.in_replay_j(list(enabled), enabled)


@dataclass(frozen=True)
class FakeCall:
    """What NoisyMeasure returns (a CallMeasure)."""

    energy_j: float
    energy_uncertainty_j: float
    time_s: float
    mean_power_w: float


class NoisyMeasure:
    """Measures one replay of a FakeGraphGPU as its exact energy plus N(0, σ), σ = ``rel`` · E + ``abs_j``, and
    reports that σ; each measurement takes ``call_s`` of the fake clock (a real one takes ~0.7 s). ``unseen``: a
    further relative scatter of each measurement, N(0, unseen · E), that the reported σ leaves out (the real
    replays' τ, replay_design.py)."""

    def __init__(
        self,
        gpu: FakeGraphGPU,
        rel: float = 0.005,
        abs_j: float = 0.0,
        seed: int = 0,
        call_s: float = 0.7,
        unseen: float = 0.0,
    ):
        self.gpu, self.rel, self.abs_j, self.call_s, self.unseen = gpu, rel, abs_j, call_s, unseen
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def __call__(self, fn: Callable[[], None]) -> FakeCall:
        t0 = self.gpu.clock.now_s()
        fn()
        t = self.gpu.clock.now_s() - t0
        self.gpu.clock.sleep(max(self.call_s - t, 0.0))
        self.calls += 1
        e = self.gpu.replay_j(self.gpu.enabled)
        sd = self.rel * e + self.abs_j
        got = e + float(self.rng.normal(0.0, sd)) if sd > 0 else e
        if self.unseen > 0:
            got += float(self.rng.normal(0.0, self.unseen * e))
        return FakeCall(got, sd, t, e / t if t > 0 else 0.0)


def measure_on(gpu: FakeGraphGPU) -> Any:
    """``measure_callable`` bound to the fake graph GPU's averaging sensor and clock (2 %, at most 3 s)."""
    import functools

    from archline.measurement.api import measure_callable
    from tests.helpers.live_sensor import AveragingLiveSensor

    return functools.partial(
        measure_callable,
        sources=[AveragingLiveSensor(gpu)],  # type: ignore[arg-type]
        sync=gpu.synchronize,
        clock=gpu.clock,
        target_rel_error=0.02,
        max_total_s=3.0,
    )


def write_fake_replay(out: Any, force: bool, res: Any) -> Any:
    """Write a replay result measured on a fake board as ``archline replay``'s run directory; returns ``res``
    (for CLI tests that stand a fake in for ``run_replay``)."""
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    rd = RunDir.create(out, Manifest.new("replay", gpu={"name": "fake"}), overwrite=force)
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    return res


def watch_enabled(gpu: FakeGraphGPU) -> list[set[int]]:
    """Record the enabled nodes of every replay of ``gpu`` from now on; returns the (growing) list."""
    seen: list[set[int]] = []
    replay = gpu.replay

    def watched() -> None:
        seen.append(set(gpu.enabled))
        replay()

    gpu.replay = watched  # type: ignore[method-assign]
    return seen

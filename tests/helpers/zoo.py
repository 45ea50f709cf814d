"""Workloads for the simulated sensor zoo: isolated kernels, back to back, doubling, active-idle tails,
a training-like loop with no idle edge and a bursty program; each with its windows and true energies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archline.core.recording import Region
from archline.hw.sensor_zoo import ZooSensor
from archline.hw.simulated import PiecewisePower
from archline.measurement.sensor_model import infer_model
from archline.measurement.windows import window_energies

T0_S = 1_700_000_000.0


@dataclass(frozen=True)
class Workload:
    """A true-power signal and its windows; ``labels[i]`` says what window i is (for the targets)."""

    name: str
    signal: PiecewisePower
    windows: tuple[Region, ...]
    labels: tuple[str, ...]

    @property
    def true_energy_j(self) -> np.ndarray:
        return np.array([self.signal.energy_j(w.start_s, w.end_s) for w in self.windows])


class _Builder:
    """Appends constant-power pieces one after another and records windows on them."""

    def __init__(self, idle_w: float, lead_s: float = 3.0) -> None:
        self.edges: list[float] = [T0_S]
        self.levels: list[float] = [idle_w]
        self.t = T0_S + lead_s
        self.idle_w = idle_w
        self.windows: list[Region] = []
        self.labels: list[str] = []

    def hold(self, power_w: float, dur_s: float, name: str | None = None, label: str = "kernel") -> None:
        if abs(self.levels[-1] - power_w) > 1e-12:
            self.edges.append(self.t)
            self.levels.append(power_w)
        if name is not None:
            self.windows.append(Region(name, self.t, self.t + dur_s))
            self.labels.append(label)
        self.t += dur_s

    def tail(self, active_w: float, steps_w: Sequence[float] = (), hold_s: float = 1.0) -> None:
        """Burtscher's active idle: hold ``active_w``, then step down once a second to idle."""
        self.hold(active_w, hold_s)
        for p in steps_w:
            self.hold(p, 1.0)
        self.hold(self.idle_w, 0.0)

    def build(self, name: str, trail_s: float = 3.0) -> Workload:
        end = self.t + trail_s
        signal = PiecewisePower(np.array([*self.edges, end]), np.array(self.levels))
        return Workload(name, signal, tuple(self.windows), tuple(self.labels))


def isolated(
    idle_w: float, busy_w: Sequence[float], durations_s: Sequence[float], *, gap_s: float = 1.5, seed: int = 0
) -> Workload:
    """Isolated kernels of each duration at each power, separated by idle gaps at random phases."""
    rng = np.random.default_rng(seed)
    b = _Builder(idle_w)
    for i, d in enumerate(durations_s):
        p = busy_w[i % len(busy_w)]
        b.hold(p, d, f"iso{1e3 * d:g}ms@{p:g}W")
        b.hold(idle_w, gap_s + rng.uniform(0.0, 0.1))
    return b.build("isolated")


def k20_like(scale: float = 1.0, *, seed: int = 0) -> Workload:
    """The issue's K20-shaped trace: idle 25 W, kernels of 120–175 W of 1–3 s, each followed by an
    active-idle hold that steps down over seconds (Burtscher §4.2), times ``scale``."""
    rng = np.random.default_rng(seed)
    b = _Builder(25.0 * scale)
    for i, (d, p) in enumerate([(2.0, 150), (1.0, 120), (3.0, 175), (1.5, 140), (2.5, 160)]):
        b.hold(p * scale, d, f"k{i}")
        b.tail(60 * scale, (45 * scale, 35 * scale))
        b.hold(25.0 * scale, 3.0 + rng.uniform(0.0, 0.5))
    return b.build(f"k20-like x{scale:g}")


def shapes(idle_w: float, busy_w: float, active_w: float) -> Workload:
    """Back to back (two powers, abutting), doubling (0.6 s then 1.2 s), and kernels with
    active-idle tails."""
    b = _Builder(idle_w)
    b.hold(busy_w, 0.8, "b2b-first", "kernel")
    b.hold(0.7 * busy_w + 0.3 * idle_w, 0.8, "b2b-second", "kernel")
    b.hold(idle_w, 2.0)
    b.hold(busy_w, 0.6, "double-1x", "kernel")
    b.hold(idle_w, 2.0)
    b.hold(busy_w, 1.2, "double-2x", "kernel")
    b.hold(idle_w, 2.0)
    for i, d in enumerate((0.5, 2.0)):
        b.hold(busy_w, d, f"tail{i}", "kernel")
        b.tail(active_w, (0.5 * (active_w + idle_w),))
        b.hold(idle_w, 1.5)
    return b.build("shapes")


def training_loop(idle_w: float, busy_w: float, *, seconds: float = 60.0, seed: int = 1) -> Workload:
    """A training-like loop: steps of 20–40 ms (forward, backward, optimizer at different powers,
    short launch gaps) with no idle edge; windows: the whole loop, its 10 s and its 1 s pieces."""
    rng = np.random.default_rng(seed)
    b = _Builder(idle_w)
    start = b.t
    while b.t < start + seconds:
        step = rng.uniform(0.020, 0.040)
        b.hold(busy_w * rng.uniform(0.85, 1.0), 0.45 * step)
        b.hold(busy_w * rng.uniform(0.9, 1.0), 0.40 * step)
        b.hold(0.6 * busy_w, 0.10 * step)
        b.hold(0.45 * busy_w + 0.55 * idle_w, 0.05 * step)
    wl = b.build("loop")
    wins = [Region("loop", start, start + seconds)]
    labels = ["loop"]
    for i in range(int(seconds // 10)):
        wins.append(Region(f"loop10s#{i}", start + 10 * i, start + 10 * (i + 1)))
        labels.append("loop10")
    for i in range(int(seconds)):
        wins.append(Region(f"loop1s#{i}", start + i, start + i + 1))
        labels.append("loop1")
    return Workload("loop", wl.signal, tuple(wins), tuple(labels))


def bursty(idle_w: float, busy_w: float, *, n: int = 20, seed: int = 2) -> Workload:
    """A bursty program: bursts of 50 ms–2 s at 50–100 % of ``busy_w`` between idle gaps of 0.1–1.5 s."""
    rng = np.random.default_rng(seed)
    b = _Builder(idle_w)
    for i in range(n):
        d = float(np.exp(rng.uniform(np.log(0.05), np.log(2.0))))
        b.hold(busy_w * rng.uniform(0.5, 1.0), d, f"burst{i}", "kernel")
        b.hold(idle_w, rng.uniform(0.1, 1.5))
    return b.build("bursty")


def reduced_zoo(idle_w: float, busy_w: float) -> list[Workload]:
    """The workloads of the deterministic tests (a shorter loop, fewer kernels)."""
    return [
        isolated(idle_w, [busy_w, 0.5 * (busy_w + idle_w)], [0.005, 0.05, 0.5, 2.0]),
        shapes(idle_w, busy_w, 0.3 * busy_w + 0.7 * idle_w),
        training_loop(idle_w, busy_w, seconds=20.0),
    ]


def full_zoo(idle_w: float, busy_w: float) -> list[Workload]:
    """Every workload of the benchmark at one power scale."""
    levels = [busy_w, 0.5 * (busy_w + idle_w), idle_w + 0.2 * (busy_w - idle_w)]
    return [
        isolated(idle_w, levels, [0.005, 0.02, 0.1, 0.5, 1.0, 2.0, 5.0]),
        shapes(idle_w, busy_w, 0.3 * busy_w + 0.7 * idle_w),
        training_loop(idle_w, busy_w),
        bursty(idle_w, busy_w),
    ]


@dataclass(frozen=True)
class WindowCheck:
    """One window through one sensor with ``--sensor auto``: relative error, relative σ, and the
    target it is held to (None: only the honesty of σ)."""

    sensor: str
    workload: str
    window: str
    label: str
    duration_s: float
    rel_error: float
    rel_sigma: float
    resolvable: bool
    limit: float | None
    must_resolve: bool

    @property
    def z(self) -> float:
        return self.rel_error / self.rel_sigma if self.rel_sigma > 0 else float("inf")

    @property
    def passed(self) -> bool:
        ok = self.limit is None or abs(self.rel_error) <= self.limit
        return ok and (self.resolvable or not self.must_resolve)


def _target(label: str, duration_s: float, full: bool) -> tuple[float | None, bool]:
    """Issue 11's targets: (limit on |relative error|, whether the window must be resolvable)."""
    if label in ("loop", "loop10"):
        return 0.01, False
    if label == "loop1":
        return 0.02, False
    if full and duration_s >= 0.5:
        return 0.02, True
    if not full and duration_s >= 2.0:
        return 0.02, False
    return None, False


def check_sensor(zs: ZooSensor, workloads: Sequence[Workload], *, seed: int = 0) -> list[WindowCheck]:
    """Every window of every workload through ``zs``, the model chosen from each recording alone."""
    out: list[WindowCheck] = []
    for k, wl in enumerate(workloads):
        r = zs.readings(wl.signal, seed=seed + k)
        model = infer_model(r)
        res = window_energies(r, model, wl.windows)
        for w, truth, label in zip(res, wl.true_energy_j, wl.labels, strict=True):
            limit, must = _target(label, w.duration_s, zs.full_coverage)
            out.append(
                WindowCheck(
                    zs.name,
                    wl.name,
                    w.name,
                    label,
                    w.duration_s,
                    w.energy_j / truth - 1.0,
                    w.energy_uncertainty_j / abs(truth),
                    w.resolvable,
                    limit,
                    must,
                )
            )
    return out

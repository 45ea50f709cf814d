"""True-power signal builders for tests: kernels on an idle baseline, with the windows and their true energy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archline.core.recording import Region
from archline.hw.simulated import PiecewisePower

T0_S = 1_700_000_000.0


@dataclass(frozen=True)
class Scenario:
    """A true-power signal, the windows of interest on it and the true energy of each (J)."""

    signal: PiecewisePower
    windows: tuple[Region, ...]

    @property
    def true_energy_j(self) -> np.ndarray:
        return np.array([self.signal.energy_j(w.start_s, w.end_s) for w in self.windows])


def kernels(
    spans: Sequence[tuple[float, float]],
    *,
    busy_w: float | Sequence[float] = 300.0,
    idle_w: float = 100.0,
    t0_s: float = T0_S,
    lead_s: float = 1.0,
    trail_s: float = 3.0,
    names: Sequence[str] | None = None,
    active_idle_w: float | None = None,
    active_hold_s: float = 0.0,
) -> Scenario:
    """Kernels at ``(start, duration)`` (s, relative to ``t0_s + lead_s``) drawing ``busy_w``
    over an ``idle_w`` baseline. With ``active_idle_w``, the GPU holds that level for
    ``active_hold_s`` after each kernel before dropping to idle (Burtscher's active idle)."""
    busy = np.broadcast_to(np.asarray(busy_w, float), (len(spans),))
    base = t0_s + lead_s
    events: list[tuple[float, float]] = [(t0_s, idle_w)]
    wins: list[Region] = []
    for i, (s, d) in enumerate(spans):
        a, b = base + s, base + s + d
        if a < events[-1][0] - 1e-12:
            raise ValueError("kernels must be in order and not overlap")
        events.append((a, float(busy[i])))
        if active_idle_w is not None and active_hold_s > 0:
            events.append((b, active_idle_w))
            nxt = base + spans[i + 1][0] if i + 1 < len(spans) else np.inf
            events.append((min(b + active_hold_s, nxt), idle_w))
        else:
            events.append((b, idle_w))
        wins.append(Region(names[i] if names else f"k{i}", a, b))
    # Later events at the same instant win (back-to-back kernels).
    times: list[float] = []
    levels: list[float] = []
    for t, lv in events:
        if times and abs(t - times[-1]) < 1e-12:
            levels[-1] = lv
        else:
            times.append(t)
            levels.append(lv)
    end = max(base + spans[-1][0] + spans[-1][1] + trail_s, times[-1] + 1e-6)
    return Scenario(PiecewisePower(np.array([*times, end]), np.array(levels)), tuple(wins))


def step(t_on_s: float = 2.0, before_w: float = 100.0, after_w: float = 300.0, span_s: float = 8.0) -> PiecewisePower:
    """A single step at ``T0_S + t_on_s``."""
    return PiecewisePower(np.array([T0_S, T0_S + t_on_s, T0_S + span_s]), np.array([before_w, after_w]))


def isolated_pulses(
    durations_s: Sequence[float],
    *,
    repeat: int = 5,
    spacing_s: float = 0.6,
    jitter_s: float = 0.013,
    seed: int = 0,
    busy_w: float = 300.0,
    idle_w: float = 100.0,
) -> Scenario:
    """``repeat`` isolated pulses of each duration, ``spacing_s`` apart, at random phases."""
    rng = np.random.default_rng(seed)
    spans = []
    names = []
    t = 0.0
    for d in durations_s:
        for _ in range(repeat):
            t += spacing_s + rng.uniform(0.0, jitter_s)
            spans.append((t, d))
            names.append(f"pulse{1e3 * d:g}ms")
            t += d
    return kernels(spans, busy_w=busy_w, idle_w=idle_w, names=names)


def calibration_loads(busy_w: float = 300.0, idle_w: float = 100.0) -> Scenario:
    """What a calibration runs: a long step, then isolated pulses from 2 ms to 1 s (3 each)."""
    spans = [(0.0, 3.0)]
    names = ["step"]
    t = 3.0 + 1.5
    for d in (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
        for i in range(3):
            spans.append((t, d))
            names.append(f"pulse{1e3 * d:g}ms")
            t += d + 0.6 + 0.013 * i
    return kernels(spans, busy_w=busy_w, idle_w=idle_w, names=names)

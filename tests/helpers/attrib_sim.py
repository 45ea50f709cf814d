"""Simulated GPU programs for attribution tests: kernel timelines with known energy and the sensors that watch them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings
from archline.core.recording import Recording

F64 = NDArray[np.float64]

#: Unix-epoch offset of simulated timelines, so float64 precision matches real recordings.
EPOCH_S = 1_795_000_000.0


@dataclass(frozen=True)
class SimKernel:
    """A kernel with a true duration and power per call (and their call-to-call spread)."""

    name: str
    duration_s: float
    power_w: float
    duration_cv: float = 0.05
    power_cv: float = 0.03
    kind: str = "kernel"


@dataclass(frozen=True)
class SensorSim:
    """How the simulated NVML sensors behave (defaults: what an H200 showed)."""

    counter_period_s: float = 0.100
    counter_delay_s: float = 0.013
    counter_jitter_s: float = 0.0002
    counter_quantum_j: float = 0.001
    poll_s: tuple[float, float] = (0.0034, 0.0037)
    buffer_gaps_s: tuple[float, ...] = (0.010, 0.020, 0.030)
    buffer_gap_p: tuple[float, ...] = (0.05, 0.90, 0.05)
    #: The buffer reading averages the last ``buffer_window_s`` before its stamp (part-time if < the gap).
    buffer_window_s: float = 0.020
    buffer_noise_w: float = 1.0


@dataclass
class SimRun:
    """A simulated program: what the tracer and the sensors saw, and the truth."""

    activities: list[ActivityRecord]
    recording: Recording
    program_span: tuple[float, float]
    truth_energy_j: dict[str, float]
    truth_calls: dict[str, int]
    seg_t: F64
    seg_e: F64
    meta: dict[str, float] = field(default_factory=dict)

    def true_energy(self, a_s: float, b_s: float) -> float:
        """The true board energy between two instants (epoch seconds)."""
        return float(np.interp(b_s, self.seg_t, self.seg_e) - np.interp(a_s, self.seg_t, self.seg_e))

    def truth_per_call_j(self, name: str) -> float:
        return self.truth_energy_j[name] / self.truth_calls[name]

    def mean_call_s(self, name: str) -> float:
        """The traced mean duration of one call of ``name``."""
        d = [a.end_s - a.start_s for a in self.activities if a.name == name]
        return float(np.mean(d)) if d else math.nan


def simulate_program(
    kernels: Sequence[SimKernel],
    *,
    seed: int = 0,
    program_s: float = 20.0,
    pre_s: float = 1.0,
    post_s: float = 1.0,
    block_s: tuple[float, float] = (0.05, 0.40),
    idle_prob: float = 0.4,
    idle_s: tuple[float, float] = (0.01, 0.15),
    launch_gap_s: tuple[float, float] = (2e-6, 50e-6),
    idle_power_w: float = 120.0,
    gap_power_w: float = 190.0,
    wait_power_w: float = 150.0,
    mix_concentration: float = 1.0,
    sensors: SensorSim | None = None,
) -> SimRun:
    """Simulate a program that runs ``kernels`` in blocks of randomly varying proportions.

    Each block draws the kernels' proportions from a Dirichlet distribution and launches calls
    back to back (a mean gap drawn log-uniformly from ``launch_gap_s``, at ``gap_power_w``, as
    host overheads vary between phases of a real program); between blocks the GPU waits on
    the host (``wait_power_w``) with probability ``idle_prob``. Before and after the program
    the GPU idles at ``idle_power_w``.
    """
    sens = sensors or SensorSim()
    rng = np.random.default_rng(seed)
    k = len(kernels)
    seg_start: list[float] = [0.0]
    seg_power: list[float] = [idle_power_w]
    acts: list[tuple[int, float, float]] = []
    truth = np.zeros(k)
    counts = np.zeros(k, np.int64)
    t = pre_s
    p_end = pre_s + program_s
    dur_s = np.array([kern.duration_s for kern in kernels])
    dur_cv = np.array([kern.duration_cv for kern in kernels])
    pw_w = np.array([kern.power_w for kern in kernels])
    pw_cv = np.array([kern.power_cv for kern in kernels])
    while t < p_end:
        q = rng.dirichlet(np.full(k, mix_concentration))
        b_end = min(t + rng.uniform(*block_s), p_end)
        mean_gap = float(np.exp(rng.uniform(np.log(launch_gap_s[0]), np.log(launch_gap_s[1]))))
        while t < b_end:  # calls in batches (drawn at once; a block is cut at the first call past its end)
            n = 256
            gap = rng.exponential(mean_gap, n)
            idx = rng.choice(k, p=q, size=n)
            dur = np.maximum(0.2, 1.0 + dur_cv[idx] * rng.standard_normal(n)) * dur_s[idx]
            pw = np.maximum(0.2, 1.0 + pw_cv[idx] * rng.standard_normal(n)) * pw_w[idx]
            before = t + np.concatenate([[0.0], np.cumsum(gap + dur)[:-1]])
            m = int(np.searchsorted(before, b_end, side="left"))  # calls that start before the block ends
            starts = before[:m] + gap[:m]
            for j in range(m):
                seg_start.append(float(before[j]))
                seg_power.append(gap_power_w)
                seg_start.append(float(starts[j]))
                seg_power.append(float(pw[j]))
                acts.append((int(idx[j]), float(starts[j]), float(starts[j] + dur[j])))
            np.add.at(truth, idx[:m], pw[:m] * dur[:m])
            np.add.at(counts, idx[:m], 1)
            t = float(starts[m - 1] + dur[m - 1]) if m else t
            if m < n:
                break
        if t < p_end and rng.random() < idle_prob:
            seg_start.append(t)
            seg_power.append(wait_power_w)
            t += rng.uniform(*idle_s)
    seg_start.append(t)
    seg_power.append(idle_power_w)
    t_end = t + post_s
    st = np.array([*seg_start, t_end])
    pw_arr = np.array(seg_power)
    e_cum = np.concatenate([[0.0], np.cumsum(pw_arr * np.diff(st))])
    seg_t = st + EPOCH_S

    def energy_at(x: F64) -> F64:
        return np.interp(x, seg_t, e_cum).astype(np.float64)

    # Energy counter: updates on a regular grid, reports energy up to (update - delay), polled.
    t0, t1 = EPOCH_S, EPOCH_S + t_end
    phase = rng.uniform(0, sens.counter_period_s)
    upd = t0 + phase + np.arange(0, t_end / sens.counter_period_s + 1) * sens.counter_period_s
    upd = upd + rng.normal(0, sens.counter_jitter_s, upd.size)
    upd = upd[upd < t1]
    val = np.floor((3.3e6 + energy_at(upd - sens.counter_delay_s)) / sens.counter_quantum_j) * sens.counter_quantum_j
    polls = t0 + np.cumsum(rng.uniform(*sens.poll_s, int(t_end / sens.poll_s[0]) + 2))
    polls = polls[polls < t1]
    last = np.searchsorted(upd, polls, side="right") - 1
    ok = last >= 0
    counter = Readings("nvml.energy", "energy", polls[ok], val[last[ok]])

    # Power buffer: irregular stamps, each the mean power over the last buffer_window_s.
    gaps = rng.choice(np.array(sens.buffer_gaps_s), p=np.array(sens.buffer_gap_p), size=int(t_end / 0.009) + 2)
    stamps = t0 + 0.03 + np.cumsum(gaps)
    stamps = stamps[stamps < t1]
    win = sens.buffer_window_s
    pwr = (energy_at(stamps) - energy_at(stamps - win)) / win + rng.normal(0, sens.buffer_noise_w, stamps.size)
    buf = Readings("nvml.buffer", "power", stamps, np.round(pwr, 3))

    activities = [
        ActivityRecord(kernels[i].name, s + EPOCH_S, e + EPOCH_S, kind=kernels[i].kind, stream=7, correlation_id=n)  # type: ignore[arg-type]
        for n, (i, s, e) in enumerate(acts)
    ]
    rec = Recording(readings={"nvml.energy": counter, "nvml.buffer": buf}, start_s=t0, end_s=t1)
    return SimRun(
        activities=activities,
        recording=rec,
        program_span=(EPOCH_S + pre_s, EPOCH_S + p_end),
        truth_energy_j={kern.name: float(truth[i]) for i, kern in enumerate(kernels)},
        truth_calls={kern.name: int(counts[i]) for i, kern in enumerate(kernels)},
        seg_t=seg_t,
        seg_e=e_cum,
        meta={"counter_delay_s": sens.counter_delay_s},
    )


def long_kernel_run(
    *,
    seed: int = 0,
    power_w: float = 300.0,
    duration_s: float = 1.0,
    calls: int = 4,
    idle_power_w: float = 120.0,
    gap_s: float = 0.5,
    sensors: SensorSim | None = None,
) -> SimRun:
    """A program of a few long calls of one kernel, separated by idle gaps."""
    sens = sensors or SensorSim()
    rng = np.random.default_rng(seed)
    starts = 1.0 + np.arange(calls) * (duration_s + gap_s)
    ends = starts + duration_s
    t_end = float(ends[-1] + 1.0)
    st = np.concatenate([[0.0], np.ravel(np.column_stack([starts, ends])), [t_end]])
    pw = np.array([idle_power_w] + [power_w, idle_power_w] * calls)
    e_cum = np.concatenate([[0.0], np.cumsum(pw * np.diff(st))])
    seg_t = st + EPOCH_S

    def energy_at(x: F64) -> F64:
        return np.interp(x, seg_t, e_cum).astype(np.float64)

    t0, t1 = EPOCH_S, EPOCH_S + t_end
    upd = t0 + 0.037 + np.arange(0, t_end / sens.counter_period_s + 1) * sens.counter_period_s
    upd = upd[upd < t1]
    val = np.floor((1e6 + energy_at(upd - sens.counter_delay_s)) * 1000) / 1000
    polls = t0 + np.cumsum(rng.uniform(*sens.poll_s, int(t_end / sens.poll_s[0]) + 2))
    polls = polls[polls < t1]
    last = np.searchsorted(upd, polls, side="right") - 1
    ok = last >= 0
    stamps = t0 + 0.02 * np.arange(1, int(t_end / 0.02))
    pwr = (energy_at(stamps) - energy_at(stamps - 0.02)) / 0.02
    rec = Recording(
        readings={
            "nvml.energy": Readings("nvml.energy", "energy", polls[ok], val[last[ok]]),
            "nvml.buffer": Readings("nvml.buffer", "power", stamps, pwr),
        },
        start_s=t0,
        end_s=t1,
    )
    acts = [ActivityRecord("long_kernel", s + EPOCH_S, e + EPOCH_S) for s, e in zip(starts, ends, strict=True)]
    return SimRun(
        activities=acts,
        recording=rec,
        program_span=(EPOCH_S + 0.9, EPOCH_S + float(ends[-1]) + 0.1),
        truth_energy_j={"long_kernel": power_w * duration_s * calls},
        truth_calls={"long_kernel": calls},
        seg_t=seg_t,
        seg_e=e_cum,
    )

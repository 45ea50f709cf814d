"""A steady training loop (forward, backward, optimizer phases) seen by a lagged power buffer and an energy counter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.core.activity import ActivityRecord
from archline.core.readings import Readings
from archline.core.recording import Recording
from archline.measurement.sensor_model import SensorModel
from tests.helpers.attrib_sim import EPOCH_S, SimKernel, SimRun

F64 = NDArray[np.float64]

#: One step: phases of (kernel name, calls) run in order; the same every step.
Phase = Sequence[tuple[str, int]]

#: An H100's power buffer as its calibration saw it: an instantaneous sample of a first-order
#: lag, delayed, stamped every 20 ms.
LAGGED_BUFFER = SensorModel(kind="lagged", period_s=0.020, window_s=0.0, lag_s=0.0136, delay_s=0.0039)


@dataclass(frozen=True)
class LoopSpec:
    kernels: Sequence[SimKernel]
    phases: Sequence[Phase]
    steps: int = 120
    launch_gap_s: float = 8e-6
    gap_power_w: float = 180.0
    host_wait_s: float = 0.004
    idle_power_w: float = 120.0
    buffer: SensorModel = LAGGED_BUFFER
    buffer_noise_w: float = 1.0
    stamp_jitter_s: float = 0.0002


def _lagged_samples(st: F64, pw: F64, t: F64, lag_s: float) -> F64:
    """First-order-lag output at instants ``t`` for piecewise-constant power ``pw`` on ``[st[i], st[i+1])``."""
    dur = np.diff(st)
    decay = np.exp(-dur / lag_s)
    s = np.empty(st.size)
    s[0] = pw[0]
    for i in range(dur.size):  # s at each segment's end
        s[i + 1] = pw[i] + (s[i] - pw[i]) * decay[i]
    seg = np.clip(np.searchsorted(st, t, side="right") - 1, 0, pw.size - 1)
    return (pw[seg] + (s[seg] - pw[seg]) * np.exp(-(t - st[seg]) / lag_s)).astype(np.float64)


def steady_loop(spec: LoopSpec, *, seed: int = 0, pre_s: float = 1.0, post_s: float = 1.0) -> SimRun:
    """Run ``spec.steps`` identical steps; the truth is each kernel's energy, the sensors an H100's."""
    rng = np.random.default_rng(seed)
    by_name = {k.name: k for k in spec.kernels}
    starts: list[float] = [0.0]
    powers: list[float] = [spec.idle_power_w]
    acts: list[ActivityRecord] = []
    truth = dict.fromkeys(by_name, 0.0)
    calls = dict.fromkeys(by_name, 0)
    t = pre_s
    order = [(name, n) for phase in spec.phases for name, n in phase]
    for _ in range(spec.steps):
        for name, n in order:
            k = by_name[name]
            dur = k.duration_s * np.maximum(0.2, 1 + k.duration_cv * rng.standard_normal(n))
            pw = k.power_w * np.maximum(0.2, 1 + k.power_cv * rng.standard_normal(n))
            gap = rng.exponential(spec.launch_gap_s, n)
            for g, d, p in zip(gap.tolist(), dur.tolist(), pw.tolist(), strict=True):
                starts += [t, t + g]
                powers += [spec.gap_power_w, p]
                acts.append(ActivityRecord(name, EPOCH_S + t + g, EPOCH_S + t + g + d))
                truth[name] += p * d
                calls[name] += 1
                t += g + d
        starts.append(t)
        powers.append(spec.gap_power_w)
        t += spec.host_wait_s
    p_end = t
    starts.append(t)
    powers.append(spec.idle_power_w)
    t_end = t + post_s
    st = np.array([*starts, t_end])
    pw_arr = np.array(powers)
    e_cum = np.concatenate([[0.0], np.cumsum(pw_arr * np.diff(st))])

    # Energy counter: every 100 ms, 13 ms late, 1 mJ steps, polled every ~3.5 ms.
    upd = 0.037 + np.arange(0, t_end / 0.1) * 0.1
    val = np.floor((2e6 + np.interp(upd - 0.013, st, e_cum)) * 1000) / 1000
    polls = np.cumsum(rng.uniform(0.0034, 0.0037, int(t_end / 0.0034)))
    polls = polls[polls < t_end]
    last = np.searchsorted(upd, polls, side="right") - 1
    ok = last >= 0
    counter = Readings("nvml.energy", "energy", EPOCH_S + polls[ok], val[last[ok]])

    m = spec.buffer
    stamps = 0.011 + np.arange(0, (t_end - 0.05) / m.period_s) * m.period_s
    seen = _lagged_samples(st, pw_arr, stamps - m.delay_s, m.lag_s)
    seen += rng.normal(0, spec.buffer_noise_w, stamps.size)
    stamped = stamps + rng.normal(0, spec.stamp_jitter_s, stamps.size)
    buf = Readings("nvml.buffer", "power", EPOCH_S + stamped, np.round(seen, 3))
    rec = Recording({"nvml.energy": counter, "nvml.buffer": buf}, (), EPOCH_S, EPOCH_S + t_end)
    return SimRun(
        activities=acts,
        recording=rec,
        program_span=(EPOCH_S + pre_s, EPOCH_S + p_end),
        truth_energy_j=truth,
        truth_calls=calls,
        seg_t=st + EPOCH_S,
        seg_e=e_cum,
    )

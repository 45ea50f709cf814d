"""The design's busy-time model: each configuration's kernel time beyond the same kernels' time in the whole step.

A kernel run without its neighbours can run longer (a consumer reading from memory what its switched-off producer
left out of the L2) and spends power over that time. The randomized design (replay_context.py) cannot tell that
from the groups' own energies: their main effects take the slowdown's average share, and ρ its rest. Here each
configuration S is also timed kernel by kernel (one traced replay, CUPTI's records: hw/cupti/busy.py), and

    Z(S) = Σ over the kernel names enabled in S of (busy time in S − busy time in the whole step)

is fitted as β·Z beside the energies (replay_design.fit_design's covariates). Z is 0 in the whole step by
construction and carries its own main effects (a group whose consumers slow down when it is off has Z > 0 in the
configurations that switch it off), so the slowdown's energy leaves the groups' in-step energies and ρ together.
One β for every kernel: kernels of different powers leave the difference in ρ, which the fold still covers.

Tried first and not adopted (benchmarks/design_time.py): the configuration's wall time less the additive time
fit's prediction. That residual is orthogonal to the main effects, so it shrank ρ but left the slowdowns' share in
the energies, and on a fake step with slow consumers its intervals held the in-step energies in 9 % of groups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["BUSY_COVARIATE", "BUSY_REPLAYS", "BusyTimer", "excess_busy"]

Array = np.ndarray[Any, np.dtype[np.float64]]

#: Runs one call (a replay) and returns each kernel name's busy time in it (s): hw/cupti/busy.kernel_busy_s on a GPU.
BusyTimer = Callable[[Callable[[], None]], Mapping[str, float]]
#: The covariate's name in a design's record: β, the energy per second of excess busy time (W).
BUSY_COVARIATE = "excess_busy_w"
#: Traced replays per configuration, averaged (kernel durations repeat to well under a per cent).
BUSY_REPLAYS = 3


def excess_busy(x: Array, factor_groups: Sequence[Sequence[str]], traces: Sequence[Mapping[str, float]]) -> Array:
    """Z of each configuration (module docstring): ``x`` its on/off flags per factor (row 0 the whole step),
    ``factor_groups`` each factor's kernel names (a lumped factor has several), ``traces`` each configuration's
    busy time by kernel name. Names in no factor (nodes on in every replay) always count. ValueError where the
    traces do not match the configurations, or a trace is not finite."""
    if len(traces) != x.shape[0] or len(factor_groups) != x.shape[1]:
        raise ValueError(f"{len(traces)} traces for {x.shape[0]} configurations of {x.shape[1]} factors")
    whole = traces[0]
    if not all(np.isfinite(v) for t in traces for v in t.values()):
        raise ValueError("a kernel's busy time is not finite")
    z = np.zeros(x.shape[0])
    for r, trace in enumerate(traces):
        off = {name for f, names in enumerate(factor_groups) if x[r, f] == 0.0 for name in names}
        z[r] = sum(trace.get(k, 0.0) - whole.get(k, 0.0) for k in set(trace) | set(whole) if k not in off)
    return z

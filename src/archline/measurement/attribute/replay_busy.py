"""The design's busy-time model: each configuration's kernel time beyond the same kernels' time in the whole step.

A kernel run without its neighbours can run longer (a consumer reading from memory what its switched-off producer
left out of the L2) and spends power over that time. The randomized design (replay_context.py) cannot tell that
from the groups' own energies: their main effects take the slowdown's average share, and ρ its rest. Here each
configuration S is also timed kernel by kernel (:data:`BUSY_REPLAYS` traced replays after its measurement, CUPTI's
records: hw/cupti/busy.py), and

    Z(S) = Σ over the kernel names enabled in S of (busy time in S − busy time in the whole step)

is fitted as β·Z beside the energies and the links model's κ·B (replay_design.fit_design's covariates). Z is 0 in
the whole step by definition and carries its own main effects (a group whose consumers slow down when it is off
has Z > 0 in the configurations that switch it off), so the slowdown's energy leaves the groups' in-step energies
and ρ together. One β for every kernel: kernels of different powers leave the difference in ρ, which the fold
still covers. Fitted beside κ, not instead of it, so that a Z with nothing in it leaves the links model's fit.

The whole step's busy times (the reference every configuration is compared with) are the mean of two traces, one
before the design's configurations and one after them; their difference is reported (drift over the design). A
first trace before either is discarded (CUPTI's one-time set-up). Every factor's kernel names must appear in the
whole step's trace: a name CUPTI spells otherwise than graph capture would count as always on and bias every
group it belongs to, so then the busy model is not fitted.

Tried first and not adopted (benchmarks/design_time.py): the configuration's wall time less the additive time
fit's prediction. That residual is orthogonal to the main effects, so it shrank ρ but left the slowdowns' share in
the energies, and on a fake step with slow consumers its intervals held the in-step energies in 9 % of groups.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["BUSY_COVARIATE", "BUSY_REPLAYS", "BusyTimer", "BusyTimings", "excess_busy"]

Array = np.ndarray[Any, np.dtype[np.float64]]

#: Runs one call (a replay) and returns each kernel name's busy time in it (s): hw/cupti/busy.kernel_busy_s on a GPU.
BusyTimer = Callable[[Callable[[], None]], Mapping[str, float]]
#: The covariate's name in a design's record: β, the energy per second of excess busy time (W).
BUSY_COVARIATE = "excess_busy_w"
#: Traced replays per configuration; their mean is the configuration's busy times, their spread is recorded.
BUSY_REPLAYS = 3


def excess_busy(
    x: Array, factor_groups: Sequence[Sequence[str]], traces: Sequence[Mapping[str, float]],
    reference: Mapping[str, float] | None = None,
) -> Array:  # fmt: skip
    """Z of each configuration (module docstring): ``x`` its on/off flags per factor (row 0 the whole step, whose Z
    is 0), ``factor_groups`` each factor's kernel names (a lumped factor has several), ``traces`` each
    configuration's busy time by kernel name, ``reference`` the whole step's (default: row 0's trace). Names in no
    factor (nodes on in every replay) always count. ValueError where the traces do not match the configurations,
    or a busy time is not finite."""
    if len(traces) != x.shape[0] or len(factor_groups) != x.shape[1]:
        raise ValueError(f"{len(traces)} traces for {x.shape[0]} configurations of {x.shape[1]} factors")
    whole = traces[0] if reference is None else reference
    if not all(math.isfinite(v) for t in [*traces, whole] for v in t.values()):
        raise ValueError("a kernel's busy time is not finite")
    z = np.zeros(x.shape[0])
    for r, trace in enumerate(traces):
        if r == 0:
            continue
        off = {name for f, names in enumerate(factor_groups) if x[r, f] == 0.0 for name in names}
        z[r] = sum(trace.get(k, 0.0) - whole.get(k, 0.0) for k in set(trace) | set(whole) if k not in off)
    return z


def _mean(traces: Sequence[Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in traces:
        for k, v in t.items():
            out[k] = out.get(k, 0.0) + v / len(traces)
    return out


class BusyTimings:
    """A design's kernel timings, one per configuration measured, in order. ``busy(nodes)`` traces
    :data:`BUSY_REPLAYS` replays with ``nodes`` enabled and returns one busy-time map per replay. Once a timing
    fails the timings are dropped (``failed`` says why): a timing must not end a design of many minutes."""

    def __init__(self, busy: Callable[[Sequence[int]], Sequence[Mapping[str, float]]] | None) -> None:
        self.busy = busy
        self.traces: list[dict[str, float]] | None = [] if busy is not None else None
        #: Each configuration's relative spread (sample SD / mean) of its replays' total busy time.
        self.spreads: list[float] = []
        self.again: dict[str, float] | None = None
        self.failed = ""

    def _trace(self, nodes: Sequence[int]) -> tuple[dict[str, float], float] | None:
        if self.busy is None or self.traces is None:
            return None
        try:
            runs = [dict(t) for t in self.busy(nodes)]
        except Exception as exc:  # CUPTI gone, a bad record, a switch refused: the links model is fitted alone
            self.traces, self.failed = None, f"{type(exc).__name__}: {exc}"
            return None
        if not runs:
            self.traces, self.failed = None, "a timing returned no replay"
            return None
        totals = np.array([sum(t.values()) for t in runs])
        spread = float(np.std(totals, ddof=1) / np.mean(totals)) if len(runs) > 1 and np.mean(totals) > 0 else 0.0
        return _mean(runs), spread

    def warm_up(self, nodes: Sequence[int]) -> None:
        """One trace, discarded: CUPTI's set-up in this process stays out of the reference."""
        self._trace(nodes)

    def take(self, nodes: Sequence[int]) -> None:
        got = self._trace(nodes)
        if got is not None and self.traces is not None:
            self.traces.append(got[0])
            self.spreads.append(got[1])

    def take_reference(self, nodes: Sequence[int]) -> None:
        """The whole step traced again after the design's configurations (the reference's second half)."""
        got = self._trace(nodes)
        if got is not None:
            self.again = got[0]

    def covariate(self, x: Array, factor_groups: Sequence[Sequence[str]]) -> tuple[list[float] | None, str]:
        """Z of every configuration, or None and why not: the timings failed, a factor's kernel is missing from the
        whole step's trace (names that do not match), or Z is nowhere above the timings' own scatter."""
        if self.traces is None:
            return None, f"kernel timing failed ({self.failed})" if self.failed else "no kernel can be timed here"
        if len(self.traces) != x.shape[0]:
            raise AssertionError(f"{len(self.traces)} kernel timings for {x.shape[0]} configurations")
        whole = self.traces[0]
        missing = [n for names in factor_groups for n in names if not n.startswith("[") and n not in whole]
        if missing:
            return None, (
                f"{len(missing)} of the groups' kernel names are not in the whole step's kernel timing (e.g. "
                f"{missing[0][:60]!r}): CUPTI names them otherwise than graph capture"
            )
        reference = _mean([whole, self.again]) if self.again is not None else whole
        try:
            z = excess_busy(x, factor_groups, self.traces, reference)
        except ValueError as exc:
            return None, str(exc)
        total = sum(reference.values())
        noise = float(np.median(self.spreads)) * total if self.spreads else 0.0
        if not np.any(np.abs(z) > 3.0 * noise) or not np.any(z != 0.0):
            return None, (
                "no configuration's kernels ran longer or shorter than in the whole step beyond the timings' scatter"
            )
        return z.tolist(), ""

    def record(self, factor_groups: Sequence[Sequence[str]]) -> dict[str, Any]:
        """What the design's summary keeps: each factor's busy time in the whole step (the reference), each
        configuration's per factor (``configs``, for later study), the reference's drift and the timings' scatter."""
        if not self.traces:
            return {}
        whole = self.traces[0]
        reference = _mean([whole, self.again]) if self.again is not None else whole
        per = [[sum(t.get(n, 0.0) for n in names) for names in factor_groups] for t in self.traces]
        out: dict[str, Any] = {
            "factor_busy_s": [sum(reference.get(n, 0.0) for n in names) for names in factor_groups],
            "busy_s": per,
            "busy_total_s": sum(reference.values()),
            "busy_rel_sd_pct": 100.0 * float(np.median(self.spreads)) if self.spreads else math.nan,
        }
        if self.again is not None and sum(whole.values()) > 0:
            out["busy_reference_drift_pct"] = 100.0 * (sum(self.again.values()) / sum(whole.values()) - 1.0)
        return out

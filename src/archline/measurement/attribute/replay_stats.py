"""Graph replay's arithmetic: energies of replays and their differences, repeats, run-to-run reproducibility."""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["CallMeasure", "Energy", "mean_of_runs", "reproducibility", "run_spread_pct", "unresolved_text"]

#: Mean range of n standard normal draws (d2 of quality control): a spread's expectation from noise alone.
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078}


class CallMeasure(Protocol):
    """What measures one call: energy (J) and its 1 σ, time (s) and mean power (W) per call."""

    @property
    def energy_j(self) -> float: ...

    @property
    def energy_uncertainty_j(self) -> float: ...

    @property
    def time_s(self) -> float: ...

    @property
    def mean_power_w(self) -> float: ...


@dataclass(frozen=True)
class Energy:
    """Energy per replay (J, 1 σ) and time per replay (s); ``nonfinite``: how many of the measurement's
    repetitions ended with the step's state non-finite (hw/graph_state.py; 0 where nothing checked)."""

    energy_j: float
    sigma_j: float
    time_s: float
    nonfinite: int = 0
    #: What the clocks did during this replay's measurement (the SM clock in MHz, NVML's clock-event reasons); a
    #: difference keeps the first replay's (the group's own), as its energy is the group's.
    sm_clock_mhz: float | None = None
    clock_reasons: tuple[str, ...] = ()

    @classmethod
    def of(cls, m: CallMeasure, nonfinite: int = 0) -> Energy:
        mhz = getattr(m, "sm_clock_mhz", None)
        reasons = str(getattr(m, "clock_event_reasons", "") or "")
        ok = isinstance(mhz, numbers.Real) and not isinstance(mhz, bool) and math.isfinite(float(mhz))
        return cls(
            m.energy_j, m.energy_uncertainty_j, m.time_s, nonfinite, float(mhz) if ok else None,  # type: ignore[arg-type]
            tuple(x for x in reasons.split(",") if x),
        )  # fmt: skip

    def minus(self, other: Energy) -> Energy:
        """What this replay adds to ``other``'s nodes (a replay of both, less one of ``other``'s alone)."""
        return Energy(
            self.energy_j - other.energy_j,
            math.hypot(self.sigma_j, other.sigma_j),
            self.time_s - other.time_s,
            self.nonfinite + other.nonfinite,
            self.sm_clock_mhz,
            self.clock_reasons,
        )

    @property
    def power_w(self) -> float:
        return self.energy_j / self.time_s if self.time_s > 0 else math.nan


def run_spread_pct(values: Sequence[float]) -> float | None:
    """Largest minus smallest of the runs, in % of their mean (None for fewer than two runs)."""
    if len(values) < 2:
        return None
    m = statistics.fmean(values)
    return (max(values) - min(values)) / abs(m) * 100.0 if m else math.inf


def mean_of_runs(runs: Sequence[Energy]) -> tuple[Energy, float | None, float | None]:
    """The mean of the runs (σ of the mean), their spread (%) and the spread noise alone would give (%)."""
    n = len(runs)
    e = statistics.fmean(r.energy_j for r in runs)
    sd = math.sqrt(sum(r.sigma_j**2 for r in runs)) / n
    t = statistics.fmean(r.time_s for r in runs)
    spread = run_spread_pct([r.energy_j for r in runs])
    noise = None
    if n >= 2 and e:
        single = math.sqrt(statistics.fmean(r.sigma_j**2 for r in runs))
        noise = _D2.get(n, 3.0) * single / abs(e) * 100.0
    clocks = [r.sm_clock_mhz for r in runs if r.sm_clock_mhz is not None]
    reasons = tuple(dict.fromkeys(x for r in runs for x in r.clock_reasons))
    mhz = statistics.fmean(clocks) if clocks else None
    return Energy(e, sd, t, sum(r.nonfinite for r in runs), mhz, reasons), spread, noise


#: The 99th percentile of the range of two runs, in units of its expected value (|Z|·√2 at 99 % over d2 = 1.128).
NOISE_RANGE_99 = 3.2


def reproducibility(
    groups: Sequence[tuple[str, float | None, float | None]], target_pct: float = 3.0
) -> dict[str, Any] | None:
    """Run-to-run reproducibility of the measured groups, judged against ``target_pct``.

    ``groups``: (name, spread %, expected spread from the reported σ alone %). The spread is the
    range of a group's energies over the repeats in % of their mean, so it is two-sided: a run
    3 % low fails as a run 3 % high does. A group whose expected spread from its σ alone is above the
    target cannot be judged at it (its noise could fake a failure as well as hide one): it is listed in
    ``groups_unresolved`` and left out of the verdict, unless its spread is beyond what that noise gives
    (:data:`NOISE_RANGE_99` × its expected spread): then it is judged. ``verdict`` is ``PASS`` when every
    other group's spread is within the target, ``UNRESOLVED`` when no group can be judged. Where the measurement's
    median noise is larger than half the target the test cannot tell much, and ``resolution`` says so.
    None without repeats.
    """
    rows = [(g, s, n) for g, s, n in groups if s is not None and math.isfinite(s)]
    if not rows:
        return None
    spreads = [s for _, s, _ in rows]
    noises = [n for _, _, n in rows if n is not None and math.isfinite(n)]
    # too noisy to judge: σ alone spreads it beyond the target, and its spread is within what that noise gives
    # (3.2 × the expected range of two runs is its 99th percentile); a spread beyond that is judged, and fails
    unresolved = [
        g for g, s, n in rows if n is not None and math.isfinite(n) and n > target_pct and s <= NOISE_RANGE_99 * n
    ]
    judged = [r for r in rows if r[0] not in unresolved]
    worst = max(judged or rows, key=lambda r: r[1])
    outside = [g for g, s, _ in judged if s > target_pct]
    noise = statistics.median(noises) if noises else None
    if noise is not None and noise > target_pct / 2:
        resolution = (
            f"coarse: the replays' own noise alone gives a median spread of {noise:.2f} %, more than half the "
            f"{target_pct:g} % target; measure longer (max_total_s) for a sharper test"
        )
    else:
        resolution = "adequate"
    return {
        "target_pct": target_pct,
        "groups": len(rows),
        "median_spread_pct": statistics.median([s for _, s, _ in judged] or spreads),
        "max_spread_pct": worst[1],
        "worst_group": worst[0],
        "groups_outside_target": outside,
        "groups_unresolved": unresolved,
        "unresolved_spread_pct": {g: (s, n) for g, s, n in rows if g in unresolved},
        "median_noise_pct": noise,
        "verdict": "FAIL" if outside else ("PASS" if judged else "UNRESOLVED"),
        "resolution": resolution,
    }


def unresolved_text(rep: Mapping[str, Any]) -> str:
    """'; N group(s) too noisy to judge: …' for a reproducibility summary's unresolved groups ('' where none)."""
    groups = list(rep.get("groups_unresolved") or [])
    if not groups:
        return ""
    sp = rep.get("unresolved_spread_pct") or {}

    def one(g: Any) -> str:
        s_n = sp.get(g)
        return f"{str(g)[:40]} ({s_n[0]:.1f} % against {s_n[1]:.1f} % from noise)" if s_n else str(g)[:40]

    names = ", ".join(one(g) for g in groups[:3]) + (f" and {len(groups) - 3} more" if len(groups) > 3 else "")
    return f"; {len(groups)} group(s) too noisy to judge at {rep.get('target_pct', 3.0):g} % (left out): {names}"

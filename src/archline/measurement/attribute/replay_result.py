"""Graph replay's result: one row per group of nodes (isolated, marginal and in-context energies), the whole step."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from archline.core.frames import Tabular
from archline.measurement.attribute.replay_stats import reproducibility, run_spread_pct

__all__ = ["FIXED", "LUMPED", "PINNED", "REST", "ReplayResult", "ReplayRow", "design_c0", "fixed_cost_to_take_out"]

#: The rest of the step's nodes, measured as one group so the isolated energies add up to the step.
REST = "[all other nodes]"
#: The groups whose nodes cannot be switched, enabled in every replay and measured together.
PINNED = "[groups not switchable]"
#: A replay with no group enabled (only the memsets): its launch, synchronisation and the idle power over them,
#: which every isolated replay also carries and which is taken out of each (since session 11).
FIXED = "[a replay's fixed cost]"
#: The shortest groups switched together in a design too small to fit each on its own (replay_context.py).
LUMPED = "[groups lumped in the design]"


@dataclass(frozen=True)
class ReplayRow:
    """One group of nodes (a kernel name, or copies, or memsets). J, s, W; σ is 1 σ.

    A row that is not ``measurable`` has NaN energies and says why in ``reason``. With repeats,
    ``energy_runs_j`` holds each run's isolated energy, ``run_spread_pct`` their range in % of
    their mean, and ``run_noise_pct`` the range the reported σ alone would give. With a design
    (replay_context.py), ``context_j`` is the group's energy per step inside the step, with
    ``context_sigma_j`` (1 σ, the neighbour dependence folded in); a group measured only by the
    design has NaN isolated energies.
    """

    group: str
    kind: str
    nodes_per_step: int
    time_s: float
    energy_j: float
    energy_sigma_j: float
    mean_power_w: float
    marginal_j: float | None = None
    marginal_sigma_j: float | None = None
    measurable: bool = True
    reason: str = ""
    energy_runs_j: tuple[float, ...] = ()
    run_spread_pct: float | None = None
    run_noise_pct: float | None = None
    context_j: float | None = None
    context_sigma_j: float | None = None
    #: The group's time per replay with only it enabled, beyond a replay with none enabled (its kernels' own
    #: time, without the replay's launch and synchronisation); ``time_s`` is the isolated replay's, less the base's
    #: (pinned groups and memsets, or the fixed cost) where the base was measured (since session 11 where a
    #: replay with none enabled takes at least 1 % of the step's time).
    group_time_s: float | None = None
    #: Repetitions that ended with the step's state non-finite (hw/graph_state.py), over the replays this row's
    #: energies derive from: its own isolated (and without-it) replays and those subtracted from them (the base,
    #: the whole step). Its energy is then partly of kernels computing on NaN. 0 where nothing was checked.
    nonfinite_reps: int = 0
    #: With a design: the group's time per step inside the step (s), fitted like its energy.
    context_time_s: float | None = None
    #: A kernel group's busy time per step in the whole step (s): CUPTI's kernel records of the replays that rank the
    #: groups (replay.py's ``_ranking``), as the attribution times a program's calls; None where CUPTI did not trace
    #: (and in replays before session 20).
    busy_time_s: float | None = None
    #: The SM clock (MHz, mean of its readings) and NVML's clock-event reasons (comma-separated, e.g.
    #: ``sw_power_cap``) over the group's isolated measurements; None and "" where no reading was taken (fakes,
    #: replays before session 22, a GPU without the telemetry) and for rows the randomized design measured alone
    #: (its configurations' clocks are not kept).
    sm_clock_mhz: float | None = None
    clock_event_reasons: str = ""

    def to_row(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
        out["energy_runs_j"] = ";".join(f"{e:.6g}" for e in self.energy_runs_j)
        return out


@dataclass
class ReplayResult(Tabular):
    """The whole step and its top groups; ``sum_*`` adds the isolated energies (top groups + the rest).

    ``design``: the randomized design's summary (replay_context.py) where one was run."""

    step_energy_j: float
    step_sigma_j: float
    step_time_s: float
    rows: list[ReplayRow] = field(default_factory=list)
    groups: int = 0
    notes: list[str] = field(default_factory=list)
    repeats: int = 1
    step_runs_j: list[float] = field(default_factory=list)
    switching: dict[str, Any] = field(default_factory=dict)
    target_pct: float = 3.0
    design: dict[str, Any] | None = None
    #: How the step's state was guarded between replays (hw/graph_state.py's summary); None: not a PyTorch step.
    state: dict[str, Any] | None = None
    #: Whether every replay with nodes switched off was preceded by one whole step (replay.py's ``prime``);
    #: None: a replay from before the option.
    primed: bool | None = None
    #: Whether the step was captured with every buffer its own (hw/graph.py's ``keep_buffers``); None: not a
    #: PyTorch capture, or a replay from before the option.
    kept_buffers: bool | None = None
    #: Each pass's measurements of a replay's fixed cost (J), as measured, before their mean was taken out of every
    #: group (replay.py's ``fixed_reps``; since session 23); empty where none was taken out.
    fixed_passes_j: list[list[float]] = field(default_factory=list)

    def table_rows(self) -> list[dict[str, Any]]:
        """Each group's isolated energy (J, 1 σ), time (s) and marginal energy, for ``.to_pandas()``."""
        return [r.to_row() for r in self.rows]

    def table_title(self) -> str:
        return f"one step: {self.step_energy_j:.4g} ± {self.step_sigma_j:.2g} J"

    @property
    def kernels(self) -> list[ReplayRow]:
        return [r for r in self.rows if r.group not in (REST, PINNED, LUMPED, FIXED) and r.measurable]

    @property
    def not_measurable(self) -> list[ReplayRow]:
        return [r for r in self.rows if not r.measurable]

    @property
    def _measured(self) -> list[ReplayRow]:
        return [r for r in self.rows if r.measurable and math.isfinite(r.energy_j)]

    @property
    def sum_isolated_j(self) -> float:
        return sum(r.energy_j for r in self._measured)

    @property
    def sum_isolated_sigma_j(self) -> float:
        return math.sqrt(sum(r.energy_sigma_j**2 for r in self._measured))

    @property
    def sum_vs_step_pct(self) -> float:
        return (self.sum_isolated_j / self.step_energy_j - 1.0) * 100.0 if self.step_energy_j else math.nan

    @property
    def reproducibility(self) -> dict[str, Any] | None:
        """Run-to-run spread of every measured group over the repeats, against ``target_pct`` (None: one run)."""
        return reproducibility([(r.group, r.run_spread_pct, r.run_noise_pct) for r in self._measured], self.target_pct)

    def summary(self) -> dict[str, Any]:
        return {
            "step_energy_j": self.step_energy_j,
            "step_sigma_j": self.step_sigma_j,
            "step_time_s": self.step_time_s,
            "groups": self.groups,
            "sum_isolated_j": self.sum_isolated_j,
            "sum_isolated_sigma_j": self.sum_isolated_sigma_j,
            "sum_vs_step_pct": self.sum_vs_step_pct,
            "repeats": self.repeats,
            "step_runs_j": list(self.step_runs_j),
            "step_run_spread_pct": run_spread_pct(self.step_runs_j),
            "reproducibility": self.reproducibility,
            "not_measurable": {r.group: r.reason for r in self.not_measurable},
            "switching": dict(self.switching),
            "design": None if self.design is None else dict(self.design),
            "state": None if self.state is None else dict(self.state),
            "primed": self.primed,
            "kept_buffers": self.kept_buffers,
            "fixed_passes_j": [list(p) for p in self.fixed_passes_j],
            "notes": list(self.notes),
        }


def _number(v: Any) -> float:
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def design_c0(design: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """A randomized design's fixed cost of a replay, c0 ± its σ (J), where it has one (``replay.json``'s design)."""
    if not design:
        return None
    c0, se = _number(design.get("c0_j")), _number(design.get("c0_se_j"))
    return (c0, se) if math.isfinite(c0) and math.isfinite(se) else None


def fixed_cost_to_take_out(
    rows: Sequence[Mapping[str, Any]], design: Mapping[str, Any] | None
) -> tuple[float, float] | None:
    """What still has to come out of each isolated energy of ``replay.csv``'s ``rows`` to leave the group's own:
    nothing where the replay took the base out itself (a :data:`FIXED` or :data:`PINNED` row, since session 11),
    else the design's c0 ± σ where one ran (replays recorded before kept it in every isolated energy)."""
    if any(str(r.get("group", "")) in (FIXED, PINNED) for r in rows):
        return None
    return design_c0(design)

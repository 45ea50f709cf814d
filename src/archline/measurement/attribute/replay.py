"""Graph replay: each kernel group's energy in a captured step, in isolation and at the margin.

The reference measurement of a real program's kernels (issue 13). One call of the step is a
CUDA graph; replaying it with only one group of kernel nodes enabled measures that group in
isolation, with only that group disabled measures its marginal cost. Each replay is measured
like any short call (:func:`~archline.measurement.api.measure_callable`: repetitions at spread
phases of the sensor). The sum of the isolated energies is checked against the whole step, and
with ``repeats`` the whole measurement is done several times to see how well it reproduces.

Nodes that the driver will not switch (replay_switch.py) stay enabled in every replay with the
memsets; their groups are reported as not measurable, and every other group's isolated energy
is then its replay with them less their replay alone.

With ``design`` every measurable group is also measured inside the step, by a randomized design
of on/off configurations fitted as the fixed cost plus each group's energy (replay_context.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from archline.core.activity import demangle, short_name
from archline.core.readings import Clock
from archline.errors import ArchlineError, InputError
from archline.hw.graph_nodes import GraphError, GraphNode, SwitchError
from archline.hw.sync_watchdog import HANG_S, SyncWatchdog
from archline.measurement.attribute.replay_busy import BUSY_REPLAYS, BusyTimer
from archline.measurement.attribute.replay_context import (
    DEFAULT_DESIGN_MODEL,
    DESIGN_MODELS,
    ContextResult,
    check_design,
    check_replicates,
    context_rows,
    run_context,
    set_step,
)
from archline.measurement.attribute.replay_progress import PHASES
from archline.measurement.attribute.replay_result import FIXED, LUMPED, PINNED, REST, ReplayResult, ReplayRow
from archline.measurement.attribute.replay_stats import CallMeasure, Energy, mean_of_runs
from archline.measurement.attribute.replay_switch import (
    ReplayableGraph,
    Switching,
    blocked_groups,
    choose_switching,
)

__all__ = [
    "DESIGN_KINDS",
    "LUMPED",
    "PINNED",
    "REST",
    "WORKSPACE_INIT",
    "ReplayResult",
    "ReplayRow",
    "ReplayableGraph",
    "group_nodes",
    "is_kept",
    "kept_nodes",
    "replay_energy",
    "run_replay",
]

#: The ways of drawing the randomized design (replay_context.run_context).
DESIGN_KINDS = ("halves", "prefix")

#: Called before each replay that is measured or timed: (group, what), what being timing, whole,
#: base, alone, without or rest. Lets a caller learn which replay lost the CUDA context.
TrialHook = Callable[[str, str], None]


#: Kernels that, by their name, set up a workspace the step's next kernels use: kept on in every replay as the
#: memsets are (cuDNN's ``init_device_workspace_kernel`` before its split-K weight-gradient kernels; session 30: a
#: VGG-16 step's replay did not finish with such a weight-gradient group alone, session 29).
WORKSPACE_INIT = re.compile(r"init_device_workspace|init_?workspace|workspace_?init", re.IGNORECASE)


def is_kept(node: GraphNode, workspace_init: bool = True) -> bool:
    """Whether ``node`` stays enabled in every replay: a memset, or (``workspace_init``) a workspace's set-up kernel."""
    if node.kind == "memset":
        return True
    return workspace_init and node.kind == "kernel" and WORKSPACE_INIT.search(node.name) is not None


def group_nodes(nodes: Sequence[GraphNode], workspace_init: bool = True) -> dict[str, list[int]]:
    """Node indices by kernel name (copies form one group), in first-seen order. The nodes
    :func:`kept_nodes` keeps on are no group: they stay enabled in every replay."""
    out: dict[str, list[int]] = {}
    for n in nodes:
        if not is_kept(n, workspace_init):
            out.setdefault(n.name if n.kind == "kernel" else f"[{n.kind}]", []).append(n.index)
    return out


def kept_nodes(nodes: Sequence[GraphNode], workspace_init: bool = True) -> list[int]:
    """Nodes enabled in every replay: the memsets and (``workspace_init``) the kernels :data:`WORKSPACE_INIT` names.
    Memsets switched off, a replay of a real training step lost the CUDA context (benchmarks/replay_probe.py on an
    H100); they most likely reset counters and workspaces that cuBLAS's cooperative GEMMs count on. Both take
    microseconds. ``workspace_init=False`` keeps only the memsets (benchmarks/replay_probe.py's comparison)."""
    return [n.index for n in nodes if is_kept(n, workspace_init)]


@dataclass
class _Plan:
    """Groups, the nodes enabled in every replay (``base``: memsets and blocked groups), what is measured."""

    groups: dict[str, list[int]]
    keep: list[int]
    blocked: dict[str, str]
    base: list[int]
    failed: dict[str, str] = field(default_factory=dict)
    #: The names of the kernels among ``keep`` (workspace set-up kernels, :data:`WORKSPACE_INIT`), one per node.
    kept_kernels: list[str] = field(default_factory=list)

    @property
    def measurable(self) -> list[str]:
        return [g for g in self.groups if g not in self.blocked and g not in self.failed]

    @property
    def pinned(self) -> bool:
        return bool(self.blocked)


def _plan(graph: ReplayableGraph, excluded: Mapping[str, str], workspace_init: bool = True) -> tuple[_Plan, Switching]:
    groups = group_nodes(graph.nodes, workspace_init)
    keep = kept_nodes(graph.nodes, workspace_init)
    switching = choose_switching(graph, [i for idx in groups.values() for i in idx])
    blocked = blocked_groups(groups, switching.not_switchable, excluded)
    base = keep + [i for g in blocked for i in groups[g]]
    kernels = [graph.nodes[i].name for i in keep if graph.nodes[i].kind == "kernel"]
    return _Plan(groups, keep, blocked, base, kept_kernels=kernels), switching


#: Seconds the board idles after a priming step before the switched replay's measurement starts.
PRIME_SETTLE_S = 0.1


class _Trials:
    """Runs and measures replays with chosen nodes enabled; a group whose switching fails is set aside."""

    def __init__(
        self,
        graph: ReplayableGraph,
        measure: Callable[[Callable[[], None]], CallMeasure],
        hook: TrialHook | None,
        clock: Clock,
        prime: bool = False,
        busy_timer: BusyTimer | None = None,
    ) -> None:
        self.graph, self.measure, self.hook, self.clock = graph, measure, hook, clock
        #: Times one replay kernel name by kernel name (the design's busy-time model; None: not here).
        self.busy_timer = busy_timer
        #: The state copy that precedes every switched replay, measured alone (None: none, or not yet).
        self.copy: Energy | None = None
        #: Whether every measurement or timing with nodes switched off is preceded by one whole step
        #: (:meth:`_prime`), and how many such steps ran.
        self.prime = prime
        self.primes = 0
        #: A replay with no group enabled, in seconds (set by :func:`_time_groups`; 0: it takes no time to measure).
        self.base_s = 0.0
        #: Whether every pass measures the fixed cost (decided once, in the first pass), the last one measured,
        #: and how many passes reused it because their own measurement failed.
        self.fixed_wanted: bool | None = None
        self.fixed_last: Energy | None = None
        self.fixed_reused = 0
        #: Each pass's measurements of the fixed cost (J), as measured (replay.json's ``fixed_passes_j``).
        self.fixed_passes: list[list[float]] = []
        #: Groups measured alone more than once in a pass (:func:`_alone`): name → the most measurements a pass took.
        self.noisy: dict[str, int] = {}
        #: Groups whose further measurement alone was refused (a SwitchError): name → how many times.
        self.noisy_refused: dict[str, int] = {}
        #: How many passes the run makes (replay_energy's ``repeats``).
        self.passes = 1

    def _prime(self, nodes: Sequence[int] | None, settle: bool = True) -> None:
        """Before a replay with nodes switched off: run the whole step once from the restored state, outside any
        measurement, so that every buffer a switched-off node would have written holds what it writes in a step.
        A kernel whose producer is off then reads its producer's output of a whole step, not what an earlier
        switched replay left there (stale or garbage data that changes its power; docs/replay.md)."""
        if not self.prime or nodes is None:
            return
        self._restore()
        self.graph.set_enabled(None)
        self.graph.replay()
        self.graph.synchronize()
        # let the board's sensors leave the whole step behind before the switched replay is measured: unsettled,
        # the prime's power reached a lone group's measurement on the fake board's 20 ms averaging sensor,
        # beyond tests/unit/test_replay_state.py's 3 % bound (a timing reads no sensor: ``settle=False``)
        if settle:
            self.clock.sleep(PRIME_SETTLE_S)
        self.primes += 1

    def _copy_cost(self) -> Energy | None:
        """The energy and time of the state copy alone (``reset_state``), measured once like any replay, so that
        every switched measurement can be given without it: the whole step carries none."""
        reset = getattr(self.graph, "reset_state", None)
        if reset is None:
            return None
        if self.copy is None:
            try:
                self.copy = Energy.of(self.measure(reset))
            except InputError:  # it took no measurable time at all (nothing to copy): it costs nothing
                self.copy = Energy(0.0, 0.0, 0.0)
        return self.copy

    def _restore(self) -> None:
        """Put the step's state back as captured, where the graph keeps one (hw/graph_state.py)."""
        restore = getattr(self.graph, "restore_state", None)
        if restore is not None:
            restore()

    def _replay_for(self, nodes: Sequence[int] | None) -> Callable[[], None]:
        """The replay to measure: with nodes switched off, the step's state is copied back before every
        replay (``reset_state``, enqueued on the replay's stream), so no replay starts from weights that an
        earlier one computed from what switched-off nodes left behind. The copy is measured alone once and
        taken out of every such measurement and timing (:meth:`_copy_cost`)."""
        reset = getattr(self.graph, "reset_state", None)
        if nodes is None or reset is None:
            return self.graph.replay
        replay = self.graph.replay

        def guarded() -> None:
            reset()
            replay()

        return guarded

    def run(self, group: str, what: str, nodes: Sequence[int] | None) -> Energy:
        if self.hook is not None:
            self.hook(group, what)
        self._prime(nodes)
        self._restore()
        self.graph.set_enabled(nodes)
        state = getattr(self.graph, "state", None)
        before = int(getattr(state, "nonfinite", 0))
        m = self.measure(self._replay_for(nodes))
        e = Energy.of(m, int(getattr(state, "nonfinite", 0)) - before)
        copy = self._copy_cost() if nodes is not None else None
        if copy is None:
            return e
        return e.minus(copy)  # the copy is measured once, on a state that is never NaN: its nonfinite is 0

    def busy(self, nodes: Sequence[int] | None) -> list[dict[str, float]]:
        """Each kernel name's busy time in each of :data:`BUSY_REPLAYS` traced replays with ``nodes`` enabled (s;
        replay_busy.py), only the names of the graph's own kernel nodes. Primed once (no sensor to settle) and
        restored before each replay, as a measurement is; the state copy runs before the traced replay, so its
        kernels are not counted."""
        if self.busy_timer is None:
            raise ValueError("no busy timer")
        if self.hook is not None:
            self.hook("[busy]", "busy")
        kernels = {n.name for n in self.graph.nodes if n.kind == "kernel"}
        self._prime(nodes, settle=False)
        out: list[dict[str, float]] = []
        for _ in range(BUSY_REPLAYS):
            self._restore()
            self.graph.set_enabled(nodes)
            reset = getattr(self.graph, "reset_state", None)
            if reset is not None:
                reset()
                self.graph.synchronize()
            got = self.busy_timer(self.graph.replay)
            out.append({k: v for k, v in got.items() if k in kernels})
        return out

    def time(self, group: str, nodes: Sequence[int], clock: Clock, replays: int) -> float:
        """Seconds per replay (host timer around synchronised replays)."""
        if self.hook is not None:
            self.hook(group, "timing")
        self._prime(nodes)
        self._restore()
        self.graph.set_enabled(nodes)
        replay = self._replay_for(nodes)
        replay()
        self.graph.synchronize()
        t0 = clock.now_s()
        for _ in range(replays):
            replay()
        self.graph.synchronize()
        copy = self._copy_cost()  # timings always switch nodes: each replay was preceded by the copy
        return (clock.now_s() - t0) / replays - (copy.time_s if copy is not None else 0.0)


def _time_groups(t: _Trials, plan: _Plan, clock: Clock, replays: int) -> dict[str, float]:
    """Each measurable group's time per replay with only it enabled, beyond the time of a replay with none
    (the base: pinned nodes and memsets, or nothing; a replay's launch and synchronisation are not the group's)."""
    try:
        base_s = t.time(PINNED, plan.base, clock, replays)
    except SwitchError:
        base_s = 0.0
    t.base_s = base_s
    out: dict[str, float] = {}
    for name in plan.measurable:
        try:
            out[name] = max(t.time(name, plan.groups[name] + plan.base, clock, replays) - base_s, 0.0)
        except SwitchError as exc:
            plan.failed[name] = f"switching failed: {exc}"
    return out


def _measure_repeat(
    t: _Trials, plan: _Plan, chosen: list[str], others: list[int], marginal: bool, fixed_k: int = 1
) -> tuple[Energy, Energy | None, dict[str, tuple[Energy, Energy | None]], Energy | None]:
    """One pass: whole step, base, each chosen group alone (and without it), the rest. The base (pinned groups and
    memsets, or nothing but a replay's launch) is taken out of each group's and the rest's energy, as out of their
    times (:func:`_time_groups`). Pinned groups are measured once, first; a fixed cost (no pinned groups)
    ``fixed_k`` times, centred in the pass's slots (the chosen groups, then the rest), and their mean is taken out
    (:func:`fixed_reps`); each measurement is kept in ``t.fixed_passes``."""
    whole = t.run("[whole step]", "whole", None)
    pinned = t.run(PINNED, "base", plan.base) if plan.pinned else None
    wanted = not plan.pinned and _fixed_wanted(t, whole)
    slots = len(chosen) + (1 if others else 0)
    at = sorted(slots * (2 * j + 1) // (2 * fixed_k) for j in range(fixed_k)) if wanted else []
    fresh: list[Energy] = []
    every = [i for idx in plan.groups.values() for i in idx]
    raw: dict[str, tuple[Energy, Energy | None]] = {}
    for pos, name in enumerate(chosen):
        fresh += [e for _ in range(at.count(pos)) for e in _fixed_once(t, plan)]
        if name in plan.failed:
            continue
        idx = plan.groups[name]
        try:
            known = mean_of_runs(fresh)[0] if fresh else t.fixed_last
            iso = _alone(t, name, idx + plan.base, known)
            marg = None
            if marginal:
                own = set(idx)
                marg = whole.minus(t.run(name, "without", [i for i in every if i not in own] + plan.keep))
        except SwitchError as exc:
            plan.failed[name] = f"switching failed: {exc}"
            continue
        raw[name] = (iso, marg)
    fresh += [e for _ in range(sum(1 for a in at if a >= len(chosen))) for e in _fixed_once(t, plan)]
    rest = t.run(REST, "rest", others + plan.base) if others else None
    base = pinned if plan.pinned else _fixed_base(t, fresh) if wanted else None
    per = {name: (iso.minus(base) if base is not None else iso, marg) for name, (iso, marg) in raw.items()}
    if rest is not None and base is not None:
        rest = rest.minus(base)
    return whole, base, per, rest


#: A group alone whose replays' mean over a run's passes would have a 1 σ above this share of its energy is measured
#: again (:func:`_alone`): two runs' means then differ by under 3 % (the reproducibility target) 19 times in 20
#: (1.96 · √2 · 1.08 % = 3 %).
NOISY_REL = 0.01
#: The most measurements of one group alone in one pass.
NOISY_MAX = 6


def _alone(t: _Trials, name: str, nodes: list[int], fixed: Energy | None = None) -> Energy:
    """A group's replay alone: measured again, up to :data:`NOISY_MAX` times in all, while its own 1 σ over its energy
    with the fixed cost ``fixed`` taken out (the pass's measurements so far, else the last pass's; as measured where
    none) is above :data:`NOISY_REL` · √(the run's passes) of it (so the mean over the passes is within NOISY_REL),
    and the mean kept. The bound is per group: a verdict over several groups at the limit fails more often than one
    in twenty. Why (session 23, docs/replay.md): the transformer's largest cuBLAS GEMM, running alone above an
    H100's 700 W limit, had a 1 σ of 2.5 and 4.2 % per measurement (net of the fixed cost) where the other groups
    had 1.0-2.4 %, and its passes spread 5.6-8.3 % inside one process; it failed reproducibility on two of fourteen
    boards. A SwitchError from a further measurement keeps those already taken (counted in ``t.noisy_refused``)."""
    got = [t.run(name, "alone", nodes)]
    mean = got[0]
    limit = NOISY_REL * math.sqrt(t.passes)
    while len(got) < NOISY_MAX and _net_rel_sd(mean, fixed) > limit:
        try:
            got.append(t.run(name, "alone", nodes))
        except SwitchError:
            t.noisy_refused[name] = t.noisy_refused.get(name, 0) + 1
            break
        mean = mean_of_runs(got)[0]
    if len(got) > 1:
        t.noisy[name] = max(t.noisy.get(name, 0), len(got))
    return mean


def _net_rel_sd(e: Energy, fixed: Energy | None) -> float:
    """A group's replay's own 1 σ over its energy with ``fixed`` taken out, where given (0 where that is not above
    nothing: nothing to judge). The fixed cost's own σ is left out: measuring the group again cannot shrink it (its
    allocation does, :func:`fixed_reps`)."""
    net = e.energy_j - fixed.energy_j if fixed is not None and math.isfinite(fixed.energy_j) else e.energy_j
    return e.sigma_j / net if net > 0 else 0.0


#: The most times one pass measures a replay's fixed cost (:func:`fixed_reps`).
FIXED_REPS_MAX = 4


def fixed_reps(groups: int) -> int:
    """How many times a pass measures the fixed cost taken out of ``groups`` measurements: √groups, rounded, 1 to
    :data:`FIXED_REPS_MAX`. Every group's isolated energy carries the fixed cost's error, so it is measured √G times
    as often as a group, the allocation that minimises the variance of G comparisons against one common control
    (Dunnett 1955). Why (session 23, docs/replay.md): on H200 GPU-df21093a one process's three fixed costs spread
    6.9 % while its groups spread at most 1.6 %, and session 21's H200 pair failed by its fixed cost alone."""
    return max(1, min(FIXED_REPS_MAX, round(math.sqrt(max(groups, 0)))))


def _fixed_wanted(t: _Trials, whole: Energy) -> bool:
    """Whether passes take a fixed cost out, decided in the first: not where an empty replay takes under 1 % of the
    step's time (too little to take out), nor once the first pass could not measure it."""
    if t.fixed_wanted is None:
        t.fixed_wanted = t.base_s > 0.01 * whole.time_s
    return t.fixed_wanted


def _fixed_once(t: _Trials, plan: _Plan) -> list[Energy]:
    """One measurement of the fixed cost ([] where it fails)."""
    try:
        return [t.run(FIXED, "base", plan.base)]
    except (SwitchError, ArchlineError):
        return []


def _fixed_base(t: _Trials, fresh: list[Energy]) -> Energy | None:
    """A pass's fixed cost: the mean of its own measurements; where all failed, the last pass's (counted in
    ``fixed_reused``), or none at all where no pass has measured one (then no later pass tries)."""
    t.fixed_passes.append([e.energy_j for e in fresh])
    if fresh:
        t.fixed_last = mean_of_runs(fresh)[0]
        return t.fixed_last
    if t.fixed_last is None:
        t.fixed_wanted = False
        return None
    t.fixed_reused += 1
    return t.fixed_last


def _fixed_share(rows: Sequence[ReplayRow]) -> str | None:
    """How much of the measured groups' isolated replays the fixed cost taken out of each was (None: no kernel group
    measured). Session 22 found a fixed cost 8.6 % apart between two processes moving two small groups 3.5-3.9 %
    while their replays as measured agreed within 0.59 % (docs/replay.md)."""
    fixed = next((r for r in rows if r.group == FIXED), None)
    if fixed is None or not math.isfinite(fixed.energy_j):
        return None
    shares = [
        fixed.energy_j / (r.energy_j + fixed.energy_j)
        for r in rows
        if r.kind == "kernel" and r.measurable and math.isfinite(r.energy_j) and r.energy_j + fixed.energy_j > 0
    ]
    if not shares:
        return None
    return (
        f"a replay's fixed cost, {fixed.energy_j:.4g} J per step (a replay with no group enabled), was taken out of "
        f"each group: {100 * min(shares):.0f}-{100 * max(shares):.0f} % of the kernel groups' isolated replays as "
        "measured; a change in it from one run to the next moves every group by as many joules, the smallest most "
        "(docs/replay.md, 'Session 22')"
    )


def _group_time(r: ReplayRow, times: Mapping[str, float], bases: Sequence[Energy]) -> float:
    """A group's time per replay beyond a replay with none: its timing's, or where that came out at nothing (the
    H100 runs of sessions 10-11: every group's timing, each replay primed by a whole step and a state copy, was
    at or under the base's) the time of its isolated measurements less the base's, where the base was measured."""
    t = times[r.group]
    if t > 0 or not bases or not r.measurable or not math.isfinite(r.time_s) or r.time_s <= 0:
        return t
    return r.time_s


def _row(name: str, kind: str, nodes: int, runs: Sequence[Energy], marg: Sequence[Energy] = ()) -> ReplayRow:
    e, spread, noise = mean_of_runs(runs)
    m = mean_of_runs(marg)[0] if marg else None
    return ReplayRow(
        name, kind, nodes, e.time_s, e.energy_j, e.sigma_j, e.power_w,
        None if m is None else m.energy_j, None if m is None else m.sigma_j,
        energy_runs_j=tuple(r.energy_j for r in runs), run_spread_pct=spread, run_noise_pct=noise,
        nonfinite_reps=e.nonfinite + (0 if m is None else m.nonfinite),
        sm_clock_mhz=e.sm_clock_mhz, clock_event_reasons=",".join(e.clock_reasons),
    )  # fmt: skip


def _unmeasured(name: str, kind: str, nodes: int, reason: str) -> ReplayRow:
    return ReplayRow(name, kind, nodes, math.nan, math.nan, math.nan, math.nan, measurable=False, reason=reason)


#: Synchronised replays each group's time alone is taken from (:func:`_time_groups`).
TIMING_REPLAYS = 10


def replay_energy(
    graph: ReplayableGraph,
    measure: Callable[[Callable[[], None]], CallMeasure],
    clock: Clock,
    *,
    top: int = 8,
    marginal: bool = True,
    timing_replays: int = TIMING_REPLAYS,
    repeats: int = 1,
    exclude: Mapping[str, str] | None = None,
    on_trial: TrialHook | None = None,
    target_pct: float = 3.0,
    design: int | str | None = None,
    design_seed: int | None = None,
    design_budget_s: float | None = None,
    design_kind: str = "halves",
    prime: bool = False,
    design_p_on: float = 0.5,
    design_replicates: int | str | None = None,
    design_model: str = "additive",
    busy_timer: BusyTimer | None = None,
) -> ReplayResult:
    """Energy of the whole step, of its ``top`` groups (by in-step energy where a design ran, else by isolated
    time), and of the rest.

    ``measure(fn)`` measures one call of ``fn`` (a replay); the graph's enable flags are set
    before each measurement and every node is enabled again at the end. The groups to measure
    are chosen once; then the whole measurement runs ``repeats`` times. ``exclude`` (group →
    why) keeps groups out, enabled in every replay like nodes that cannot be switched.

    ``design`` (a number of configurations, or ``"auto"``: max(3 · groups, 40)) then measures every
    measurable group inside the step (``context_j``; replay_context.py), with the RNG seeded by
    ``design_seed`` (drawn and recorded where None), in at most ``design_budget_s`` seconds of
    measurement (fewer configurations, with a note). ``design_kind``: ``halves`` (each group on in a random
    half of the configurations, or in a share ``design_p_on`` of them) or ``prefix`` (random prefixes of the step:
    no kernel runs without the ones before it; replay_context.prefix_rows). The design runs first, and the
    ``top`` groups measured one by one are then the largest by in-step energy: the ones a per-kernel table
    ranks first. (Timed one by one under priming and the state copy, every group of the H100 runs of sessions
    10-11 came out at nothing, and the top groups were the first in capture order.)

    ``prime``: run the whole step once, unmeasured, before every measurement or timing with nodes switched
    off, so that switched-off producers' buffers hold a whole step's output (:meth:`_Trials._prime`). Off here by
    default (the fake boards of the CPU tests); :func:`run_replay` turns it on, with ``keep_buffers``: priming
    alone did not help on H100 GPU-66ba516d, with every buffer kept its own it did (docs/replay.md).

    ``design_replicates`` (a count, ``"auto"``: a fifth of the design's measurements, or None): configurations
    the design measures twice, so that one measurement's own scatter is told apart from the neighbour
    dependence (replay_context.run_context). Off here by default; :func:`run_replay` measures ``"auto"``.
    ``design_model``: ``additive``, ``links`` (a cost per broken producer→consumer link fitted beside the
    energies; replay_context.link_breaks) or ``busy`` (the energy of the kernels' busy time beyond theirs in the
    whole step, each configuration timed by ``busy_timer``; replay_busy.py): ``additive`` here by default, ``links``
    in :func:`run_replay`. ``busy_timer``, where given, also ranks the groups (:func:`_ranking`).
    """
    check_design(design)
    check_replicates(design_replicates)
    if design_kind not in DESIGN_KINDS:
        raise ValueError(f"unknown design kind {design_kind!r} ({' or '.join(DESIGN_KINDS)})")
    if design_model not in DESIGN_MODELS:
        raise ValueError(f"unknown design model {design_model!r} ({' or '.join(DESIGN_MODELS)})")
    if top < 1:
        raise ValueError("top must be at least 1")
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    if not 0.0 < design_p_on < 1.0:
        raise ValueError(f"design_p_on must be strictly between 0 and 1, not {design_p_on}")
    plan, switching = _plan(graph, exclude or {})
    t = _Trials(graph, measure, on_trial, clock, prime, busy_timer)
    try:
        times = _time_groups(t, plan, clock, timing_replays)
        ranking, ranked_by, rank_note = _ranking(t, plan, times)
        ctx = None
        if design is not None:
            ctx = _run_design(
                t, plan, ranking, design, design_seed, design_budget_s, design_kind, design_p_on, design_replicates,
                design_model,
            )  # fmt: skip
        chosen, by = _choose(plan, ranking, ctx, top, ranked_by)
        others = [i for g in plan.measurable if g not in chosen for i in plan.groups[g]]
        fixed_k = fixed_reps(len(chosen) + (1 if others else 0))
        t.passes = repeats
        passes = [_measure_repeat(t, plan, chosen, others, marginal, fixed_k) for _ in range(repeats)]
        whole, _, _ = mean_of_runs([p[0] for p in passes])
        res = ReplayResult(
            whole.energy_j, whole.sigma_j, whole.time_s, groups=len(plan.groups), repeats=repeats,
            step_runs_j=[p[0].energy_j for p in passes], switching=switching.summary(), target_pct=target_pct,
        )  # fmt: skip
        for name in chosen:
            got = [p[2][name] for p in passes if name in p[2]]
            if name in plan.failed or len(got) < repeats:
                continue
            kind, n = graph.nodes[plan.groups[name][0]].kind, len(plan.groups[name])
            margs = [m for _, m in got if m is not None]
            res.rows.append(_row(name, kind, n, [iso for iso, _ in got], margs))
        rests = [p[3] for p in passes if p[3] is not None]
        if rests:
            res.rows.append(_row(REST, "mixed", len(others), rests))
        bases = [p[1] for p in passes if p[1] is not None]
        if plan.pinned:
            res.rows.append(_row(PINNED, "mixed", len(plan.base) - len(plan.keep), bases))
        elif bases:  # every pass has one (_fixed_base)
            res.rows.append(_row(FIXED, "mixed", len(plan.keep), bases))
            res.fixed_passes_j = [list(p) for p in t.fixed_passes]
            counts = sorted({len(p) for p in t.fixed_passes})
            if fixed_k > 1:
                how_many = "/".join(str(c) for c in counts)
                res.notes.append(
                    f"the fixed cost was measured {how_many} time(s) in each pass of {fixed_k} asked, centred in it, "
                    "and their mean taken out of each group: √G times as often as a group, G the measurements it is "
                    "taken out of (Dunnett's allocation; since session 23; each measurement in fixed_passes_j)"
                )
            share = _fixed_share(res.rows)
            if share is not None:
                res.notes.append(share)
            if t.fixed_reused:
                res.notes.append(
                    f"the fixed cost's measurement failed in {t.fixed_reused} pass(es); each reused the last measured"
                )
        if t.noisy:
            full = demangle(list(t.noisy))
            some = ", ".join(f"{short_name(full.get(g, g), 50)} ({n})" for g, n in t.noisy.items())
            res.notes.append(
                "measured alone more than once in a pass, its own 1 σ over its energy net of the fixed cost being "
                f"above {100 * NOISY_REL:g} % × √{repeats} (the most measurements a pass took): {some}; each pass "
                "kept their mean (since session 23)"
            )
        if t.noisy_refused:
            res.notes.append(
                "a further measurement alone was refused (switching failed) for "
                + ", ".join(f"{short_name(demangle([g]).get(g, g), 50)} ({n}×)" for g, n in t.noisy_refused.items())
                + "; each pass kept the measurements it had"
            )
        for name, why in {**plan.blocked, **plan.failed}.items():
            res.rows.append(_unmeasured(name, graph.nodes[plan.groups[name][0]].kind, len(plan.groups[name]), why))
        fixed = any(r.group == FIXED for r in res.rows)
        res.notes += _notes(plan, switching, chosen, ranking, repeats, fixed=fixed, by=by, ranked_by=ranked_by)
        if rank_note:
            res.notes.append(rank_note)
        if ctx is not None:
            _add_context(res, t, plan, times, ctx)
        res.rows = [replace(r, group_time_s=_group_time(r, times, bases)) if r.group in times else r for r in res.rows]
        if ranked_by == BY_BUSY:  # each kernel group's CUPTI busy time, to compare with a program's traced calls
            res.rows = [
                replace(r, busy_time_s=ranking[r.group]) if r.group in ranking and r.kind == "kernel" else r
                for r in res.rows
            ]
        if t.primes:
            res.notes.append(
                f"every measurement and timing with nodes switched off was preceded by one whole step, unmeasured "
                f"({t.primes} in all), so that switched-off nodes' buffers held a whole step's output"
            )
        res.primed = prime
        if t.copy is not None:
            res.notes.append(
                f"the state copy before every replay with nodes switched off, measured alone: "
                f"{t.copy.energy_j:.4g} ± {t.copy.sigma_j:.2g} J, {t.copy.time_s * 1e3:.3g} ms; taken out of every "
                "such measurement and timing"
            )
        return res
    finally:
        with contextlib.suppress(GraphError):  # a node stuck off: the caller drops this graph anyway
            graph.set_enabled(None)


def _run_design(
    t: _Trials, plan: _Plan, times: Mapping[str, float], design: int | str, seed: int | None,
    budget_s: float | None, kind: str, p_on: float, replicates: int | str | None = None, model: str = "additive",
) -> ContextResult:  # fmt: skip
    """Every measurable group's energy inside the step, by a randomized design (replay_context.py). Factors are
    ordered longest first, then by node count (a design too small for every group lumps the last): on the H100 runs
    every timing came out at nothing, and capture order would have lumped the step's tail whatever its size."""
    names = sorted((g for g in plan.measurable if g in times), key=lambda g: (-times[g], -len(plan.groups[g])))
    groups = {g: plan.groups[g] for g in names}
    return run_context(
        lambda nodes: t.run("[design]", "design", nodes), groups, plan.base, t.clock, design=design, seed=seed,
        budget_s=budget_s, kind=kind, p_on=p_on, replicates=replicates, model=model,
        busy=t.busy if t.busy_timer is not None else None,
    )  # fmt: skip


#: What :func:`_ranking` ranks groups by where CUPTI traced the whole step.
BY_BUSY = "busy time in the whole step (CUPTI)"
#: ... and where it did not: each group's replay alone, timed on the host.
BY_ISOLATED = "isolated time"


def _ranking(t: _Trials, plan: _Plan, times: Mapping[str, float]) -> tuple[dict[str, float], str, str | None]:
    """How long each measurable group runs, to rank them by (the design's factor order, the top groups where no
    design ran): each kernel group's busy time in the whole step, from :data:`BUSY_REPLAYS` replays traced by CUPTI
    (their mean; copies keep their host time), where a busy timer is given and it traces; else the host timings.
    Timed on the host one by one, under priming and the state copy, every group of the H100 runs of sessions 10–18
    came out at nothing, so without a design the top groups were the first in capture order. Returns the times, what
    they are, and a note where CUPTI could not trace."""
    if t.busy_timer is None:
        return dict(times), BY_ISOLATED, None
    host = "groups ranked by their isolated time on the host"
    try:
        traces = t.busy(None)
    except Exception as exc:
        # a ranking only: any failure to trace (cupti-python's own errors are plain Exceptions) falls back to the
        # host timings, with a note, and the replay goes on
        return dict(times), BY_ISOLATED, f"{host}: CUPTI did not trace ({type(exc).__name__}: {exc})"
    busy = {g: sum(tr.get(g, 0.0) for tr in traces) / len(traces) for g in times}
    kernels = [g for g in times if t.graph.nodes[plan.groups[g][0]].kind == "kernel"]
    missing = [g for g in kernels if not busy[g] > 0.0]
    if missing:  # as replay_busy: a name CUPTI gives otherwise would rank last, whatever its size
        why = (
            "traced no kernel"
            if len(missing) == len(kernels)
            else (f"gave no time to {len(missing)} of {len(kernels)} kernel groups (names not as captured?)")
        )
        return dict(times), BY_ISOLATED, f"{host}: CUPTI {why}"
    return {g: busy[g] if g in kernels else times[g] for g in times}, BY_BUSY, None


def _choose(
    plan: _Plan, times: Mapping[str, float], ctx: ContextResult | None, top: int, ranked_by: str = BY_ISOLATED
) -> tuple[list[str], str]:
    """The groups measured one by one: the ``top`` largest by in-step energy where a design gave them (groups it
    lumped or could not fit come after, by time), else by time (``ranked_by``: :func:`_ranking`); and what they were
    chosen by."""
    timed = sorted(plan.measurable, key=lambda g: -times.get(g, 0.0))
    if ctx is None or not ctx.values:
        return timed[:top], ranked_by
    fitted = sorted((g for g in plan.measurable if g in ctx.values), key=lambda g: -ctx.values[g][0])
    chosen = (fitted + [g for g in timed if g not in ctx.values])[:top]
    by_time = sum(1 for g in chosen if g not in ctx.values)
    if not by_time:
        return chosen, "in-step energy (the design)"
    return chosen, (
        f"in-step energy (the design), then {by_time} by {ranked_by} (groups the design lumped together or did not fit)"
    )


def _add_context(res: ReplayResult, t: _Trials, plan: _Plan, times: Mapping[str, float], ctx: ContextResult) -> None:
    """The design's in-step energies into the rows, its Σ e + c0 checked against the whole step measured after."""
    set_step(ctx, res.step_energy_j, res.step_sigma_j)
    names = [g for g in plan.measurable if g in times]
    info = {g: (t.graph.nodes[plan.groups[g][0]].kind, len(plan.groups[g]), times[g]) for g in names}
    info[LUMPED] = ("mixed", sum(len(plan.groups[g]) for g in ctx.lumped), sum(times[g] for g in ctx.lumped))
    res.rows = context_rows(res.rows, ctx, info)
    res.design = ctx.summary or None
    res.notes += ctx.notes


def _notes(
    plan: _Plan, switching: Switching, chosen: list[str], times: dict[str, float], repeats: int, fixed: bool = False,
    by: str = BY_ISOLATED, ranked_by: str = BY_ISOLATED,
) -> list[str]:  # fmt: skip
    measurable = plan.measurable
    total = sum(times.values())
    share = {BY_BUSY: "the step's busy time (copies timed on the host)"}.get(ranked_by, f"the {ranked_by}")
    covered = f", {sum(times.get(g, 0.0) for g in chosen) / total:.0%} of {share}" if total > 0 else ""
    notes = [
        f"{len(chosen)} of {len(measurable)} measurable groups measured one by one, the largest by {by}"
        f"{covered}; the rest as one group",
        "isolated energies are board energy per replay with only that group's nodes enabled, its idle "
        "share included; marginal = step − step without the group",
        switching.note(),
    ]
    if plan.keep:
        memsets = len(plan.keep) - len(plan.kept_kernels)
        kept = [f"{memsets} memsets"] if memsets else []
        if plan.kept_kernels:
            names = sorted(set(plan.kept_kernels))
            full = demangle(names)
            kept.append(
                f"{len(plan.kept_kernels)} workspace set-up kernels ("
                + ", ".join(short_name(full.get(n, n), 90) for n in names)
                + ")"
            )
        notes.append(f"the step's {' and '.join(kept)} stay enabled in every replay (counters and workspaces)")
    if not plan.pinned and fixed:
        notes.append(
            f"each group's isolated energy is its replay less a replay with no group enabled ('{FIXED}': the "
            "launch, synchronisation, memsets and the idle power over them), as its time is"
        )
    if plan.blocked:
        notes.append(
            f"{len(plan.blocked)} groups cannot be switched and stay enabled in every replay ('{PINNED}', measured "
            "alone with the memsets); each other group's isolated energy is its replay with them less theirs"
        )
    if plan.failed:
        notes.append(f"{len(plan.failed)} groups failed to switch during the measurement and are not measured")
    if repeats > 1:
        notes.append(f"the whole measurement ran {repeats} times on one capture; energies are the runs' mean")
    return notes


def hang_message(group: str, what: str, waited_s: float) -> str:
    """The line a hung replay prints (and its run directory's note)."""
    # the group's whole name: replay's exclude and a bug report need it (a cut one hid which variant of a cuDNN
    # weight-gradient kernel hung, session 29)
    where = PHASES.get(what, what) if group.startswith("[") else f"{PHASES.get(what, what)}: {group}"
    return (
        f"a replay with nodes switched off did not finish within {waited_s:.0f} s ({where}): a kernel of this step is "
        "most likely waiting for something a switched-off node would have done; a kernel that does not end cannot be "
        "stopped from the host, so archline ends this process; graph replay cannot isolate this step's kernels "
        "(docs/replay.md, 'Session 29' and 'Session 30')"
    )


def replay_hung(rd: Any, group: str, what: str, waited_s: float, exit_now: Callable[[int], None] = os._exit) -> None:
    """What the watchdog does on a hang (from its thread, the main one blocked in the driver): the run directory
    finished as failed with the line, the line on stderr as the CLI prints errors, and the process ended with exit
    status 2 (the hung kernel cannot be stopped otherwise)."""
    try:
        msg = hang_message(group, what, waited_s)
        if rd is not None:
            with contextlib.suppress(Exception):  # the line and the exit matter more than the manifest
                rd.finish("failed", notes=(f"replay failed: {msg}",))
        sys.stderr.write(f"archline: error: {msg}\n")
        sys.stderr.flush()
    finally:  # whatever failed above, the process must not stay behind a kernel that does not end
        exit_now(GraphError.exit_code)


#: A replay's waits may last this many times their expected length (the whole step's, times the replays queued
#: before one wait) before they count as a hang, where that is more than ``hang_s``.
HANG_FACTOR = 20.0


def hang_limit_s(hang_s: float, step_s: float, queued: int, max_total_s: float) -> float:
    """The watchdog's limit: ``hang_s``, or more for a long step, ``HANG_FACTOR`` × the longest wait a healthy replay
    makes: ``queued`` whole steps (a timing queues its replays, the prime and the state copy before one wait) or one
    measurement's ``max_total_s``."""
    return max(hang_s, HANG_FACTOR * max(queued * max(step_s, 0.0), max_total_s))


def run_replay(
    step: Callable[[], Any],
    *,
    gpu: int = 0,
    top: int = 8,
    marginal: bool = True,
    out: Any = None,
    force: bool = False,
    max_total_s: float = 3.0,
    repeats: int = 1,
    target_rel_error: float = 0.02,
    exclude: Mapping[str, str] | None = None,
    on_trial: TrialHook | None = None,
    design: int | str | None = None,
    design_seed: int | None = None,
    design_budget_s: float | None = 600.0,
    state: Any = None,
    design_kind: str = "halves",
    prime: bool = True,
    keep_buffers: bool = True,
    design_p_on: float = 0.5,
    design_replicates: int | str | None = "auto",
    design_model: str = DEFAULT_DESIGN_MODEL,
    hang_s: float | None = HANG_S,
) -> ReplayResult:
    """Capture one call of the PyTorch ``step`` on ``gpu`` and measure its groups by replay.

    With ``out`` the result goes into a run directory of kind ``replay`` (``replay.csv``,
    ``replay.json``, the manifest with the board and its state). ``design``: also each group's
    energy inside the step by a randomized design (:func:`replay_energy`), its measurements within
    ``design_budget_s`` seconds (each configuration is one measurement of up to ``max_total_s``).
    ``state``: what the step updates (modules, optimizers, tensors), copied back before every measurement
    and after every repetition; by default what the step's closure reaches (hw/graph_state.py).
    ``keep_buffers``: capture with the storage of every tensor the step creates held, so no buffer of the
    step shares memory with another (hw/graph.py); ``prime``: one unmeasured whole step before every replay with
    nodes switched off (:func:`replay_energy`). Both are on by default since session 9: on H100 GPU-f641ab6c
    they took a transformer training step's random halves from 9 of 20 ending non-finite (primed alone) to 0,
    and its design to ρ̂ 5.2 %, Σ e + c0 +2.1 % of the step (docs/replay.md). ``design_replicates``: configurations
    measured twice (``"auto"``, the default since session 14: a fifth of the design's measurements; 0 or None:
    none, as before). ``design_model``: ``links`` (the default: a cost per broken producer→consumer link fitted beside
    the energies), ``busy`` (session 17's default: each configuration also timed kernel by kernel with CUPTI and the
    energy of the kernels' busy time beyond theirs in the whole step fitted too; replay_busy.py; held out in session
    18 it fitted no better than links) or ``additive`` (the energies alone).

    ``hang_s``: a wait for a replay that lasts longer than this (or than :func:`hang_limit_s` allows a long step,
    timed once after capture) is a hang (hw/sync_watchdog.py): most likely a kernel waiting for something a
    switched-off node would have done, which cannot be stopped from the host and holds the GPU. The run directory is
    then finished as failed, one line says which trial hung (``archline: error: …``) and **the process ends** with
    exit status 2 (:func:`replay_hung`), a Python session calling :func:`archline.replay` included. ``None``: no
    watchdog (a hang then waits for ever).
    """
    from archline.core.readings import SystemClock
    from archline.errors import ArchlineError
    from archline.hw.graph import capture_torch
    from archline.hw.nvml import device_state, device_static
    from archline.measurement.api import measure_callable
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    if hang_s is not None and not hang_s > 0:
        raise InputError(f"hang_s must be a number of seconds > 0 (or None: no watchdog), not {hang_s}")
    static = device_static(gpu)  # a missing GPU or NVML is one clear error before PyTorch is asked for CUDA
    rd = None
    if out is not None:
        rd = RunDir.create(out, Manifest.new("replay", gpu=static), overwrite=force)
        rd.update_manifest(state_before=device_state(gpu))
    last = ["[capture]", "capture"]  # the trial under way, for the line a hang prints

    def trial(group: str, what: str) -> None:
        last[:] = [group, what]
        if on_trial is not None:  # a progress hook (replay_progress.py)
            on_trial(group, what)

    trial("[capture]", "capture")
    graph = capture_torch(step, gpu, state=state, keep_buffers=keep_buffers)
    watchdog: SyncWatchdog | None = None

    def measure(fn: Callable[[], None]) -> CallMeasure:
        return measure_callable(
            fn, gpu=gpu, target_rel_error=target_rel_error, max_total_s=max_total_s, sync=graph.synchronize,
            between=graph.restore_state,
        )  # fmt: skip

    # every replay ranks its groups by their busy time in the whole step where CUPTI traces (_ranking); the busy
    # design model also times each configuration with it
    from archline.hw.cupti.busy import kernel_busy_s

    def busy_timer(fn: Callable[[], None]) -> Mapping[str, float]:
        return kernel_busy_s(fn, synchronize=graph.synchronize)

    try:
        if hang_s is not None:
            # the whole step, every node on, timed once (it always ends): a long step's waits are allowed longer
            trial("[whole step]", "step")
            clock = SystemClock()
            t0 = clock.now_s()
            graph.replay()
            graph.synchronize()
            limit = hang_limit_s(hang_s, clock.now_s() - t0, TIMING_REPLAYS + 2, max_total_s)
            watchdog = SyncWatchdog(limit, lambda waited: replay_hung(rd, last[0], last[1], waited)).start()
            graph.watchdog = watchdog
        res = replay_energy(
            graph, measure, SystemClock(), top=top, marginal=marginal, repeats=repeats, exclude=exclude,
            on_trial=trial, design=design, design_seed=design_seed, design_budget_s=design_budget_s,
            design_kind=design_kind, prime=prime, design_p_on=design_p_on, design_replicates=design_replicates,
            design_model=design_model, busy_timer=busy_timer,
        )  # fmt: skip
        res.notes += graph.notes
        res.kept_buffers = graph.kept_buffers
        if graph.state is not None:
            res.notes.append(graph.state.note())
            res.state = graph.state.summary()
    except ArchlineError as exc:
        if rd is not None:
            rd.finish("failed", notes=(f"replay failed: {exc}",))
        raise
    except RuntimeError as exc:  # the CUDA context is lost: a kernel read what a disabled node left behind
        if rd is not None:
            rd.finish("failed", notes=(f"replay failed: {exc}",))
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphError(
            f"a replay with nodes switched off failed ({first}): a kernel of this step reads memory that a "
            "switched-off node would have written (buffers the graph reuses, pointer or index arrays); "
            "graph replay cannot isolate this step's kernels (docs/replay.md)"
        ) from None
    finally:
        if watchdog is not None:
            watchdog.stop()
        graph.close()
    if rd is not None:
        write_replay(rd, [r.to_row() for r in res.rows], res.summary())
        rd.finish("complete", state_after=device_state(gpu), notes=tuple(res.notes))
    return res

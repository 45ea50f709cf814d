"""Graph replay: each kernel group's energy in a captured step, in isolation and at the margin.

The reference measurement of a real program's kernels (issue 13). One call of the step is a
CUDA graph; replaying it with only one group of kernel nodes enabled measures that group in
isolation, with only that group disabled measures its marginal cost. Each replay is measured
like any short call (:func:`~archline.measurement.api.measure_callable`: repetitions at spread
phases of the sensor). The sum of the isolated energies is checked against the whole step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from archline.core.frames import Tabular
from archline.core.readings import Clock
from archline.hw.graph import GraphNode

__all__ = [
    "ReplayResult",
    "ReplayRow",
    "ReplayableGraph",
    "group_nodes",
    "kept_nodes",
    "replay_energy",
    "run_replay",
]

#: The rest of the step's nodes, measured as one group so the isolated energies add up to the step.
REST = "[all other nodes]"


class ReplayableGraph(Protocol):
    """A captured step: its switchable nodes, and replay with a chosen subset enabled."""

    @property
    def nodes(self) -> Sequence[GraphNode]: ...

    def set_enabled(self, indices: Sequence[int] | None) -> None: ...

    def replay(self) -> None: ...

    def synchronize(self) -> None: ...


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
class ReplayRow:
    """One group of nodes (a kernel name, or copies, or memsets). J, s, W; σ is 1 σ."""

    group: str
    kind: str
    nodes_per_step: int
    time_s: float
    energy_j: float
    energy_sigma_j: float
    mean_power_w: float
    marginal_j: float | None = None
    marginal_sigma_j: float | None = None

    def to_row(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ReplayResult(Tabular):
    """The whole step and its top groups; ``sum_*`` adds the isolated energies (top groups + the rest)."""

    step_energy_j: float
    step_sigma_j: float
    step_time_s: float
    rows: list[ReplayRow] = field(default_factory=list)
    groups: int = 0
    notes: list[str] = field(default_factory=list)

    def table_rows(self) -> list[dict[str, Any]]:
        """Each group's isolated energy (J, 1 σ), time (s) and marginal energy, for ``.to_pandas()``."""
        return [r.to_row() for r in self.rows]

    def table_title(self) -> str:
        return f"one step: {self.step_energy_j:.4g} ± {self.step_sigma_j:.2g} J"

    @property
    def kernels(self) -> list[ReplayRow]:
        return [r for r in self.rows if r.group != REST]

    @property
    def sum_isolated_j(self) -> float:
        return sum(r.energy_j for r in self.rows)

    @property
    def sum_isolated_sigma_j(self) -> float:
        return math.sqrt(sum(r.energy_sigma_j**2 for r in self.rows))

    @property
    def sum_vs_step_pct(self) -> float:
        return (self.sum_isolated_j / self.step_energy_j - 1.0) * 100.0 if self.step_energy_j else math.nan

    def summary(self) -> dict[str, Any]:
        return {
            "step_energy_j": self.step_energy_j,
            "step_sigma_j": self.step_sigma_j,
            "step_time_s": self.step_time_s,
            "groups": self.groups,
            "sum_isolated_j": self.sum_isolated_j,
            "sum_isolated_sigma_j": self.sum_isolated_sigma_j,
            "sum_vs_step_pct": self.sum_vs_step_pct,
            "notes": list(self.notes),
        }


def group_nodes(nodes: Sequence[GraphNode]) -> dict[str, list[int]]:
    """Node indices by kernel name (copies form one group), in first-seen order. Memsets are no
    group: they stay enabled in every replay (:func:`kept_nodes`)."""
    out: dict[str, list[int]] = {}
    for n in nodes:
        if n.kind != "memset":
            out.setdefault(n.name if n.kind == "kernel" else f"[{n.kind}]", []).append(n.index)
    return out


def kept_nodes(nodes: Sequence[GraphNode]) -> list[int]:
    """Nodes enabled in every replay: the memsets. Switched off, a replay of a real training step
    lost the CUDA context (benchmarks/replay_probe.py on an H100); they most likely reset counters
    and workspaces that cuBLAS's cooperative GEMMs count on. They take microseconds."""
    return [n.index for n in nodes if n.kind == "memset"]


def _time_groups(
    graph: ReplayableGraph, groups: dict[str, list[int]], keep: list[int], clock: Clock, replays: int
) -> dict[str, float]:
    """Seconds per replay with only each group enabled (host timer around synchronised replays)."""
    out: dict[str, float] = {}
    for name, idx in groups.items():
        graph.set_enabled(idx + keep)
        graph.replay()
        graph.synchronize()
        t0 = clock.now_s()
        for _ in range(replays):
            graph.replay()
        graph.synchronize()
        out[name] = (clock.now_s() - t0) / replays
    return out


def replay_energy(
    graph: ReplayableGraph,
    measure: Callable[[Callable[[], None]], CallMeasure],
    clock: Clock,
    *,
    top: int = 8,
    marginal: bool = True,
    timing_replays: int = 10,
) -> ReplayResult:
    """Energy of the whole step, of its ``top`` groups by isolated time, and of the rest.

    ``measure(fn)`` measures one call of ``fn`` (a replay); the graph's enable flags are set
    before each measurement and every node is enabled again at the end.
    """
    if top < 1:
        raise ValueError("top must be at least 1")
    groups = group_nodes(graph.nodes)
    keep = kept_nodes(graph.nodes)
    try:
        graph.set_enabled(None)
        whole = measure(graph.replay)
        times = _time_groups(graph, groups, keep, clock, timing_replays)
        chosen = sorted(groups, key=lambda g: -times[g])[:top]
        res = ReplayResult(whole.energy_j, whole.energy_uncertainty_j, whole.time_s, groups=len(groups))
        all_idx = [i for idx in groups.values() for i in idx]
        for name in chosen:
            idx = groups[name]
            graph.set_enabled(idx + keep)
            iso = measure(graph.replay)
            m = ms = None
            if marginal:
                graph.set_enabled([i for i in all_idx if i not in set(idx)] + keep)
                rest = measure(graph.replay)
                m = whole.energy_j - rest.energy_j
                ms = math.hypot(whole.energy_uncertainty_j, rest.energy_uncertainty_j)
            kind = graph.nodes[idx[0]].kind
            res.rows.append(
                ReplayRow(
                    name, kind, len(idx), iso.time_s, iso.energy_j, iso.energy_uncertainty_j, iso.mean_power_w, m, ms
                )
            )
        others = [i for name, idx in groups.items() if name not in chosen for i in idx]
        if others:
            graph.set_enabled(others + keep)
            r = measure(graph.replay)
            res.rows.append(
                ReplayRow(REST, "mixed", len(others), r.time_s, r.energy_j, r.energy_uncertainty_j, r.mean_power_w)
            )
        covered = sum(times[g] for g in chosen) / max(sum(times.values()), 1e-12)
        res.notes.append(
            f"{len(chosen)} of {len(groups)} groups measured one by one ({covered:.0%} of the isolated time); "
            "the rest as one group"
        )
        res.notes.append(
            "isolated energies are board energy per replay with only that group's nodes enabled, its idle "
            "share included; marginal = step − step without the group"
        )
        if keep:
            res.notes.append(f"the step's {len(keep)} memsets stay enabled in every replay (counters and workspaces)")
        return res
    finally:
        graph.set_enabled(None)


def run_replay(
    step: Callable[[], Any],
    *,
    gpu: int = 0,
    top: int = 8,
    marginal: bool = True,
    out: Any = None,
    force: bool = False,
    max_total_s: float = 3.0,
) -> ReplayResult:
    """Capture one call of the PyTorch ``step`` on ``gpu`` and measure its groups by replay.

    With ``out`` the result goes into a run directory of kind ``replay`` (``replay.csv``,
    ``replay.json``, the manifest with the board and its state).
    """
    from archline.core.readings import SystemClock
    from archline.hw.graph import GraphError, capture_torch
    from archline.hw.nvml import device_state, device_static
    from archline.measurement.api import measure_callable
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    rd = None
    if out is not None:
        rd = RunDir.create(out, Manifest.new("replay", gpu=device_static(gpu)), overwrite=force)
        rd.update_manifest(state_before=device_state(gpu))
    graph = capture_torch(step, gpu)

    def measure(fn: Callable[[], None]) -> CallMeasure:
        return measure_callable(fn, gpu=gpu, target_rel_error=0.02, max_total_s=max_total_s, sync=graph.synchronize)

    try:
        res = replay_energy(graph, measure, SystemClock(), top=top, marginal=marginal)
    except RuntimeError as exc:  # the CUDA context is lost: a kernel read what a disabled node left behind
        if rd is not None:
            rd.finish("failed", notes=(f"replay failed: {exc}",))
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GraphError(
            f"a replay with nodes switched off failed ({first}): a kernel of this step reads memory that a "
            "switched-off node would have written (buffers the graph reuses, pointer or index arrays); "
            "graph replay cannot isolate this step's kernels (docs/replay.md)"
        ) from None
    if rd is not None:
        write_replay(rd, [r.to_row() for r in res.rows], res.summary())
        rd.finish("complete", state_after=device_state(gpu), notes=tuple(res.notes))
    return res

"""Graph replay: how the nodes of a captured step are switched off, and which groups that leaves measurable.

The driver refuses to switch some nodes (on an H100, cluster-launched cuDNN kernels of a
ResNet-50 step: ``cuGraphNodeSetEnabled`` returns CUDA error 912). The graph offers several ways
of switching (``switch_modes``, tried in order); :func:`choose_switching` takes the first under
which every node can be switched off and on again, else the one that leaves the fewest nodes
stuck. A group with a node that cannot be switched is not measured on its own: its nodes stay
enabled in every replay, with the memsets (:func:`blocked_groups`), and the rest of the step is
still measured against them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from archline.hw.graph_nodes import GraphError, GraphNode

__all__ = ["ReplayableGraph", "Switching", "blocked_groups", "choose_switching"]

#: Nodes described in the record when some cannot be switched (the first ones, by index).
DESCRIBED_NODES = 12


class ReplayableGraph(Protocol):
    """A captured step: its switchable nodes, the ways of switching them, replay with a chosen subset enabled."""

    @property
    def nodes(self) -> Sequence[GraphNode]: ...

    @property
    def switch_modes(self) -> Sequence[str]: ...

    def set_switch_mode(self, mode: str) -> None: ...

    def check_switchable(self, indices: Sequence[int]) -> dict[int, str]: ...

    def set_enabled(self, indices: Sequence[int] | None) -> None: ...

    def replay(self) -> None: ...

    def synchronize(self) -> None: ...

    def describe(self, index: int) -> Mapping[str, Any]: ...


@dataclass
class Switching:
    """The way chosen (``mode``), the nodes it cannot switch (index → why), what each way tried gave, and the
    launch shape of the first nodes refused by the first way that refused any (``described``)."""

    mode: str
    not_switchable: dict[int, str] = field(default_factory=dict)
    tried: list[dict[str, Any]] = field(default_factory=list)
    described: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "not_switchable_nodes": len(self.not_switchable),
            "tried": list(self.tried),
            "refused_nodes": [dict(d) for d in self.described],
        }

    def note(self) -> str:
        tried = "; ".join(
            f"{t['mode']}: " + (t["error"] if "error" in t else f"{t['not_switchable']} nodes not switchable")
            for t in self.tried
        )
        stuck = f", {len(self.not_switchable)} nodes not switchable" if self.not_switchable else ""
        return f"nodes switched by '{self.mode}'{stuck} (tried {tried})"


def choose_switching(graph: ReplayableGraph, indices: Sequence[int]) -> Switching:
    """Try each of the graph's switch modes on ``indices``; the graph is left in the chosen mode.

    :class:`GraphError` when no mode can be used at all.
    """
    best: Switching | None = None
    tried: list[dict[str, Any]] = []
    described: list[dict[str, Any]] = []
    for mode in graph.switch_modes:
        try:
            graph.set_switch_mode(mode)
            failed = graph.check_switchable(indices)
        except GraphError as exc:
            tried.append({"mode": mode, "error": str(exc)})
            continue
        first = next(iter(failed.values()), "")
        tried.append({"mode": mode, "not_switchable": len(failed), "first_error": first})
        if failed and not described:  # the first refusals, described whichever way wins in the end
            described = [
                {**graph.describe(i), "why": why, "mode": mode} for i, why in sorted(failed.items())[:DESCRIBED_NODES]
            ]
        if best is None or len(failed) < len(best.not_switchable):
            best = Switching(mode, dict(failed))
        if not failed:
            break
    if best is None:
        raise GraphError("no way of switching the step's nodes works: " + "; ".join(t["error"] for t in tried))
    if tried[-1]["mode"] != best.mode:
        graph.set_switch_mode(best.mode)
    best.tried = tried
    best.described = described
    return best


def blocked_groups(
    groups: Mapping[str, Sequence[int]], not_switchable: Mapping[int, str], excluded: Mapping[str, str]
) -> dict[str, str]:
    """Groups that cannot be measured on their own → why: those with a node that cannot be switched, and
    those ``excluded`` by the caller (e.g. one whose replay lost the CUDA context in an earlier try)."""
    out: dict[str, str] = {}
    for name, idx in groups.items():
        stuck = [i for i in idx if i in not_switchable]
        if name in excluded:
            out[name] = excluded[name]
        elif stuck:
            out[name] = f"{len(stuck)} of {len(idx)} nodes cannot be switched off ({not_switchable[stuck[0]]})"
    return out

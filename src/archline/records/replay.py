"""The table of a graph-replay run (``replay.csv``) and its summary (``replay.json``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from archline.records.rundir import RunDir

__all__ = ["REPLAY_COLUMNS", "write_replay"]

#: One row per group of nodes: J, s, W; σ columns are 1 σ.
REPLAY_COLUMNS = (
    "group",
    "kind",
    "nodes_per_step",
    "time_s",
    "energy_j",
    "energy_sigma_j",
    "mean_power_w",
    "marginal_j",
    "marginal_sigma_j",
)


def write_replay(rd: RunDir, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    """Write ``replay.csv`` and ``replay.json`` into the run directory (atomically)."""
    rd.write_csv("replay.csv", rows, REPLAY_COLUMNS)
    rd.write_json("replay.json", dict(summary))

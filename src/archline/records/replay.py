"""The table of a graph-replay run (``replay.csv``) and its summary (``replay.json``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from archline.errors import RunDirError
from archline.records.rundir import RunDir, atomic_write_bytes

__all__ = ["REPLAY_COLUMNS", "REPLAY_FILES", "copy_replay", "write_replay"]

#: The files of a graph replay → what each holds (for a manifest).
REPLAY_FILES = {
    "replay.csv": "graph replay: each kernel group's isolated and marginal energy per step",
    "replay.json": "graph replay: the whole step's energy, the sum of the isolated energies and the design's fit",
}

#: One row per group of nodes: J, s, W; σ columns are 1 σ. A group that could not be measured has no
#: energies and says why (``reason``); with repeats, each run's energy (``;``-separated) and their spread (%).
#: With a randomized design, ``context_j`` ± ``context_sigma_j`` is the group's energy inside the step (files
#: written before the design have no such columns: readers take them as empty), ``context_time_s`` its time in
#: the step; ``nonfinite_reps`` the repetitions behind the row that ended with the step's state non-finite
#: (both written from session 9 on: session 8's files lack them); ``busy_time_s`` a kernel group's busy time per step
#: in the whole step as CUPTI traces it (from session 20 on); ``sm_clock_mhz`` and ``clock_event_reasons`` the SM
#: clock (MHz, mean) and NVML's clock-event reasons (comma-separated) over the group's isolated measurements (from
#: session 22 on: a group alone above the power limit can be measured with its clocks held down).
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
    "context_j",
    "context_sigma_j",
    "context_time_s",
    "group_time_s",
    "measurable",
    "reason",
    "run_spread_pct",
    "run_noise_pct",
    "energy_runs_j",
    "nonfinite_reps",
    "busy_time_s",
    "sm_clock_mhz",
    "clock_event_reasons",
)


def write_replay(rd: RunDir, rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    """Write ``replay.csv`` and ``replay.json`` into the run directory (atomically)."""
    rd.write_csv("replay.csv", rows, REPLAY_COLUMNS)
    rd.write_json("replay.json", dict(summary))


def copy_replay(source: Path, directory: Path) -> dict[str, str]:
    """Copy a replay's ``replay.csv`` (and ``replay.json`` where there is one) from ``source`` (a replay run
    directory, or its ``replay.csv``) into ``directory``, atomically; file → what it holds, for the manifest."""
    src = source if source.is_dir() else source.parent
    out: dict[str, str] = {}
    for name, what in REPLAY_FILES.items():
        p = src / name
        if name != "replay.csv" and not p.is_file():
            continue
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise RunDirError(f"{p}: cannot read ({exc.strerror or exc})") from None
        atomic_write_bytes(directory / name, data)
        out[name] = f"{what} (copied from {src}; its isolated energies were the kernels' priors)"
    return out

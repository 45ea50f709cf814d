"""Walking shipped attribution run sets (``validate_attribution_real.py --out``) for the docs' tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def summaries(runs: Sequence[Path], tool: str) -> list[tuple[Path, str, dict[str, Any]]] | None:
    """Each run set with its board (the GPU UUID prefix) and its workloads (``summary.json``); None after one line on
    stderr naming the first run set without a readable summary."""
    out = []
    for run in runs:
        try:
            summ = json.loads((run / "summary.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"{tool}: {run}: no readable summary.json ({exc})", file=sys.stderr)
            return None
        out.append((run, str(summ.get("board", "?")).split()[-1][:12], dict(summ.get("workloads", {}))))
    return out


def label(run: Path, board: str, name: str) -> str:
    """A row's first 34 characters: the GPU kind and session of the run set (``results/<gpu>/attribution-<s>/``),
    its board and the workload (a name longer than 11 characters widens its line rather than being cut)."""
    gen, sess = run.parent.parent.name[:4], run.parent.name.removeprefix("attribution-")[:4]
    return f"{gen:4s} {sess:4s} {board:12s} {name:11s}"


def each_workload(
    runs: Sequence[Path], tool: str, analyse: Callable[[Path, str], T | str], show: Callable[[dict[str, Any], T], str]
) -> int:
    """Print one line per workload of each run set: ``show(its summary, analyse(run set, workload))`` after its label,
    or why it is skipped (the run failed; ``analyse`` returned a reason). Exit status 2 after one line on stderr for
    an unreadable run set or workload, else 0."""
    sets = summaries(runs, tool)
    if sets is None:
        return 2
    for run, board, workloads in sets:
        for name, att in workloads.items():
            head = f"{label(run, board, name):34s}"
            if "error" in att:
                print(f"{head} skipped: the run failed")
                continue
            try:
                got = analyse(run, name)
            except (OSError, ValueError, KeyError) as exc:
                print(f"{tool}: {run / name}: unreadable ({exc})", file=sys.stderr)
                return 2
            print(f"{head} skipped: {got}" if isinstance(got, str) else f"{head} {show(att, got)}")
    return 0


def table_main(
    argv: list[str] | None, doc: str | None, head: str, tool: str,
    analyse: Callable[[Path, str], T | str], show: Callable[[dict[str, Any], T], str],
) -> int:  # fmt: skip
    """A table benchmark's command line: ``RUN_SET [RUN_SET ...]``, its header, then :func:`each_workload`."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    a = ap.parse_args(argv)
    print(head)
    return each_workload(a.runs, tool, analyse, show)

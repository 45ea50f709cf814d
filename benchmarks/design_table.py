"""Print, for shipped attribution runs of real training loops, each replay's randomized design and the attribution
it fed: one line per workload, for docs/replay.md's and docs/attribution.md's tables.

    python benchmarks/design_table.py RUN_SET [RUN_SET ...]

A RUN_SET is what ``benchmarks/validate_attribution_real.py --out`` wrote (``summary.json`` and ``<workload>-replay/``
run directories). Columns: the board; the design's kind, configurations and how many ended a repetition with the
state non-finite; ρ̂ and its 95 % bound; Σ e + c0 against the whole step; the isolated groups' sum against the step;
whether switched replays were primed ('-': before the option) and whether the capture kept every buffer its
own; then the attribution's share of kernel energy in identifiable rows, within ±15 %, and the energy-weighted
median 95 % half-width.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HEAD = "board          workload    design  cfgs  NaN  rho^  bound  Σe+c0%  isol.%  primed kept  ident  ±15%  half-w%"


def _kept(rep: dict[str, Any]) -> str:
    """Whether the replay's capture kept every buffer its own: its record, else its note (session 9's runs)."""
    if rep.get("kept_buffers") is not None:
        return "yes" if rep["kept_buffers"] else "no"
    notes = " ".join(rep.get("notes") or [])
    return "yes" if "kept alive" in notes or "kept its own" in notes else "no"


def _f(v: Any, scale: float = 1.0, fmt: str = "5.1f") -> str:
    """A number for the table, '-' where the run recorded none (NaN is written as null)."""
    return "-" if v is None else format(scale * float(v), fmt)


def _line(board: str, name: str, rep: dict[str, Any], att: dict[str, Any]) -> str:
    d = rep.get("design") or {}
    primed = rep.get("primed")
    # configurations that ended non-finite were recorded from session 8's last commits on: '-' before
    bad = d.get("nonfinite_configs")
    if bad is not None and not any("nonfinite" in c for c in d.get("configs") or []):
        bad = None
    cells = [
        f"{board:14s} {name:11s} {d.get('kind', 'halves'):7s} {d.get('configurations') or 0:4d}",
        f"{'-' if bad is None else str(bad):>4s}  {_f(d.get('rho'), 100):>5s} {_f(d.get('rho_up'), 100):>5s}",
        f"{_f(d.get('sum_vs_step_pct'), 1, '+7.2f'):>7s} {_f(rep.get('sum_vs_step_pct'), 1, '+7.1f'):>7s}",
        f"{'yes' if primed else 'no' if primed is False else '-':>6s}",
        f"{_kept(rep):>4s} ",
        f"{_f(att.get('identifiable_share'), 100):>5s} {_f(att.get('identifiable_within_15pct_share'), 100):>5s}",
        f"{_f(att.get('median_half_width_pct'), 1, '6.1f'):>6s}",
    ]
    return " ".join(cells)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    a = ap.parse_args(argv)
    print(HEAD)
    for run in a.runs:
        try:
            summ = json.loads((run / "summary.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"design_table: {run}: no readable summary.json ({exc})", file=sys.stderr)
            return 2
        board = str(summ.get("board", "?")).split()[-1][:12]
        for name, att in summ.get("workloads", {}).items():
            if "error" in att:
                print(f"{board:14s} {name:11s} failed: {str(att['error'])[:70]}")
                continue
            rj = run / f"{name}-replay" / "replay.json"
            try:
                rep = json.loads(rj.read_text())
            except (OSError, ValueError) as exc:
                print(f"design_table: {rj}: unreadable ({exc})", file=sys.stderr)
                return 2
            print(_line(board, name, rep, att))
    return 0


if __name__ == "__main__":
    sys.exit(main())

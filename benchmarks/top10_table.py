"""Issue 13's top-10 comparison of shipped attribution run sets, redone from their files (no fit, no GPU).

    python benchmarks/top10_table.py results/h100/attribution-s12/top-by-energy-GPU-*

For each run set (``validate_attribution_real.py``'s ``DIR``: ``<workload>-run/attribution.json`` beside
``<workload>-replay/replay.csv``) and workload: the top-10 rows by energy that have an isolated replay row, how
many are within 15 % of it per call (the issue's target: all), and how many of the rows' own 95 % intervals hold
the isolated energy per call. The analysis is ``validate_attribution_real.analyse``, the replay's fixed cost taken
out as there. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run_sets", nargs="+", type=Path)
    a = ap.parse_args(argv)
    from validate_attribution_real import WORKLOADS, analyse, fixed_cost_to_take_out

    from archline.core.activity import demangle

    print(f"{'run set':<34} {'workload':<12} {'compared':>8} {'within 15 %':>11} {'in interval':>11}")
    for d in a.run_sets:
        for w in WORKLOADS:
            att, rep = d / f"{w}-run" / "attribution.json", d / f"{w}-replay" / "replay.csv"
            if not att.is_file() and not rep.is_file():
                continue
            try:
                result = json.loads(att.read_text())
                with rep.open(newline="") as f:
                    rows = list(csv.DictReader(f))
                summary = json.loads((d / f"{w}-replay" / "replay.json").read_text())
            except (OSError, ValueError) as exc:
                print(f"top10_table: {d}: {w}: {exc}", file=sys.stderr)
                return 2
            names = demangle([str(r["group"]) for r in rows])
            s = analyse(result, rows, names=names, fixed_j=fixed_cost_to_take_out(rows, summary.get("design")))
            print(f"{d.name[:34]:<34} {w:<12} {s['top_compared']:>8} {s['top_within_15pct']:>11} "
                  f"{s['top_replay_in_interval']:>11}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

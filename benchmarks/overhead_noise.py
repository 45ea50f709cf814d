"""How noisy the overhead benchmark's loops are, inside a process and between processes, from its summaries.

    python benchmarks/overhead_noise.py results/h100/bench/overhead-auto-s12/*.json

For every workload and mode of each ``overhead_summary.json`` that keeps its children's loops
(``loops``, since session 12): the coefficient of variation (sample standard deviation) of the loops inside
each process (the median over processes), that of the processes' median loops, and the pairs a paired
interval of ±3 % would need at that spread between processes (90 %, normal approximation:
(1.645 · √2 · CV / 3 %)²): a lower bound, for a change of 0 (a change δ leaves 3 % − |δ| for the half-width),
with independent runs of the two modes. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

#: The overhead target (relative) and the one-sided normal quantile of a two-sided 90 % interval.
TARGET, Z90 = 0.03, 1.645


def rows(summary: dict[str, Any]) -> list[tuple[str, str, int, float, float, int]]:
    """(workload, mode, processes, within-process CV, between-process CV, pairs needed) per workload and mode."""
    out = []
    for work, modes in (summary.get("loops") or {}).items():
        for mode, runs in modes.items():
            loops = [r["loops_s"] for r in runs if len(r.get("loops_s") or []) >= 2]
            if len(loops) < 2:
                continue
            within = statistics.median(statistics.stdev(x) / statistics.mean(x) for x in loops)
            meds = [statistics.median(x) for x in loops]
            between = statistics.stdev(meds) / statistics.mean(meds)
            need = math.ceil((Z90 * math.sqrt(2.0) * between / TARGET) ** 2)
            out.append((work, mode, len(loops), within, between, need))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("summaries", nargs="+", type=Path)
    a = ap.parse_args(argv)
    print(f"{'summary':<40} {'workload':<32} {'mode':<8} {'n':>3} {'within':>7} {'between':>8} {'pairs':>6}")
    for path in a.summaries:
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"overhead_noise: {path}: {exc}", file=sys.stderr)
            return 2
        if not isinstance(summary, dict) or "loops" not in summary:
            print(f"overhead_noise: {path}: no 'loops' (summaries before session 12 keep none)", file=sys.stderr)
            return 2
        for work, mode, n, within, between, need in rows(summary):
            print(f"{path.stem[:40]:<40} {work[:32]:<32} {mode:<8} {n:>3} {100 * within:6.1f}% {100 * between:7.1f}% "
                  f"{need:>6}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How a shipped attribution's kernel energy is spread over its rows, and how wide each row is (no fit, no GPU).

    python benchmarks/row_shares.py [--top N] RUN_SET [RUN_SET ...]

A RUN_SET is what ``benchmarks/validate_attribution_real.py --out`` wrote (``summary.json`` and ``<workload>-run/``).
For each workload: its largest kernel rows by energy (N, 10 by default), each with its share of the kernel energy
(kernels, copies and sets with energy, as validate_attribution_real.py counts it), the cumulative share, its 95 %
half-width relative to its energy, whether it is identifiable and what dominated it; then how many rows it takes to
hold 80 % of the kernel energy (issue 13's target share) and the widest half-width among them. Bad input: one line,
exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_sets import each_workload
from validate_attribution_real import KERNEL_KINDS

TARGET = 0.80
NAME_W = 52


def _rows(run: Path, name: str) -> list[dict[str, Any]] | str:
    att = json.loads((run / f"{name}-run" / "attribution.json").read_text())
    rows = [r for r in att["rows"] if r.get("kind") in KERNEL_KINDS and float(r["energy_j"]) > 0]
    return sorted(rows, key=lambda r: -float(r["energy_j"])) if rows else "no kernel rows"


def _half(r: dict[str, Any]) -> float:
    return (float(r["energy_hi_j"]) - float(r["energy_lo_j"])) / 2 / float(r["energy_j"])


def show(rows: list[dict[str, Any]], top: int) -> list[str]:
    """The lines for one workload's rows (largest first)."""
    total = sum(float(r["energy_j"]) for r in rows)
    out, cum = [], 0.0
    need, widest = 0, 0.0
    for i, r in enumerate(rows):
        share = float(r["energy_j"]) / total
        if cum < TARGET:
            need, widest = i + 1, max(widest, _half(r))
        cum += share
        if i < top:
            out.append(
                f"  {str(r['name'])[:NAME_W]:{NAME_W}s} {100 * share:5.1f} % {100 * cum:5.1f} % "
                f"±{100 * _half(r):5.1f} % {'ident' if r.get('identifiable') else '-':5s} "
                f"{r.get('dominated_by') or '-'}"
            )
    out.append(
        f"  {need} of {len(rows)} rows hold {100 * TARGET:.0f} % of the kernel energy; "
        f"the widest of them ±{100 * widest:.1f} %"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--top", type=int, default=10, help="rows listed per workload (10)")
    ap.add_argument("runs", nargs="+", type=Path)
    a = ap.parse_args(argv)
    print(f"{'gpu  set board        workload':34s} / {'row':{NAME_W - 2}s} share   cumul.  95 % half-width")
    return each_workload(a.runs, "row_shares", _rows, lambda _att, rows: "\n" + "\n".join(show(rows, a.top)))


if __name__ == "__main__":
    raise SystemExit(main())

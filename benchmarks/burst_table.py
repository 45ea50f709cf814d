"""A table of the shipped burst-power measurements (``burst_power.py --json``), one row per board.

    python benchmarks/burst_table.py results/h100/bench/burst-power/burst_power-GPU-*.json

Per board: the GEMM's board power back to back (duty 1) with the SM clock and what held it; between idle gaps
(duty < 1) how many rows were above the limit × 1.05 by more than 2 σ and their range; the highest of those with
its σ, size and duty. A file that is not such a measurement is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def row(data: dict[str, Any]) -> str:
    rows = data["rows"]
    cont = [r for r in rows if r["duty"] >= 1.0]
    gaps = [r for r in rows if r["duty"] < 1.0]
    above = [r for r in gaps if r["verdict"] == "above"]
    held = sorted({x for r in cont for x in r.get("clock_reasons_a", [])}) or ["nothing"]
    c_w = [r["gemm_w"] for r in cont]
    c_mhz = [r["sm_mhz_a"] for r in cont]
    back = "—"
    if cont:
        back = f"{min(c_w):.0f}–{max(c_w):.0f} W at {min(c_mhz):.0f}–{max(c_mhz):.0f} MHz ({', '.join(held)})"
    if above:
        top = max(above, key=lambda r: r["gemm_w"])
        a_w = [r["gemm_w"] for r in above]
        a_mhz = sorted({round(r["sm_mhz_a"]) for r in above})
        between = f"{len(above)} of {len(gaps)}: {min(a_w):.0f}–{max(a_w):.0f} W at {'/'.join(map(str, a_mhz))} MHz"
        highest = f"{top['gemm_w']:.0f} ± {top['gemm_w_se']:.0f} W (n = {top['n']}, duty {100 * top['duty']:g} %)"
    else:
        between, highest = f"0 of {len(gaps)}", "—"
    return f"| {data['uuid'][:12]} | {data['power_limit_w']:.0f} W | {back} | {between} | {highest} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("files", type=Path, nargs="+")
    a = ap.parse_args(argv)
    lines = []
    for f in a.files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            lines.append(row(data))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"{f}: not a burst_power.py measurement ({type(exc).__name__}: {exc})", file=sys.stderr)
            return 2
    print("| board | limit | back to back (duty 100 %) | between gaps: above the limit × 1.05 by > 2 σ | highest |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

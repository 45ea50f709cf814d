"""Print the Markdown tables that docs/results.md quotes, read from the shipped run directories.

    python3 scripts/results_tables.py [results]

One table per kind of validation run (sensor validation, measurement of real programs, the
node run); every row names its board by GPU UUID prefix, so no figure in the docs is typed by
hand.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any


def _board(run: Path) -> str:
    g = json.loads((run / "manifest.json").read_text())["gpu"]
    return f"{g.get('name', '?')} {str(g.get('uuid', '?'))[:12]}"


def _pct(v: Any) -> str:
    return "—" if v in (None, "") else f"{float(v):+.2f} %"


def sensor_validation(root: Path) -> None:
    print("| board | check | error | limit | passed |\n|---|---|---:|---:|---|")
    for run in sorted(root.glob("*/sensor/validation")):
        with (run / "validation.csv").open() as f:
            for r in csv.DictReader(f):
                ok = {"true": "yes", "false": "no"}.get(r["passed"].lower(), "raw, for comparison")
                print(f"| {_board(run)} | {r['check']} | {_pct(r['error_pct'])} | {r['limit_pct']} % | {ok} |")


def calibrations(root: Path) -> None:
    print("| board | source | kind | period (ms) | window (ms) | lag C (ms) | delay (ms) | coverage |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for run in sorted(root.glob("*/sensor/calibration")):
        for source, p in json.loads((run / "profiles.json").read_text())["profiles"].items():
            m = p["model"]

            def ms(key: str, m: dict[str, Any] = m) -> str:
                v = m.get(key)
                return "—" if v is None else f"{1e3 * float(v):.1f}"

            print(f"| {_board(run)} | {source} | {m.get('kind')} | {ms('period_s')} | {ms('window_s')} "
                  f"| {ms('lag_s')} | {ms('delay_s')} | {100 * float(p.get('coverage', 0)):.0f} % |")  # fmt: skip


def measure_validation(root: Path) -> None:
    print(
        "| board | check | archline (J) | reference (J) | error | limit | passed |\n|---|---|---:|---:|---:|---:|---|"
    )
    for run in sorted(root.glob("*/measure-validation/*")):
        for r in json.loads((run / "summary.json").read_text())["checks"]:
            m, ref = r.get("measured_j"), r.get("reference_j")
            ms = "—" if m is None else f"{m:.5g}"
            rs = "—" if ref is None else f"{ref:.5g}"
            lim = r.get("limit_pct")
            print(f"| {_board(run)} | {r['check']} | {ms} | {rs} | {_pct(r.get('error_pct'))} | {lim} % | "
                  f"{'yes' if r.get('passed') else 'no'} |")  # fmt: skip


def node(root: Path) -> None:
    for run in sorted(root.glob("*/node")):
        s = json.loads((run / "summary.json").read_text())
        print(f"- boards: {', '.join(b['board'] for b in s.get('boards', []))} ({run})")
        print(f"- characterize --quick: one GPU {s['characterize_solo_wall_s']:.1f} s, both GPUs "
              f"{s['characterize_all_wall_s']:.1f} s ({s['characterize_ratio']:.3f}×, target ≤ 1.1×)")  # fmt: skip
        for g in s["ddp_per_gpu"]:
            print(f"- DDP, GPU {g['gpu']}: archline {g['energy_j']:.0f} ± {g['energy_uncertainty_j']:.0f} J, "
                  f"counter {g['energy_counter_j']:.0f} J ({g['error_pct']:+.2f} %, target ±1 %)")  # fmt: skip
        print(f"- archline fleet (LocalCUDACluster, quick): {s['fleet_wall_s']:.1f} s")


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "results")
    for title, fn in (("Sensor calibration", calibrations), ("Sensor validation", sensor_validation),
                      ("Measurement of real programs", measure_validation), ("Node", node)):  # fmt: skip
        print(f"\n### {title}\n")
        fn(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

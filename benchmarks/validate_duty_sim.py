"""Duty-cycled attribution against truth, on simulated sensors: per-call error and interval coverage.

Usage: python benchmarks/validate_duty_sim.py [--seeds 8] [--program-s 60] [--duty full,0.9/6,0.3/3,0.3/6]
                                              [--out FILE.json]

Simulates programs of three kernels (tests/helpers/attrib_sim.py: an energy counter updating every
100 ms with a 13 ms delay, a 20 ms power buffer) in two mixes: ``varied`` (blocks of 50–400 ms, each
with its own proportions of the kernels) and ``fine`` (blocks of 1–20 ms, so a 100 ms counter window
averages several: the launch-bound program of benchmarks/validate_duty.py is like this). For each
duty cycle ON/PERIOD (seconds; ``full`` = traced throughout) only the calls that start inside traced
periods are given to the attribution, as the injection library's duty cycle would. Prints, per mix
and duty: the median and 90th percentile of |attributed − true| energy per call, and how often the
95 % interval of the energy per call held the truth. No pass/fail: it says how far duty-cycled rows
can be trusted, and why they can be worse on the GPU than in simulation.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.attrib_sim import SimKernel, simulate_program

from archline.errors import TooLittleTracedError
from archline.measurement.attribute.attribution import attribute_energy

KERNELS = [
    SimKernel("fma", 0.00030, 420.0),
    SimKernel("stream", 0.00070, 260.0),
    SimKernel("small", 0.00012, 330.0),
]
MIXES = {"varied": (0.05, 0.40), "fine": (0.001, 0.020)}


def one(
    seed: int, program_s: float, block_s: tuple[float, float], duty: tuple[float, float] | None
) -> list[dict[str, Any]]:
    run = simulate_program(KERNELS, seed=seed, program_s=program_s, block_s=block_s)
    acts, traced = run.activities, None
    if duty is not None:
        a, b = run.program_span
        on, period = duty
        traced = [(t, min(t + on, b)) for t in np.arange(a, b, period)]
        acts = [r for r in acts if any(lo <= r.start_s < hi for lo, hi in traced)]
    try:
        res = attribute_energy(run.recording, acts, program_span=run.program_span, traced=traced)
    except TooLittleTracedError:
        return []
    out = []
    for k in KERNELS:
        row = res.table[k.name]
        truth = run.truth_per_call_j(k.name)
        out.append(
            {
                "kernel": k.name,
                "error": row.energy_per_call_j / truth - 1.0,
                "covered": row.energy_lo_j / row.calls <= truth <= row.energy_hi_j / row.calls,
                "identifiable": bool(row.identifiable),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--program-s", type=float, default=60.0)
    ap.add_argument("--duty", default="full,0.9/6,0.3/3,0.3/6")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    duties: dict[str, tuple[float, float] | None] = {}
    for d in a.duty.split(","):
        if d == "full":
            duties[d] = None
        else:
            on, period = (float(x) for x in d.split("/"))
            duties[d] = (on, period)
    summary: dict[str, Any] = {"seeds": a.seeds, "program_s": a.program_s, "results": []}
    print(f"{'mix':7s} {'duty':7s} {'median |err|':>12s} {'p90 |err|':>10s} {'coverage':>9s} {'identifiable':>12s}  n")
    for mix, block_s in MIXES.items():
        for name, duty in duties.items():
            t0 = time.perf_counter()
            rows = [r for s in range(a.seeds) for r in one(2000 + s, a.program_s, block_s, duty)]
            if not rows:
                print(f"{mix:7s} {name:7s} too little traced in every run")
                continue
            err = np.abs([r["error"] for r in rows])
            cov = float(np.mean([r["covered"] for r in rows]))
            ident = float(np.mean([r["identifiable"] for r in rows]))
            med, p90 = float(np.median(err)), float(np.percentile(err, 90))
            summary["results"].append(
                {
                    "mix": mix,
                    "duty": name,
                    "n": len(rows),
                    "median_abs_error": med,
                    "p90_abs_error": p90,
                    "coverage": cov,
                    "identifiable": ident,
                }
            )
            print(
                f"{mix:7s} {name:7s} {100 * med:11.1f} % {100 * p90:9.1f} % {100 * cov:8.0f} % {100 * ident:11.0f} %"
                f"  {len(rows)} ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

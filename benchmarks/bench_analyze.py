"""Time a whole ``archline analyze`` run on a one-hour 1 kHz trace (3.6 M rows); target < 5 s on 2 cores.

Usage: python benchmarks/bench_analyze.py [--rows 3600000] [--windows 200] [--keep DIR]

The trace is an averaging 1 kHz meter (each row the mean power over the millisecond before
it) watching kernels of 10 ms to 30 s at 250–400 W over a 100 W idle, with 0.5 W noise. It
prints the wall time of the CLI run (a fresh process, as a user would run it) and how well the
windows' energies match the known truth.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_trace(rows: int, n_windows: int, out: Path, seed: int = 0) -> tuple[Path, Path, np.ndarray]:
    rng = np.random.default_rng(seed)
    t0 = 1.7e9
    dt = 1e-3
    span = rows * dt
    # Kernels: random starts, durations log-uniform 10 ms .. 30 s, never overlapping.
    starts = np.sort(rng.uniform(1.0, span - 40.0, n_windows))
    durs = np.exp(rng.uniform(np.log(0.01), np.log(30.0), n_windows))
    ends = np.minimum(starts + durs, np.append(starts[1:] - 0.05, span - 1.0))
    power = rng.uniform(250.0, 400.0, n_windows)
    # Exact per-millisecond means of the piecewise-constant true power.
    edges = np.concatenate([[0.0], np.column_stack([starts, ends]).ravel(), [span + 1.0]])
    levels = np.concatenate([[100.0], np.column_stack([power, np.full(n_windows, 100.0)]).ravel()])
    cum = np.concatenate([[0.0], np.cumsum(levels * np.diff(edges))])
    tt = dt * np.arange(1, rows + 1)
    k = np.searchsorted(edges, tt, side="right") - 1
    c1 = cum[k] + levels[k] * (tt - edges[k])
    k0 = np.searchsorted(edges, tt - dt, side="right") - 1
    c0 = cum[k0] + levels[k0] * (tt - dt - edges[k0])
    p = (c1 - c0) / dt + rng.normal(0.0, 0.5, rows)
    trace = out / "trace.csv"
    with trace.open("w") as fh:
        fh.write("# synthetic 1 kHz averaging meter\ntime_s,power_w,voltage_v\n")
        np.savetxt(fh, np.column_stack([t0 + tt, p, np.full(rows, 12.0)]), delimiter=",", fmt=["%.3f", "%.3f", "%.1f"])
    wins = out / "windows.csv"
    with wins.open("w") as fh:
        fh.write("name,start_s,end_s\n")
        for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
            fh.write(f"k{i},{t0 + a:.6f},{t0 + b:.6f}\n")
    truth = power * (ends - starts)
    return trace, wins, truth


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3_600_000)
    ap.add_argument("--windows", type=int, default=200)
    ap.add_argument("--keep", type=Path, default=None, help="write the trace here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        trace, wins, truth = make_trace(args.rows, args.windows, out)
        print(
            f"generated {args.rows} rows, {args.windows} windows in {time.perf_counter() - t:.1f} s "
            f"({trace.stat().st_size / 1e6:.0f} MB)"
        )
        cmd = [sys.executable, "-m", "archline", "analyze", str(trace), "--windows", str(wins), "--json"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            print(proc.stderr)
            return 1
        res = json.loads(proc.stdout)
        e = np.array([w["energy_j"] for w in res["windows"]])
        s = np.array([w["energy_uncertainty_j"] for w in res["windows"]])
        ok = np.array([w["resolvable"] for w in res["windows"]])
        rel = e / truth - 1
        print(f"archline analyze: {wall:.2f} s wall for {args.rows} rows (target < 5 s)")
        print(f"sensor: {res['sensor']['kind']}, update {1e3 * res['sensor']['update_period_s']:.3f} ms")
        print(
            f"energy error vs truth: median {100 * np.median(np.abs(rel)):.3f} %, "
            f"max {100 * np.max(np.abs(rel)):.3f} %; "
            f"|error| <= 2σ for {100 * np.mean(np.abs(e - truth) <= 2 * s):.0f} % of windows; "
            f"{int(ok.sum())}/{ok.size} resolvable"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

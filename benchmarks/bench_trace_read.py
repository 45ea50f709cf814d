"""Time and peak memory of ``archline analyze`` on big meter traces: 3.6 M rows (CSV) and 72 M rows (one hour at
20 kHz, Parquet, and with --csv-big CSV); targets < 1.5 s and < 30 s with < 2 GB peak on 2 cores.

Usage: python benchmarks/bench_trace_read.py [--dir /tmp/archline-bench] [--big-rows 72000000] [--small-rows 3600000]
       [--skip-big] [--csv-big]

The traces are an averaging 20 kHz meter (each row the mean power over the 50 µs before it) watching 200 kernels
of 10 ms to 30 s at 250–400 W over a 100 W idle, with 0.5 W noise, written in chunks (the generator never holds
the whole trace). Each analysis runs as a user would run it, ``archline analyze FILE --windows W --json`` in a
fresh process; the figures are its wall time, its peak resident memory (the child's ru_maxrss) and the largest
error of the windows' energies against the known truth. The files stay in --dir for a rerun (delete them after).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RATE_HZ = 20_000.0
T0_S = 1.7e9


def _kernels(span_s: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.uniform(1.0, span_s - 40.0, n))
    durs = np.exp(rng.uniform(np.log(0.01), np.log(30.0), n))
    ends = np.minimum(starts + durs, np.append(starts[1:] - 0.05, span_s - 1.0))
    keep = ends > starts + 0.005
    return starts[keep], ends[keep], rng.uniform(250.0, 400.0, int(keep.sum()))


def _power(tt: np.ndarray, dt: float, edges: np.ndarray, levels: np.ndarray, cum: np.ndarray) -> np.ndarray:
    """Exact means over (t - dt, t] of the piecewise-constant true power."""
    k = np.searchsorted(edges, tt, side="right") - 1
    c1 = cum[k] + levels[k] * (tt - edges[k])
    k0 = np.searchsorted(edges, tt - dt, side="right") - 1
    c0 = cum[k0] + levels[k0] * (tt - dt - edges[k0])
    return np.asarray((c1 - c0) / dt)


def make_trace(rows: int, out: Path, fmt: str, seed: int = 0, chunk: int = 2_000_000) -> tuple[Path, Path, np.ndarray]:
    """Write the trace (csv, csv.gz or parquet) and its windows; return their paths and the true energies (J)."""
    import pyarrow as pa
    from pyarrow import csv, parquet

    dt = 1.0 / RATE_HZ
    span = rows * dt
    starts, ends, power = _kernels(span, 200, seed)
    n = starts.size
    edges = np.concatenate([[0.0], np.column_stack([starts, ends]).ravel(), [span + 1.0]])
    levels = np.concatenate([[100.0], np.column_stack([power, np.full(n, 100.0)]).ravel()])
    cum = np.concatenate([[0.0], np.cumsum(levels * np.diff(edges))])
    trace = out / f"trace_{rows}.{fmt}"
    if not trace.exists():
        rng = np.random.default_rng(seed + 1)
        schema = pa.schema([("time_s", pa.float64()), ("power_w", pa.float64())])
        tmp = trace.with_suffix(".part")
        sink: pa.NativeFile = pa.OSFile(str(tmp), "wb")
        if fmt == "csv.gz":
            sink = pa.CompressedOutputStream(sink, "gzip")
        writer: parquet.ParquetWriter | csv.CSVWriter = (
            parquet.ParquetWriter(sink, schema) if fmt == "parquet" else csv.CSVWriter(sink, schema)
        )
        for a in range(0, rows, chunk):
            tt = dt * np.arange(a + 1, min(rows, a + chunk) + 1)
            p = _power(tt, dt, edges, levels, cum) + rng.normal(0.0, 0.5, tt.size)
            # Meter resolution: 1 µs stamps, 1 mW readings (as a CSV meter would print them).
            batch = pa.record_batch([np.round(T0_S + tt, 6), np.round(p, 3)], schema=schema)
            writer.write_batch(batch)
        writer.close()
        sink.close()
        tmp.rename(trace)
    wins = out / f"windows_{rows}.csv"
    with wins.open("w") as fh:
        fh.write("name,start_s,end_s\n")
        for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
            fh.write(f"k{i},{T0_S + a:.6f},{T0_S + b:.6f}\n")
    return trace, wins, power * (ends - starts)


def run(trace: Path, wins: Path, truth: np.ndarray) -> dict[str, float]:
    """One ``archline analyze`` in a fresh process: wall s, peak MB of that process, max |error| %."""
    cmd = [sys.executable, "-m", "archline", "analyze", str(trace), "--windows", str(wins), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}")
    e = np.array([w["energy_j"] for w in json.loads(proc.stdout)["windows"]])
    err = float(np.max(np.abs(e - truth) / truth)) * 100
    if peak_mb < before / 1024:  # ru_maxrss of children is the largest child so far: say when it is not ours
        peak_mb = float("nan")
    return {"wall_s": wall, "peak_mb": peak_mb, "max_err_pct": err}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/archline-bench"))
    ap.add_argument("--small-rows", type=int, default=3_600_000)
    ap.add_argument("--big-rows", type=int, default=72_000_000)
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--csv-big", action="store_true", help="also the big trace as CSV (2 GB; slow to write)")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    cases = [(args.small_rows, "csv", 1.5)]
    if not args.skip_big:
        cases += [(args.big_rows, "parquet", 30.0)] + ([(args.big_rows, "csv", 30.0)] if args.csv_big else [])
    failed = 0
    # Smallest first, so the children's peak memory (a running maximum) is each run's own.
    for rows, fmt, target_s in cases:
        t = time.perf_counter()
        trace, wins, truth = make_trace(rows, args.dir, fmt)
        made = time.perf_counter() - t
        try:
            r = run(trace, wins, truth)
        except RuntimeError as exc:
            print(f"{rows:>11,} rows {fmt:<8} FAILED: {exc}")
            failed += 1
            continue
        ok = r["wall_s"] < target_s and not r["peak_mb"] > 2048
        failed += not ok
        print(
            f"{rows:>11,} rows {fmt:<8} ({trace.stat().st_size / 1e6:,.0f} MB, ready in {made:.0f} s): "
            f"analysed in {r['wall_s']:.2f} s (target < {target_s:g} s), peak {r['peak_mb']:,.0f} MB "
            f"(target < 2048 MB), max window error {r['max_err_pct']:.3f} %  {'OK' if ok else 'MISSED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

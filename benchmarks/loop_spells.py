"""Where a launch-bound loop's slow spells come from: its CPU time, its GPU's clock, a spinning CPU beside it.

    python benchmarks/loop_spells.py --gpus 0,1 --cpus 16,24 --spin-cpu 8 --seconds 60 --json OUT.json

The decode loop (benchmarks/workloads/gpt2_decode.py) runs 0.3 to 0.8 s a loop on the lent hosts, in spells of
seconds, and two copies run at once on two GPUs do not slow down together (session 28, overhead_concurrent.py).
Here, with nothing of archline's running: one plain copy per GPU, each pinned to one CPU, stamps each loop's wall
time and its main thread's CPU time; a pure-Python spin on another CPU counts its iterations every 0.25 s; and
``nvidia-smi`` reads each GPU's SM clock and utilisation every 0.25 s. Printed per copy: the loops' spread, the
share of wall time the main thread spent on the CPU (near 1: the loop is the CPU's work, and a slow loop is a slow
CPU; well below: it waits), and the correlation of each loop's time with its GPU's SM clock and with the spin's rate
over the same stretch. Before its block each copy counts the host synchronisations one step makes
(``torch.cuda.set_sync_debug_mode``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run_overhead import WORKLOADS  # this script's folder
from overhead_concurrent import correlation


def child(workload: str, cpu: int, seconds: float) -> int:
    """One copy: pinned, set up, one step counted for host synchronisations, then loops for ``seconds``; JSON."""
    os.sched_setaffinity(0, [cpu])
    import torch

    load = WORKLOADS[workload]()
    if load is None:
        return 3
    _, fn = load
    fn()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        fn()
        torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    wall, cpu_t = [time.time_ns()], [time.thread_time_ns()]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        wall.append(time.time_ns())
        cpu_t.append(time.thread_time_ns())
    print(json.dumps({"wall_ns": wall, "thread_ns": cpu_t, "syncs_per_step": syncs, "cpu": cpu}), flush=True)
    return 0


def spin(cpu: int, seconds: float, bin_s: float = 0.25) -> int:
    """Pure-Python iterations per ``bin_s`` on one CPU: the CPU's own speed over time; JSON."""
    os.sched_setaffinity(0, [cpu])
    out: list[tuple[float, int]] = []
    end = time.time() + seconds
    while time.time() < end:
        n, t_next = 0, time.time() + bin_s
        while time.time() < t_next:
            for _ in range(1000):
                n += 1
        out.append((time.time(), n))
    print(json.dumps({"bins": out, "cpu": cpu}), flush=True)
    return 0


def loops(wall_ns: list[int], thread_ns: list[int]) -> list[tuple[float, float, float]]:
    """(end time s, wall s, main-thread CPU s) of each loop."""
    return [
        (wall_ns[i + 1] * 1e-9, (wall_ns[i + 1] - wall_ns[i]) * 1e-9, (thread_ns[i + 1] - thread_ns[i]) * 1e-9)
        for i in range(len(wall_ns) - 1)
    ]


def mean_over(series: list[tuple[float, float]], lo: float, hi: float) -> float | None:
    """The mean of a sampled series' values with times in [lo, hi] (the nearest sample where none falls inside)."""
    ts = [t for t, _ in series]
    inside = [v for t, v in series if lo <= t <= hi]
    if inside:
        return statistics.fmean(inside)
    if not series:
        return None
    i = min(max(bisect.bisect_left(ts, (lo + hi) / 2), 0), len(series) - 1)
    return series[i][1]


def summarize(
    copy: dict[str, Any], clock: list[tuple[float, float]], spin_rate: list[tuple[float, float]]
) -> dict[str, Any]:
    """A copy's loops: median and spread, the CPU share, and the correlations of its loop times with the GPU's SM
    clock and the spin's rate, each averaged over the loop."""
    ls = loops(copy["wall_ns"], copy["thread_ns"])
    walls = [w for _, w, _ in ls]
    share = [c / w for _, w, c in ls if w > 0]
    clk, spn, ws = [], [], []
    for end, w, _ in ls:
        c, s = mean_over(clock, end - w, end), mean_over(spin_rate, end - w, end)
        if c is not None and s is not None:
            clk.append(c)
            spn.append(s)
            ws.append(math.log(w))
    return {
        "loops": len(ls),
        "median_loop_s": statistics.median(walls),
        "min_loop_s": min(walls),
        "max_loop_s": max(walls),
        "cpu_share_median": statistics.median(share),
        "cpu_share_min": min(share),
        "corr_loop_vs_sm_clock": correlation(ws, clk),
        "corr_loop_vs_spin_rate": correlation(ws, spn),
        "syncs_per_step": copy.get("syncs_per_step"),
        "cpu": copy.get("cpu"),
    }


def read_smi(path: Path) -> dict[int, list[tuple[float, float, float]]]:
    """nvidia-smi's CSV (timestamp, index, clocks.sm MHz, utilization %) as {index: [(unix s, MHz, %)]}."""
    out: dict[int, list[tuple[float, float, float]]] = {}
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        try:
            t = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            frac = float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
            out.setdefault(int(parts[1]), []).append((t + frac, float(parts[2].split()[0]), float(parts[3].split()[0])))
        except (ValueError, IndexError):
            continue
    return out


def analyse(
    gpus: list[int], outs: list[dict[str, Any]], spin_out: dict[str, Any], smi: dict[str, list[Any]]
) -> dict[str, Any]:
    """Every copy's summary (:func:`summarize`) with its GPU's SM clock range over its loops; the raw data kept."""
    spin_rate = [(float(t), float(n)) for t, n in spin_out["bins"]]
    report: dict[str, Any] = {"copies": [], "spin": spin_out, "smi": smi}
    for g, o in zip(gpus, outs, strict=True):
        rows = smi.get(str(g), [])
        clock = [(float(r[0]), float(r[1])) for r in rows]
        s = summarize(o, clock, spin_rate)
        lo, hi = o["wall_ns"][0] * 1e-9, o["wall_ns"][-1] * 1e-9
        during = [c for t, c in clock if lo <= t <= hi]
        busy = [float(r[2]) for r in rows if lo <= float(r[0]) <= hi]
        s["gpu"] = g
        s["sm_clock_mhz"] = [min(during), max(during)] if during else None
        s["gpu_util_median_pct"] = statistics.median(busy) if busy else None
        s["block_s"] = [lo, hi]
        report["copies"].append({**s, "raw": o})
    return report


def two_second(bins: list[tuple[float, float]], per: int = 8) -> list[float]:
    """The spin's mean iterations per 0.25 s bin over consecutive runs of ``per`` bins (2 s)."""
    rates = [n for _, n in bins]
    return [statistics.fmean(rates[k : k + per]) for k in range(0, len(rates) - per + 1, per)]


def show(report: dict[str, Any]) -> None:
    """Print each copy's line and the spin's."""
    for s in report["copies"]:
        clk = s.get("sm_clock_mhz")
        if clk and clk[0] == clk[1]:
            vs_clock = f"SM clock {clk[0]:.0f} MHz throughout its loops"
        else:
            rng = f" ({clk[0]:.0f} .. {clk[1]:.0f} MHz)" if clk else ""
            vs_clock = f"ln loop time vs SM clock{rng} r = {s['corr_loop_vs_sm_clock']}"
        r_spin = s["corr_loop_vs_spin_rate"]
        print(
            f"GPU {s['gpu']} (CPU {s['cpu']}): {s['loops']} loops, median {1e3 * s['median_loop_s']:.0f} ms "
            f"({1e3 * s['min_loop_s']:.0f} .. {1e3 * s['max_loop_s']:.0f}); main thread on the CPU "
            f"{100 * s['cpu_share_median']:.0f} % of the wall (least {100 * s['cpu_share_min']:.0f} %); "
            f"host synchronisations per step {s['syncs_per_step']}; {vs_clock}; GPU utilisation (nvidia-smi) "
            + ("n/a" if s.get("gpu_util_median_pct") is None else f"{s['gpu_util_median_pct']:.0f} % (median)")
            + "; vs the other CPU's spin rate r = "
            + ("n/a" if r_spin is None else f"{r_spin:+.2f}"),
            flush=True,
        )
    spin_out = report["spin"]
    bins = [(float(t), float(n)) for t, n in spin_out["bins"]]
    rates = [n for _, n in bins]
    per2 = two_second(bins)
    print(
        f"spin on CPU {spin_out['cpu']}: {statistics.median(rates):.0f} iterations per 0.25 s, range "
        f"{min(rates):.0f} .. {max(rates):.0f} ({len(rates)} bins, {bins[-1][0] - bins[0][0]:.0f} s); over 2 s: "
        f"{min(per2):.0f} .. {max(per2):.0f} ({max(per2) / min(per2):.2f}x)"
    )
    spans = [c["block_s"] for c in report["copies"] if c.get("block_s")]
    if spans:
        lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
        inside = two_second([b for b in bins if lo <= b[0] <= hi])
        if inside:
            print(
                f"  while the copies' loops ran ({hi - lo:.0f} s): over 2 s {min(inside):.0f} .. {max(inside):.0f} "
                f"({max(inside) / min(inside):.2f}x)"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--cpus", default="16,24", help="one CPU per copy, in the order of --gpus")
    ap.add_argument("--spin-cpu", type=int, default=8)
    ap.add_argument("--workload", default="decode")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--from-json", type=Path, default=None, help="print the analysis of a saved --json")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--spin", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child, args.cpu, args.seconds)
    if args.spin:
        return spin(args.cpu, args.seconds)
    if args.from_json is not None:
        try:
            saved = json.loads(args.from_json.read_text())
            outs = [c["raw"] for c in saved["copies"]]
            report = analyse([int(c["gpu"]) for c in saved["copies"]], outs, saved["spin"], saved["smi"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {args.from_json}: not a readable loop_spells JSON ({exc})", file=sys.stderr)
            return 2
        show(report)
        return 0
    gpus = [int(x) for x in args.gpus.split(",")]
    cpus = [int(x) for x in args.cpus.split(",")]
    if len(gpus) != len(cpus):
        ap.error("--gpus and --cpus: as many of each")
    tmp = Path(tempfile.mkdtemp(prefix="archline-spells-"))
    smi_path = tmp / "smi.csv"
    q = "timestamp,index,clocks.sm,utilization.gpu"
    with open(smi_path, "w") as smi_out:
        smi = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "250"], stdout=smi_out
        )
        procs = []
        for g, c in zip(gpus, cpus, strict=True):
            env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(g))
            cmd = [
                sys.executable,
                __file__,
                "--child",
                args.workload,
                "--cpu",
                str(c),
                "--seconds",
                f"{args.seconds:g}",
            ]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
        # the spin starts with the copies' set-up and outlasts their blocks
        sp = subprocess.Popen(
            [sys.executable, __file__, "--spin", "--cpu", str(args.spin_cpu), "--seconds", f"{args.seconds + 40:g}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        spin_out = json.loads(sp.communicate()[0].strip().splitlines()[-1])
        smi.terminate()
        smi.wait()
    smi_rows = read_smi(smi_path)
    report = analyse(gpus, outs, spin_out, {str(k): v for k, v in smi_rows.items()})
    show(report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        part = args.json.with_suffix(".tmp")
        part.write_text(json.dumps(report))
        part.replace(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Board power while a short GEMM runs between idle gaps: can a kernel's mean power exceed the power limit?

    python benchmarks/burst_power.py [--gpu 0] [--sizes 2048,4096,8192] [--duties 1,0.5,0.2,0.05] [--json F]

Why: archline's attribution refuses (caps) a kernel whose energy per call over its time per call is above
the board's power limit × 1.05 (issue 13's rule). On the H100's real training loops the design of graph
replay puts the transformer's largest GEMMs at 770–1070 W over their time per call (docs/attribution.md,
session 10). The power limit is enforced by a control loop over some time constant; a kernel of tens of
microseconds between low-power kernels may draw more than the limit while the board's average stays under
it. This measures it directly, without tracing and without any attribution model.

For each GEMM size (bf16, n×n×n, cuBLAS through PyTorch) and duty (the GEMM's share of the time), two CUDA
graphs are captured: A = R × [GEMM, idle gap] and B = R × [idle gap], the gap a one-thread spin kernel
(``torch.cuda._sleep``) of (1/duty − 1) × the GEMM's time. A and B are replayed back to back in alternating
phases (A B A B …, ``--rounds``, ``--phase-s`` each), each phase read from the board's energy counter
through archline's NVML layer. Per round the GEMM's board power is

    P = (E_A − E_B) / (T_A − T_B)    (per graph replay: energy J, wall time s)

the energy the board draws while the GEMMs run (static power included, as an attribution row's mean
power is) over the time they add. Printed per (size, duty): the GEMM's time, P ± 1 σ over the rounds,
phase A's mean board power and median SM clock, and the limit. Duty 1 has no B (the GEMMs back to back).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from graph_vs_eager import Sampler  # noqa: E402


def power_limit_w(gpu: int) -> float:
    """The enforced power limit (W), as archline's NVML layer reads it."""
    from archline.hw.nvml import device_state

    state = device_state(gpu)
    lim = state.get("enforced_power_limit_w") or state.get("power_limit_w")
    return float(lim) if lim else math.nan


def throttle_reasons(gpu: int) -> list[str]:
    """The clock event reasons NVML reports now (e.g. the software power cap)."""
    from archline.hw.nvml import device_state

    t = device_state(gpu).get("throttle") or {}
    return list(t.get("reasons", []))


def summarize(rounds: list[dict[str, float]], limit_w: float) -> dict[str, Any]:
    """Mean and 1 σ (standard error over rounds) of the GEMM's power, and whether it lies above limit × 1.05 by
    more than 2 σ (``above``), below it by more than 2 σ (``below``) or neither (``unresolved``)."""
    p = [r["gemm_w"] for r in rounds if math.isfinite(r["gemm_w"])]
    if not p:
        return {"gemm_w": math.nan, "gemm_w_se": math.nan, "verdict": "unresolved"}
    mean = statistics.fmean(p)
    se = statistics.stdev(p) / math.sqrt(len(p)) if len(p) > 1 else math.nan
    bound = 1.05 * limit_w
    if not (math.isfinite(se) and math.isfinite(bound)):
        verdict = "unresolved"
    elif mean - 2 * se > bound:
        verdict = "above"
    elif mean + 2 * se < bound:
        verdict = "below"
    else:
        verdict = "unresolved"
    return {"gemm_w": mean, "gemm_w_se": se, "verdict": verdict}


def gemm_power(a_phase: dict[str, float], b_phase: dict[str, float] | None) -> float:
    """(E_A − E_B) / (T_A − T_B) per graph replay; E_A / T_A where there is no B."""
    ea, ta = a_phase["j_per_replay"], a_phase["s_per_replay"]
    eb, tb = (b_phase["j_per_replay"], b_phase["s_per_replay"]) if b_phase else (0.0, 0.0)
    return (ea - eb) / (ta - tb) if ta > tb else math.nan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--sizes", default="2048,4096,8192")
    ap.add_argument("--duties", default="1,0.5,0.2,0.05")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phase-s", type=float, default=1.5)
    ap.add_argument("--graph-s", type=float, default=0.01, help="each graph's length (s) at least")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch

    torch.cuda.set_device(args.gpu)
    smp = Sampler(args.gpu)
    limit = power_limit_w(args.gpu)
    name = torch.cuda.get_device_name(args.gpu)
    from archline.hw.nvml import device_state, device_static

    uuid = str(device_static(args.gpu).get("uuid", ""))
    state0 = device_state(args.gpu)
    print(f"board: {name} {uuid[:12]}, power limit {limit:.0f} W", flush=True)

    # the spin kernel's cycles per second
    torch.cuda._sleep(1000)
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    torch.cuda._sleep(20_000_000)
    ev1.record()
    torch.cuda.synchronize()
    cycles_per_s = 20_000_000 / (ev0.elapsed_time(ev1) / 1e3)

    def replay_phase(graph: Any, seconds: float) -> dict[str, float]:
        torch.cuda.synchronize()
        with smp:
            e0 = smp.joules()
            t0 = time.perf_counter()
            n = 0
            while time.perf_counter() - t0 < seconds:
                graph.replay()
                n += 1
                if n % 8 == 0:
                    torch.cuda.synchronize()  # keep the queue short so the phase ends on time
            reasons = throttle_reasons(args.gpu)  # read while the last replays still run
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            e1 = smp.joules()
        clk = [r[0] for r in smp.rows]
        return {"replays": n, "j_per_replay": (e1 - e0) / n, "s_per_replay": (t1 - t0) / n,
                "mean_w": (e1 - e0) / (t1 - t0), "sm_mhz": statistics.median(clk) if clk else math.nan,
                "clock_reasons": reasons}  # fmt: skip

    rows: list[dict[str, Any]] = []
    print(f"{'n':>5} {'duty':>5} {'GEMM µs':>8} {'R':>4} {'GEMM W':>14} {'board W (A)':>11} {'SM MHz':>7}  verdict")
    for n in [int(s) for s in args.sizes.split(",")]:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(5):
            torch.matmul(a, b, out=c)
        ev0.record()
        for _ in range(20):
            torch.matmul(a, b, out=c)
        ev1.record()
        torch.cuda.synchronize()
        t_gemm = ev0.elapsed_time(ev1) / 1e3 / 20
        for duty in [float(d) for d in args.duties.split(",")]:
            gap_s = t_gemm * (1.0 / duty - 1.0)
            cycles = int(gap_s * cycles_per_s)
            reps = max(1, math.ceil(args.graph_s / (t_gemm / duty)))
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up on a side stream before capture, as PyTorch documents
                torch.matmul(a, b, out=c)
            torch.cuda.current_stream().wait_stream(side)
            ga = torch.cuda.CUDAGraph()
            with torch.cuda.graph(ga):
                for _ in range(reps):
                    torch.matmul(a, b, out=c)
                    if cycles > 0:
                        torch.cuda._sleep(cycles)
            gb = None
            if cycles > 0:
                gb = torch.cuda.CUDAGraph()
                with torch.cuda.graph(gb):
                    for _ in range(reps):
                        torch.cuda._sleep(cycles)
            ga.replay()
            torch.cuda.synchronize()
            rounds = []
            for _ in range(args.rounds):
                pa = replay_phase(ga, args.phase_s)
                pb = replay_phase(gb, args.phase_s) if gb is not None else None
                t_in = (pa["s_per_replay"] - (pb["s_per_replay"] if pb else 0.0)) / reps
                rounds.append({"a": pa, "b": pb, "gemm_w": gemm_power(pa, pb), "gemm_s": t_in})
            s = summarize(rounds, limit)
            row = {"n": n, "duty": duty, "gemm_s_events": t_gemm, "gap_s": gap_s, "reps_per_graph": reps,
                   "gemm_s_in_graph": statistics.fmean(r["gemm_s"] for r in rounds),
                   "board_w_a": statistics.fmean(r["a"]["mean_w"] for r in rounds),
                   "sm_mhz_a": statistics.median(r["a"]["sm_mhz"] for r in rounds),
                   "clock_reasons_a": sorted({x for r in rounds for x in r["a"]["clock_reasons"]}),
                   "rounds": rounds, **s}  # fmt: skip
            rows.append(row)
            print(f"{n:5d} {duty:5.2f} {row['gemm_s_in_graph'] * 1e6:8.1f} {reps:4d} "
                  f"{s['gemm_w']:7.0f} ± {s['gemm_w_se']:4.0f} {row['board_w_a']:11.0f} {row['sm_mhz_a']:7.0f}  "
                  f"{s['verdict']} (limit × 1.05 = {1.05 * limit:.0f} W); clocks held by: "
                  f"{', '.join(row['clock_reasons_a']) or 'nothing'}", flush=True)  # fmt: skip
            del ga, gb
    above = [r for r in rows if r["verdict"] == "above"]
    print(
        f"GEMMs whose board power while they run is above the limit × 1.05 by more than 2 σ: {len(above)} of "
        f"{len(rows)}" + (": " + ", ".join(f"n={r['n']} duty {r['duty']:g}" for r in above) if above else "")
    )
    if args.json:
        out = {"board": name, "uuid": uuid, "power_limit_w": limit, "state_before": state0,
               "cycles_per_s": cycles_per_s, "rows": rows}  # fmt: skip
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(out, indent=1))
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

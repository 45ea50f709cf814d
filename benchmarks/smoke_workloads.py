"""GPU smoke test of archline's held-out workloads: set up, run, check and time each one; print W, Q and rates.

Run on the GPU machine:  python benchmarks/smoke_workloads.py [--reps 20] [--gemm-sizes 2048 4096 8192]
Exits non-zero if any workload fails its output check. Times are CUDA-event means over --reps
invocations after one warm-up; they are a sanity check of the counts, not the energy measurement.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--gemm-sizes", type=int, nargs="+", default=[2048, 4096, 8192])
    args = ap.parse_args()
    if os.environ.get("CUPY_TF32", "0") not in ("", "0"):
        print("CUPY_TF32 is set: SGEMM would run on TF32 tensor cores and its flops would not be FP32; unset it")
        return 2

    import cupy as cp

    from archline.characterize.workloads import default_workloads

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    print(f"device {dev.id}: {props['name'].decode()}  cupy {cp.__version__}")
    header = f"{'workload':24s} {'W flop':>10s} {'Q B':>10s} {'I':>8s} {'t ms':>9s} {'TFLOP/s':>8s} {'GB/s':>8s}  check"
    print(header)
    failed = 0
    for w in default_workloads(tuple(args.gemm_sizes)):
        try:
            w.setup()
            w.run()  # warm-up (JIT, cuBLAS heuristics)
            w.check()
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            for _ in range(args.reps):
                w.run()
            stop.record()
            stop.synchronize()
            t_s = cp.cuda.get_elapsed_time(start, stop) / 1e3 / args.reps
            w.check()
            status = "ok"
        except Exception as exc:  # a smoke test reports every failure and goes on
            failed += 1
            t_s = float("nan")
            status = f"FAILED: {exc}"
            traceback.print_exc()
        finally:
            w.teardown()
            cp.get_default_memory_pool().free_all_blocks()
        print(
            f"{w.name:24s} {w.flops:10.3g} {w.dram_bytes:10.3g} {w.flops / w.dram_bytes:8.3g} {t_s * 1e3:9.4g} "
            f"{w.flops / t_s / 1e12:8.3g} {w.dram_bytes / t_s / 1e9:8.4g}  {status}"
        )
    print(f"{failed} failed" if failed else "all workloads ran and checked out")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

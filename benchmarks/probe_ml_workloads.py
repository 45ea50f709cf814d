"""Check the ML workloads on a GPU: each one runs and passes its check, its time, and ncu's tensor-op counts.

Usage: python benchmarks/probe_ml_workloads.py [--gpu 0] [--ncu-set calibration|heldout|none] [--json OUT]

Prints, per workload, the median time of 5 invocations (CUDA events) and whether its output
check passed; then the tensor-core paths this ``ncu`` knows, and for the chosen set one ncu
count per workload with ncu's tensor ops beside the workload's nominal flops. This is what the
protocol's tensor-op convention is read from: only the calibration set is counted by default.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--ncu-set", choices=("calibration", "heldout", "none"), default="calibration")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import torch

    from archline.characterize.workloads_ml import ml_calibration_workloads, ml_heldout_workloads
    from archline.errors import ArchlineError
    from archline.hw import ncu

    torch.cuda.set_device(a.gpu)
    out: dict[str, object] = {"torch": torch.__version__, "device": torch.cuda.get_device_name(a.gpu)}
    rows = []
    for set_name, ws in (("calibration", ml_calibration_workloads()), ("heldout", ml_heldout_workloads())):
        for w in ws:
            row: dict[str, object] = {"name": w.name, "set": set_name, "flops": w.flops, "bytes": w.dram_bytes}
            try:
                w.setup()
                w.run()
                w.check()
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
                times = []
                for _ in range(5):
                    ev[0].record()
                    w.run()
                    ev[1].record()
                    torch.cuda.synchronize()
                    times.append(ev[0].elapsed_time(ev[1]) * 1e-3)
                w.check()
                t = sorted(times)[2]
                row.update(status="ok", time_s=t, tflops=w.flops / t / 1e12, gbps=w.dram_bytes / t / 1e9)
            except (ArchlineError, RuntimeError, TypeError, ValueError) as exc:
                row.update(status="failed", note=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                w.teardown()
            print(json.dumps(row), flush=True)
            rows.append(row)
    out["workloads"] = rows
    try:
        exe = ncu.find_ncu()
        known = ncu.parse_query(ncu._run([exe, "--query-metrics"], 120, "ncu --query-metrics"))
        out["tensor_metrics"] = sorted(m for m in known if "ops_path_tensor" in m or "pipe_tensor" in m)
        print("tensor metrics:", out["tensor_metrics"], flush=True)
        if a.ncu_set != "none":
            names = [str(r["name"]) for r in rows if r["set"] == a.ncu_set and r.get("status") == "ok"]
            child = [sys.executable, "-m", "archline.characterize.ncu_child"]
            counts, metrics = ncu.count_workloads(names, gpu=a.gpu, child=child)
            out["ncu_metrics"] = metrics
            flops = {str(r["name"]): float(r["flops"]) for r in rows}  # type: ignore[arg-type]
            out["counts"] = {}
            for n, c in counts.items():
                tc = {k: v for k, v in c.values.items() if k.startswith("tc_ops_")}
                ratio = sum(tc.values()) / flops[n] if flops[n] else None
                out["counts"][n] = {**c.as_row(), "tc_ops_over_nominal_flops": ratio}  # type: ignore[index]
                print(n, "tensor ops", tc, "ops/nominal flops", ratio, "kernels", c.kernels[:4], flush=True)
    except ArchlineError as exc:
        out["ncu_error"] = str(exc)
        print("ncu:", exc, flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

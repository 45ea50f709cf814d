"""Sampler speed on a GPU: share of the driver's samples captured, CPU cost, effect on kernel runtime.

Usage (on a GPU machine): python benchmarks/bench_sampler.py [--gpu 0] [--seconds 60] [--out FILE.json]

1. capture: the sampler (NVML sample-buffer source only) runs for ``--seconds`` while a separate
   process drains the same buffer every 10 ms; every timestamp the reference saw must be in
   the sampler's recording (target: 100 %).
2. CPU: the process's CPU time over the same span, main thread asleep (target: < 1 % of a core).
3. runtime: a 50 ms busy kernel launched back to back for 10 s without and with the full
   sampler (every NVML source); mean kernel time from CUDA events (target: < 0.5 % change).
Prints every figure and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REF = r"""
import sys, time, pynvml as nv
nv.nvmlInit(); h = nv.nvmlDeviceGetHandleByIndex(int(sys.argv[1])); end = time.time() + float(sys.argv[2])
last = time.time_ns() // 1000; seen = set()
while time.time() < end:
    try:
        _, s = nv.nvmlDeviceGetSamples(h, nv.NVML_TOTAL_POWER_SAMPLES, last)
        for x in s:
            seen.add(int(x.timeStamp))
        if s:
            last = max(last, max(int(x.timeStamp) for x in s))
    except nv.NVMLError:
        pass
    time.sleep(0.01)
print(" ".join(map(str, sorted(seen))))
"""


#: Two processes draining the buffer see the same sample stamped up to ~0.5 ms apart (H100, this
#: benchmark's first runs: misses at 2 µs sat 0.2–0.5 ms from a sampler stamp); a match within a
#: tenth of the 20 ms period is the same sample.
MATCH_US = 2000.0


def capture(gpu: int, seconds: float) -> dict[str, float]:
    from archline.hw.nvml import open_sources
    from archline.measurement.sampler import Sampler

    ref = subprocess.Popen([sys.executable, "-c", REF, str(gpu), str(seconds)], stdout=subprocess.PIPE, text=True)
    s = Sampler(open_sources(gpu, ["nvml.buffer"]), settle_s=0.3)
    c0, w0 = time.process_time(), time.time()
    s.start()
    time.sleep(seconds)
    rec = s.stop()
    c1, w1 = time.process_time(), time.time()
    s.close()
    out, _ = ref.communicate(timeout=60)
    ref_ts = {int(x) for x in out.split()}
    # Float seconds since the epoch carry ~0.25 µs of rounding: match the µs stamps within 2 µs.
    ours_us = np.sort(rec.readings["nvml.buffer"].t_s * 1e6)
    lo, hi = ours_us[0], ours_us[-1]
    ref_in = sorted(t for t in ref_ts if lo - 2 <= t <= hi + 2)
    idx = np.clip(np.searchsorted(ours_us, ref_in), 1, len(ours_us) - 1)
    near = np.minimum(np.abs(ours_us[idx] - ref_in), np.abs(ours_us[idx - 1] - ref_in))
    missed = [t for t, d in zip(ref_in, near, strict=True) if d > MATCH_US]
    exact = sum(1 for d in near if d <= 2.0)

    # Where the misses are: how far each is from the sampler's nearest stamp (a displaced
    # stamp sits ~9 ms off the 20 ms grid; a lost one leaves a ~40 ms hole).
    miss_near_ms = [float(x) / 1e3 for x in near if x > 2.0]
    return {
        "seconds": seconds,
        "reference_samples": len(ref_in),
        "sampler_samples": len(ours_us),
        "captured_pct": 100.0 * (1 - len(missed) / max(len(ref_in), 1)),
        "cpu_pct_of_one_core": 100.0 * (c1 - c0) / (w1 - w0),
        "polls": rec.meta["polls"]["nvml.buffer"],
        "missed": len(missed),
        "match_tolerance_us": MATCH_US,
        "exact_stamp_pct": 100.0 * exact / max(len(ref_in), 1),
        "inexact_nearest_ms_quartiles_max": [float(q) for q in np.percentile(miss_near_ms, [25, 50, 75, 100])]
        if miss_near_ms
        else [],
        "missed_first": missed[:20],
    }


def runtime(gpu: int, seconds: float) -> dict[str, float]:
    from archline.hw.cuda import CudaExecutor
    from archline.hw.nvml import open_sources
    from archline.measurement.calibrate.load_runs import BusyLoad
    from archline.measurement.sampler import Sampler

    ex = CudaExecutor(gpu)
    load = BusyLoad(ex)
    res: dict[str, list[float]] = {"without": [], "with": []}
    for phase in ("without", "with", "without", "with"):  # interleaved against drift
        s = Sampler(open_sources(gpu), settle_s=0.05).start() if phase == "with" else None
        end = time.time() + seconds / 2
        while time.time() < end:
            r = ex.launch(load.kernel, load.grid, load.block, load._args(0.05))
            res[phase].append(r.event_s)
        if s is not None:
            s.stop()
            s.close()
    load.close()
    a, b = np.mean(res["without"]), np.mean(res["with"])
    return {
        "kernel_s_without": float(a),
        "kernel_s_with": float(b),
        "runtime_change_pct": float((b / a - 1) * 100),
        "launches": len(res["without"]) + len(res["with"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--runtime-seconds", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    figs = {"capture": capture(a.gpu, a.seconds), "runtime": runtime(a.gpu, a.runtime_seconds)}
    figs["host"] = {"cpus": os.cpu_count() or 0}
    print(json.dumps(figs, indent=2))
    c, r = figs["capture"], figs["runtime"]
    print(
        f"captured {c['captured_pct']:.2f} % of {c['reference_samples']} driver samples within "
        f"{c['match_tolerance_us'] / 1e3:g} ms (target 100 %); {c['exact_stamp_pct']:.1f} % with the identical stamp"
    )
    print(f"CPU {c['cpu_pct_of_one_core']:.3f} % of one core for the buffer source (target < 1 %)")
    print(f"kernel runtime change with the sampler {r['runtime_change_pct']:+.3f} % (target < 0.5 %)")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(figs, indent=2))


if __name__ == "__main__":
    main()

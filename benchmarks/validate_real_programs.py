"""Issue 11's GPU targets: archline's energy of real programs against the board's energy counter.

    python3 benchmarks/validate_real_programs.py --out DIR [--gpu 0] [--quick]

Writes one archline run directory, DIR (manifest kind ``measure-validation``), holding
``summary.json``, ``checks.csv``, the ``archline measure`` outputs and the recording of the
region test (``regions.npz``), and prints every figure with its pass/fail:

1. ``archline measure --json`` of a real PyTorch training program (ResNet-50, bf16, ≥ 15 s) and
   of a cuBLAS GEMM loop: archline's energy within 1 % of the energy counter over the same span.
2. Isolated 1 s and 3 s FP32-FMA kernels, each after 1 s idle, as regions of one
   ``archline.measure()``: within 2 % of a counter reference per kernel, taken over ~8 s of
   back-to-back kernels between two of the counter's own update edges.
3. ``measure_callable`` of FP32-FMA calls of ~1 ms to ~1 s: its counter figure within 1 % of the
   same kind of reference (its own corrected energy is printed beside it).

The kernels of 2 and 3 stay under the board's power limit: a kernel that reaches it (a bf16
GEMM at 700 W does) runs at boost clocks for its first few hundred ms after idle and capped
afterwards, so an isolated call and a back-to-back one are different operating points and the
back-to-back counter is no reference for it. Every check records the throttle reasons seen.

Every check is two-sided: |error| ≤ limit. Each section runs on its own; a failing one is
reported and the others go on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def check(rows: list[dict[str, Any]], name: str, measured: float | None, ref: float | None, limit_pct: float,
          **extra: Any) -> None:  # fmt: skip
    err = None if measured is None or not ref else (measured / ref - 1) * 100
    ok = err is not None and abs(err) <= limit_pct
    rows.append({"check": name, "measured_j": measured, "reference_j": ref, "error_pct": err,
                 "limit_pct": limit_pct, "passed": ok, **extra})  # fmt: skip
    e = "n/a" if err is None else f"{err:+.2f} %"
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {measured} J vs {ref} J ({e}, limit ±{limit_pct} %)", flush=True)


def measure_program(out: Path, name: str, argv: list[str], gpu: int) -> dict[str, Any]:
    """``archline measure --json`` of a program, as a user runs it."""
    cmd = [sys.executable, "-m", "archline", "measure", "--gpu", str(gpu), "--json", "--", sys.executable, *argv]
    t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    (out / f"measure_{name}.json").write_text(res.stdout)
    (out / f"measure_{name}.err").write_text(res.stderr)
    if res.returncode != 0:
        raise RuntimeError(f"archline measure exited {res.returncode}: {res.stderr.strip()[-400:]}")
    d: dict[str, Any] = json.loads(res.stdout)
    d["wall_s"] = time.time() - t0
    return d


class Counter:
    """NVML's energy counter through archline's own source (J), polled from this thread."""

    def __init__(self, gpu: int) -> None:
        from archline.hw.nvml import open_sources

        (self.src,) = open_sources(gpu, ["nvml.energy"])

    def read_j(self) -> float:
        return float(self.src.read().value[-1])

    def edge(self) -> tuple[float, float]:
        """Wait for the counter's next update; its value (J) and when it was first seen (s)."""
        v0 = self.read_j()
        while True:
            v = self.read_j()
            if v != v0:
                return v, time.time()

    def idle_w(self, seconds: float = 1.0) -> float:
        e0, t0 = self.edge()
        time.sleep(seconds)
        e1, t1 = self.edge()
        return (e1 - e0) / (t1 - t0)

    def reference(self, block: Callable[[], None], seconds: float, idle_w: float) -> tuple[float, int]:
        """Energy of one ``block`` (which synchronises the GPU) from back-to-back blocks between edges."""
        e0, t_edge0 = self.edge()
        t_start = time.time()
        n = 0
        while time.time() - t_start < seconds:
            block()
            n += 1
        t_end = time.time()
        e1, t_edge1 = self.edge()
        idle_j = idle_w * ((t_start - t_edge0) + (t_edge1 - t_end))
        return (e1 - e0 - idle_j) / n, n


FMA_SRC = r"""
extern "C" __global__ void fma_burn(float* out, long long iters, float a, float b) {
  float x0 = threadIdx.x * 1e-3f, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
  for (long long i = 0; i < iters; ++i) {
    x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
  }
  float s = x0 + x1 + x2 + x3;
  if (s == 1234567.0f) out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // never true: keeps the work
}
"""


def fma_kernels(gpu: int) -> Callable[[float, bool], Callable[[], None]]:
    """A factory of FP32-FMA kernels lasting about ``t`` seconds (one launch each)."""
    import cupy as cp

    cp.cuda.Device(gpu).use()
    sms = cp.cuda.Device(gpu).attributes["MultiProcessorCount"]
    kern = cp.RawKernel(FMA_SRC, "fma_burn")
    out = cp.zeros(sms * 4 * 256, cp.float32)
    grid, block = (sms * 4,), (256,)

    def launch(iters: int) -> None:
        kern(grid, block, (out, cp.int64(iters), cp.float32(0.999), cp.float32(1e-3)))

    launch(1000)
    cp.cuda.Device(gpu).synchronize()
    t0 = time.perf_counter()
    launch(2_000_000)
    cp.cuda.Device(gpu).synchronize()
    per_iter = (time.perf_counter() - t0) / 2_000_000

    def make(t: float, sync: bool = True) -> Callable[[], None]:
        iters = max(1, round(t / per_iter))

        def call() -> None:
            launch(iters)
            if sync:
                cp.cuda.Device(gpu).synchronize()

        return call

    return make


def programs(out: Path, rows: list[dict[str, Any]], gpu: int, quick: bool) -> None:
    secs = "15" if quick else "18"
    for name, argv in (
        ("resnet50_train", [str(HERE / "workloads" / "train_resnet.py"), "--seconds", secs]),
        ("gemm_loop", [str(HERE / "workloads" / "gemm_loop.py"), "--seconds", "8" if quick else "10"]),
    ):
        try:
            d = measure_program(out, name, argv, gpu)
            print(f"  {name}: {d['time_s']:.1f} s, {d['sensor_model']}; notes: {d.get('notes')}", flush=True)
            check(rows, f"archline measure: {name} vs energy counter", d["energy_j"], d["energy_counter_j"], 1.0,
                  sigma_j=d["energy_uncertainty_j"], counter_sigma_j=d.get("energy_counter_uncertainty_j"),
                  time_s=d["time_s"], resolvable=d["resolvable"])  # fmt: skip
        except Exception as exc:  # one section's failure must not lose the others
            traceback.print_exc()
            rows.append({"check": f"archline measure: {name}", "passed": False, "error": repr(exc)})


def regions(out: Path, rows: list[dict[str, Any]], gpu: int, quick: bool) -> None:
    import archline
    from archline.records.traces import save_recording

    make = fma_kernels(gpu)
    counter = Counter(gpu)
    idle = counter.idle_w()
    print(f"  idle {idle:.1f} W", flush=True)
    for target_s in (1.0, 3.0):
        block = make(target_s, True)
        ref, n = counter.reference(block, 6.0 if quick else 9.0, idle)
        with archline.measure(gpu=gpu) as meas:
            for i in range(3):
                time.sleep(1.0)
                with meas.region(f"block{target_s:g}s_{i}"):
                    block()
            time.sleep(1.0)
        if meas.trace is not None:
            save_recording(out / f"regions_{target_s:g}s.npz", meas.trace)
        for key, r in meas.regions.items():
            check(rows, f"measure() region {key} ({r.duration_s:.2f} s) vs counter reference", r.energy_j, ref, 2.0,
                  sigma_j=r.energy_uncertainty_j, reference_blocks=n, sensor_model=r.sensor_model,
                  mean_power_w=r.mean_power_w, max_power_w=r.max_power_w, resolvable=r.resolvable,
                  notes="; ".join(r.notes), throttle=_throttle(meas.trace, r.start_s, r.end_s))  # fmt: skip


def callables(out: Path, rows: list[dict[str, Any]], gpu: int, quick: bool) -> None:
    import archline

    make = fma_kernels(gpu)
    counter = Counter(gpu)
    idle = counter.idle_w()
    for target_s in (0.001, 0.01, 0.1, 1.0):
        fn = make(target_s, False)
        res = archline.measure_callable(fn, gpu=gpu, target_rel_error=0.02, max_total_s=6.0 if quick else 8.0)
        # Back to back as measure_callable runs them: a batch of unsynchronised calls, then one sync.
        k = max(1, round(0.1 / target_s))
        batch, call = make(target_s, False), make(target_s, True)

        def block(batch: Callable[[], None] = batch, call: Callable[[], None] = call, k: int = k) -> None:
            for _ in range(k - 1):
                batch()
            call()

        ref_block, _ = counter.reference(block, 5.0 if quick else 8.0, idle)
        ref = ref_block / k
        label = f"measure_callable {1e3 * res.time_s:.3g} ms call"
        check(rows, f"{label}: counter figure vs counter reference", res.counter_energy_j, ref, 1.0,
              archline_energy_j=res.energy_j, sensor_model=res.sensor_model)  # fmt: skip
        check(rows, f"{label}: archline energy vs counter reference", res.energy_j, ref, 2.0,
              sigma_j=res.energy_uncertainty_j, resolvable=res.resolvable)  # fmt: skip


def _throttle(rec: Any, a: float, b: float) -> str:
    """The clock-event reasons NVML reported inside [a, b] (e.g. sw_power_cap)."""
    from archline.hw.nvml import decode_throttle

    thr = rec.get("nvml.throttle") if rec is not None else None
    if thr is None or len(thr) == 0:
        return "unknown"
    mask = 0
    for t, v in zip(thr.t_s, thr.value, strict=True):
        if a <= t <= b:
            mask |= int(v)
    return ",".join(n for n in decode_throttle(mask)[0] if n != "gpu_idle") or "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="programs,regions,callables")
    a = ap.parse_args()
    from archline.hw.nvml import device_state, device_static
    from archline.records import Manifest, RunDir

    static = device_static(a.gpu)
    rd = RunDir.create(a.out, Manifest.new("measure-validation", gpu=static), overwrite=True)
    rd.update_manifest(state_before=device_state(a.gpu))
    board = f"{static.get('name')} {str(static.get('uuid'))[:12]}"
    print(f"board: {board}, driver {static.get('driver_version')}", flush=True)
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    sections = {"programs": programs, "regions": regions, "callables": callables}
    for name in a.only.split(","):
        print(f"=== {name}", flush=True)
        try:
            sections[name](rd.path, rows, a.gpu, a.quick)
        except Exception as exc:
            traceback.print_exc()
            rows.append({"check": name, "passed": False, "error": repr(exc)})
    rd.write_csv("checks.csv", rows, ["check", "measured_j", "reference_j", "error_pct", "limit_pct", "passed"])
    passed = sum(1 for r in rows if r.get("passed"))
    summary = {"board": board, "checks": rows, "passed": passed, "total": len(rows), "wall_s": time.time() - t0}
    rd.write_json("summary.json", summary)
    rd.finish("complete", state_after=device_state(a.gpu))
    print(f"{passed}/{len(rows)} checks passed in {time.time() - t0:.0f} s on {board}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

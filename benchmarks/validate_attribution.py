"""GPU validation of per-kernel energy attribution: totals, a synthetic mix with known truth, real workloads.

Usage (on a GPU machine with cupy-cuda13x, cupti-python and, for the transformer, torch):

    python benchmarks/validate_attribution.py OUT_DIR [--gpu 0] [--quick] [--skip-torch] [--skip-gemm]

Writes one run directory per experiment under OUT_DIR and OUT_DIR/validation_summary.json, prints
every figure, and exits 1 if a check fails:

1. isolated: an FP32-FMA kernel and a memory-bound copy kernel (CuPy RawKernel, each call
   < 1 ms), each looped alone for a few seconds; per-call energy = counter energy over the
   steady part of the loop / calls in it.
2. mix: the two kernels interleaved in blocks of random proportions (50–400 ms), with idle
   waits between some blocks; the attributed per-call energies must be within 10 % of the
   isolated ones.
3. total: in every run the rows add up to the energy counter's total, the unexplained
   residual is < 2 % of it, and the power buffer's integral over the same span agrees with
   the counter within 2 % (an independent check of the total).
4. real workloads: a PyTorch training step of a small transformer and a cuBLAS GEMM loop;
   their top kernels are printed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from archline.measurement.attribute.api import Attribution, attribute
from archline.measurement.attribute.windows import BufferIntegral, counter_windows
from archline.records.attribution import AttributionResult

FMA_SRC = r"""
extern "C" __global__ void fma_burn(float* out, int iters, float a, float b) {
  float x0 = threadIdx.x * 1e-3f, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
  float x4 = x0 + 4.f, x5 = x0 + 5.f, x6 = x0 + 6.f, x7 = x0 + 7.f;
  for (int i = 0; i < iters; ++i) {
    x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
    x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
  }
  float s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
  if (s == 1234567.0f) out[blockIdx.x * blockDim.x + threadIdx.x] = s;  // never true: keeps the work
}
"""

MEM_SRC = r"""
extern "C" __global__ void stream_copy(const float4* __restrict__ src, float4* __restrict__ dst, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) dst[i] = src[i];
}
"""


class Kernels:
    """The two synthetic kernels, sized so that one call lasts about ``target_s``."""

    def __init__(self, target_s: float = 0.0005) -> None:
        import cupy as cp

        self.cp = cp
        dev = cp.cuda.Device()
        self.sms = dev.attributes["MultiProcessorCount"]
        self.fma = cp.RawKernel(FMA_SRC, "fma_burn")
        self.copy = cp.RawKernel(MEM_SRC, "stream_copy")
        self.out = cp.zeros(self.sms * 8 * 256, cp.float32)
        self.iters = 1000
        self.iters = max(1, int(self.iters * target_s / self._time(self.call_fma)))
        n_bytes = 256 << 20
        self._alloc(n_bytes)
        n_bytes = int(n_bytes * target_s / self._time(self.call_copy))
        self._alloc(max(n_bytes, 64 << 20))
        self.fma_s = self._time(self.call_fma)
        self.copy_s = self._time(self.call_copy)

    def _alloc(self, n_bytes: int) -> None:
        cp = self.cp
        self.n4 = n_bytes // 16
        self.src = cp.random.random(self.n4 * 4, dtype=cp.float32)
        self.dst = cp.empty_like(self.src)

    def call_fma(self) -> None:
        self.fma((self.sms * 8,), (256,), (self.out, np.int32(self.iters), np.float32(0.9999), np.float32(1e-4)))

    def call_copy(self) -> None:
        self.copy((self.sms * 8,), (256,), (self.src, self.dst, np.int64(self.n4)))

    def _time(self, fn: Any, reps: int = 20) -> float:
        cp = self.cp
        fn()
        cp.cuda.Device().synchronize()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        return float(cp.cuda.get_elapsed_time(e0, e1)) * 1e-3 / reps

    def sync(self) -> None:
        self.cp.cuda.Device().synchronize()


def total_checks(a: Attribution) -> dict[str, float]:
    """Rows vs the counter total, the residual, and the power buffer's integral vs the counter."""
    res = a.result
    assert res is not None and a.recording is not None
    rows_j = sum(r.energy_j for r in res.rows)
    residual = res.table["(unexplained residual)"].energy_j
    out = {
        "counter_total_j": res.total_energy_j,
        "rows_sum_j": rows_j,
        "rows_vs_counter": rows_j / res.total_energy_j - 1.0,
        "residual_share": residual / res.total_energy_j,
    }
    buf = a.recording.get("nvml.buffer")
    if buf is not None and len(buf) > 3:
        integ = BufferIntegral(buf)
        b = float(integ.energy(np.array([res.span_start_s]), np.array([res.span_end_s]))[0])
        out["buffer_vs_counter"] = b / res.total_energy_j - 1.0
    return out


def steady_per_call_j(a: Attribution, name: str, skip_s: float = 0.3) -> tuple[float, int]:
    """Counter energy over the windows fully inside the steady part of a loop, per call started in them."""
    assert a.recording is not None and a.result is not None
    calls = [r for r in a.activities if r.name == name or r.name.startswith(name)]
    t0 = calls[0].start_s + skip_s
    t1 = calls[-1].end_s
    w = counter_windows(a.recording.readings["nvml.energy"])
    edges = w.edges_s - a.result.counter_delay_s
    inside = (edges[:-1] >= t0) & (edges[1:] <= t1)
    idx = np.nonzero(inside)[0]
    lo, hi = float(edges[idx[0]]), float(edges[idx[-1] + 1])
    starts = np.array([c.start_s for c in calls])
    ends = np.array([c.end_s for c in calls])
    # Calls cut by the span's ends count by the fraction inside.
    frac = np.clip((np.minimum(ends, hi) - np.maximum(starts, lo)) / (ends - starts), 0, 1)
    return float(w.energy_j[idx].sum() / frac.sum()), round(float(frac.sum()))


def run_isolated(k: Kernels, which: str, out: Path, gpu: int, seconds: float) -> dict[str, Any]:
    fn = k.call_fma if which == "fma_burn" else k.call_copy
    with attribute(gpu=gpu, out=out / f"isolated_{which}", force=True) as a:
        t_end = time.time() + seconds
        n = 0
        while time.time() < t_end:
            for _ in range(50):
                fn()
            n += 50
            k.sync()
    per_call, used = steady_per_call_j(a, which)
    row = a.kernels[which]
    checks = total_checks(a)
    print(
        f"isolated {which}: {n} calls of {1e3 * row.mean_time_s:.3f} ms; counter: {1e3 * per_call:.3f} mJ/call "
        f"over {used} calls; attributed row: {1e3 * row.energy_per_call_j:.3f} mJ/call ({row.mean_power_w:.0f} W)"
    )
    return {"per_call_j": per_call, "row_per_call_j": row.energy_per_call_j, "calls": n, "checks": checks}


def run_mix(k: Kernels, out: Path, gpu: int, seconds: float, seed: int = 0) -> tuple[AttributionResult, dict[str, Any]]:
    rng = np.random.default_rng(seed)
    counts = {"fma_burn": 0, "stream_copy": 0}
    with attribute(gpu=gpu, out=out / "mix", force=True) as a:
        t_end = time.time() + seconds
        while time.time() < t_end:
            frac_fma = rng.uniform(0, 1)
            block_s = rng.uniform(0.05, 0.4)
            n_calls = max(1, int(block_s / (frac_fma * k.fma_s + (1 - frac_fma) * k.copy_s)))
            for is_fma in rng.random(n_calls) < frac_fma:
                if is_fma:
                    k.call_fma()
                    counts["fma_burn"] += 1
                else:
                    k.call_copy()
                    counts["stream_copy"] += 1
            k.sync()
            if rng.random() < 0.4:
                time.sleep(rng.uniform(0.01, 0.1))
    assert a.result is not None
    return a.result, {"counts": counts, "checks": total_checks(a)}


def print_top(res: AttributionResult, n: int = 10) -> None:
    from archline.core.activity import short_name

    print(f"  total {res.total_energy_j:.1f} J over {res.span_end_s - res.span_start_s:.2f} s, {res.windows} windows")
    for r in list(res.kernels)[:n]:
        flag = "" if r.identifiable else "  (not identifiable)"
        print(
            f"  {100 * r.share:5.1f} %  {r.energy_j:9.3f} J [{r.energy_lo_j:.3f}, {r.energy_hi_j:.3f}]  "
            f"{r.mean_power_w:6.0f} W  {r.calls:6d} calls  {1e6 * r.mean_time_s:9.1f} µs  "
            f"{short_name(r.name, 70)}{flag}"
        )
    for r in res.unattributed:
        print(f"  {100 * r.share:5.1f} %  {r.energy_j:9.3f} J  {r.name}")


def run_torch(out: Path, gpu: int, seconds: float) -> tuple[AttributionResult, dict[str, Any]] | None:
    try:
        import torch
        from torch import nn
    except ImportError:
        print("torch not installed: transformer workload skipped")
        return None
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True), num_layers=6
    ).to(dev)
    head = nn.Linear(512, 1000).to(dev)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-4)
    x = torch.randn(32, 256, 512, device=dev)
    y = torch.randint(0, 1000, (32, 256), device=dev)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = head(model(x))
            loss = nn.functional.cross_entropy(logits.float().view(-1, 1000), y.view(-1))
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    steps = 0
    with attribute(gpu=gpu, out=out / "torch_transformer", force=True) as a:
        t_end = time.time() + seconds
        while time.time() < t_end:
            step()
            steps += 1
            if steps % 4 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
    assert a.result is not None
    return a.result, {"steps": steps, "checks": total_checks(a)}


def run_gemm(out: Path, gpu: int, seconds: float) -> tuple[AttributionResult, dict[str, Any]]:
    import cupy as cp

    rng = np.random.default_rng(1)
    mats = {
        n: (cp.random.random((n, n), dtype=cp.float32), cp.random.random((n, n), dtype=cp.float32))
        for n in (1024, 2048, 4096)
    }
    halves = {n: (a.astype(cp.float16), b.astype(cp.float16)) for n, (a, b) in mats.items()}
    calls = 0
    with attribute(gpu=gpu, out=out / "cublas_gemm", force=True) as a:
        t_end = time.time() + seconds
        while time.time() < t_end:
            n = int(rng.choice([1024, 2048, 4096]))
            pair = mats[n] if rng.random() < 0.5 else halves[n]
            for _ in range(int(rng.integers(5, 40))):
                cp.matmul(pair[0], pair[1])
                calls += 1
            cp.cuda.Device().synchronize()
            if rng.random() < 0.3:
                time.sleep(rng.uniform(0.01, 0.08))
    assert a.result is not None
    return a.result, {"calls": calls, "checks": total_checks(a)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="shorter runs (about 1 minute in all)")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-gemm", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    iso_s, mix_s, real_s = (3.0, 10.0, 6.0) if args.quick else (6.0, 30.0, 15.0)
    summary: dict[str, Any] = {"gpu": args.gpu}
    failures: list[str] = []

    k = Kernels()
    print(f"fma_burn: {1e3 * k.fma_s:.3f} ms/call ({k.iters} iterations); stream_copy: {1e3 * k.copy_s:.3f} ms/call "
          f"({16 * k.n4 / 2**20:.0f} MiB copied)")  # fmt: skip
    iso = {name: run_isolated(k, name, args.out, args.gpu, iso_s) for name in ("fma_burn", "stream_copy")}
    summary["isolated"] = iso
    res, mix = run_mix(k, args.out, args.gpu, mix_s)
    print("mix:")
    print_top(res)
    summary["mix"] = mix
    summary["mix"]["per_call"] = {}
    for name in ("fma_burn", "stream_copy"):
        row = res.kernels[name]
        err = row.energy_per_call_j / iso[name]["per_call_j"] - 1.0
        ok = abs(err) <= 0.10
        summary["mix"]["per_call"][name] = {
            "attributed_j": row.energy_per_call_j,
            "isolated_j": iso[name]["per_call_j"],
            "error": err,
            "ci_j": [row.energy_lo_j / row.calls, row.energy_hi_j / row.calls],
            "identifiable": row.identifiable,
            "pass": ok,
        }
        verdict = "PASS" if ok else "FAIL"
        print(
            f"  {name}: attributed {1e3 * row.energy_per_call_j:.3f} mJ/call vs isolated "
            f"{1e3 * iso[name]['per_call_j']:.3f} mJ/call: {100 * err:+.1f} % ({verdict}, limit 10 %)"
        )
        if not ok:
            failures.append(f"mix {name} per-call error {100 * err:+.1f} %")

    real: dict[str, Any] = {}
    if not args.skip_torch:
        r = run_torch(args.out, args.gpu, real_s)
        if r is not None:
            print("torch transformer training step:")
            print_top(r[0])
            real["torch_transformer"] = r[1]
    if not args.skip_gemm:
        r2 = run_gemm(args.out, args.gpu, real_s)
        print("cuBLAS GEMM loop:")
        print_top(r2[0])
        real["cublas_gemm"] = r2[1]
    summary["real"] = real

    print("totals (rows vs counter; residual; power buffer vs counter):")
    runs = {**{f"isolated_{n}": v["checks"] for n, v in iso.items()}, "mix": mix["checks"]}
    runs.update({n: v["checks"] for n, v in real.items()})
    for name, c in runs.items():
        ok = abs(c["rows_vs_counter"]) <= 0.02 and abs(c["residual_share"]) <= 0.02
        bvc = c.get("buffer_vs_counter", math.nan)
        print(f"  {name:22s} rows {100 * c['rows_vs_counter']:+.3f} %  residual {100 * c['residual_share']:+.2f} %  "
              f"buffer {100 * bvc:+.2f} %  {'PASS' if ok else 'FAIL'}")  # fmt: skip
        if not ok:
            failures.append(f"{name}: total check failed")
        if math.isfinite(bvc) and abs(bvc) > 0.02:
            print(f"    note: the power buffer and the counter differ by {100 * bvc:+.2f} % over {name}")
    summary["failures"] = failures
    (args.out / "validation_summary.json").write_text(json.dumps(summary, indent=2, default=float) + "\n")
    print("PASS" if not failures else "FAIL: " + "; ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

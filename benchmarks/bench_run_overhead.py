"""How much does recording (NVML sampler + CUPTI kernel trace) slow a workload down? Target: < 3 %.

Usage (GPU machine): python benchmarks/bench_run_overhead.py [--gpu 0] [--reps 5] [--out DIR]

Each workload is timed (host wall clock around the synchronised block) alternately without
recording, with the sensors only, and with sensors + CUPTI, ``--reps`` times each; the
figure is the median time's change. Workloads: a cuBLAS GEMM loop (few, long kernels), an
elementwise loop of many ~10 µs kernels (CUPTI's worst case), and a small transformer training
step if torch is installed. Prints one line per workload and PASS/FAIL against 3 %.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from archline.measurement.attribute_api import Attribution


def gemm_workload() -> tuple[str, Callable[[], None]]:
    import cupy as cp

    a = cp.random.random((4096, 4096), dtype=cp.float32)
    b = cp.random.random((4096, 4096), dtype=cp.float32)

    def run() -> None:
        for _ in range(200):
            cp.matmul(a, b)
        cp.cuda.Device().synchronize()

    return "cuBLAS SGEMM 4096² × 200", run


def small_kernel_workload() -> tuple[str, Callable[[], None]]:
    import cupy as cp

    x = cp.random.random(1 << 16, dtype=cp.float32)

    def run() -> None:
        y = x
        for _ in range(20000):
            y = y * 1.0001 + 1e-6
        cp.cuda.Device().synchronize()

    return "20 000 elementwise kernels of 64 Ki floats", run


def torch_workload() -> tuple[str, Callable[[], None]] | None:
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    dev = torch.device("cuda")
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True), num_layers=6
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 256, 512, device=dev)

    def run() -> None:
        for _ in range(20):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
        torch.cuda.synchronize()

    return "transformer training, 20 steps", run


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="archline-overhead-"))
    loads = [gemm_workload(), small_kernel_workload()]
    t = torch_workload()
    if t is not None:
        loads.append(t)
    worst = 0.0
    for name, fn in loads:
        fn()  # warm up (JIT, cuBLAS handles, allocator)
        base: list[float] = []
        sensors: list[float] = []
        traced: list[float] = []
        for rep in range(args.reps):
            base.append(timed(fn))
            with Attribution(args.gpu, trace=False, pre_s=0.3, post_s=0.3):
                sensors.append(timed(fn))
            with Attribution(args.gpu, out=out / f"{len(base)}-{rep}", force=True, pre_s=0.3, post_s=0.3):
                traced.append(timed(fn))
        b = statistics.median(base)
        s = statistics.median(sensors) / b - 1.0
        c = statistics.median(traced) / b - 1.0
        worst = max(worst, c)
        spread = (max(base) - min(base)) / b
        print(
            f"{name}: {b * 1e3:.1f} ms (spread {100 * spread:.1f} %); sensors only {100 * s:+.2f} %; "
            f"sensors + CUPTI {100 * c:+.2f} %  {'PASS' if c < 0.03 else 'FAIL'} (< 3 %)"
        )
    print(f"worst overhead {100 * worst:+.2f} %: {'PASS' if worst < 0.03 else 'FAIL'}")
    return 0 if worst < 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())

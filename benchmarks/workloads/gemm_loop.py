"""A cuBLAS GEMM loop: torch.matmul of bf16 8192² matrices on random data, for a set time.

python3 benchmarks/workloads/gemm_loop.py [--seconds 10] [--n 8192]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--n", type=int, default=8192)
    a = ap.parse_args()
    x = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(a.n, a.n, device="cuda", dtype=torch.bfloat16)
    y = x @ w
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < a.seconds:
        for _ in range(10):
            y = x @ w
        torch.cuda.synchronize()
        n += 10
    dt = time.perf_counter() - t0
    print(json.dumps({"gemms": n, "tflops": 2 * a.n**3 * n / dt / 1e12, "checksum": float(y[0, 0])}))


if __name__ == "__main__":
    main()

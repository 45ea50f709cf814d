"""A launch-bound CuPy program: ~10 µs kernels of two kinds in blocks of random proportions, fixed work.

Usage: python benchmarks/workload_launch_bound.py [CALLS] — prints {"block_s", "calls", "heavy", "light"} as
JSON on its last line. Used by benchmarks/validate_duty.py to measure what kernel tracing costs a program
whose GPU waits on the CPU's launches, and whether duty-cycled tracing attributes it the same way.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import cupy as cp
import numpy as np


def make_kernels() -> tuple[Any, Any, Any, Any]:
    """The two kernels and their 64 Ki-float input and output: (x, y, heavy, light); heavy(x, y) runs one."""
    x = cp.random.random(1 << 16, dtype=cp.float32)
    y = cp.empty_like(x)
    heavy = cp.ElementwiseKernel(
        "float32 x",
        "float32 y",
        "float a = x; for (int i = 0; i < 256; ++i) { a = a * 0.9999f + 0.25f; } y = a;",
        "archline_heavy",
    )
    light = cp.ElementwiseKernel("float32 x", "float32 y", "y = x + 1.0f", "archline_light")
    return x, y, heavy, light


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 600_000
    x, y, heavy, light = make_kernels()
    rng = np.random.default_rng(1)
    plan = []  # blocks of 200–4000 calls, each with its own share of heavy calls
    n = 0
    while n < calls:
        k = min(int(rng.integers(200, 4000)), calls - n)
        plan.append(rng.random(k) < rng.uniform(0.05, 0.95))
        n += k
    heavy(x, y)
    light(x, y)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for block in plan:
        for h in block.tolist():
            if h:
                heavy(x, y)
            else:
                light(x, y)
    cp.cuda.Device().synchronize()
    block_s = time.perf_counter() - t0
    n_heavy = int(sum(int(b.sum()) for b in plan))
    print(json.dumps({"block_s": block_s, "calls": calls, "heavy": n_heavy, "light": calls - n_heavy}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The child interpreter that ``ncu`` profiles: each held-out workload once, split by marker kernels."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from archline.hw.ncu import MARKER


def _child(gpu: int, names: Sequence[str]) -> int:
    import cupy as cp

    from archline.characterize.workloads_ml import MlWorkload, workload_registry

    cp.cuda.Device(gpu).use()
    by_name = workload_registry()
    if any(isinstance(by_name.get(n), MlWorkload) for n in names):
        import torch

        torch.cuda.set_device(gpu)
    unknown = [n for n in names if n not in by_name]
    if unknown:
        print(f"archline: error: unknown held-out workload {unknown[0]}", file=sys.stderr)
        return 2
    marker = cp.RawKernel(f'extern "C" __global__ void {MARKER}() {{}}', MARKER)
    for i, n in enumerate(names):
        w = by_name[n]
        w.setup()
        try:
            w.run()
            w.check()
            cp.cuda.runtime.profilerStart()
            marker((i + 1,), (32,), ())
            w.run()
            w.synchronize()
            cp.cuda.runtime.profilerStop()
        finally:
            w.teardown()
            cp.get_default_memory_pool().free_all_blocks()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--names", required=True)
    a = ap.parse_args(argv)
    return _child(a.gpu, [n for n in a.names.split(",") if n])


if __name__ == "__main__":
    raise SystemExit(main())

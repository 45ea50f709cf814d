"""Each kernel name's busy time in one call, from CUPTI's kernel records (graph replay's busy-time design model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archline.errors import CUPTIUnavailableError
from archline.hw.cupti.trace import KernelTracer, cuda_synchronize

__all__ = ["kernel_busy_s"]


def kernel_busy_s(
    fn: Callable[[], None], *, cupti_module: Any = None, synchronize: Callable[[], None] | None = cuda_synchronize
) -> dict[str, float]:
    """Run ``fn`` once with CUPTI tracing kernels: each kernel name's busy time in it (s, the sum of its kernels'
    durations on the device clock). Kernels only: copies and memsets are left out. Raises
    :class:`~archline.errors.CUPTIUnavailableError` where CUPTI cannot trace (as :class:`KernelTracer`), and where a
    kernel record has no valid start and end (CUPTI has been seen to write zeros on long graph traces): a busy time
    built on one would be wrong by seconds."""
    tracer = KernelTracer(kinds=("kernel",), cupti_module=cupti_module, synchronize=synchronize)
    with tracer:
        fn()
    out: dict[str, float] = {}
    bad = 0
    for kind, name, start, end, *_ in tracer.raw:
        if kind != "kernel":
            continue
        if not end >= start > 0:
            bad += 1
            continue
        out[name] = out.get(name, 0.0) + (end - start) * 1e-9
    if bad:
        raise CUPTIUnavailableError(f"{bad} kernel record(s) of the traced call have no valid start and end")
    return out

"""Run the pointer-chase latency kernels on one GPU: cycles per dependent load, against published figures."""

from __future__ import annotations

from typing import Any

import numpy as np

from archline.characterize.kernels.latency import LatencyKernel, expected_end, latency_kernels
from archline.core.executor import Executor
from archline.errors import BenchmarkError

__all__ = ["LATENCY_COLUMNS", "measure_latency", "run_latency"]

#: Columns of ``latency.csv``.
LATENCY_COLUMNS = (
    "name",
    "level",
    "footprint_b",
    "stride_b",
    "steps",
    "cycles_per_load",
    "cycles_per_load_repeat",
    "repeat_diff_pct",
    "published_low",
    "published_high",
    "vs_published_pct",
    "within_15pct",
    "source",
    "verified",
    "note",
)


def measure_latency(ex: Executor, k: LatencyKernel) -> tuple[float, bool, str]:
    """One launch of ``k`` (one thread): (cycles per load, the chase ended where the host says, note)."""
    buf = ex.alloc(k.footprint_b)
    out = ex.alloc(24)
    try:
        ex.upload(buf, np.asarray(_chain_cached(k)))
        kern = ex.load(k.ptx, k.entry)
        ex.launch(kern, 1, 1, [("ptr", buf), ("ptr", out), ("u32", k.entries), ("u32", k.steps)])
        ex.synchronize()
        words = np.asarray(ex.download(out, 24)).view(np.uint64)
    finally:
        ex.free(buf)
        ex.free(out)
    cycles, steps, end = int(words[0]), int(words[1]), int(words[2])
    want = expected_end(k.entries, k.stride_b, k.steps, k.width)
    ok = steps == k.steps and end == want and cycles > 0
    note = "" if ok else f"chase ended at byte {end}, expected {want} after {k.steps} loads"
    return cycles / k.steps, ok, note


_CHAINS: dict[tuple[int, int, int], Any] = {}


def _chain_cached(k: LatencyKernel) -> Any:
    from archline.characterize.kernels.latency import chain

    key = (k.entries, k.stride_b, k.width)
    if key not in _CHAINS:
        _CHAINS[key] = chain(k.entries, k.stride_b, k.width)
    return _CHAINS[key]


def run_latency(ex: Executor, kernels: list[LatencyKernel] | None = None) -> list[dict[str, Any]]:
    """Every chase twice (repeatability), as rows of :data:`LATENCY_COLUMNS`; a failing level is a row
    with its note, not an exception."""
    rows: list[dict[str, Any]] = []
    for k in kernels or latency_kernels():
        row: dict[str, Any] = {
            "name": k.name,
            "level": k.level,
            "footprint_b": k.footprint_b,
            "stride_b": k.stride_b,
            "steps": k.steps,
            "published_low": k.published_cycles[0],
            "published_high": k.published_cycles[1],
            "source": k.source,
        }
        try:
            c1, ok1, n1 = measure_latency(ex, k)
            c2, ok2, n2 = measure_latency(ex, k)
        except BenchmarkError as exc:
            row.update(verified=False, note=str(exc))
            rows.append(row)
            continue
        lo, hi = k.published_cycles
        nearest = min(max(c1, lo), hi)
        row.update(
            cycles_per_load=c1,
            cycles_per_load_repeat=c2,
            repeat_diff_pct=(c2 / c1 - 1.0) * 100.0,
            vs_published_pct=(c1 / nearest - 1.0) * 100.0,
            within_15pct=abs(c1 / nearest - 1.0) <= 0.15,
            verified=ok1 and ok2,
            note=n1 or n2,
        )
        rows.append(row)
    return rows

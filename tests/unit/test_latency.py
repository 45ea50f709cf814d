"""Pointer-chase latency: the chains, the workflow on a chasing fake executor, the SASS, the report table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from archline.characterize.kernels.latency import LatencyKernel, chain, expected_end, latency_kernels
from archline.characterize.latency import LATENCY_COLUMNS, run_latency
from archline.records.rundir import write_csv
from archline.report.doc import Table
from archline.report.tensor import latency_blocks
from tests.helpers.kernel_suite import TOOLS_PRESENT


def _small(k: LatencyKernel) -> LatencyKernel:
    """The same chase on a footprint a CPU follows in milliseconds."""
    from dataclasses import replace

    return replace(k, footprint_b=min(k.footprint_b, 64 * k.stride_b), steps=200)


def test_chain_is_one_cycle_through_every_slot() -> None:
    for width, stride in ((8, 128), (4, 4)):
        words = chain(50, stride, width).view(np.uint64 if width == 8 else np.uint32)
        off, seen = 0, set()
        for _ in range(50):
            seen.add(off)
            off = int(words[off // width])
        assert off == 0 and len(seen) == 50 and all(s % stride == 0 for s in seen)
    assert expected_end(50, 128, 50) == 0 and expected_end(50, 128, 3) != 0


class ChasingExecutor:
    """Follows the uploaded chain like the kernel would, and reports ``cycles`` per load."""

    def __init__(self, cycles: dict[str, float], wrong: str = "") -> None:
        self.cycles, self.wrong = cycles, wrong
        self.bufs: dict[int, np.ndarray[Any, Any]] = {}

    def alloc(self, nbytes: int) -> int:
        self.bufs[len(self.bufs)] = np.zeros(nbytes, dtype=np.uint8)
        return len(self.bufs) - 1

    def upload(self, buf: int, data: np.ndarray[Any, Any]) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8)
        self.bufs[buf][: raw.size] = raw

    def download(self, buf: int, nbytes: int) -> np.ndarray[Any, Any]:
        return self.bufs[buf][:nbytes].copy()

    def free(self, buf: int) -> None:
        pass

    def load(self, ptx: str, entry: str, *, opt_level: int = 3) -> str:
        return entry

    def synchronize(self) -> None:
        pass

    def launch(self, kernel: str, grid: int, block: int, args: Sequence[tuple[str, Any]], **_: Any) -> None:
        (_, buf), (_, out), (_, _entries), (_, steps) = args
        level = kernel.removeprefix("k_lat_")
        width = 4 if level == "shared" else 8
        words = self.bufs[buf].view(np.uint32 if width == 4 else np.uint64)
        off = 0
        for _ in range(steps):
            off = int(words[off // width])
        if level == self.wrong:
            off += width
        res = np.array([int(self.cycles[level] * steps), steps, off], dtype=np.uint64)
        self.bufs[out][:24] = res.view(np.uint8)


def test_run_latency_measures_checks_and_compares_every_level() -> None:
    ks = [_small(k) for k in latency_kernels()]
    ex = ChasingExecutor({"l1": 36.0, "shared": 30.0, "l2": 300.0, "dram": 800.0}, wrong="l2")
    rows = {r["level"]: r for r in run_latency(ex, ks)}  # type: ignore[arg-type]
    assert list(rows) == ["l1", "shared", "l2", "dram"]
    assert rows["l1"]["cycles_per_load"] == 36.0 and rows["l1"]["vs_published_pct"] == 0.0
    assert rows["l1"]["within_15pct"] and rows["l1"]["verified"] and rows["l1"]["repeat_diff_pct"] == 0.0
    assert rows["dram"]["vs_published_pct"] == pytest.approx((800 / 650 - 1) * 100)
    assert not rows["dram"]["within_15pct"]
    assert rows["l2"]["verified"] is False and "expected" in rows["l2"]["note"]


def test_report_table_from_latency_csv(tmp_path: Path) -> None:
    ks = [_small(k) for k in latency_kernels()]
    rows = run_latency(ChasingExecutor({"l1": 36.0, "shared": 30.0, "l2": 300.0, "dram": 600.0}), ks)  # type: ignore[arg-type]
    write_csv(tmp_path / "latency.csv", rows, LATENCY_COLUMNS)
    (table,) = latency_blocks(tmp_path)
    assert isinstance(table, Table) and [r[0] for r in table.rows] == ["l1", "shared", "l2", "dram"]
    assert table.rows[0][2] == "36.0" and table.rows[3][4] == "480–650" and table.rows[0][6] == "yes"
    assert table.rows[0][1] == "8 KiB"
    assert latency_blocks(tmp_path / "nothing") == []


@pytest.mark.skipif(not TOOLS_PRESENT, reason="ptxas or nvdisasm is not installed")
def test_chases_are_dependent_loads_with_the_intended_cache_policy() -> None:
    from archline.hw import sass

    ks = latency_kernels()
    for k, rep in zip(ks, sass.inspect_many([k.ptx for k in ks]), strict=True):
        ops = [i.mnemonic for i in rep.instructions]
        clocks = sum(1 for o in ops if o.startswith("CS2R"))
        assert clocks >= 2, k.name  # %clock64 before and after
        if k.level == "shared":
            assert sum(o == "LDS" for o in ops) >= 8
        else:
            scope = "SM" if k.level == "l1" else "GPU"  # ld.ca stays in L1; ld.cg goes to L2
            assert sum(o == f"LDG.E.64.STRONG.{scope}" for o in ops) >= 8, (k.name, set(ops))

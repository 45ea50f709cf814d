"""The overhead benchmark's split of a duty-cycled run into loops inside and outside traced periods."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_run_overhead.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run_overhead", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_run_overhead"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_loops_inside_and_outside_traced_periods_are_compared_with_the_baseline(bench):
    # Loops of 0.1 s; inside [1.0, 1.5] each traced loop takes 0.116 s, outside 0.1005 s.
    stamps = [0.0]
    while stamps[-1] < 3.0:
        a = stamps[-1]
        traced = a >= 1.0 and a + 0.116 <= 1.5
        stamps.append(a + (0.116 if traced else 0.1005))
    run = bench.ChildRun(wall_s=4.0, block_s=stamps[-1], stamps_ns=[round(t * 1e9) for t in stamps])
    split = bench.split_by_tracing([run], [[(1.0, 1.5)]], base_loop_s=0.1)
    assert split["traced"] == pytest.approx(0.16, abs=1e-6)
    assert split["untraced"] == pytest.approx(0.005, abs=1e-6)
    # Loops that straddle a switch belong to neither.
    assert split["n_traced"] + split["n_untraced"] < len(stamps) - 1
    assert split["n_traced"] == 4


def test_a_run_without_traced_periods_has_only_untraced_loops(bench):
    run = bench.ChildRun(wall_s=1.0, block_s=0.3, stamps_ns=[0, 100_000_000, 200_000_000, 300_000_000])
    split = bench.split_by_tracing([run], [[]], base_loop_s=0.1)
    assert "traced" not in split and split["untraced"] == pytest.approx(0.0) and split["n_untraced"] == 3

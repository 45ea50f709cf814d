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


def test_pairs_compare_each_repetition_with_its_own_baseline(bench):
    assert bench.pair_changes([1.0, 2.0], [1.1, 1.9]) == pytest.approx([0.1, -0.05])
    with pytest.raises(ValueError):
        bench.pair_changes([1.0], [1.0, 2.0])


def test_signed_rank_distribution_matches_its_table(bench):
    cdf = bench._signed_rank_cdf(7)
    assert len(cdf) == 29 and cdf[-1] == pytest.approx(1.0)
    # P(W+ <= w) for n = 7: 1, 2, 3, 5, 7 of 128 subsets.
    assert [round(c * 128) for c in cdf[:5]] == [1, 2, 3, 5, 7]


def test_paired_estimate_centre_and_interval(bench):
    # Seven pairs: the baseline drifts by ±13 % between repetitions, the cost is 2 % in every pair;
    # the pairs see only the cost (a comparison of medians would see the drift).
    base = [1.0, 1.13, 0.87, 1.05, 0.95, 1.1, 0.9]
    other = [b * 1.02 * (1 + e) for b, e in zip(base, [0.001, -0.002, 0.0, 0.003, -0.001, 0.002, -0.003], strict=True)]
    est = bench.paired_estimate(bench.pair_changes(base, other))
    assert est.centre == pytest.approx(0.02, abs=0.002)
    assert est.lo <= est.centre <= est.hi and est.hi - est.lo < 0.01
    # n = 7 at 90 %: the 4th smallest and 4th largest of the 28 Walsh averages, coverage 1 - 10/128.
    assert est.n == 7 and est.coverage == pytest.approx(1 - 10 / 128)
    assert bench.verdict(est.centre) == "PASS"


def test_paired_estimate_is_robust_to_one_wild_pair(bench):
    changes = [0.01, 0.012, 0.009, 0.011, 0.5, 0.01, 0.008]
    est = bench.paired_estimate(changes)
    assert est.centre < 0.02 and est.hi >= 0.011


def test_too_few_pairs_give_every_walsh_average_and_say_how_sure(bench):
    est = bench.paired_estimate([0.01, 0.03, 0.02])
    assert (est.lo, est.hi) == pytest.approx((0.01, 0.03), abs=1e-9)
    assert est.coverage == pytest.approx(1 - 2 / 8)


def test_verdict_is_two_sided(bench):
    assert [bench.verdict(c) for c in (0.029, 0.03, -0.029, -0.03)] == ["PASS", "FAIL", "PASS", "NOISE"]
    fig = bench.Figure("x", {"wall": 0.08, "block": 0.01}, judged=("block",))
    assert fig.verdict == "PASS"
    fig = bench.Figure("x", {"block": -0.05})
    assert fig.verdict == "NOISE"


def test_cpus_split_between_the_children_and_this_process(bench):
    assert bench.parse_cpus("0-3,8, 10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert bench.split_cpus(list(range(16)), "auto") == (list(range(8, 16)), list(range(8)))
    assert bench.split_cpus(list(range(6)), "auto") == ([3, 4, 5], [0, 1, 2])
    assert bench.split_cpus([0, 1], "auto") == ([], [])
    assert bench.split_cpus(list(range(16)), "none") == ([], [])
    assert bench.split_cpus(list(range(4)), "2-3,9") == ([2, 3], [0, 1])
    with pytest.raises(ValueError):
        bench.split_cpus([0, 1], "5")


def test_traced_loops_against_the_same_process_untraced_loops(bench):
    stamps = [0.0]
    while stamps[-1] < 3.0:
        a = stamps[-1]
        stamps.append(a + (0.12 if a >= 1.0 and a + 0.12 <= 1.5 else 0.1))
    run = bench.ChildRun(wall_s=4.0, block_s=stamps[-1], stamps_ns=[round(t * 1e9) for t in stamps])
    assert bench.traced_vs_own_untraced([run], [[(1.0, 1.5)]]) == pytest.approx(0.2)
    assert bench.traced_vs_own_untraced([run], [[]]) is None
    assert run.median_loop_s() == pytest.approx(0.1)


def _run(bench, loops_s: list[float]):
    stamps = [0.0]
    for d in loops_s:
        stamps.append(stamps[-1] + d)
    return bench.ChildRun(wall_s=stamps[-1] + 1.0, block_s=stamps[-1], stamps_ns=[round(t * 1e9) for t in stamps])


def test_robust_loop_change_counts_tracing_in_full_and_ignores_a_host_burst(bench):
    """The baseline's loops take 0.1 s but for two slowed by the host (0.3 s); the traced run's untraced loops
    take 0.101 s, and the 5 loops inside its traced period 0.12 s."""
    base = _run(bench, [0.1] * 48 + [0.3, 0.3])
    loops = [0.101] * 20 + [0.12] * 5 + [0.101] * 25
    run = _run(bench, loops)
    start = sum(loops[:20])
    traced = [(start, start + 5 * 0.12)]
    got = bench.robust_loop_change(base, run, traced)
    # untraced at 0.101 (median), the 5 traced at 0.12 (mean) in their share of 5 of 50 loops
    want = (45 / 50 * 0.101 + 5 / 50 * 0.12) / 0.1 - 1.0
    assert got == pytest.approx(want, rel=1e-6)
    # the block's own change is dominated by the bursts: far from it
    assert abs((sum(loops) / sum([0.1] * 48 + [0.3, 0.3]) - 1.0) - want) > 0.02
    # a loop that a traced period only straddles counts at the mean with the traced ones (counted with the free
    # loops at their median it would give (46 · 0.101 + 4 · 0.12) / 50 / 0.1 − 1, lower)
    part = bench.robust_loop_change(base, run, [(start + 0.06, start + 5 * 0.12)])
    assert part == pytest.approx(want, rel=1e-6) and part > (46 * 0.101 + 4 * 0.12) / 50 / 0.1 - 1.0
    # no loops: nothing to say
    empty = bench.ChildRun(wall_s=1.0, block_s=0.5, stamps_ns=[0])
    assert bench.robust_loop_change(empty, run, traced) is None and bench.robust_loop_change(base, empty, []) is None


def test_a_pass_needs_the_interval_within_the_limit(bench):
    fig = bench.Figure("auto", {"robust loop": 0.01}, judged=("robust loop",), interval=(-0.005, 0.025))
    assert fig.verdict == "PASS" and fig.passed
    wide = bench.Figure("auto", {"robust loop": 0.01}, judged=("robust loop",), interval=(-0.04, 0.05))
    assert wide.verdict == "UNRESOLVED" and not wide.passed
    assert bench.Figure("auto", {"robust loop": 0.05}, interval=(0.04, 0.06)).verdict == "FAIL"
    # the interval decides, not the centre: a centre above 3 % whose interval spans it is unresolved
    assert bench.Figure("auto", {"robust loop": 0.0387}, interval=(-0.25, 0.086)).verdict == "UNRESOLVED"
    assert bench.Figure("auto", {"robust loop": -0.05}, interval=(-0.08, -0.031)).verdict == "NOISE"
    assert bench.Figure("auto", {"robust loop": -0.039}, interval=(-0.10, 0.063)).verdict == "UNRESOLVED"
    assert bench.Figure("auto", {"block": 0.01}).verdict == "PASS"  # without an interval: the centre alone
    assert bench.Figure("auto", {"block": 0.04}).verdict == "FAIL"


def test_the_worst_verdict_of_a_mode(bench):
    assert bench._worst(["PASS", "UNRESOLVED", "NOISE"]) == "UNRESOLVED"
    assert bench._worst(["NOISE", "FAIL"]) == "FAIL" and bench._worst(["PASS"]) == "PASS"
    s = bench.Summary()
    s.add("auto", bench.Figure("auto", {"robust loop": 0.01}, judged=("robust loop",), interval=(-0.04, 0.05)))
    assert s.verdicts == {"auto": ["UNRESOLVED"]} and s.failed

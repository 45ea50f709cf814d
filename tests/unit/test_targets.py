"""The characterization suite's acceptance rules: each passes exactly at its bound and fails just past it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from archline.characterize.targets import TargetCheck, evaluate_targets

EPS = 1e-6


def _check(checks: list[TargetCheck], prefix: str) -> TargetCheck:
    (c,) = [c for c in checks if c.target.startswith(prefix)]
    return c


def _arith(name: str, frac: float) -> dict[str, Any]:
    return {
        "name": name,
        "status": "ok",
        "frac_of_spec": frac,
        "ops_per_clk_per_sm": 128 * frac,
        "spec_ops_per_clk_per_sm": 128.0,
    }


def _evaluate(rows: list[Mapping[str, Any]], **kw: Any) -> list[TargetCheck]:
    args: dict[str, Any] = {"copy_bytes_per_s": None, "suite_seconds": None, "quick": False}
    args.update(kw)
    return evaluate_targets(rows, **args)


@pytest.mark.parametrize(
    ("name", "prefix", "bound"),
    [
        ("arith.fp32.fma", "FP32 FMA", 0.95),
        ("arith.fp64.fma", "FP64 FMA", 0.95),
        ("arith.int32.add", "INT32 add", 0.90),
        ("arith.sfu.sin", "SFU", 0.90),
    ],
)
def test_fraction_of_spec_passes_at_its_bound_and_fails_just_below(name: str, prefix: str, bound: float) -> None:
    at = _check(_evaluate([_arith(name, bound)]), prefix)
    below = _check(_evaluate([_arith(name, bound - EPS)]), prefix)
    assert at.passed is True and at.measured == pytest.approx(bound * 100)
    assert below.passed is False and "short by" in below.detail
    assert _check(_evaluate([]), prefix).passed is None


def test_a_row_that_failed_does_not_count() -> None:
    row = {**_arith("arith.fp32.fma", 1.0), "status": "failed"}
    assert _check(_evaluate([row]), "FP32 FMA").passed is None


def test_dram_streaming_is_judged_against_the_copy_bandwidth() -> None:
    row = {"name": "mem.dram.read", "status": "ok", "bytes_per_s": 0.9e12}
    assert _check(_evaluate([row], copy_bytes_per_s=1e12), "DRAM").passed is True
    assert _check(_evaluate([row], copy_bytes_per_s=1e12 * (1 + 1e-4)), "DRAM").passed is False
    assert _check(_evaluate([row]), "DRAM").passed is None


def test_shared_memory_bound_is_ninety_percent_of_the_peak() -> None:
    def rows(v: float) -> list[Mapping[str, Any]]:
        return [{"name": "mem.shared.read", "status": "ok", "bytes_per_clk_per_sm": v}]

    assert _check(_evaluate(rows(0.9 * 128)), "shared memory").passed is True
    assert _check(_evaluate(rows(0.9 * 128 - EPS)), "shared memory").passed is False


def _sweep(ways_to_time: Mapping[int, float]) -> list[Mapping[str, Any]]:
    return [
        {"name": f"mem.shared.conflict.{n:02d}", "status": "ok", "sweep_var": "conflict_ways", "sweep_value": n,
         "time_s": t, "ops": 1.0}
        for n, t in ways_to_time.items()
    ]  # fmt: skip


def test_bank_conflicts_pass_within_ten_percent_of_n_times() -> None:
    ok = _check(_evaluate(_sweep({1: 1.0, 2: 2.0 * 1.0999, 32: 32.0 * 0.9001})), "n-way")
    bad = _check(_evaluate(_sweep({1: 1.0, 2: 2.0 * 1.1001, 32: 32.0})), "n-way")
    assert ok.passed is True
    assert bad.passed is False and "n = 2" in bad.detail
    assert _check(_evaluate(_sweep({2: 2.0})), "n-way").passed is None


@pytest.mark.parametrize(("quick", "limit_s"), [(True, 120.0), (False, 600.0)])
def test_suite_wall_time_limit(quick: bool, limit_s: float) -> None:
    assert _check(_evaluate([], quick=quick, suite_seconds=limit_s), "--quick" if quick else "full").passed is True
    over = _check(_evaluate([], quick=quick, suite_seconds=limit_s + EPS), "--quick" if quick else "full")
    assert over.passed is False


def test_repeatability_bounds_are_two_sided_in_sign() -> None:
    def reps(dt: float, de: float) -> list[Mapping[str, Any]]:
        return [{"name": "arith.fp32.fma", "time_diff_pct": dt, "energy_diff_pct": de}]

    at = _evaluate([], repeats=reps(-2.0, 3.0))
    assert _check(at, "same benchmark twice: time").passed is True
    assert _check(at, "same benchmark twice: energy").passed is True
    past = _evaluate([], repeats=reps(-2.0 - EPS, -3.0 - EPS))
    assert _check(past, "same benchmark twice: time").passed is False
    assert _check(past, "same benchmark twice: energy").passed is False

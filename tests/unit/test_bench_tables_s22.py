"""Session 22's transformer runs at batch 16 and 128 (plan_s22b on H100 GPU-e7ad0b8d, plan_s22c's GPU 0 on H100
GPU-6e0448a4; no rule changed) print the four docs/data/*_s22.txt tables line for line with session 18-21's commands,
and the figures docs/attribution.md "Session 22" reads from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.bench import load_bench, session_table

ROOT = Path(__file__).resolve().parents[2]
S22 = ROOT / "results" / "h100" / "attribution-s22"
RUNS = [S22 / "batch16-GPU-e7ad0b8d", S22 / "batch128-GPU-e7ad0b8d", S22 / "batch128-GPU-6e0448a4"]


def _table(name: str, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    assert load_bench(name).main([str(r) for r in RUNS]) == 0
    return session_table(name, RUNS, "s22", capsys.readouterr().out)


def test_design_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("design_table", capsys)
    # within ±15 %: 39.8 % at batch 16, 44.4 and 45.0 % at batch 128; median half-widths 17.7, 16.4, 16.0 %
    assert [(r[0], r[-2], r[-1]) for r in rows] == [
        ("GPU-e7ad0b8d", "39.8", "17.7"),
        ("GPU-e7ad0b8d", "44.4", "16.4"),
        ("GPU-6e0448a4", "45.0", "16.0"),
    ]


def test_top10_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("top10_table", capsys)
    # every top-ten row within 15 % of replay's isolated energy on all three runs
    assert [r[-3:] for r in rows] == [["10", "10", "9"], ["10", "10", "10"], ["10", "10", "10"]]


def test_time_parts(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("time_parts", capsys)
    # the priors' time part by session 20's rule: 3.3 % at batch 16, 0.8 and 1.0 % at batch 128
    assert [(r[2], r[-2]) for r in rows] == [("GPU-e7ad0b8d", "3.3"), ("GPU-e7ad0b8d", "0.8"), ("GPU-6e0448a4", "1.0")]


def test_design_power(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("design_power", capsys)
    # rho_f 2.8-3.4 %; 80 % would need rho_f <= 1.7 % (batch 16) and 2.5 % (batch 128 on GPU-6e0448a4)
    assert [(r[2], r[5], r[-2]) for r in rows] == [
        ("GPU-e7ad0b8d", "2.8", "1.7"), ("GPU-e7ad0b8d", "3.4", "none"), ("GPU-6e0448a4", "3.3", "2.5")]  # fmt: skip

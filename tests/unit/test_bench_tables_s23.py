"""Session 23's transformer runs on H200s (plan_s23b's GPU 0 at batch 16 on GPU-ec88f4b4, plan_s23a's GPU 0 at batch
128 on GPU-8ef7caf0; no attribution rule changed) print the four docs/data/*_s23.txt tables line for line with
session 18-22's commands, and the figures docs/attribution.md "Session 23" reads from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.bench import load_bench, session_table

ROOT = Path(__file__).resolve().parents[2]
S23 = ROOT / "results" / "h200" / "attribution-s23"
RUNS = [S23 / "batch16-GPU-ec88f4b4", S23 / "batch128-GPU-8ef7caf0"]


def _table(name: str, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    assert load_bench(name).main([str(r) for r in RUNS]) == 0
    return session_table(name, RUNS, "s23", capsys.readouterr().out)


def test_design_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("design_table", capsys)
    # within ±15 %: 35.8 % at batch 16, 0.0 % at batch 128; median half-widths 18.9 and 25.9 %; 2 and 13 non-finite
    assert [(r[0], r[4], r[-2], r[-1]) for r in rows] == [
        ("GPU-ec88f4b4", "2", "35.8", "18.9"),
        ("GPU-8ef7caf0", "13", "0.0", "25.9"),
    ]


def test_top10_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("top10_table", capsys)
    # within 15 % of replay's isolated energy: 7 of 10 at batch 16, 9 of 10 at batch 128; in their intervals 8 and 10
    assert [r[-3:] for r in rows] == [["10", "7", "8"], ["10", "9", "10"]]


def test_time_parts(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("time_parts", capsys)
    # the priors' time part by session 20's rule: 2.8 % at batch 16, 1.0 % at batch 128
    assert [(r[2], r[-2]) for r in rows] == [("GPU-ec88f4b4", "2.8"), ("GPU-8ef7caf0", "1.0")]


def test_design_power(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _table("design_power", capsys)
    # rho_f 3.6 % at batch 16, 5.7 % at batch 128 (the prior at least sqrt(2) x 5.7 = 8.0 % uncertain, 1 sigma)
    assert [(r[2], r[5], r[6]) for r in rows] == [("GPU-ec88f4b4", "3.6", "35.8"), ("GPU-8ef7caf0", "5.7", "0.0")]

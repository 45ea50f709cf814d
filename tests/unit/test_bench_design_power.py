"""benchmarks/design_power.py: the power analysis of the shipped designs prints docs/data/design_power_s20.txt line for
line; its in-step σ is replay_context.fold_sigma's, reproduces each run at its own design, and a run set without a
summary is a one-line exit 2."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest

from archline.measurement.attribute.replay_context import fold_sigma
from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]
RUN_SETS = (
    sorted((ROOT / "results" / "h100").glob("attribution-s1[4-9]/*"))
    + sorted((ROOT / "results" / "h100").glob("attribution-s20/*"))
    + sorted((ROOT / "results" / "h200").glob("attribution-s1[4-6]/*"))
)


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("design_power")


def test_the_shipped_designs_print_the_docs_table(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert mod.main([str(r) for r in RUN_SETS]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_power_s20.txt").read_text().splitlines()
    rows = [line.split() for line in got[1:] if "skipped" not in line]
    # at its own design the model gives back each transformer run's share: by construction (each row's own ratio of
    # half-width to prior σ), a check of the bookkeeping (which rows, which energy, which denominator)
    for cells in rows:
        if cells[3] == "transformer":
            assert cells[7] == cells[6], cells
    # the docs' reading: with the time part no shipped run reaches 80 % even at ρ_f = 0 and 1280 configurations
    assert all(cells[-2] == "none" for cells in rows)
    s20 = next(c for c in rows if c[2] == "GPU-c4fd4b97")
    assert s20[4:7] == ["320", "3.9", "26.2"] and float(s20[-3]) == 48.6 and s20[-1] == "2.9"


def test_the_in_step_sigma_is_the_packages_fold(mod: ModuleType) -> None:
    row = mod.Row(energy_j=1.0, e=0.2, se=0.004, time=0.0, scale=0.0, k=1.0)
    m2, rho = 0.01, 0.04
    # at p = ½ and the measured size: the design's own context σ
    assert mod.in_step_rel(row, m2, 80, 80, 0.5, rho) == pytest.approx(fold_sigma(0.2, 0.004, rho, m2) / 0.2)
    # at another p: the fold at p with the ρ the same interactions leave there, √(p (1 − p)²) r, r² = 8 ρ²
    for p in (0.3, 0.7, 0.85):
        rho_p = math.sqrt(p * (1 - p) ** 2 * 8 * rho**2)
        se_p = 0.004 * math.sqrt(0.25 / (p * (1 - p)))
        assert mod.in_step_rel(row, m2, 80, 80, p, rho) == pytest.approx(fold_sigma(0.2, se_p, rho_p, m2, p) / 0.2)
    # four times the configurations halve se
    bare = mod.Row(energy_j=1.0, e=0.2, se=0.004, time=0.0, scale=0.0, k=1.0)
    assert mod.in_step_rel(bare, m2, 80, 320, 0.5, 0.0) == pytest.approx(0.5 * 0.004 / 0.2)


def test_share_counts_the_rows_within_15_percent(mod: ModuleType) -> None:
    # 1.96 × 7 % = 13.7 % in, 1.96 × 8 % = 15.7 % out; the time part adds in quadrature
    inside = mod.Row(energy_j=3.0, e=1.0, se=0.07, time=0.0, scale=0.0, k=1.0)
    outside = mod.Row(energy_j=1.0, e=1.0, se=0.08, time=0.0, scale=0.0, k=1.0)
    timed = mod.Row(energy_j=2.0, e=1.0, se=0.05, time=0.06, scale=0.0, k=1.0)
    rows = [inside, outside, timed]
    assert mod.share(rows, 10.0, 1.0, 80, 80, 0.5, 0.0) == pytest.approx(30.0)
    assert mod.share(rows, 10.0, 1.0, 80, 80, 0.5, 0.0, time=False) == pytest.approx(50.0)
    # k < 1 (the windows took some width off) lets the outside row in
    assert mod.share([mod.Row(1.0, 1.0, 0.08, 0.0, 0.0, 0.9)], 1.0, 1.0, 80, 80, 0.5, 0.0) == pytest.approx(100.0)
    # a neighbour dependence widens every row
    assert mod.share(rows, 10.0, 1.0, 80, 80, 0.5, 0.05) == 0.0


def test_a_run_set_without_a_summary_is_one_line_exit_2(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mod.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no readable summary.json" in err[0]

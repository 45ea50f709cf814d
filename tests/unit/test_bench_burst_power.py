"""benchmarks/burst_power.py's arithmetic: the GEMM's board power from two phases, and a verdict against the
power limit × 1.05 that is two-sided (above, below, or unresolved within 2 σ)."""

from __future__ import annotations

import math
from types import ModuleType

import pytest

from tests.helpers.bench import load_bench


def _load() -> ModuleType:
    return load_bench("burst_power")


def test_gemm_power_is_the_energy_difference_over_the_time_difference() -> None:
    b = _load()
    a = {"j_per_replay": 2.0, "s_per_replay": 0.010}
    gaps = {"j_per_replay": 1.2, "s_per_replay": 0.009}
    assert b.gemm_power(a, gaps) == pytest.approx(0.8 / 0.001)
    assert b.gemm_power(a, None) == pytest.approx(200.0)
    assert math.isnan(b.gemm_power(a, {"j_per_replay": 1.0, "s_per_replay": 0.011}))


@pytest.mark.parametrize(
    ("powers", "verdict"),
    [
        ([900.0, 910.0, 905.0], "above"),
        ([500.0, 520.0, 510.0], "below"),
        ([700.0, 780.0, 740.0], "unresolved"),  # 735 W bound inside mean ± 2 σ
        ([900.0], "unresolved"),  # one round has no spread
    ],
)
def test_the_verdict_is_two_sided(powers: list[float], verdict: str) -> None:
    s = _load().summarize([{"gemm_w": p} for p in powers], 700.0)
    assert s["verdict"] == verdict
    assert s["gemm_w"] == pytest.approx(sum(powers) / len(powers))


def test_no_limit_leaves_it_unresolved() -> None:
    assert _load().summarize([{"gemm_w": 900.0}, {"gemm_w": 905.0}], math.nan)["verdict"] == "unresolved"


@pytest.mark.parametrize(("gpu", "boards"), [("h100", 5), ("h200", 1)])
def test_the_shipped_measurements_print_the_table_in_the_docs(
    gpu: str, boards: int, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "results" / gpu / "bench" / "burst-power").glob("burst_power-GPU-*.json"))
    assert len(files) == boards
    assert load_bench("burst_table").main([str(f) for f in files]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (root / "docs" / "data" / f"burst_table_{gpu}.txt").read_text().splitlines()


def test_a_file_that_is_no_measurement_is_one_line_exit_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.json"
    f.write_text('{"rows": 3}')
    assert load_bench("burst_table").main([str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(f) in err[0]

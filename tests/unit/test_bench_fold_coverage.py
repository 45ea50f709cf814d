"""benchmarks/fold_coverage.py prints docs/data/fold_coverage.txt; the fold holds the truth about as often as stated."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_figures_are_the_benchmarks_and_the_fold_is_calibrated(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_bench("fold_coverage").main([]) == 0
    out = capsys.readouterr().out
    assert out == (ROOT / "docs" / "data" / "fold_coverage.txt").read_text()
    m = re.search(r"RMS z ([\d.]+); within 1 σ (\d+) %, within 2 σ (\d+) %", out)
    assert m is not None
    rms, c1, c2 = float(m.group(1)), int(m.group(2)), int(m.group(3))
    assert 0.6 <= rms <= 1.2 and 60 <= c1 <= 90 and 92 <= c2 <= 100  # neither loose nor tight

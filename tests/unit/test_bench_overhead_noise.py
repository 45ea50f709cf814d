"""benchmarks/overhead_noise.py: loop noise inside and between processes, the pairs ±3 % needs; bad input."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


def _load():
    return load_bench("overhead_noise")


def test_noise_inside_and_between_processes_and_the_pairs_needed(tmp_path: Path, capsys) -> None:
    # three processes: loops alternate ±10 % around medians 1.0, 1.2 and 0.8
    runs = [{"rep": i, "loops_s": [m * 0.9, m * 1.1] * 10, "traced": []} for i, m in enumerate((1.0, 1.2, 0.8))]
    (tmp_path / "s.json").write_text(json.dumps({"loops": {"w": {"none": runs, "auto": runs[:1]}}}))
    mod = _load()
    (row,) = mod.rows(json.loads((tmp_path / "s.json").read_text()))  # one process of auto: no spread to give
    work, mode, n, within, between, need = row
    assert (work, mode, n) == ("w", "none", 3)
    assert within == pytest.approx(statistics.stdev([0.9, 1.1] * 10), rel=1e-9)
    want = statistics.stdev([1.0, 1.2, 0.8]) / 1.0
    assert between == pytest.approx(want, rel=1e-9)
    assert need == math.ceil((1.645 * math.sqrt(2) * want / 0.03) ** 2) and need > 100
    assert mod.main([str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[1].split()[1:4] == ["w", "none", "3"]


def test_the_shipped_summaries_print_the_docs_table(capsys) -> None:
    runs = sorted((ROOT / "results" / "h100" / "bench" / "overhead-auto-s12").glob("*.json"))
    assert _load().main([str(p) for p in runs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "overhead_noise_s12.txt").read_text().splitlines()


def test_a_summary_without_loops_or_unreadable_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"figures": {}}))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    mod = _load()
    for path, why in ((old, "no 'loops'"), (bad, str(bad))):
        assert mod.main([str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and why in err[0]

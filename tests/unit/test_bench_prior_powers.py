"""benchmarks/prior_powers.py: on the shipped session-10 calibration runs it counts as many priors over the limit
as each run's attribution capped (its note); bad input is one line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "results" / "h100" / "attribution-s10" / "calibration-GPU-9abc3476"


@pytest.mark.parametrize("workload", ["transformer", "resnet50"])
def test_the_count_over_the_limit_is_the_runs_own(workload: str, capsys: pytest.CaptureFixture[str]) -> None:
    run, rep = CAL / f"{workload}-run", CAL / f"{workload}-replay"
    assert load_bench("prior_powers").main([str(run), str(rep), "--top", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 5 + 1
    over, total = map(int, re.match(r"(\d+) of (\d+) priors over", out[-1]).groups())  # type: ignore[union-attr]
    notes = json.loads((run / "attribution.json").read_text())["notes"]
    noted = next(int(n.split()[0]) for n in notes if "impossible in this run" in n)
    assert over == noted and 0 < over < total
    assert sum(1 for line in out[1:-1] if " over " in line) <= over


def test_a_run_without_kernels_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_bench("prior_powers").main([str(tmp_path), str(CAL / "transformer-replay")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kernels.csv" in err[0]

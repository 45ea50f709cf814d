"""benchmarks/design_ceiling.py: every shipped run set's ceiling (session 31) prints the table of
docs/data/design_power_all_s31.txt line for line; its columns agree with design_power's and move the way taking a
part of a row's width out must; the counts line counts; a run set without a summary is a one-line exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "data" / "design_power_all_s31.txt"


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("design_ceiling")


def _sets() -> list[Path]:
    """The run sets scripts/design_ceiling_all.sh takes: every one with a summary that design_power can read."""
    power = load_bench("design_power")
    out = []
    for d in sorted((ROOT / "results").glob("h*/attribution-s*/*")):
        if not (d / "summary.json").is_file():
            continue
        if power.main([str(d)]) == 0:
            out.append(d)
    return out


def test_the_shipped_sets_print_the_docs_table(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    sets = _sets()
    capsys.readouterr()
    assert mod.main([str(s) for s in sets]) == 0
    got = capsys.readouterr().out.splitlines()
    doc = DOC.read_text().splitlines()
    assert got == doc[doc.index("== design_ceiling.py") + 1 :]
    rows = [line.split() for line in got[1:-1] if "skipped" not in line]
    assert len(rows) == 47
    # design_power's table above it walks the same sets in the same order
    power = [x.split() for x in doc[2 : doc.index("== design_ceiling.py")] if "skipped" not in x]
    assert len(power) == len(rows)
    for c, pw in zip(rows, power, strict=True):
        own, own_nt, long_nt, rho0 = map(float, c[7:11])
        # own is design_power's model% at the run's own design: the same bookkeeping
        assert pw[:7] == c[:7] and float(pw[7]) == own, c
        # taking the time part out, then the design's noise, then the dependence, can only widen the share
        assert own <= own_nt <= long_nt and own <= rho0, c
    # the docs' reading: no run reaches 80 % at its own design, not even without the call-time part or at ρ_f = 0;
    # three transformer runs would at 1280 configurations without the call-time part; no CNN anywhere
    assert got[-1] == (
        "reach 80 %, of 47 workloads scored (14 CNN): "
        "own 0 (0 CNN), own-nt 0 (0 CNN), 1280-nt 3 (0 CNN), rho0 0 (0 CNN)"
    )


def test_a_run_set_without_a_summary_is_one_line(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "design_ceiling.py"), str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "summary.json" in p.stderr

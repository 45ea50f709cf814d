"""benchmarks/design_replicates.py: τ pooled from pairs of one configuration measured twice is recovered on synthetic
pairs; the shipped transformer designs print docs/data/design_replicates_s14.txt; a directory without a design is
one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("tau", [0.0, 0.01, 0.02])
def test_pooled_tau_is_recovered_from_synthetic_pairs(tau: float) -> None:
    rng = np.random.default_rng(int(tau * 1000))
    pairs = []
    for _ in range(200):
        e = float(rng.uniform(2.0, 3.0))
        s = 0.003 * e
        pairs.append(
            (e * (1 + tau * rng.normal()) + s * rng.normal(), s, e * (1 + tau * rng.normal()) + s * rng.normal(), s)
        )
    got, up = load_bench("design_replicates").pooled_tau(pairs)
    assert abs(got - tau) <= 0.0025 and up >= got


def test_the_shipped_designs_print_the_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = [
        *sorted(ROOT.glob("results/h100/attribution-s1[0-3]/*/transformer-replay")),
        ROOT / "results/h100/attribution-s9/halves-primed-keep-buffers-GPU-f641ab6c/transformer-replay",
        *sorted(ROOT.glob("results/h200/attribution-s13/*/transformer-replay")),
    ]
    assert load_bench("design_replicates").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_replicates_s14.txt").read_text().splitlines()
    # with τ the fold is smaller on every design
    for line in got[1:-1]:
        cells = line.split()
        assert float(cells[4].rstrip("%")) < float(cells[3].rstrip("%"))


def test_a_directory_without_a_design_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "replay.json").write_text('{"design": null}')
    assert load_bench("design_replicates").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0]


def test_the_held_out_designs_print_their_own_tau(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = [*sorted(ROOT.glob("results/h100/attribution-s14/*/*-replay")),
            *sorted(ROOT.glob("results/h200/attribution-s14/*/*-replay"))]  # fmt: skip
    assert len(dirs) == 5 and load_bench("design_replicates").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_replicates_s14_heldout.txt").read_text().splitlines()
    assert all(line.split()[-1] != "-" for line in got[1:-1])  # each has replicates: its own τ and ρ


def test_the_session_15_designs_print_their_own_tau(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = sorted(ROOT.glob("results/h100/attribution-s15/*/*-replay"))
    assert len(dirs) == 4 and load_bench("design_replicates").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_replicates_s15.txt").read_text().splitlines()


def test_the_session_16_designs_print_their_own_tau(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = sorted(ROOT.glob("results/h200/attribution-s16/*/*-replay"))
    assert len(dirs) == 2 and load_bench("design_replicates").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_replicates_s16.txt").read_text().splitlines()

"""benchmarks/anchor_check.py: anchoring the in-step energies on the isolated replays fails where kernels interact
in pairs (session 15's finding), and the table it ships is what it prints."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.bench import ROOT, load_bench


def test_the_anchor_undercovers_pairwise_interactions_that_the_design_covers() -> None:
    mod = load_bench("anchor_check")
    for amp, anchored_max in ((0.1, 0.7), (0.05, 0.7)):
        runs = [mod.simulate(s, amp) for s in range(12)]
        hits = [h for got, _ in runs for h in got]
        assert np.mean([h[0] for h in hits]) >= 0.9  # the design's fold covers
        assert np.mean([h[1] for h in hits]) <= anchored_max  # the anchor does not
        assert 0.4 <= np.mean([z for _, z in runs]) <= 1.2  # while its own check looks fine
    runs = [mod.simulate(s, 0.0) for s in range(12)]  # without interactions both cover
    assert min(np.mean([h[k] for got, _ in runs for h in got]) for k in (0, 1)) >= 0.9


def test_the_shipped_table_is_the_benchmarks_output(capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_bench("anchor_check")
    dirs = sorted(ROOT.glob("results/*/attribution-s1[34]/*/*-replay"))
    assert len(dirs) == 9
    assert mod.main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs/data/anchor_check_s15.txt").read_text().splitlines()  # the simulation's half too
    assert "transformer" in "".join(got) and "resnet50" in "".join(got)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_bench("anchor_check")
    assert mod.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("anchor_check:")

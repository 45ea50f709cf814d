"""benchmarks/design_adjacency.py: on a synthetic design whose neighbouring groups interact the neighbour pairs
explain the misfit and random pairs do not; the shipped session-14 designs print docs/data/design_adjacency_s14.txt;
a directory without factor_nodes is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


def test_neighbour_interactions_are_found_where_they_are() -> None:
    mod = load_bench("design_adjacency")
    rng = np.random.default_rng(3)
    f = 20
    nodes = [[g, g + f] for g in range(f)]  # capture order 0..39: factor g's nodes at g and g + 20
    pairs = mod.neighbour_pairs(nodes)
    assert (0, 1) in pairs and (0, 19) in pairs and len(pairs) == f  # a ring of neighbours (19 → 0 at 19/20)
    e = rng.uniform(0.05, 0.3, f)
    x = np.vstack([np.ones(f), np.zeros(f), (rng.random((98, f)) < 0.5).astype(float)])
    y = 0.05 + x @ e + sum(0.15 * e[g] * x[:, g] * x[:, h] * rng.choice([-1, 1]) for g, h in pairs)
    s = np.full(len(y), 1e-3)
    y = y + rng.normal(0.0, 1e-3, len(y))
    r = mod.compare(x, y, s, nodes)
    assert r["neighbours"] < 0.5 * r["additive"] and r["random"] > 0.8 * r["additive"]


def test_the_shipped_designs_print_the_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = [*sorted(ROOT.glob("results/h100/attribution-s14/*/*-replay")),
            *sorted(ROOT.glob("results/h200/attribution-s14/*/*-replay"))]  # fmt: skip
    assert load_bench("design_adjacency").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_adjacency_s14.txt").read_text().splitlines()


def test_a_design_without_factor_nodes_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "replay.json").write_text(json.dumps({"design": {"configs": [{"on": "11", "energy_j": 1.0}]}}))
    assert load_bench("design_adjacency").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "factor_nodes" in err[0]


def test_the_session_15_designs_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = sorted(ROOT.glob("results/h100/attribution-s15/*/*-replay"))
    assert load_bench("design_adjacency").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_adjacency_s15.txt").read_text().splitlines()


def test_the_session_16_designs_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = sorted(ROOT.glob("results/h200/attribution-s16/*/*-replay"))
    assert len(dirs) == 2 and load_bench("design_adjacency").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_adjacency_s16.txt").read_text().splitlines()

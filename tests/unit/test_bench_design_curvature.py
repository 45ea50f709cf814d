"""benchmarks/design_curvature.py: a known common curvature in the enabled load is recovered from a synthetic design;
an additive one leaves nothing to remove; the shipped transformer designs print docs/data/design_curvature_s13.txt;
a directory without a design is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


def _design(gamma: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    e = rng.uniform(0.01, 0.3, 30)
    x = np.vstack([np.ones(30), np.zeros(30), (rng.random((98, 30)) < 0.5).astype(float)])
    load = x @ e
    s = np.full(len(load), 1e-3)
    y = 0.05 + load + gamma * load**2 + rng.normal(0.0, 1e-3, len(load))
    return x, y, s, 0.001 + 0.002 * x.sum(axis=1)


def test_a_known_curvature_is_recovered_and_explains_the_misfit() -> None:
    mod = load_bench("design_curvature")
    r = mod.curvature(*_design(gamma=-0.01))
    assert r["gamma"] == pytest.approx(-0.01, rel=0.05)
    assert r["removed"] > 0.95 and r["chi2_load"] < 1.5 * r["dof"]


def test_an_additive_design_leaves_nothing_for_the_curvature() -> None:
    r = load_bench("design_curvature").curvature(*_design(gamma=0.0))
    assert abs(r["gamma_share"]) < 0.005 and r["removed"] < 0.1
    assert r["chi2_additive"] < 1.5 * r["dof"]


def test_the_shipped_designs_print_the_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    dirs = [
        *sorted((ROOT / "results" / "h100" / "attribution-s12").glob("top-by-energy-GPU-*/transformer-replay")),
        ROOT / "results" / "h100" / "attribution-s13" / "top-by-energy-GPU-d61dff47" / "transformer-replay",
        ROOT / "results" / "h200" / "attribution-s13" / "top-by-energy-GPU-339faabf" / "transformer-replay",
        ROOT / "results" / "h100" / "attribution-s13" / "top-by-energy-GPU-d61dff47" / "resnet50-replay",
    ]
    assert load_bench("design_curvature").main([str(d) for d in dirs]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "design_curvature_s13.txt").read_text().splitlines()
    assert got[-1].split()[3] == "-"  # ResNet-50: fewer finite configurations than parameters


def test_a_directory_without_a_design_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "replay.json").write_text('{"design": null}')
    assert load_bench("design_curvature").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0]

"""Session 23's exploration of how a design's neighbour dependence scales with a group's energy: the α plumbing
(replay_design.interaction_load, fit_design(alpha), replay_context.fold_sigma / fold_typical, the prior's reading of a
design's rho_alpha), benchmarks/design_alpha.py's calibration table, and scripts/alpha_redo.sh's table against its
shipped logs (docs/attribution.md "Session 23")."""

from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from archline.measurement.attribute.replay_context import fold_sigma, fold_typical
from archline.measurement.attribute.replay_design import draw_design, fit_design, interaction_load
from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


def test_alpha_2_is_archlines_model_and_other_alphas_scale_by_the_rms_energy() -> None:
    x = np.array([[1, 1, 1], [1, 0, 1], [0, 1, 0]], np.float64)
    e = np.array([0.1, 0.4, -0.2])
    assert interaction_load(x, e, 2.0) == pytest.approx(x @ e**2)
    rms = math.sqrt(float(np.mean(e**2)))
    assert interaction_load(x, e, 1.0) == pytest.approx(x @ np.abs(e) * rms)
    # a group of the RMS energy moves by the same relative ρ whatever α
    assert interaction_load(np.array([[1.0]]), np.array([rms]), 1.5)[0] == pytest.approx(rms**2)
    # the fold: α = 2 is the session-12 formula; at α, e² becomes |e|^α e_rms^(2-α)
    typ2 = float(np.mean(e**2))
    assert fold_sigma(0.4, 0.01, 0.05, typ2) == pytest.approx(math.sqrt(0.01**2 + 0.05**2 * 2 * (0.16 + typ2)))
    typ, e_rms = fold_typical(list(e), 1.5)
    assert e_rms == pytest.approx(rms) and typ == pytest.approx(float(np.mean(np.abs(e) ** 1.5)))
    got = fold_sigma(0.4, 0.0, 0.05, typ, 0.5, 1.5, e_rms)
    assert got == pytest.approx(0.05 * math.sqrt(rms**0.5 * (0.4**1.5 * 2 + 2 * typ)))
    assert fold_typical([], 1.5) == (pytest.approx(math.nan, nan_ok=True), pytest.approx(math.nan, nan_ok=True))


def test_a_fit_at_another_alpha_records_it_and_finds_the_dependence_it_was_given() -> None:
    """Configurations whose residuals carry a dependence scaling as |e|^(1/2) (α = 1): the fit at α = 1 finds its
    ρ and records rho_alpha; α = 2 leaves no key (nothing written before changes). One design of 80 configurations
    tells the two scalings apart weakly (as the shipped ones do, benchmarks/design_alpha.py); ten of them summed,
    clearly: their likelihood at α = 1 is above α = 2's by 9.3."""
    from archline.measurement.attribute.replay_design import rho_profile

    gains, rhos = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        e = rng.uniform(0.01, 1.0, 12)
        x = draw_design(12, 80, rng)
        y = 0.3 + x @ e + rng.normal(0.0, 1.0, len(x)) * np.sqrt(1e-6 + 0.04**2 * interaction_load(x, e, 1.0))
        s = np.full(len(x), 1e-3)
        f1 = fit_design(x, list(y), list(s), alpha=1.0)
        f2 = fit_design(x, list(y), list(s))
        assert f1.summary()["rho_alpha"] == 1.0 and "rho_alpha" not in f2.summary()
        rhos.append(f1.rho)
        ll1 = float(np.max(rho_profile(x, y, s, np.asarray(f1.energy_j), alpha=1.0)))
        gains.append(ll1 - float(np.max(rho_profile(x, y, s, np.asarray(f2.energy_j)))))
    assert 0.03 < float(np.mean(rhos)) < 0.05  # 0.04 given
    assert sum(gains) > 5.0 and sum(g > 0 for g in gains) >= 6


def test_at_alpha_2_the_fold_and_the_load_are_bit_for_bit_archlines() -> None:
    """α = 2 everywhere by default: the session-12 fold and Σ e² exactly, not approximately (nothing shipped moves)."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        e, se, rho, typ, p = (float(v) for v in rng.uniform(0.001, 1.0, 5))
        p = min(max(p, 0.05), 0.95)
        assert fold_sigma(e, se, rho, typ, p) == math.sqrt(se**2 + rho**2 * (e**2 / p + p * typ / (1.0 - p) ** 2))
    x = draw_design(9, 30, rng).astype(np.float64)
    e = rng.uniform(0.01, 1.0, 9)
    assert np.array_equal(interaction_load(x, e), np.square(x) @ (e**2))


def test_a_refold_of_a_refold_takes_the_new_alpha_only() -> None:
    """Refolding at α = 1.5, then that copy at α = 2: the second drops rho_alpha and gives ρ̂, the fold's text and
    every σ of a refold at α = 2 from the original."""
    import csv
    import json

    mod = load_bench("refold_replay")
    d = ROOT / "results/h200/attribution-s23/batch16-GPU-ec88f4b4/transformer-replay"
    design = json.loads((d / "replay.json").read_text())["design"]
    with (d / "replay.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    s15, r15, _ = mod.refold(design, rows, alpha=1.5)
    assert s15["rho_alpha"] == 1.5 and "a = 1.5" in s15["fold"] and s15["rho"] > design["rho"]
    again, r2, _ = mod.refold(s15, r15, alpha=2.0)
    direct, d2, _ = mod.refold(design, rows)
    assert "rho_alpha" not in again and again["rho"] == direct["rho"] and again["fold"] == direct["fold"]
    assert [r.get("context_sigma_j") for r in r2] == [r.get("context_sigma_j") for r in d2]


def test_the_calibration_table_is_printed_line_for_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/data/design_alpha_cal_s23.txt: its first two designs redone here (the whole table takes ~25 s); the sum
    over the 48 calibration designs is best at α = 1.5, +2.3 over α = 2, α = 1 below it by 2.8."""
    doc = (ROOT / "docs/data/design_alpha_cal_s23.txt").read_text().splitlines()
    dirs = (ROOT / "docs/data/design_alpha_cal_s23.dirs").read_text().split()
    assert len(dirs) == 48 and not any("attribution-s23" in d for d in dirs)
    monkeypatch.chdir(ROOT)
    assert load_bench("design_alpha").main(dirs[:2]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got[:3] == doc[:3]
    last = doc[-1].split()
    assert last[:4] == ["sum", "over", "48", "designs"] and last[-1] == "1.5"
    assert last[4:12] == ["-25.8", "-13.7", "-2.8", "+0.6", "+2.3", "+2.0", "+0.0", "-8.1"]


@pytest.mark.parametrize(
    "doc",
    ['{"design": null}', "[1, 2]", '{"design": {"configs": [{"on": "11", "energy_j": NaN, "sigma_j": 1}]}}', "{"],
)
def test_a_replay_without_a_usable_design_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: str
) -> None:
    (tmp_path / "replay.json").write_text(doc)
    assert load_bench("design_alpha").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"design_alpha: {tmp_path}")


def test_refold_replay_refuses_an_alpha_outside_its_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_bench("refold_replay").main([str(tmp_path), str(tmp_path / "out"), "--alpha", "0"]) == 2
    assert capsys.readouterr().err.strip().startswith("refold_replay: --alpha 0")


def test_the_alpha_redo_table_is_its_shipped_logs() -> None:
    """docs/data/alpha_redo_s23.txt: scripts/alpha_redo.sh "2 1.5" on session 23's two H200 sets (held out) and
    session 22's three H100 sets; every line is its log's figures, α = 2 gives each run's own figures back
    (docs/data/design_table_s2[23].txt), and α = 1.5 never raises the share (35.8 → 35.8, 0.0 → 0.0 held out;
    39.8 → 39.8, 44.4 → 40.1, 45.0 → 40.5 on the calibration sets)."""
    lines = (ROOT / "docs/data/alpha_redo_s23.txt").read_text().splitlines()[1:]
    shares: dict[tuple[str, str], dict[str, float]] = {}
    for line in lines:
        board, batch, a, share, half = line.split()[:5]
        gpu = "h200" if board in ("GPU-ec88f4b4", "GPU-8ef7caf0") else "h100"
        log = (ROOT / f"results/{gpu}/bench/attribution-real/alpha-s23-{board[4:]}-{batch}-a{a}.log").read_text()
        assert f"identifiable with ±15 % intervals: {share} %" in log
        assert f"energy-weighted median 95 % half-width {half} %" in log
        assert re.search(rf"refold_replay.py --alpha {re.escape(a)},", log)
        shares.setdefault((board, batch), {})[a] = float(share)
    own = {("GPU-ec88f4b4", "batch16"): 35.8, ("GPU-8ef7caf0", "batch128"): 0.0, ("GPU-e7ad0b8d", "batch16"): 39.8,
           ("GPU-e7ad0b8d", "batch128"): 44.4, ("GPU-6e0448a4", "batch128"): 45.0}  # fmt: skip
    assert {k: v["2"] for k, v in shares.items()} == own
    assert all(v["1.5"] <= v["2"] for v in shares.values())


@pytest.mark.skipif(not os.environ.get("ARCHLINE_SLOW_TESTS"), reason="48 designs (~25 s): set ARCHLINE_SLOW_TESTS=1")
def test_the_whole_calibration_table_is_redone(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    dirs = (ROOT / "docs/data/design_alpha_cal_s23.dirs").read_text().split()
    assert load_bench("design_alpha").main(dirs) == 0
    assert (
        capsys.readouterr().out.splitlines() == (ROOT / "docs/data/design_alpha_cal_s23.txt").read_text().splitlines()
    )


@pytest.mark.skipif(not os.environ.get("ARCHLINE_SLOW_TESTS"), reason="a CPU redo: set ARCHLINE_SLOW_TESTS=1")
def test_the_held_out_redo_at_alpha_1_5_is_redone(tmp_path: Path) -> None:
    """scripts/alpha_redo.sh itself on the batch-16 H200 set (needs scripts/restore_traces.sh first)."""
    s = ROOT / "results/h200/attribution-s23/batch16-GPU-ec88f4b4"
    if not list((s / "transformer-run/raw/cupti").glob("*.bin.xz")):
        pytest.skip("the raw trace is not restored (scripts/restore_traces.sh)")
    import sys

    env = {**os.environ, "PYTHON": sys.executable, "ALPHA_LOGS": str(tmp_path)}
    run = subprocess.run(["scripts/alpha_redo.sh", "1.5", str(s)], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    doc = (ROOT / "docs/data/alpha_redo_s23.txt").read_text().splitlines()
    assert out[1] in doc

"""benchmarks/refold_replay.py: a replay's in-step σ refolded with the current ρ; with the old ρ it reproduces them."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from archline.measurement.attribute.replay import replay_energy
from archline.records import Manifest, RunDir
from archline.records.replay import write_replay
from tests.helpers.bench import load_bench
from tests.helpers.fake_graph import NoisyMeasure
from tests.unit.test_replay_context import pairwise_step


def _replay_dir(tmp_path: Path) -> tuple[Path, dict[str, float]]:
    gpu = pairwise_step(2)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=2), gpu.clock, top=2, marginal=False, design=60,
                        design_seed=2)  # fmt: skip
    rd = RunDir.create(tmp_path / "rep", Manifest.new("replay"))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    sigmas = {r.group: float(r.context_sigma_j) for r in res.rows if r.context_sigma_j}
    return tmp_path / "rep", sigmas


def _sigmas(d: Path) -> dict[str, float]:
    with (d / "replay.csv").open(newline="") as f:
        return {r["group"]: float(r["context_sigma_j"]) for r in csv.DictReader(f) if r["context_sigma_j"]}


def test_the_current_fold_reproduces_a_replay_and_an_older_fold_is_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_bench("refold_replay")
    src, sigmas = _replay_dir(tmp_path)
    assert mod.main([str(src), str(tmp_path / "same")]) == 0
    assert _sigmas(tmp_path / "same") == pytest.approx(sigmas, rel=1e-9)  # written with the current fold already
    # a replay recorded with the 95 % bound folded in (before session 12): widen its σ as that fold did
    summary = json.loads((src / "replay.json").read_text())
    d = summary["design"]
    old = tmp_path / "old"
    old.mkdir()
    ratio = d["rho_up"] / d["rho_fold"]
    with (src / "replay.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = list(reader.fieldnames or []), list(reader)
    with (old / "replay.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows({**r, "context_sigma_j": str(float(r["context_sigma_j"]) * ratio)} if r["context_sigma_j"] else r
                    for r in rows)  # fmt: skip
    (old / "replay.json").write_text(json.dumps({**summary, "design": {k: v for k, v in d.items() if k != "rho_fold"}}))
    capsys.readouterr()
    assert mod.main([str(old), str(tmp_path / "refolded")]) == 0
    assert "rows refolded" in capsys.readouterr().out
    assert _sigmas(tmp_path / "refolded") == pytest.approx(sigmas, rel=1e-9)
    assert math.isclose(json.loads((tmp_path / "refolded" / "replay.json").read_text())["design"]["rho_fold"],
                        d["rho_fold"], rel_tol=1e-12)  # fmt: skip


def test_no_design_or_an_existing_output_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_bench("refold_replay")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "replay.json").write_text(json.dumps({"design": None}))
    (tmp_path / "r" / "replay.csv").write_text("group\n")
    assert mod.main([str(tmp_path / "r"), str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no randomized design" in err[0]
    src, _ = _replay_dir(tmp_path)
    assert mod.main([str(src), str(tmp_path / "r")]) == 2
    assert "exists" in capsys.readouterr().err


def test_a_replay_with_replicates_is_reproduced_and_refitted_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped session-14 H100 transformer replay: refolded as recorded it is unchanged; without its replicates
    its in-step energies and ρ are those of a fit of the first measurements alone."""
    import numpy as np

    from archline.measurement.attribute.replay_design import fit_design

    root = Path(__file__).resolve().parents[2]
    src = root / "results/h100/attribution-s14/replicates-GPU-5752653f/transformer-replay"
    mod = load_bench("refold_replay")
    assert mod.main([str(src), str(tmp_path / "same")]) == 0
    assert _sigmas(tmp_path / "same") == pytest.approx(_sigmas(src), rel=1e-9)
    assert mod.main([str(src), str(tmp_path / "without"), "--no-replicates"]) == 0
    d = json.loads((src / "replay.json").read_text())["design"]
    x = np.asarray([[float(ch == "1") for ch in c["on"]] for c in d["configs"]])
    fit = fit_design(x, [c["energy_j"] for c in d["configs"]], [c["sigma_j"] for c in d["configs"]])
    new = json.loads((tmp_path / "without" / "replay.json").read_text())["design"]
    assert "repeats" not in new and "tau" not in new and new["rho_fold"] == pytest.approx(fit.rho_fold)
    assert new["rho_fold"] > d["rho_fold"]  # the replicates took τ out of ρ on this board
    with (tmp_path / "without" / "replay.csv").open(newline="") as f:
        got = {r["group"]: float(r["context_j"]) for r in csv.DictReader(f) if r["context_j"]}
    want = dict(zip(d["factor_names"], fit.energy_j, strict=True))
    assert got and all(got[g] == pytest.approx(want[g], rel=1e-9) for g in got)


def test_first_refits_from_the_designs_first_configurations(tmp_path: Path) -> None:
    mod = load_bench("refold_replay")
    src, sigmas = _replay_dir(tmp_path)
    d = json.loads((src / "replay.json").read_text())["design"]
    n = len(d["configs"]) - 15
    assert mod.main([str(src), str(tmp_path / "small"), "--first", str(n)]) == 0
    small = json.loads((tmp_path / "small" / "replay.json").read_text())["design"]
    assert small["configurations"] == n == len(small["configs"]) and small["configs"] == d["configs"][:n]
    # the in-step energies are the refit's of those configurations alone, and wider than the whole design's
    from archline.measurement.attribute.replay_design import fit_design

    x = np.asarray([[float(ch == "1") for ch in c["on"]] for c in d["configs"][:n]])
    fit = fit_design(x, [c["energy_j"] for c in d["configs"][:n]], [c["sigma_j"] for c in d["configs"][:n]])
    at = {g: j for j, g in enumerate(d["factor_names"])}
    with (tmp_path / "small" / "replay.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["context_j"]]
    assert rows and all(float(r["context_j"]) == pytest.approx(fit.energy_j[at[r["group"]]], rel=1e-9) for r in rows)
    assert sum(float(r["context_sigma_j"]) for r in rows) > sum(sigmas[r["group"]] for r in rows)
    assert mod.main([str(src), str(tmp_path / "bad"), "--first", "1"]) == 2


def test_the_design_budget_table_reproduces_the_runs_at_their_full_designs() -> None:
    """docs/data/design_budget_s15.txt (scripts/design_budget_curve.sh, from traces kept in the history): refitted from
    all its configurations with the model it ran with (links), a run's attribution comes out as the run's did."""
    from tests.helpers.bench import ROOT

    table = [line.split() for line in (ROOT / "docs/data/design_budget_s15.txt").read_text().splitlines()[1:]]
    as_run = {}
    for name in ("design_table_s14.txt", "design_table_s15.txt"):
        for line in (ROOT / "docs/data" / name).read_text().splitlines()[1:]:
            cells = line.split()
            if cells[1] == "transformer":
                as_run[cells[0]] = cells[-2]  # its share within ±15 %
    full = {row[0]: row[3] for row in table if row[1] == row[2]}
    for board in ("GPU-2979dd19", "GPU-b2a29c9b"):  # designs that ran the links model
        assert full[board] == as_run[board]
    # on the H200, whose ρ̂ stays at 4.5-7 %, no smaller design reaches more than the full one's 19.0 %
    assert all(float(row[3]) <= 19.0 for row in table if row[0] == "GPU-07aac0c1")


def test_a_busy_design_is_refolded_with_its_recorded_busy_times(tmp_path: Path) -> None:
    """Session 17's default model: the covariate is each configuration's recorded busy_excess_s, so a refold
    reproduces the σ archline wrote; refitted as links it rewrites the in-step energies; without the record, exit 2."""
    from tests.unit.test_replay_busy import slow_chain

    mod = load_bench("refold_replay")
    gpu = slow_chain(2)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=2), gpu.clock, top=2, marginal=False, design=60,
                        design_seed=2, design_model="busy", busy_timer=gpu.busy_times)  # fmt: skip
    assert res.design is not None and res.design["model"] == "busy"
    rd = RunDir.create(tmp_path / "rep", Manifest.new("replay"))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    sigmas = {r.group: float(r.context_sigma_j) for r in res.rows if r.context_sigma_j}
    assert mod.main([str(tmp_path / "rep"), str(tmp_path / "same")]) == 0
    assert _sigmas(tmp_path / "same") == pytest.approx(sigmas, rel=1e-9)
    assert mod.main([str(tmp_path / "rep"), str(tmp_path / "links"), "--model", "links"]) == 0
    d = json.loads((tmp_path / "links" / "replay.json").read_text())["design"]
    assert d["model"] == "links" and d["rho_fold"] > res.design["rho_fold"]
    summary = json.loads((tmp_path / "rep" / "replay.json").read_text())
    for c in summary["design"]["configs"]:
        c.pop("busy_excess_s")
    (tmp_path / "rep" / "replay.json").write_text(json.dumps(summary))
    assert mod.main([str(tmp_path / "rep"), str(tmp_path / "none")]) == 2

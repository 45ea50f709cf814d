"""benchmarks/design_time.py: the time covariate, an exploration not adopted. On a fake step whose consumers run
longer while their producer is off, it shrinks ρ but leaves the slowdowns' main-effect share in the in-step energies,
so its intervals undercover where the additive fit's hold: the reason it is documented, not used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.bench import ROOT, load_bench
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode
from tests.unit.test_replay_context import FIXED_S, FIXED_W, step_nodes

design_time = load_bench("design_time")
SLOW = design_time.SLOW


def slow_chain(seed: int) -> FakeGraphGPU:
    """``step_nodes(seed)``, each node its own group at 400 W, running SLOW longer while the node before it is off."""
    nodes = [FakeNode(f"{n.name}-{i}", n.time_s, 400.0) for i, n in enumerate(step_nodes(seed))]
    slow = {i: (i - 1, SLOW) for i in range(1, len(nodes))}
    return FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W, slowdowns=slow)


def test_the_fake_consumer_runs_longer_at_its_own_power_while_its_producer_is_off() -> None:
    gpu = slow_chain(0)
    n1 = gpu.fake_nodes[1]
    assert gpu.time_s(1, {0, 1}) == n1.time_s and gpu.time_s(1, {1}) == pytest.approx(n1.time_s * (1 + SLOW))
    assert gpu.in_replay_j([1], {1}) == pytest.approx(n1.time_s * (1 + SLOW) * 400.0)
    assert gpu.time_s(0, set()) == gpu.fake_nodes[0].time_s  # the first node has no producer


def test_the_time_covariate_shrinks_rho_but_its_intervals_undercover(capsys: pytest.CaptureFixture[str]) -> None:
    sim = design_time.simulate(5)
    assert sim["time"]["rho_fold"] < 0.5 * sim["additive"]["rho_fold"]
    assert 380.0 < sim["time"]["beta_w"] < 420.0  # the excess runs at the nodes' 400 W
    assert sim["additive"]["within_2sd"] >= 0.9 and sim["links"]["within_2sd"] >= 0.85
    assert sim["time"]["within_2sd"] < 0.5
    assert design_time.main(["--simulate", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 fake steps" in out and "β " in out and out.count("within 2 σ") == 3


def test_the_table_of_shipped_designs_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = ROOT / "results/h200/attribution-s16/heldout-GPU-bfbb7738/transformer-replay"
    assert design_time.main([str(src)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == design_time.HEAD and out[1].startswith("s16 GPU-bfbb7738 transformer-replay")
    cells = out[1].split()
    add, links, tim = (float(c.rstrip("%")) for c in cells[4:7])
    assert tim < links < add  # the time fit's ρ is the smallest on the shipped design, as the docs say
    assert out[1] in (ROOT / "docs/data/design_time_s17.txt").read_text().splitlines()
    d = json.loads((src / "replay.json").read_text())
    d["design"]["configs"][3]["time_s"] = float("nan")
    bad = tmp_path / "bad-replay"
    shutil.copytree(src, bad)
    (bad / "replay.json").write_text(json.dumps(d))
    assert design_time.main([str(bad)]) == 2
    assert "time is not finite" in capsys.readouterr().err


def test_a_busy_design_prints_its_own_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """For the held-out runs of the busy-time model: its √E[ρ²] beside the additive and links fits of the same
    design, refitted as archline fits it (equal to the record's)."""
    from archline.measurement.attribute.replay import replay_energy
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay
    from tests.helpers.fake_graph import NoisyMeasure

    gpu = slow_chain(3)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=3), gpu.clock, top=2, marginal=False, design=60,
                        design_seed=3, design_model="busy", busy_timer=gpu.busy_times)  # fmt: skip
    assert res.design is not None and res.design["model"] == "busy"
    rd = RunDir.create(tmp_path / "run-GPU-fake" / "transformer-replay", Manifest.new("replay"))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    assert design_time.main([str(tmp_path / "run-GPU-fake" / "transformer-replay")]) == 0
    cells = capsys.readouterr().out.splitlines()[1].split()
    assert float(cells[-1].rstrip("%")) == pytest.approx(100 * res.design["rho_fold"], abs=0.006)
    assert float(cells[-1].rstrip("%")) < float(cells[5].rstrip("%"))  # below the links fit's


def test_the_busy_design_held_out_in_session_18_prints_its_docs_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The busy model's own √E[ρ²] beside links refitted on the same configurations (docs/replay.md "Session 18")."""
    src = ROOT / "results/h100/attribution-s18/heldout-busy-GPU-c7661d05/transformer-replay"
    assert design_time.main([str(src)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] in (ROOT / "docs/data/design_time_s18.txt").read_text().splitlines()
    cells = out[1].split()
    links, busy = float(cells[5].rstrip("%")), float(cells[-1].rstrip("%"))
    assert abs(busy - links) < 0.5  # no better than links by more than half a point: why links is the default again

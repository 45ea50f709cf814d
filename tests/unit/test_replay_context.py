"""Graph replay by a randomized design: every group's energy inside the step, c0, the neighbour dependence ρ."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from archline.measurement.attribute.replay import LUMPED, PINNED, REST, replay_energy
from archline.measurement.attribute.replay_design import MIN_RESIDUAL_DOF, draw_design, fit_design
from archline.measurement.attribute.replay_result import FIXED
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure, watch_enabled

#: A per-replay fixed cost of 0.3 J (3 ms at 100 W): launch and synchronisation.
FIXED_S, FIXED_W = 0.003, 100.0


def step_nodes(seed: int, groups: int = 12) -> list[FakeNode]:
    """``groups`` kernel names of 0.1 … 2.4 J; every third has two nodes."""
    rng = np.random.default_rng(1000 + seed)
    out = []
    for g in range(groups):
        t, p = float(rng.uniform(0.0005, 0.004)), float(rng.uniform(200.0, 600.0))
        out += [FakeNode(f"k{g:02d}", t / (2 if g % 3 == 0 else 1), p)] * (2 if g % 3 == 0 else 1)
    return out


def pairwise_step(seed: int, amp: float = 0.1) -> FakeGraphGPU:
    """``step_nodes(seed)`` with every node its own group, each drawing ±``amp`` power while a random partner is on."""
    nodes = [FakeNode(n.name + f"-{i}", n.time_s, n.power_w) for i, n in enumerate(step_nodes(seed))]
    rng = np.random.default_rng(seed)
    k = len(nodes)
    partners = {i: (int((i + 1 + rng.integers(k - 1)) % k), float(rng.choice([-amp, amp]))) for i in range(k)}
    return FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W, interactions=partners)


def in_step(gpu: FakeGraphGPU) -> dict[str, float]:
    """Each group's true energy inside the whole step (its interactions with the step's nodes included)."""
    every = list(range(len(gpu.nodes)))
    names = {n.name for n in gpu.nodes}
    return {g: gpu.in_replay_j([n.index for n in gpu.nodes if n.name == g], every) for g in names}


def coverage(res: Any, truth: dict[str, float], k: float) -> list[bool]:
    rows = [r for r in res.rows if r.group in truth and r.measurable]
    return [abs(r.context_j - truth[r.group]) <= k * r.context_sigma_j for r in rows]


def test_without_interactions_the_design_recovers_every_group_c0_and_the_step() -> None:
    cover1: list[bool] = []
    cover2: list[bool] = []
    for seed in range(10):
        nodes = step_nodes(seed)
        gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
        m = NoisyMeasure(gpu, rel=0.005, seed=seed)
        res = replay_energy(gpu, m, gpu.clock, top=4, marginal=False, design="auto", design_seed=seed)
        d = res.design
        assert d is not None and d["configurations"] == 40 and d["seed"] == seed and d["factors"] == 12
        truth = in_step(gpu)
        assert {r.group for r in res.rows if r.context_j is not None} == set(truth)  # every group, not the top 4
        cover1 += coverage(res, truth, 1.0)
        cover2 += coverage(res, truth, 2.0)
        assert abs(d["c0_j"] - gpu.c0_j) <= 3 * d["c0_se_j"]
        assert d["rho_up"] < 0.05 and d["rho"] <= d["rho_up"]
        assert abs(d["sum_vs_step_pct"]) < 1.0 and abs(d["sum_vs_step_sigma"]) < 3.5
        assert abs(d["all_on_error_pct"]) < 1.5
        # Each isolated replay carries c0: a replay with no group enabled measures it, it is taken out of each
        # group and the rest and kept once in its own row, so the isolated energies add up to the step.
        fixed = next(r for r in res.rows if r.group == FIXED)
        assert abs(fixed.energy_j - gpu.c0_j) <= 3 * fixed.energy_sigma_j + 0.02 * gpu.c0_j
        extra = res.sum_isolated_j - res.step_energy_j
        assert abs(extra) <= 4 * math.hypot(res.sum_isolated_sigma_j, res.step_sigma_j)
        assert gpu.enabled == set(range(len(nodes)))
    assert np.mean(cover1) >= 0.68 and np.mean(cover2) >= 0.95


def test_with_pairwise_interactions_rho_is_found_and_intervals_still_cover() -> None:
    """Each kernel draws ±10 % power while another (random) one is on: its energy moves by ±5 % (1 σ) with its
    neighbours; the additive fit keeps half of that variance in the residuals, so ρ̂ ≈ 5 % / √2."""
    rhos, ups, cover1, cover2 = [], [], [], []
    for seed in range(12):
        gpu = pairwise_step(seed)
        m = NoisyMeasure(gpu, rel=0.002, seed=seed)
        res = replay_energy(gpu, m, gpu.clock, top=2, marginal=False, design=60, design_seed=seed)
        assert res.design is not None
        rhos.append(res.design["rho"])
        ups.append(res.design["rho_up"])
        # the fold's ρ: √E[ρ²] over the likelihood, between the best estimate and the 95 % bound
        assert res.design["rho"] <= res.design["rho_fold"] <= res.design["rho_up"]
        assert "rho_fold" in res.design["fold"]
        cover1 += coverage(res, in_step(gpu), 1.0)
        cover2 += coverage(res, in_step(gpu), 2.0)
    assert 0.025 <= float(np.mean(rhos)) <= 0.05  # 0.035 expected
    assert all(u >= r for u, r in zip(ups, rhos, strict=True)) and float(np.mean(ups)) > float(np.mean(rhos))
    assert np.mean(cover1) >= 0.68 and np.mean(cover2) >= 0.95


def test_a_design_too_small_for_every_group_lumps_the_shortest_with_a_note() -> None:
    gpu = FakeGraphGPU(step_nodes(0), fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=2, marginal=False, design=10, design_seed=1)
    assert res.design is not None and res.design["factors"] == 10 - 1 - MIN_RESIDUAL_DOF
    rows = {r.group: r for r in res.rows}
    assert LUMPED in rows and rows[LUMPED].context_j is not None and len(res.design["lumped_groups"]) == 9
    assert rows[LUMPED].nodes_per_step == sum(1 for n in gpu.nodes if n.name in res.design["lumped_groups"])
    # each configuration's flags are named, with their nodes: the lumped column holds the lumped groups' nodes
    names, nodes = res.design["factor_names"], res.design["factor_nodes"]
    assert len(names) == len(nodes) == res.design["factors"] == len(res.design["configs"][0]["on"])
    assert names[-1] == LUMPED and len(nodes[-1]) == rows[LUMPED].nodes_per_step
    flat = [i for idx in nodes for i in idx]
    assert len(flat) == len(set(flat)) and all(isinstance(i, int) for i in flat)
    assert json.loads(json.dumps(res.design))["factor_names"] == names  # it is stored as it is
    assert any("switched together" in n for n in res.notes)
    assert LUMPED not in {r.group for r in res.kernels}
    with pytest.raises(ValueError, match="at least 7 configurations"):
        replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, design=5)
    with pytest.raises(ValueError, match="number of configurations or 'auto'"):
        replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, design="many")


def test_the_time_budget_reduces_the_design_with_a_note() -> None:
    gpu = FakeGraphGPU(step_nodes(0), fixed_s=FIXED_S, fixed_w=FIXED_W)
    m = NoisyMeasure(gpu, call_s=0.7)
    # unprimed: each configuration then takes exactly one measurement's 0.7 s
    res = replay_energy(gpu, m, gpu.clock, top=1, marginal=False, design="auto", design_budget_s=14.35, prime=False)
    assert res.design is not None and res.design["asked"] == 40 and res.design["configurations"] == 20
    assert any("design reduced from 40 to 20 configurations" in n for n in res.notes)
    assert res.design["seconds"] <= 14.35 and isinstance(res.design["seed"], int)
    small = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=40, design_budget_s=3.0,
                          prime=False)  # fmt: skip
    assert small.design is None and any("design skipped: 4 configurations" in n for n in small.notes)
    assert all(r.context_j is None for r in small.rows)


def test_pinned_groups_stay_on_in_every_configuration() -> None:
    nodes = [*step_nodes(0, groups=6), FakeNode("cl", 0.002, 500.0, cluster=(2, 1, 1))]
    gpu = FakeGraphGPU(nodes, fixed_by=None, fixed_s=FIXED_S, fixed_w=FIXED_W)
    seen = watch_enabled(gpu)
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=2, marginal=False, design=20, design_seed=3)
    pinned = len(nodes) - 1
    assert seen and all(pinned in s for s in seen)
    rows = {r.group: r for r in res.rows}
    assert rows["cl"].context_j is None and not rows["cl"].measurable and rows[PINNED].context_j is None
    assert res.design is not None and res.design["factors"] == 6
    # c0 of the design is the replay with only the pinned group: its energy is in c0, not in any group.
    assert res.design["c0_j"] == pytest.approx(gpu.c0_j + gpu.truth_j([pinned]), rel=0.05)
    assert [r.group for r in res.rows][-3:] == [REST, PINNED, "cl"]


def test_draw_design_is_balanced_and_fit_design_exact_without_noise() -> None:
    x = draw_design(5, 22, np.random.default_rng(0))
    assert x[0].all() and not x[1].any() and (x[2:].sum(axis=0) == 10).all()
    e = np.array([1.0, 0.5, 2.0, 0.1, 0.7])
    y = 0.3 + x.astype(float) @ e
    f = fit_design(x, list(y), [1e-3] * len(y))
    assert f.c0_j == pytest.approx(0.3) and np.allclose(f.energy_j, e) and f.rho == 0.0
    assert f.sum_j == pytest.approx(0.3 + e.sum()) and f.all_on_error_pct == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="at least 11 configurations"):
        draw_design(5, 10, np.random.default_rng(0))


def test_rows_and_summary_round_trip_and_old_files_read(tmp_path: Any) -> None:
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay
    from archline.records.rundir import write_csv
    from archline.report.replay import read_replay, replay_summary_text, replay_table

    gpu = FakeGraphGPU(step_nodes(0, groups=5), fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=20, design_seed=9)
    rd = RunDir.create(tmp_path / "r", Manifest.new("replay", gpu={"name": "fake"}))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    s, rows = read_replay(rd.path)
    assert s["design"]["seed"] == 9 and len(s["design"]["configs"]) == 20
    assert all(r["context_j"] is not None for r in rows if r["group"] not in (REST, FIXED))
    assert "Context energies: randomized design of 20 configurations (seed 9" in replay_summary_text(s)
    assert "in-context energy (J)" in replay_table(rows).header
    old = tmp_path / "old"
    old.mkdir()
    cols = ["group", "kind", "nodes_per_step", "time_s", "energy_j", "energy_sigma_j", "mean_power_w"]
    write_csv(old / "replay.csv", [{c: r[c] for c in cols} for r in rows if r["energy_j"] is not None], cols)
    s_old, rows_old = read_replay(old)
    assert s_old == {} and "in-context energy (J)" not in replay_table(rows_old).header
    assert "Context energies" not in replay_summary_text(s_old)


def test_cli_design_prints_the_summary(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import archline.measurement.attribute.replay as replay_mod
    from archline.cli.app import app
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    asked: dict[str, Any] = {}

    def fake_run_replay(step: Any, *, out: Any, force: bool, design: Any, design_seed: Any, **kw: Any) -> Any:
        asked.update(design=design, seed=design_seed, budget=kw["design_budget_s"], kind=kw["design_kind"])
        gpu = FakeGraphGPU(step_nodes(0, groups=6), fixed_s=FIXED_S, fixed_w=FIXED_W)
        res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=2, marginal=False, design=design,
                            design_seed=design_seed)  # fmt: skip
        rd = RunDir.create(out, Manifest.new("replay", gpu={"name": "fake"}), overwrite=force)
        write_replay(rd, [r.to_row() for r in res.rows], res.summary())
        rd.finish("complete", notes=tuple(res.notes))
        return res

    monkeypatch.setattr(replay_mod, "run_replay", fake_run_replay)
    script = tmp_path / "s.py"
    script.write_text("def make():\n    return lambda: None\n")
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--design", "30", "--design-seed", "5"])
    assert res.exit_code == 0, res.output
    assert asked == {"design": 30, "seed": 5, "budget": 600.0, "kind": "halves"}
    text = " ".join(res.output.split())
    assert "Context energies: randomized design of 30 configurations (seed 5, 6 factors)" in text
    assert "neighbour dependence ρ =" in text and "of the whole step" in text and "in context (J)" in text
    md = (out / "report.md").read_text()
    assert "in-context energy (J)" in md and "Context energies" in md
    auto = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--force", "--design", "auto"])
    assert auto.exit_code == 0 and asked["design"] == "auto" and "of 40 configurations" in " ".join(auto.output.split())
    for bad, why in (("3", "at least 7 configurations"), ("lots", "number of configurations or 'auto'")):
        r = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--design", bad])
        assert r.exit_code == 2 and why in r.output
    pre = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--force", "--design", "30",
                                   "--design-kind", "prefix"])  # fmt: skip
    assert pre.exit_code == 0 and asked["kind"] == "prefix"
    r = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--design", "30", "--design-kind", "x"])
    assert r.exit_code == 2 and "--design-kind must be halves or prefix" in r.output


def test_the_design_switches_by_rebuild_where_only_rebuilding_works() -> None:
    nodes = [*step_nodes(1, groups=5), FakeNode("cl", 0.002, 500.0, cluster=(2, 1, 1))]
    gpu = FakeGraphGPU(nodes, fixed_by="rebuild", fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=20, design_seed=2)
    assert res.switching["mode"] == "rebuild" and gpu.builds >= 20
    assert res.design is not None and res.design["factors"] == 6  # the cluster kernel is measured too
    truth = in_step(gpu)
    assert all(abs(r.context_j - truth[r.group]) <= 3 * r.context_sigma_j for r in res.rows if r.group in truth)

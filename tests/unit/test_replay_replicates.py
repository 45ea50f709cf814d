"""A design's replicates: configurations measured twice tell one measurement's own scatter τ from the
neighbour dependence ρ (replay_design.fit_design, replay_context.run_context)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.measurement.attribute.replay import replay_energy
from archline.measurement.attribute.replay_context import check_replicates, replicate_count
from archline.measurement.attribute.replay_design import Repeat, draw_design, fit_design
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure, write_fake_replay
from tests.unit.test_replay_context import FIXED_S, FIXED_W, coverage, in_step, pairwise_step, step_nodes


def _synthetic(seed: int, tau: float, reps: int) -> tuple[np.ndarray, list[float], list[float], list[Repeat]]:
    """A 20-factor design whose every measurement scatters by τ beyond its 0.3 % σ, no interactions."""
    rng = np.random.default_rng(seed)
    e = rng.lognormal(np.log(0.1), 0.8, 20)
    x = draw_design(20, 60, rng).astype(np.float64)

    def meas(row: np.ndarray) -> tuple[float, float]:
        t = 0.05 + float(row @ e)
        return t * (1.0 + tau * rng.normal() + 0.003 * rng.normal()), 0.003 * t

    m = [meas(r) for r in x]
    rows = [0, *(int(i) for i in rng.choice(np.arange(1, 60), reps - 1, replace=False))]
    return x, [a for a, _ in m], [b for _, b in m], [Repeat(r, *meas(x[r])) for r in rows]


def test_a_measurements_own_scatter_is_taken_for_rho_without_replicates_and_for_tau_with_them() -> None:
    for seed in range(3):
        x, y, s, reps = _synthetic(seed, 0.01, 16)
        alone = fit_design(x, y, s)
        both = fit_design(x, y, s, reps)
        assert alone.rho_fold > 0.02 and alone.replicates == 0 and math.isnan(alone.tau)
        assert both.replicates == 16 and 0.005 <= both.tau <= 0.0175 and both.tau <= both.tau_up
        assert both.rho_fold < alone.rho_fold / 2
        assert 0.5 < both.replicate_rms_pct < 1.6
        assert {"replicates", "tau", "tau_up", "replicate_rms_pct"} <= set(both.summary())
        assert "tau" not in alone.summary()
        # the point estimates use each configuration's mean: the same energies within their σ
        for a, b, se in zip(alone.energy_j, both.energy_j, alone.energy_se_j, strict=True):
            assert abs(a - b) <= 3 * se


def test_without_scatter_replicates_leave_tau_at_zero_and_rho_as_it_was() -> None:
    x, y, s, reps = _synthetic(7, 0.0, 16)
    both, alone = fit_design(x, y, s, reps), fit_design(x, y, s)
    assert both.tau <= 0.0025 and both.rho_fold <= alone.rho_fold + 0.005


@pytest.mark.parametrize(
    ("repeats", "why"),
    [
        ([Repeat(0, 1.0, 0.01), Repeat(0, 1.0, 0.01)], "different configuration"),
        ([Repeat(99, 1.0, 0.01)], "different configuration"),
        ([Repeat(1, math.nan, 0.01)], "finite energy"),
    ],
)
def test_bad_repeats_are_refused(repeats: list[Repeat], why: str) -> None:
    x, y, s, _ = _synthetic(1, 0.0, 2)
    with pytest.raises(ValueError, match=why):
        fit_design(x, y, s, repeats)


def test_replicate_counts() -> None:
    assert replicate_count(None, 100) == 0 and replicate_count(5, 100) == 5
    assert replicate_count("auto", 100) == 20 and replicate_count("auto", 10) == 8
    check_replicates("auto")
    check_replicates(0)
    for bad in (-1, "some", True, 1.5):
        with pytest.raises(ValueError, match="replicates"):
            check_replicates(bad)  # type: ignore[arg-type]


def test_on_the_fake_board_replicates_take_the_unseen_scatter_out_of_rho_and_intervals_still_cover() -> None:
    """Each measurement scatters by 1 % beyond the σ it reports, no interactions: without replicates ρ takes it
    for a neighbour dependence; with them τ does, ρ falls, and the in-step energies are still covered."""
    fold_without, fold_with, cover1, cover2 = [], [], [], []
    for seed in range(6):
        gpu = FakeGraphGPU(step_nodes(seed), fixed_s=FIXED_S, fixed_w=FIXED_W)
        plain = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed, unseen=0.01), gpu.clock, top=2,
                              marginal=False, design=60, design_seed=seed)  # fmt: skip
        res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed, unseen=0.01), gpu.clock, top=2,
                            marginal=False, design=60, design_seed=seed, design_replicates="auto")  # fmt: skip
        d = res.design
        assert plain.design is not None and d is not None and "repeats" not in plain.design
        assert d["replicates"] == len(d["repeats"]) == 15 and d["configurations"] == 60
        rows = [r["row"] for r in d["repeats"]]
        assert 0 in rows and len(set(rows)) == len(rows) and all(0 <= r < 60 for r in rows)
        assert rows != sorted(rows)  # measured in random order
        assert 0.005 <= d["tau"] <= 0.02
        assert any("measured twice: one measurement scatters by τ" in n for n in res.notes)
        fold_without.append(plain.design["rho_fold"])
        fold_with.append(d["rho_fold"])
        cover1 += coverage(res, in_step(gpu), 1.0)
        cover2 += coverage(res, in_step(gpu), 2.0)
    assert float(np.mean(fold_with)) < 0.5 * float(np.mean(fold_without))
    assert np.mean(cover1) >= 0.68 and np.mean(cover2) >= 0.95


def test_with_interactions_and_scatter_rho_is_still_found() -> None:
    """±10 % pairwise interactions (ρ̂ ≈ 3.5 % without scatter, test_replay_context) and a 1 % unseen scatter: with
    replicates the interactions stay in ρ."""
    rhos = []
    for seed in range(6):
        gpu = pairwise_step(seed)
        res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed, unseen=0.01), gpu.clock, top=2,
                            marginal=False, design=60, design_seed=seed, design_replicates=20)  # fmt: skip
        assert res.design is not None and res.design["replicates"] == 20
        rhos.append(res.design["rho"])
    assert 0.02 <= float(np.mean(rhos)) <= 0.05


def test_the_budget_shares_its_measurements_between_configurations_and_replicates() -> None:
    """About 0.7 s of the fake clock per measurement: 35 s hold the 40 configurations asked and 10 replicates (a
    fifth); 28 s hold 40 measurements, 32 configurations and 8 replicates, with a note."""
    got = {}
    for budget in (35.05, 28.05):
        gpu = FakeGraphGPU(step_nodes(3), fixed_s=FIXED_S, fixed_w=FIXED_W)
        res = replay_energy(gpu, NoisyMeasure(gpu, seed=3), gpu.clock, top=1, marginal=False, design="auto",
                            design_budget_s=budget, design_replicates="auto", design_seed=3)  # fmt: skip
        assert res.design is not None and res.design["asked"] == 40 and res.design["seconds"] <= budget
        got[budget] = (res.design["configurations"], res.design["replicates"], res.notes)
    assert got[35.05][:2] == (40, 10) and not any("design reduced" in n for n in got[35.05][2])
    assert got[28.05][:2] == (32, 8)
    assert any("design reduced from 40 to 32 configurations and 8 measured twice" in n for n in got[28.05][2])


def test_the_report_and_the_cli_carry_the_replicates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import archline.measurement.attribute.replay as replay_mod
    from archline.report.replay import design_text

    asked: dict[str, Any] = {}

    def fake_run_replay(step: Any, *, out: Any, force: bool, design: Any, design_replicates: Any, **kw: Any) -> Any:
        asked["replicates"] = design_replicates
        gpu = FakeGraphGPU(step_nodes(0, groups=6), fixed_s=FIXED_S, fixed_w=FIXED_W)
        res = replay_energy(gpu, NoisyMeasure(gpu, unseen=0.01), gpu.clock, top=2, marginal=False, design=design,
                            design_seed=1, design_replicates=design_replicates)  # fmt: skip
        return write_fake_replay(out, force, res)

    monkeypatch.setattr(replay_mod, "run_replay", fake_run_replay)
    script = tmp_path / "s.py"
    script.write_text("def make():\n    return lambda: None\n")
    for value, want in (("auto", "auto"), ("6", 6)):
        out = tmp_path / f"r{value}"
        res = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--design", "30",
                                       "--design-replicates", value, "--json"])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert asked["replicates"] == want
        d = json.loads((out / "replay.json").read_text())["design"]
        assert d["replicates"] == (8 if value == "auto" else 6)
        assert f"{d['replicates']} configurations were measured twice" in design_text(d)
    for bad in ("-1", "few"):
        res = CliRunner().invoke(app, ["replay", f"{tmp_path / 'x.py'}:f", "-o", str(tmp_path / "bad"),
                                       "--design-replicates", bad])  # fmt: skip
        lines = [ln for ln in res.output.splitlines() if "archline: error:" in ln]
        assert res.exit_code == 2 and len(lines) == 1 and "--design-replicates" in lines[0], res.output
        assert "Traceback" not in res.output


def test_replicates_keep_the_base_enabled_and_work_with_a_prefix_design() -> None:
    """A memset (in every replay, never a factor) draws a tenth of the step: a replicate measured without it would
    differ from its first measurement by that much and show as τ. The mean of the whole step's two measurements
    carries σ √(σ₁² + σ₂²)/2."""
    for kind in ("halves", "prefix"):
        nodes = [*step_nodes(4), FakeNode("memset", 0.002, 300.0, kind="memset")]
        gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
        res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=4), gpu.clock, top=2, marginal=False, design=40,
                            design_seed=4, design_kind=kind, design_replicates=10)  # fmt: skip
        d = res.design
        assert d is not None and d["replicates"] == 10 and d["kind"] == kind
        assert d["tau"] <= 0.0025 and d["replicate_rms_pct"] < 0.5
        first, again = d["configs"][0], next(r for r in d["repeats"] if r["row"] == 0)
        assert d["all_on_j"] == pytest.approx((first["energy_j"] + again["energy_j"]) / 2)
        # each configuration enters the fit as the mean of its measurements, with the mean's σ
        y = np.array([c["energy_j"] for c in d["configs"]])
        sd = np.array([c["sigma_j"] for c in d["configs"]])
        for r in d["repeats"]:
            i = r["row"]
            y[i], sd[i] = (y[i] + r["energy_j"]) / 2, math.hypot(sd[i], r["sigma_j"]) / 2
        assert d["noise_rms_pct"] == pytest.approx(100 * float(np.sqrt(np.mean(sd**2)) / np.mean(y)), rel=1e-9)


def test_the_pruned_tau_rho_profile_gives_the_full_grids_bounds_and_mean() -> None:
    """rho_tau_profile refines only the τ near the peak and ρ near each τ's peak; its ρ̂, bound, τ̂ and √E[ρ²] are the
    full grid's (every (τ, ρ) evaluated), on a design with a neighbour dependence and a per-measurement noise."""
    from archline.measurement.attribute import replay_design as rd

    rng = np.random.default_rng(11)
    f, n = 8, 40
    e = rng.uniform(0.05, 0.3, f)
    x = np.vstack([np.ones(f), np.zeros(f), rng.random((n - 2, f)) < 0.5]).astype(np.float64)
    true = 0.05 + x @ e
    s = 0.002 * true
    y1 = true * (1 + 0.02 * rng.normal(size=n)) + s * rng.normal(size=n)
    rows = np.arange(0, n, 4)
    y2 = true[rows] * (1 + 0.02 * rng.normal(size=rows.size)) + s[rows] * rng.normal(size=rows.size)
    k = np.ones(n)
    k[rows] = 2
    y, sm, ysq = y1.copy(), s.copy(), y1**2
    y[rows], sm[rows], ysq[rows] = (y1[rows] + y2) / 2, np.sqrt(2) * s[rows] / 2, (y1[rows] ** 2 + y2**2) / 2
    args = (x, y, sm, e, ysq, k, y1[rows] - y2, 2 * s[rows] ** 2, y1[rows] ** 2 + y2**2)
    got = rd.rho_tau_profile(*args)
    a = rd._model_matrix(x)
    load = np.square(x) @ (e**2)
    full = np.array([
        rd._reml(a, y, (sm**2 + t**2 * ysq / k)[None, :] + np.square(rd.RHO_GRID)[:, None] * load[None, :])
        for t in rd.TAU_GRID
    ]) + rd._diff_loglik(args[6], args[7], args[8], rd.TAU_GRID)[:, None]  # fmt: skip
    assert np.isfinite(got).sum() < 0.5 * got.size  # it did prune
    coarse = len(rd._coarse(len(rd.RHO_GRID)))
    assert any(int(np.isfinite(row).sum()) == coarse for row in got)  # whole τ rows left at their coarse points
    for ll in (got, full):
        assert np.all(np.isfinite(ll.max(axis=1)))
    assert rd._bound(got.max(axis=0), rd.RHO_GRID) == rd._bound(full.max(axis=0), rd.RHO_GRID)
    assert rd._bound(got.max(axis=1), rd.TAU_GRID) == rd._bound(full.max(axis=1), rd.TAU_GRID)
    m = full.max()
    with np.errstate(divide="ignore"):
        fold = [rd._fold(m + np.log(np.sum(np.exp(ll - m), axis=0))) for ll in (got, full)]
    assert fold[0] == pytest.approx(fold[1], rel=1e-9)

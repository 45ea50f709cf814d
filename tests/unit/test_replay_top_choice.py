"""Graph replay with a design: the design runs first, the groups measured one by one are the largest by in-step
energy, the whole step measured after it checks the design's Σ e + c0 (set_step), and a share ``design_p_on`` of
configurations on widens each in-step energy's interval by the fold derived for it (replay_context.py)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.measurement.attribute.replay import LUMPED, PINNED, REST, ReplayResult, replay_energy
from archline.measurement.attribute.replay_busy import BUSY_REPLAYS
from archline.measurement.attribute.replay_context import FOLD, FOLD_P, ContextResult, fold_sigma, set_step
from archline.measurement.attribute.replay_result import FIXED
from tests.helpers.fake_graph import FakeCall, FakeGraphGPU, FakeNode, NoisyMeasure, write_fake_replay
from tests.unit.test_replay_context import FIXED_S, FIXED_W, in_step, pairwise_step, step_nodes

BY_ENERGY = "the largest by in-step energy (the design)"
BY_TIME = "the largest by isolated time"


def long_and_hot() -> list[FakeNode]:
    """Four long low-power groups (4–5.5 ms at 100 W: 0.40–0.55 J), four short high-power ones (1–1.6 ms at 700 W:
    0.70–1.12 J) and four fillers (2–2.6 ms at 120 W: 0.24–0.31 J): ranked by time the long ones come first, by
    energy the hot ones."""
    return (
        [FakeNode(f"long{i}", 0.004 + 0.0005 * i, 100.0) for i in range(4)]
        + [FakeNode(f"hot{i}", 0.001 + 0.0002 * i, 700.0) for i in range(4)]
        + [FakeNode(f"mid{i}", 0.002 + 0.0002 * i, 120.0) for i in range(4)]
    )


def isolated(res: ReplayResult) -> list[str]:
    """The groups measured one by one, in the rows' order."""
    special = (REST, FIXED, PINNED, LUMPED)
    return [r.group for r in res.rows if r.measurable and math.isfinite(r.energy_j) and r.group not in special]


def choice_note(res: ReplayResult) -> str:
    notes = [n for n in res.notes if "measured one by one, the largest by" in n]
    assert len(notes) == 1, res.notes
    return notes[0]


def test_with_a_design_the_isolated_groups_are_the_largest_by_in_step_energy_and_the_design_runs_first() -> None:
    top = 4
    nodes = long_and_hot()
    by_time = sorted((n.name for n in nodes), key=lambda g: -next(n.time_s for n in nodes if n.name == g))
    by_energy = sorted((n.name for n in nodes), key=lambda g: -next(n.time_s * n.power_w for n in nodes if n.name == g))
    assert set(by_time[:top]) != set(by_energy[:top])  # the step separates the two rankings

    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    trials: list[str] = []
    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=top, marginal=False, design="auto",
                        design_seed=3, on_trial=lambda g, what: trials.append(what))  # fmt: skip
    truth = in_step(gpu)
    assert isolated(res) == sorted(truth, key=lambda g: -truth[g])[:top] == by_energy[:top]
    note = choice_note(res)
    assert f"{top} of 12 measurable groups" in note and BY_ENERGY in note and BY_TIME not in note
    # every configuration of the design is measured before the first group alone
    assert trials.index("alone") > max(k for k, w in enumerate(trials) if w == "design")
    # the others are still measured, by the design only
    rows = {r.group: r for r in res.rows}
    assert all(rows[g].context_j is not None and math.isnan(rows[g].energy_j) for g in by_energy[top:])

    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    trials.clear()
    plain = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=top, marginal=False,
                          on_trial=lambda g, what: trials.append(what))  # fmt: skip
    assert isolated(plain) == by_time[:top]
    note = choice_note(plain)
    assert BY_TIME in note and BY_ENERGY not in note and "design" not in trials
    assert plain.design is None and all(r.context_j is None for r in plain.rows)


def test_groups_a_small_design_lumped_come_after_the_fitted_ones_by_time() -> None:
    """Ten configurations fit three groups (the longest) and the lumped rest: the fitted come first by their
    in-step energy, then the longest of the lumped."""
    gpu = FakeGraphGPU(long_and_hot(), fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu, seed=2), gpu.clock, top=5, marginal=False, design=10, design_seed=4)
    assert res.design is not None and res.design["factors"] == 4 and len(res.design["lumped_groups"]) == 9
    fitted = ["long3", "long2", "long1"]  # the three longest, one factor each
    assert isolated(res) == [*fitted, "long0", "mid3"]
    ctx = {r.group: r.context_j for r in res.rows if r.group in fitted}
    assert sorted(fitted, key=lambda g: -(ctx[g] or 0.0)) == fitted
    note = choice_note(res)
    assert BY_ENERGY in note and "then 2 by isolated time (groups the design lumped together" in note


def _old_fold(e: float, se: float, rho_up: float, typical: float) -> float:
    """The p = ½ fold as it was before design_p_on."""
    return math.sqrt(se**2 + 2.0 * rho_up**2 * (e**2 + typical))


def test_fold_sigma_at_a_half_is_the_old_fold_and_follows_its_derivation_at_any_share() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        e, se, rho, typ = (float(v) for v in rng.uniform([0.01, 0.0, 0.0, 0.001], [5.0, 0.5, 0.3, 10.0]))
        assert fold_sigma(e, se, rho, typ) == pytest.approx(_old_fold(e, se, rho, typ), rel=1e-12)
        assert fold_sigma(e, se, rho, typ, 0.5) == pytest.approx(_old_fold(e, se, rho, typ), rel=1e-12)
        for p in (0.1, 0.3, 0.7, 0.85, 0.95):
            # a pairwise interaction r: the residuals keep ρ² = p (1 − p)² r²; the estimate misses (1 − p) r e of
            # its own and carries p r e_k of a typical other group's
            r2 = rho**2 / (p * (1 - p) ** 2)
            derived = math.sqrt(se**2 + r2 * ((1 - p) ** 2 * e**2 + p**2 * typ))
            assert fold_sigma(e, se, rho, typ, p) == pytest.approx(derived, rel=1e-12)
    assert fold_sigma(2.0, 0.1, 0.0, 4.0, 0.85) == pytest.approx(0.1)  # no neighbour dependence: the fit's se
    assert fold_sigma(2.0, 0.0, 0.05, 4.0, 0.5) == pytest.approx(0.05 * math.sqrt(2 * (4 + 4)))
    # a typical group (e² = ⟨e²⟩): the fold grows with p above ½, and at p = 0.85 is ≈ 3.2 times the p = ½ one
    typical = [fold_sigma(2.0, 0.0, 0.05, 4.0, p) for p in (0.5, 0.6, 0.7, 0.85, 0.95)]
    assert all(b > a for a, b in itertools.pairwise(typical))
    assert typical[3] / typical[0] == pytest.approx(math.sqrt((1 / 0.85 + 0.85 / 0.15**2) / 4), rel=1e-12)
    assert typical[3] / typical[0] > 3.0
    # it is arithmetic only: a share of 0 or 1 is not turned into a number
    for p in (0.0, 1.0):
        with pytest.raises(ZeroDivisionError):
            fold_sigma(2.0, 0.1, 0.05, 4.0, p)


def test_at_p_on_085_with_pairwise_interactions_the_derived_fold_covers_and_the_old_one_does_not() -> None:
    """As test_replay_context's pairwise test, each group on in 85 % of the configurations: ρ̂ comes out smaller
    (the residuals keep p (1 − p)² of the interaction's variance), not the interactions."""
    p = 0.85
    new1: list[bool] = []
    new2: list[bool] = []
    old2: list[bool] = []
    rhos = []
    for seed in range(12):
        gpu = pairwise_step(seed)
        k = len(gpu.nodes)
        m = NoisyMeasure(gpu, rel=0.002, seed=seed)
        res = replay_energy(gpu, m, gpu.clock, top=2, marginal=False, design=60, design_seed=seed, design_p_on=p)
        d = res.design
        assert d is not None and d["p_on"] == p and d["fold"] == FOLD_P.format(p=p) and d["factors"] == k
        on = np.array([[c == "1" for c in cfg["on"]] for cfg in d["configs"][2:]])
        assert abs(float(on.mean()) - p) < 0.01  # each group on in 85 % of the random configurations
        rhos.append(d["rho"])
        truth = in_step(gpu)
        rows = [r for r in res.rows if r.group in truth and r.measurable]
        assert len(rows) == k and all(r.context_j is not None and r.context_sigma_j for r in rows)
        typical = float(np.mean([r.context_j**2 for r in rows if r.context_j is not None]))
        for r in rows:
            e, sd = float(r.context_j or 0.0), float(r.context_sigma_j or 0.0)
            se2 = sd**2 - d["rho_fold"] ** 2 * (e**2 / p + p * typical / (1 - p) ** 2)
            assert se2 >= -1e-12 * sd**2
            se = math.sqrt(max(se2, 0.0))
            assert fold_sigma(e, se, d["rho_fold"], typical, p) == pytest.approx(sd, rel=1e-9)
            err = abs(e - truth[r.group])
            new1.append(err <= sd)
            new2.append(err <= 2 * sd)
            old2.append(err <= 2 * _old_fold(e, se, d["rho_fold"], typical))
    assert float(np.mean(rhos)) < 0.025  # ≈ 0.015 at p = 0.85, against ≈ 0.035 at p = ½
    assert np.mean(new1) >= 0.68 and np.mean(new2) >= 0.93
    assert np.mean(old2) < 0.9  # the p = ½ fold on the same fits: ≈ 0.78


class _BiasedWhole:
    """Measures like NoisyMeasure, but the whole step measured apart (the trial 'whole', after the design) comes
    out 3 % high: the design's own whole step (its first configuration) does not."""

    def __init__(self, gpu: FakeGraphGPU) -> None:
        self.inner = NoisyMeasure(gpu, seed=5)
        self.what = ""

    def hook(self, group: str, what: str) -> None:
        self.what = what

    def __call__(self, fn: Any) -> FakeCall:
        m = self.inner(fn)
        k = 1.03 if self.what == "whole" else 1.0
        return FakeCall(m.energy_j * k, m.energy_uncertainty_j * k, m.time_s, m.mean_power_w * k)


def test_the_design_sum_is_checked_against_the_whole_step_measured_after_it() -> None:
    gpu = FakeGraphGPU(step_nodes(0, groups=8), fixed_s=FIXED_S, fixed_w=FIXED_W)
    m = _BiasedWhole(gpu)
    res = replay_energy(gpu, m, gpu.clock, top=2, marginal=False, design=30, design_seed=7, on_trial=m.hook)
    d = res.design
    assert d is not None
    assert d["step_j"] == res.step_energy_j
    assert res.step_energy_j / d["all_on_j"] == pytest.approx(1.03, abs=0.02)  # not the design's own whole step
    pct = (d["sum_j"] - res.step_energy_j) / res.step_energy_j * 100.0
    assert d["sum_vs_step_pct"] == pytest.approx(pct, rel=1e-12) and -5.0 < pct < -1.0
    sigma = (d["sum_j"] - res.step_energy_j) / math.hypot(d["sum_se_j"], res.step_sigma_j)
    assert d["sum_vs_step_sigma"] == pytest.approx(sigma, rel=1e-12)
    own = (d["sum_j"] - d["all_on_j"]) / d["all_on_j"] * 100.0
    assert f"{own:+.2f} %" != f"{pct:+.2f} %"
    notes = [n for n in res.notes if n.startswith("context energies:")]
    assert len(notes) == 1 and f"Σ e + c0 is {pct:+.2f} % of the whole step" in notes[0]


def test_set_step_redoes_only_the_design_note_and_ignores_a_step_it_cannot_use() -> None:
    gpu = FakeGraphGPU(step_nodes(1, groups=6), fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=20, design_seed=2)
    assert res.design is not None
    ctx = ContextResult(summary=dict(res.design), notes=["before", *[n for n in res.notes if "context energies" in n]])
    ctx.notes.append("after")
    before = (dict(ctx.summary), list(ctx.notes))
    set_step(ctx, math.nan, 0.1)  # no step: the summary keeps the design's own, and a note says so
    assert ctx.summary == before[0] and ctx.notes[:-1] == before[1]
    assert "not finite" in ctx.notes[-1] and "design's own whole-step configuration" in ctx.notes[-1]
    ctx.notes = list(before[1])
    step = ctx.summary["sum_j"] / 1.1
    set_step(ctx, step, 0.0)
    assert ctx.summary["step_j"] == step and ctx.summary["sum_vs_step_pct"] == pytest.approx(10.0)
    assert ctx.summary["sum_vs_step_sigma"] == pytest.approx((ctx.summary["sum_j"] - step) / ctx.summary["sum_se_j"])
    assert ctx.notes[0] == "before" and ctx.notes[-1] == "after" and len(ctx.notes) == 3
    assert "Σ e + c0 is +10.00 % of the whole step" in ctx.notes[1] and ctx.notes[1] != before[1][1]
    empty = ContextResult(notes=["design skipped: no group can be switched"])
    set_step(empty, 1.0, 0.1)
    assert empty.summary == {} and empty.notes == ["design skipped: no group can be switched"]


def test_design_p_on_is_recorded_and_must_lie_strictly_between_0_and_1() -> None:
    gpu = FakeGraphGPU(step_nodes(0, groups=5), fixed_s=FIXED_S, fixed_w=FIXED_W)
    for bad in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError, match="design_p_on must be strictly between 0 and 1"):
            replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, design=20, design_p_on=bad)
    half = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=20, design_seed=1)
    assert half.design is not None and half.design["p_on"] == 0.5 and half.design["fold"] == FOLD
    assert not any("each group on in" in n for n in half.notes)
    hi = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=20, design_seed=1,
                       design_p_on=0.7)  # fmt: skip
    assert hi.design is not None and hi.design["p_on"] == 0.7 and hi.design["fold"] == FOLD_P.format(p=0.7)
    assert any("each group on in 70 % of them" in n and FOLD_P.format(p=0.7) in n for n in hi.notes)
    # a prefix design has no share on: it folds as at p = ½
    pre = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=20, design_seed=1,
                        design_kind="prefix", design_p_on=0.7)  # fmt: skip
    assert pre.design is not None and "p_on" not in pre.design and pre.design["fold"] == FOLD


def _error_lines(args: list[str]) -> tuple[int, list[str]]:
    res = CliRunner().invoke(app, args)
    assert "Traceback" not in res.output
    return res.exit_code, [ln for ln in res.output.splitlines() if "archline: error:" in ln]


@pytest.mark.parametrize("value", ["1.5", "0", "1"])
def test_cli_design_p_on_outside_0_1_is_one_line_before_the_script_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    import archline.measurement.attribute.replay as replay_mod

    def never(*a: Any, **kw: Any) -> Any:
        raise AssertionError("run_replay must not be reached")

    monkeypatch.setattr(replay_mod, "run_replay", never)
    missing = tmp_path / "x.py"  # no such script: the option is checked first
    code, errors = _error_lines(["replay", f"{missing}:f", "-o", str(tmp_path / "r"), "--design-p-on", value])
    assert code == 2 and len(errors) == 1, errors
    assert "--design-p-on must be strictly between 0 and 1" in errors[0] and "no such script" not in errors[0]
    # the same call with a valid share fails on the script instead
    code, errors = _error_lines(["replay", f"{missing}:f", "-o", str(tmp_path / "r"), "--design-p-on", "0.85"])
    assert code == 2 and len(errors) == 1 and "no such script" in errors[0]
    assert not (tmp_path / "r").exists()
    # a share other than ½ with a prefix design: refused, one line
    args = ["replay", f"{missing}:f", "-o", str(tmp_path / "r"), "--design-p-on", "0.85", "--design-kind", "prefix"]
    code, errors = _error_lines(args)
    assert code == 2 and len(errors) == 1 and "halves design only" in errors[0]


def test_cli_design_p_on_reaches_run_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import archline.measurement.attribute.replay as replay_mod

    asked: dict[str, Any] = {}

    def fake_run_replay(step: Any, *, out: Any, force: bool, design: Any, design_p_on: float, **kw: Any) -> Any:
        asked.update(design=design, p_on=design_p_on)
        gpu = FakeGraphGPU(step_nodes(0, groups=6), fixed_s=FIXED_S, fixed_w=FIXED_W)
        res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=2, marginal=False, design=design,
                            design_seed=1, design_p_on=design_p_on)  # fmt: skip
        return write_fake_replay(out, force, res)

    monkeypatch.setattr(replay_mod, "run_replay", fake_run_replay)
    script = tmp_path / "s.py"
    script.write_text("def make():\n    return lambda: None\n")
    args = ["replay", f"{script}:make", "-o", str(tmp_path / "r"), "--design", "30", "--design-p-on", "0.85", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert asked == {"design": 30, "p_on": 0.85}
    assert '"p_on": 0.85' in res.output and "p = 0.85" in res.output


def test_the_report_names_a_share_other_than_a_half() -> None:
    from archline.report.replay import design_text

    gpu = FakeGraphGPU(step_nodes(0), fixed_s=FIXED_S, fixed_w=FIXED_W)
    at = {
        p: replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=1, marginal=False, design=40,
                         design_seed=2, design_p_on=p).design
        for p in (0.5, 0.85)
    }  # fmt: skip
    assert at[0.5] is not None and at[0.85] is not None
    assert "Each group was on in" not in design_text(at[0.5])
    text = design_text(at[0.85])
    assert "Each group was on in 85 % of them" in text and "p = 0.85" in text


def test_with_every_timing_at_nothing_the_design_keeps_the_groups_of_most_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The H100 runs' timings all came out at nothing: a design too small for every group then lumps the groups of
    fewest nodes, not the tail of capture order."""
    import archline.measurement.attribute.replay as replay_mod

    def zero(t: Any, plan: Any, clock: Any, replays: int) -> dict[str, float]:
        return dict.fromkeys(plan.measurable, 0.0)

    monkeypatch.setattr(replay_mod, "_time_groups", zero)
    gpu = FakeGraphGPU(step_nodes(0), fixed_s=FIXED_S, fixed_w=FIXED_W)  # k00, k03, k06, k09: two nodes each
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=2, marginal=False, design=10, design_seed=1)
    assert res.design is not None
    lumped = set(res.design["lumped_groups"])
    assert len(lumped) == 9 and not lumped & {"k00", "k03", "k06"} and "k09" in lumped


def test_rho_fold_is_the_root_mean_square_of_rho_over_its_likelihood_and_the_sigma_folds_it() -> None:
    from archline.measurement.attribute.replay_design import RHO_GRID, fit_design, rho_profile

    gpu = pairwise_step(3)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=3), gpu.clock, top=1, marginal=False, design=60,
                        design_seed=3)  # fmt: skip
    d = res.design
    assert d is not None
    x = np.array([[c == "1" for c in cfg["on"]] for cfg in d["configs"]], float)
    y = np.array([cfg["energy_j"] for cfg in d["configs"]])
    s = np.array([cfg["sigma_j"] for cfg in d["configs"]])
    fit = fit_design(x, list(y), list(s))
    ll = rho_profile(x, y, np.maximum(s, 1e-9 * float(np.max(np.abs(y)))), np.asarray(fit.energy_j))
    w = np.exp(ll - ll.max())
    assert fit.rho_fold == pytest.approx(math.sqrt(float(np.sum(w * RHO_GRID**2) / np.sum(w))), rel=1e-9)
    assert d["rho_fold"] == pytest.approx(fit.rho_fold) and fit.rho < fit.rho_fold < fit.rho_up
    typical = float(np.mean(np.square(fit.energy_j)))  # every factor's, as the design takes it
    rows = [r for r in res.rows if r.context_j is not None and r.context_sigma_j and r.group in in_step(gpu)]
    assert len(rows) == len(fit.energy_j)
    for r in rows:  # each row's in-step energy is its factor's: match them by value
        j = int(np.argmin(np.abs(np.asarray(fit.energy_j) - float(r.context_j or 0.0))))
        e, se = fit.energy_j[j], fit.energy_se_j[j]
        assert r.context_j == pytest.approx(e, rel=1e-12)
        assert r.context_sigma_j == pytest.approx(fold_sigma(e, se, fit.rho_fold, typical), rel=1e-9)
        assert float(r.context_sigma_j or 0.0) < fold_sigma(e, se, fit.rho_up, typical)


def test_the_report_names_the_rho_folded_in_where_the_design_has_one() -> None:
    from archline.report.replay import design_text

    gpu = pairwise_step(1)
    d = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=1, marginal=False, design=40, design_seed=1).design
    assert d is not None
    assert f"√E[ρ²] {100 * d['rho_fold']:.1f} %, folded into each σ" in design_text(d)
    old = {k: v for k, v in d.items() if k != "rho_fold"}  # a replay from before session 12
    assert "√E[ρ²]" not in design_text(old) and "95 % upper bound" in design_text(old)


def test_without_a_design_the_groups_are_ranked_by_cuptis_busy_time_in_the_whole_step() -> None:
    """Where a busy timer traces, the top groups are the longest by it (not by the host timings, which came out at
    nothing on real boards): a timer that reports the 'mid' groups ten times longer makes them the top four, and
    the note says what they were chosen by and what share of the step's busy time they hold."""
    gpu = FakeGraphGPU(long_and_hot(), fixed_s=FIXED_S, fixed_w=FIXED_W)
    calls = {"n": 0}

    def timer(fn: Any) -> dict[str, float]:
        calls["n"] += 1
        return {k: v * (10.0 if k.startswith("mid") else 1.0) for k, v in gpu.busy_times(fn).items()}

    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=timer)
    assert isolated(res) == ["mid3", "mid2", "mid1", "mid0"] and calls["n"] == BUSY_REPLAYS
    note = choice_note(res)
    assert "the largest by busy time in the whole step (CUPTI)" in note and "of the step's busy time" in note
    share = float(note.split("CUPTI), ")[1].split("%")[0])
    busy = {n.name: n.time_s * (10.0 if n.name.startswith("mid") else 1.0) for n in long_and_hot()}
    assert share == pytest.approx(100 * sum(v for k, v in busy.items() if k.startswith("mid")) / sum(busy.values()),
                                  abs=0.5)  # fmt: skip


def test_a_busy_timer_that_cannot_trace_falls_back_to_the_host_timings_with_a_note() -> None:
    from archline.errors import CUPTIUnavailableError

    gpu = FakeGraphGPU(long_and_hot(), fixed_s=FIXED_S, fixed_w=FIXED_W)

    def broken(fn: Any) -> dict[str, float]:
        raise CUPTIUnavailableError("no CUPTI here")

    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=broken)
    assert isolated(res) == ["long3", "long2", "long1", "long0"]  # the host timings' order, as without a timer
    assert BY_TIME in choice_note(res)
    assert any("ranked by their isolated time on the host: CUPTI did not trace" in n and "no CUPTI here" in n
               for n in res.notes)  # fmt: skip


def test_with_every_host_timing_at_nothing_the_busy_time_still_ranks_groups_and_the_designs_factors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on the real boards: every host timing 0. Without a timer the top groups are then the first in capture
    order; with one, the longest by busy time, and a design too small for every group lumps the shortest by it."""
    import archline.measurement.attribute.replay as replay_mod

    monkeypatch.setattr(replay_mod, "_time_groups", lambda t, plan, clock, n: {g: 0.0 for g in plan.measurable})
    nodes = long_and_hot()
    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    plain = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False)
    assert isolated(plain) == ["long0", "long1", "long2", "long3"]  # capture order: what session 18's runs measured
    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=gpu.busy_times)
    assert isolated(res) == ["long3", "long2", "long1", "long0"]
    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    small = replay_energy(gpu, NoisyMeasure(gpu, seed=2), gpu.clock, top=5, marginal=False, design=10, design_seed=4,
                          busy_timer=gpu.busy_times)  # fmt: skip
    assert small.design is not None and small.design["factors"] == 4
    assert set(small.design["lumped_groups"]) == {n.name for n in nodes} - {"long3", "long2", "long1"}


@pytest.mark.parametrize(
    ("rename", "why"),
    [
        (lambda k: k + "_v2", "CUPTI traced no kernel"),
        (lambda k: k + "_v2" if k == "hot0" else k, "gave no time to 1 of 12"),
    ],
)
def test_names_cupti_does_not_give_as_captured_fall_back_to_the_host_timings(rename: Any, why: str) -> None:
    gpu = FakeGraphGPU(long_and_hot(), fixed_s=FIXED_S, fixed_w=FIXED_W)

    def timer(fn: Any) -> dict[str, float]:
        return {rename(k): v for k, v in gpu.busy_times(fn).items()}

    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=timer)
    assert isolated(res) == ["long3", "long2", "long1", "long0"] and BY_TIME in choice_note(res)
    assert any(n.startswith("groups ranked by their isolated time on the host: CUPTI") and why in n for n in res.notes)


def test_a_plain_exception_from_the_tracer_falls_back_too() -> None:
    """cupti-python raises its own errors as plain Exceptions: the ranking falls back, the replay goes on."""
    gpu = FakeGraphGPU(long_and_hot(), fixed_s=FIXED_S, fixed_w=FIXED_W)

    def broken(fn: Any) -> dict[str, float]:
        raise Exception("CUPTI_ERROR_NOT_INITIALIZED")

    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=broken)
    assert isolated(res) == ["long3", "long2", "long1", "long0"]
    assert any("CUPTI did not trace (Exception: CUPTI_ERROR_NOT_INITIALIZED)" in n for n in res.notes)


def test_each_kernel_row_keeps_its_cupti_busy_time_where_the_timer_traced_and_none_where_it_did_not() -> None:
    """Session 20: the busy times that rank the groups are kept in each kernel row (``busy_time_s``, per step in the
    whole step), so a prior is timed as the program's calls are; with a design every factor's row has one. Without a
    timer, or with one that cannot trace, the rows have none."""
    from archline.errors import CUPTIUnavailableError

    nodes = long_and_hot()
    truth: dict[str, float] = {}
    for n in nodes:
        truth[n.name] = truth.get(n.name, 0.0) + n.time_s
    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=gpu.busy_times)
    kernels = [r for r in res.rows if r.group in truth]
    assert len(kernels) == 4 and all(r.busy_time_s == pytest.approx(truth[r.group], rel=1e-3) for r in kernels)
    assert all(r.busy_time_s is None for r in res.rows if r.group not in truth)  # the rest, the fixed cost
    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    design = replay_energy(gpu, NoisyMeasure(gpu, seed=2), gpu.clock, top=4, marginal=False, design=40, design_seed=4,
                           busy_timer=gpu.busy_times)  # fmt: skip
    fitted = [r for r in design.rows if r.context_j is not None and r.group in truth]
    assert len(fitted) == len(truth) and all(r.busy_time_s == pytest.approx(truth[r.group], rel=1e-3) for r in fitted)

    def broken(fn: Any) -> dict[str, float]:
        raise CUPTIUnavailableError("no CUPTI here")

    for timer in (None, broken):
        gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
        plain = replay_energy(gpu, NoisyMeasure(gpu, seed=1), gpu.clock, top=4, marginal=False, busy_timer=timer)
        assert all(r.busy_time_s is None for r in plain.rows)

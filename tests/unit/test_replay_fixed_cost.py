"""A replay's fixed cost in isolated energies: what still has to come out of them (replay_result), and the run
report's comparison against graph replay taking it out of replays recorded before session 11."""

from __future__ import annotations

from typing import Any

import pytest

from archline.measurement.attribute.replay_result import FIXED, PINNED, REST, design_c0, fixed_cost_to_take_out
from archline.report.run_tables import replay_comparison

DESIGN = {"c0_j": 0.054, "c0_se_j": 0.002}
OLD = [{"group": "gemm", "nodes_per_step": 4, "energy_j": 0.054 + 4 * 0.020, "energy_sigma_j": 0.001}]
ROW = {"name": "gemm", "kind": "kernel", "calls": 100, "energy_j": 2.0, "energy_lo_j": 1.9, "energy_hi_j": 2.1}


def test_only_replays_that_left_the_fixed_cost_in_need_it_taken_out() -> None:
    assert fixed_cost_to_take_out(OLD, DESIGN) == (0.054, 0.002)  # recorded before: c0 in every isolated energy
    for base in (FIXED, PINNED):  # the replay took its base out itself
        assert fixed_cost_to_take_out([*OLD, {"group": base, "nodes_per_step": 0, "energy_j": 0.054}], DESIGN) is None
    assert fixed_cost_to_take_out(OLD, None) is None  # no design: nothing known to take out
    assert design_c0({"c0_j": "nan", "c0_se_j": 0.1}) is None


def test_the_reports_comparison_takes_the_fixed_cost_out_where_it_was_left_in() -> None:
    # 2.0 J over 100 calls = 20 mJ a call; replay 4 calls a step: (54 + 80) / 4 = 33.5 mJ as recorded, 20 mJ net
    raw = replay_comparison([ROW], OLD, 0.95)
    net = replay_comparison([ROW], OLD, 0.95, fixed_cost_to_take_out(OLD, DESIGN))
    assert raw is not None and net is not None
    diff_raw = raw.sort_keys[0][4] if raw.sort_keys else None
    diff_net = net.sort_keys[0][4] if net.sort_keys else None
    assert diff_raw == pytest.approx(100 * (20.0 / 33.5 - 1)) and diff_net == pytest.approx(0.0, abs=1e-9)
    assert "less a replay's fixed cost (54 mJ" in net.caption and "fixed cost" not in raw.caption


def test_a_replay_says_how_much_of_each_group_its_fixed_cost_was() -> None:
    """Session 22 (docs/replay.md): the fixed cost taken out of every group moved 8.6 % between two processes on an
    H200 and failed two small groups whose replays as measured agreed; each replay now says its share."""
    from archline.measurement.attribute.replay import replay_energy
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, measure_on

    nodes = [FakeNode("gemm", 0.004, 600.0), FakeNode("relu", 0.0005, 300.0), FakeNode("norm", 0.0015, 350.0)]
    gpu = FakeGraphGPU(nodes, fixed_s=0.003, fixed_w=100.0)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=2, marginal=False)
    rows = {r.group: r for r in res.rows}
    f = rows[FIXED].energy_j
    assert f == pytest.approx(0.3, rel=0.05)  # 3 ms at 100 W
    lo, hi = sorted(f / (rows[g].energy_j + f) for g in ("gemm", "norm"))
    note = next(n for n in res.notes if n.startswith("a replay's fixed cost"))
    assert f"{100 * lo:.0f}-{100 * hi:.0f} % of the kernel groups' isolated replays as measured" in note


def test_fixed_reps_follow_dunnetts_square_root_between_one_and_the_cap() -> None:
    from archline.measurement.attribute.replay import FIXED_REPS_MAX, fixed_reps

    assert [fixed_reps(g) for g in (0, 1, 2, 3, 4, 6, 9, 12, 16, 40)] == [1, 1, 1, 2, 2, 2, 3, 3, 4, FIXED_REPS_MAX]
    assert FIXED_REPS_MAX == 4


def _noisy_fixed(gpu: Any, seed: int, fail: Any = None) -> Any:
    """NoisyMeasure without noise, except a replay with no node enabled (the fixed cost alone): σ 5 %; ``fail(n)``
    says whether the n-th fixed-cost measurement raises SwitchError."""
    import numpy as np

    from archline.hw.graph_nodes import SwitchError
    from tests.helpers.fake_graph import FakeCall, NoisyMeasure

    exact = NoisyMeasure(gpu, rel=0.0)
    rng = np.random.default_rng(seed)
    n = [0]

    def measure(fn: Any) -> Any:
        got = exact(fn)
        if gpu.enabled:
            return got
        n[0] += 1
        if fail is not None and fail(n[0]):
            raise SwitchError({0: "refused (a test)"})
        return FakeCall(got.energy_j * (1 + 0.05 * float(rng.normal())), 0.05 * got.energy_j, got.time_s,
                        got.mean_power_w)  # fmt: skip

    return measure


def _replay(monkeypatch: pytest.MonkeyPatch, seed: int, reps: int | None, fail: Any = None, top: int = 8) -> Any:
    """A 10-kernel fake step replayed with ``top`` groups and the rest, one pass; ``reps`` forces fixed_reps."""
    from archline.measurement.attribute import replay as mod
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode

    nodes = [FakeNode(f"k{i}", 0.001 + 0.0002 * i, 300.0 + 20 * i) for i in range(10)]
    gpu = FakeGraphGPU(nodes, fixed_s=0.003, fixed_w=100.0)
    if reps is not None:
        monkeypatch.setattr(mod, "fixed_reps", lambda _g: reps)
    order: list[str] = []
    res = mod.replay_energy(gpu, _noisy_fixed(gpu, seed, fail), gpu.clock, top=top, marginal=False,
                            on_trial=lambda g, what: order.append(g if what != "timing" else ""))  # fmt: skip
    rows = {r.group: r for r in res.rows}
    truth = {f"k{i}": gpu.replay_j([i]) - gpu.replay_j([]) for i in range(10)}
    rest_truth = sum(v for g, v in truth.items() if g not in rows)
    err = {g: rows[g].energy_j - truth[g] for g in truth if g in rows}
    err[REST] = rows[REST].energy_j - rest_truth
    return res, [g for g in order if g and g != "[whole step]"], err


def test_each_pass_measures_the_fixed_cost_sqrt_g_times_centred_and_takes_their_mean_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Session 23 (docs/replay.md): one H200 process's three fixed costs spread 6.9 % against its groups' 1.6 %. With
    8 groups and the rest (G = 9) each pass measures it 3 times, centred in the pass's 9 slots (before the 2nd, 5th
    and 8th group), keeps each measurement, and the fixed-cost row is their mean: with only the fixed cost's
    measurements noisy (σ 5 %), the groups' and the rest's errors shrink by about √3 against one a pass."""
    res, measured, _ = _replay(monkeypatch, 0, None)
    at = [i for i, g in enumerate(measured) if g == FIXED]
    kernels = [g for g in measured if g.startswith("k")]
    assert len(at) == 3 and len(kernels) == 8
    assert [measured[i + 1] for i in at] == [kernels[1], kernels[4], kernels[7]]
    assert len(res.fixed_passes_j) == 1 and len(res.fixed_passes_j[0]) == 3
    rows = {r.group: r for r in res.rows}
    assert rows[FIXED].energy_j == pytest.approx(sum(res.fixed_passes_j[0]) / 3)
    assert any(n.startswith("the fixed cost was measured 3 time(s) in each pass of 3 asked") for n in res.notes)
    assert res.summary()["fixed_passes_j"] == res.fixed_passes_j
    sigma1 = {r.group: r for r in _replay(monkeypatch, 0, 1)[0].rows}[FIXED].energy_sigma_j
    assert rows[FIXED].energy_sigma_j == pytest.approx(sigma1 / 3**0.5, rel=0.05)  # the mean of three of one σ
    monkeypatch.undo()
    e3 = [e for s in range(40) for e in _replay(monkeypatch, s, None)[2].values()]
    e1 = [e for s in range(40) for e in _replay(monkeypatch, s, 1)[2].values()]
    rms = [float(sum(x * x for x in e) / len(e)) ** 0.5 for e in (e1, e3)]
    assert 1.3 < rms[0] / rms[1] < 2.3  # √3 = 1.73 expected, the rest's error included


def test_failed_fixed_cost_measurements_are_left_out_and_a_pass_without_any_reuses_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One of three refused: the pass's mean is of the two measured, and the note says 2 of 3. Every one refused in
    the second pass: it reuses the first pass's mean (counted). All refused from the start: nothing taken out."""
    res, _, _ = _replay(monkeypatch, 1, None, fail=lambda n: n == 2)
    assert [len(p) for p in res.fixed_passes_j] == [2]
    assert any(n.startswith("the fixed cost was measured 2 time(s) in each pass of 3 asked") for n in res.notes)
    from archline.measurement.attribute.replay import replay_energy
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode

    nodes = [FakeNode(f"k{i}", 0.001 + 0.0002 * i, 300.0 + 20 * i) for i in range(10)]
    gpu = FakeGraphGPU(nodes, fixed_s=0.003, fixed_w=100.0)
    res2 = replay_energy(gpu, _noisy_fixed(gpu, 2, fail=lambda n: n > 3), gpu.clock, top=8, marginal=False, repeats=2)
    assert [len(p) for p in res2.fixed_passes_j] == [3, 0]
    rows = {r.group: r for r in res2.rows}
    first = sum(res2.fixed_passes_j[0]) / 3
    assert rows[FIXED].energy_runs_j == pytest.approx((first, first))
    assert any("failed in 1 pass(es); each reused the last measured" in n for n in res2.notes)
    gpu3 = FakeGraphGPU(nodes, fixed_s=0.003, fixed_w=100.0)
    res3 = replay_energy(gpu3, _noisy_fixed(gpu3, 3, fail=lambda n: True), gpu3.clock, top=8, marginal=False)
    assert FIXED not in {r.group for r in res3.rows} and res3.fixed_passes_j == []


def test_pinned_groups_are_measured_once_a_pass_whatever_g(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where pinned groups (nodes that cannot be switched) are the base, the allocation does not apply."""
    from archline.measurement.attribute.replay import PINNED, replay_energy
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure

    nodes = [FakeNode(f"k{i}", 0.001 + 0.0002 * i, 300.0 + 20 * i) for i in range(10)]
    gpu = FakeGraphGPU(nodes, fixed_s=0.003, fixed_w=100.0)
    order: list[str] = []
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=8, marginal=False, exclude={"k9": "a test"},
                        on_trial=lambda g, what: order.append(f"{g}:{what}"))  # fmt: skip
    assert order.count(f"{PINNED}:base") == 1 and f"{FIXED}:base" not in order
    assert res.fixed_passes_j == [] and not any("Dunnett" in n for n in res.notes)

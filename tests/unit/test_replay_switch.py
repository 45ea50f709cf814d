"""Graph replay when the driver refuses to switch cluster-launched nodes (CUDA error 912): each way of
switching, the fallback to the next, and the step still measured when no way switches every node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from archline.hw.graph import GraphError, SwitchError
from archline.measurement.attribute.replay import PINNED, REST, replay_energy
from archline.measurement.attribute.replay_switch import blocked_groups, choose_switching
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, measure_on, write_fake_replay

# Two cluster-launched kernels (a 1x2 and a 2x1 cluster, as cuDNN's and cuBLAS's Hopper kernels use).
NODES = [
    FakeNode("conv", 0.004, 600.0, cluster=(1, 2, 1)),
    FakeNode("relu", 0.0005, 300.0),
    FakeNode("conv", 0.004, 600.0, cluster=(1, 2, 1)),
    FakeNode("norm", 0.0015, 350.0),
    FakeNode("copy", 0.0003, 200.0, kind="memcpy"),
    FakeNode("gemm", 0.003, 550.0, cluster=(2, 1, 1)),
    FakeNode("memset", 0.00001, 150.0, kind="memset"),
]
CLUSTER = [0, 2, 5]
GROUPS = {"conv": [0, 2], "relu": [1], "norm": [3], "[memcpy]": [4], "gemm": [5]}


def _switchable() -> list[int]:
    return [i for idx in GROUPS.values() for i in idx]


@pytest.mark.parametrize(
    ("fixed_by", "tried"),
    [
        ("toggle", ["toggle"]),
        ("toggle+optin", ["toggle", "toggle+optin"]),
        ("rebuild", ["toggle", "toggle+optin", "rebuild"]),
    ],
)
def test_the_first_way_that_switches_every_node_is_chosen(fixed_by: str, tried: list[str]) -> None:
    gpu = FakeGraphGPU(NODES, fixed_by=fixed_by)
    s = choose_switching(gpu, _switchable())
    assert s.mode == fixed_by and not s.not_switchable
    assert [t["mode"] for t in s.tried] == tried
    for t in s.tried[:-1]:  # each refused way names the nodes and the driver's error
        assert t["not_switchable"] == len(CLUSTER) and "912" in t["first_error"]
    # The first refusals are described even when a later way switches everything.
    assert [d["index"] for d in s.described] == (CLUSTER if len(tried) > 1 else [])
    assert gpu.mode == fixed_by and gpu.enabled == set(range(len(NODES)))


def test_a_node_stuck_off_rules_out_pytorchs_executable() -> None:
    # Enabling again is refused: PyTorch's executable would be left without the node, so 'toggle' is
    # dropped as a whole; an executable of our own ('toggle+optin') is rebuilt and keeps the nodes on.
    gpu = FakeGraphGPU(NODES, fixed_by="rebuild", fail_on="enable")
    s = choose_switching(gpu, _switchable())
    assert s.mode == "rebuild"
    assert "error" in s.tried[0] and "could not be enabled again" in s.tried[0]["error"]
    assert s.tried[1]["not_switchable"] == len(CLUSTER)


def test_when_no_way_switches_every_node_the_one_leaving_fewest_stuck_is_kept() -> None:
    gpu = FakeGraphGPU(NODES, fixed_by=None)
    s = choose_switching(gpu, _switchable())
    assert [t["mode"] for t in s.tried] == ["toggle", "toggle+optin", "rebuild"]
    assert s.mode == "toggle" and sorted(s.not_switchable) == CLUSTER  # a tie: the first way tried
    assert gpu.mode == "toggle"
    assert [d["index"] for d in s.described] == CLUSTER and all("912" in d["why"] for d in s.described)
    assert {d["mode"] for d in s.described} == {"toggle"}
    blocked = blocked_groups(GROUPS, s.not_switchable, {})
    assert set(blocked) == {"conv", "gemm"} and blocked["conv"].startswith("2 of 2 nodes cannot be switched off")


def test_no_usable_way_is_one_line_graph_error() -> None:
    class Broken(FakeGraphGPU):
        def set_switch_mode(self, mode: str) -> None:
            raise GraphError(f"{mode}: CUDA error 999 (unknown error)")

    with pytest.raises(GraphError) as exc:
        choose_switching(Broken(NODES), _switchable())
    assert "no way of switching" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("fixed_by", ["toggle+optin", "rebuild"])
def test_a_fallback_way_measures_every_group(fixed_by: str) -> None:
    gpu = FakeGraphGPU(NODES, fixed_by=fixed_by)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=3, marginal=False)
    assert res.switching["mode"] == fixed_by and not res.not_measurable
    rows = {r.group: r for r in res.rows}
    assert list(rows)[:3] == ["conv", "gemm", "norm"]
    for name in ("conv", "gemm", "norm"):
        assert rows[name].energy_j == pytest.approx(gpu.truth_j(GROUPS[name]), rel=0.03)
    assert abs(res.sum_vs_step_pct) < 3.0
    assert any(f"switched by '{fixed_by}'" in n for n in res.notes)


def test_groups_that_cannot_be_switched_stay_on_and_the_rest_is_still_measured() -> None:
    gpu = FakeGraphGPU(NODES, fixed_by=None)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=2, marginal=True)
    rows = {r.group: r for r in res.rows}
    # conv and gemm cannot be switched: not measured on their own, with the driver's reason.
    for name in ("conv", "gemm"):
        assert not rows[name].measurable and "912" in rows[name].reason and rows[name].to_row()["energy_j"] is None
    # They run in every replay ('[groups not switchable]', with the memset); the others are measured against them.
    pinned = gpu.truth_j([0, 2, 5, 6])
    assert rows[PINNED].energy_j == pytest.approx(pinned, rel=0.03) and rows[PINNED].nodes_per_step == 3
    for name in ("norm", "relu"):
        truth = gpu.truth_j(GROUPS[name])
        r = rows[name]
        assert abs(r.energy_j - truth) <= max(3 * r.energy_sigma_j, 0.05 * truth), (name, r, truth)
        assert r.marginal_j == pytest.approx(truth, rel=0.1)
    assert rows[REST].nodes_per_step == 1  # the copy
    assert abs(res.sum_vs_step_pct) < 3.0  # no energy lost: the not-switchable groups are in their own row
    assert res.summary()["not_measurable"].keys() == {"conv", "gemm"}
    assert gpu.enabled == set(range(len(NODES)))


def test_a_group_whose_switching_fails_mid_run_is_set_aside_and_the_step_goes_on() -> None:
    class FlakyNorm(FakeGraphGPU):
        def set_enabled(self, indices: Sequence[int] | None) -> None:
            if indices is not None and 3 in indices and 1 not in indices and 0 not in indices:
                raise SwitchError({3: "enable: CUDA error 912 (cluster misconfiguration)"})
            super().set_enabled(indices)

    gpu = FlakyNorm(NODES)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=3, marginal=False)
    rows = {r.group: r for r in res.rows}
    assert not rows["norm"].measurable and "switching failed" in rows["norm"].reason
    assert rows["conv"].measurable and rows["gemm"].measurable
    assert any("failed to switch" in n for n in res.notes)


def test_excluded_groups_are_kept_on_with_their_reason() -> None:
    gpu = FakeGraphGPU(NODES)
    seen: list[tuple[str, str]] = []
    res = replay_energy(
        gpu, measure_on(gpu), gpu.clock, top=1, marginal=False,
        exclude={"relu": "lost the CUDA context when replayed alone"}, on_trial=lambda g, w: seen.append((g, w)),
    )  # fmt: skip
    rows = {r.group: r for r in res.rows}
    assert rows["relu"].reason == "lost the CUDA context when replayed alone" and not rows["relu"].measurable
    assert ("relu", "alone") not in seen and ("relu", "timing") not in seen  # never replayed without the rest
    assert (PINNED, "base") in seen and ("conv", "alone") in seen and seen[0] == (PINNED, "timing")
    assert rows[PINNED].energy_j == pytest.approx(gpu.truth_j([1, 6]), rel=0.05)


def test_cli_prints_the_way_chosen_what_was_not_measured_and_the_spread(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import archline.measurement.attribute.replay as replay_mod
    from archline.cli.app import app

    def fake_run_replay(step: Any, *, out: Any, force: bool, repeats: int, **kw: Any) -> Any:
        gpu = FakeGraphGPU(NODES, fixed_by=None)
        res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=2, marginal=False, repeats=repeats)
        return write_fake_replay(out, force, res)

    monkeypatch.setattr(replay_mod, "run_replay", fake_run_replay)
    script = tmp_path / "s.py"
    script.write_text("def make():\n    return lambda: None\n")
    out = tmp_path / "r"
    res = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--repeats", "2"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "nodes switched by 'toggle' (3 could not be)" in text
    assert "not measured: conv: 2 of 2 nodes cannot be switched off" in text
    assert "run-to-run spread over 2 runs" in text and "against 3 %" in text
    md = (out / "report.md").read_text()
    assert "not measured because" in md and "Nodes switched by 'toggle' (3 nodes could not be)" in md
    bad = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(out), "--repeats", "0"])
    assert bad.exit_code == 2 and "--repeats must be at least 1" in bad.output

"""Graph replay on a fake captured step with known per-node energies: isolated, marginal, the sum."""

from __future__ import annotations

import json
from typing import Any

import pytest

from archline.measurement.attribute.replay import REST, group_nodes, kept_nodes, replay_energy
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, measure_on, watch_enabled

NODES = [
    FakeNode("gemm", 0.004, 600.0),
    FakeNode("relu", 0.0005, 300.0),
    FakeNode("gemm", 0.004, 600.0),
    FakeNode("norm", 0.0015, 350.0),
    FakeNode("copy", 0.0003, 200.0, kind="memcpy"),
    FakeNode("relu", 0.0005, 300.0),
]


def test_groups_are_kernel_names_and_copy_kinds() -> None:
    gpu = FakeGraphGPU(NODES)
    assert group_nodes(gpu.nodes) == {"gemm": [0, 2], "relu": [1, 5], "norm": [3], "[memcpy]": [4]}


def test_isolated_and_marginal_energies_recover_the_truth() -> None:
    gpu = FakeGraphGPU(NODES)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=2)
    step = gpu.truth_j(range(len(NODES)))
    assert res.step_energy_j == pytest.approx(step, rel=0.02)
    rows = {r.group: r for r in res.rows}
    assert list(rows)[:2] == ["gemm", "norm"]  # the two longest groups, longest first
    for name, idx in (("gemm", [0, 2]), ("norm", [3])):
        r = rows[name]
        truth = gpu.truth_j(idx)
        assert abs(r.energy_j - truth) <= max(3 * r.energy_sigma_j, 0.02 * truth), (name, r, truth)
        assert r.marginal_j is not None and r.marginal_j == pytest.approx(truth, rel=0.05)
        assert r.time_s == pytest.approx(sum(NODES[i].time_s for i in idx), rel=1e-4)
    assert rows[REST].nodes_per_step == 3
    assert abs(res.sum_vs_step_pct) < 2.0
    assert gpu.enabled == set(range(len(NODES)))  # every node enabled again


def test_memsets_stay_enabled_in_every_replay() -> None:
    nodes = [*NODES, FakeNode("memset", 0.00001, 150.0, kind="memset")]
    gpu = FakeGraphGPU(nodes)
    seen = watch_enabled(gpu)
    assert "[memset]" not in group_nodes(gpu.nodes)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=1, marginal=False)
    assert seen and all(6 in s for s in seen)
    assert any("memsets stay enabled" in n for n in res.notes)


INIT = (
    "_ZN21cask_plugin__5x_cudnn14xmma__5x_cudnn28init_device_workspace_kernelIN14xmma__5x_cudnn13implicit_gemm"
    "13wgrad_indexedEEvT_b"
)
WGRAD = "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_execute_segment_k_on_kernel__5x_cudnn"


def test_a_workspace_set_up_kernel_stays_enabled_in_every_replay_and_is_no_group() -> None:
    nodes = [*NODES, FakeNode(INIT, 0.00001, 150.0), FakeNode(WGRAD, 0.003, 650.0)]
    gpu = FakeGraphGPU(nodes)
    seen = watch_enabled(gpu)
    assert INIT not in group_nodes(gpu.nodes) and WGRAD in group_nodes(gpu.nodes)
    assert kept_nodes(gpu.nodes) == [6]
    # the comparison benchmarks/replay_probe.py makes: without the rule the set-up kernel is a group of its own
    assert INIT in group_nodes(gpu.nodes, workspace_init=False) and kept_nodes(gpu.nodes, workspace_init=False) == []
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=2, marginal=False)
    assert seen and all(6 in s for s in seen)
    # the weight-gradient group alone ran with its workspace's set-up kernel, never without it
    assert any(s == {6, 7} for s in seen)
    assert WGRAD in {r.group for r in res.rows} and INIT not in {r.group for r in res.rows}
    assert any("1 workspace set-up kernels (" in n and "init_device_workspace_kernel" in n for n in res.notes)


def test_top_must_be_positive() -> None:
    gpu = FakeGraphGPU(NODES)
    with pytest.raises(ValueError):
        replay_energy(gpu, measure_on(gpu), gpu.clock, top=0)


def test_cli_errors_are_one_line_exit_2(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from archline.cli.app import app

    script = tmp_path / "s.py"
    script.write_text("def make():\n    return lambda: None\n\ndef boom():\n    raise ValueError('no data')\n")
    cases = [
        ("nocolon", "expected SCRIPT.py:FUNCTION"),
        (f"{tmp_path / 'missing.py'}:f", "no such script"),
        (f"{script}:absent", "has no function 'absent'"),
        (f"{script}:boom", "raised ValueError: no data"),
    ]
    for target, needle in cases:
        res = CliRunner().invoke(app, ["replay", target, "-o", str(tmp_path / "r")])
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output and needle in res.output, res.output


def test_the_set_up_rule_names_only_the_set_up_kernel_among_every_shipped_replays_groups() -> None:
    # every group name graph replay measured on the shipped H100/H200 steps (ResNet-50, VGG-16, transformers, MLP,
    # decode): the rule keeps on cuDNN's workspace set-up kernel and nothing else
    import csv
    from pathlib import Path

    from archline.measurement.attribute.replay import WORKSPACE_INIT

    root = Path(__file__).resolve().parents[2] / "results"
    names = {r["group"] for f in root.glob("**/replay.csv") for r in csv.DictReader(f.read_text().splitlines())}
    assert len(names) > 100
    hit = {n for n in names if WORKSPACE_INIT.search(n)}
    assert len(hit) == 1 and "init_device_workspace_kernel" in next(iter(hit))
    # since session 30 the kernels kept on are no group: the replays' notes name them, and name only that kernel
    kept = [
        n
        for f in root.glob("**/*manifest.json")
        for n in json.loads(f.read_text()).get("notes", [])
        if "workspace set-up kernels (" in n
    ]
    assert len(kept) >= 3  # session 30's VGG-16 replays (two run sets and the CLI's)
    for note in kept:
        inside = note.split("workspace set-up kernels (", 1)[1].rsplit(") stay enabled", 1)[0]
        assert inside == "cask_plugin__5x_cudnn::xmma__5x_cudnn::init_device_workspace_kernel<…>(…)", note

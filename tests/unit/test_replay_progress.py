"""Graph replay's progress lines (replay_progress.py): one at each new kind of trial, and while one goes on."""

from __future__ import annotations

from typing import Any

from archline.measurement.attribute.replay import replay_energy
from archline.measurement.attribute.replay_progress import ReplayProgress
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure

NODES = [
    FakeNode("gemm", 0.004, 600.0),
    FakeNode("relu", 0.0005, 300.0),
    FakeNode("gemm", 0.004, 600.0),
    FakeNode("norm", 0.0015, 350.0),
    FakeNode("softmax", 0.001, 320.0),
]


def test_a_line_at_each_new_kind_of_trial_and_every_interval_within_one() -> None:
    t = [0.0]
    lines: list[str] = []
    p = ReplayProgress(lambda: t[0], lines.append, every_s=30.0)
    p("[capture]", "capture")
    t[0] = 4.0
    p("gemm", "timing")
    for _ in range(5):  # the design: a line when it starts, one more once 30 s have passed, not at every trial
        t[0] += 10.0
        p("[design]", "design")
    assert lines == [
        "replay: capturing the step as a CUDA graph (0 s)",
        "replay: timing each group: 1 so far (4 s)",
        "replay: the design's configurations: 1 so far (14 s)",
        "replay: the design's configurations: 4 so far (44 s)",
    ]
    t[0] += 1.0
    p("gemm", "alone")
    assert lines[-1] == "replay: groups alone: 1 so far (55 s)"
    assert p.counts == {"capture": 1, "timing": 1, "design": 5, "alone": 1}


def test_a_fake_replay_with_a_design_reports_every_phase_in_order() -> None:
    gpu = FakeGraphGPU(NODES, fixed_s=0.002, fixed_w=120.0)
    lines: list[str] = []
    p = ReplayProgress(gpu.clock.now_s, lines.append, every_s=1e9)
    m = NoisyMeasure(gpu, rel=0.005, seed=1)
    res: Any = replay_energy(gpu, m, gpu.clock, top=2, marginal=True, design=12, design_seed=1, on_trial=p)
    assert res.rows
    kinds = [line.split(":")[1].strip() for line in lines]
    # timing first, then the design, then each pass: the whole step, groups alone and switched off, the rest
    assert kinds[:2] == ["timing each group", "the design's configurations"]
    for later in ("the whole step", "groups alone", "groups switched off", "the rest"):
        assert later in kinds[2:], (later, kinds)
    assert p.counts["design"] >= 12 and p.counts["alone"] >= 2 and p.counts["without"] >= 2
    assert all(line.startswith("replay: ") and line.endswith(" s)") for line in lines)


def test_kinds_that_alternate_print_their_first_trial_then_every_interval() -> None:
    """The fixed cost measured between the groups alone: a line for each kind's first trial, then one per 30 s."""
    t = [0.0]
    lines: list[str] = []
    p = ReplayProgress(lambda: t[0], lines.append, every_s=30.0)
    for _ in range(6):
        p("gemm", "alone")
        t[0] += 2.0
        p("[fixed]", "base")
        t[0] += 2.0
    assert lines == ["replay: groups alone: 1 so far (0 s)", "replay: the fixed cost (no group on): 1 so far (2 s)"]
    t[0] = 40.0
    p("gemm", "alone")
    assert lines[-1] == "replay: groups alone: 7 so far (40 s)" and len(lines) == 3

"""Graph replay restores the step's state: a step whose data a switched-off replay poisons is measured clean.

On real GPUs, replays with nodes switched off left every weight of a training step NaN, and the step then drew
13–26 % less energy (benchmarks/replay_data_check.py). Here the fake step draws 20 % less while poisoned; a
replay with any node off poisons it, and only the graph's ``restore_state`` cleans it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pytest

from archline.measurement.attribute.replay import replay_energy
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, measure_on

NODES = [
    FakeNode("gemm", 0.004, 600.0),
    FakeNode("relu", 0.0005, 300.0),
    FakeNode("gemm", 0.004, 600.0),
    FakeNode("norm", 0.0015, 350.0),
]


class PoisonedGPU(FakeGraphGPU):
    """A replay with some node off leaves the data non-finite; every node then draws 80 % of its power."""

    def __init__(self, nodes: Sequence[FakeNode], fixed_s: float = 0.0) -> None:
        super().__init__(nodes, fixed_s=fixed_s)
        self.poisoned = False
        self.restores = 0

    def power_w(self, i: int, enabled: Sequence[int] | set[int]) -> float:
        return super().power_w(i, enabled) * (0.8 if self.poisoned else 1.0)

    def replay(self) -> None:
        super().replay()
        if len(self.enabled) < len(self.nodes):
            self.poisoned = True

    def reset_state(self) -> None:
        self.poisoned = False

    def restore_state(self) -> bool:
        was_clean = not self.poisoned
        self.poisoned = False
        self.restores += 1
        return was_clean


class Unguarded(PoisonedGPU):
    """The same step with no state to restore (the replay cannot find the step's tensors)."""

    restore_state = None  # type: ignore[assignment]
    reset_state = None  # type: ignore[assignment]


def test_the_whole_step_is_measured_on_clean_data_when_the_state_is_restored() -> None:
    gpu = PoisonedGPU(NODES)
    between: list[bool] = []
    measure = functools.partial(measure_on(gpu), between=lambda: between.append(gpu.restore_state()))
    res = replay_energy(gpu, measure, gpu.clock, top=2, marginal=False)
    truth = gpu.truth_j(range(len(NODES)))
    assert res.step_energy_j == pytest.approx(truth, rel=0.03)
    # after each repetition of each measurement (whole step, two groups alone, the rest, the copy alone)...
    assert len(between) >= 2 * 5
    # ...and besides, before each timing (the base and three groups) and each of the four trials measured (this
    # fake's empty replay takes no time: there is no fixed cost to measure)
    assert gpu.restores == len(between) + 4 + 4


def test_without_a_state_the_step_is_measured_poisoned() -> None:
    gpu = Unguarded(NODES)
    res = replay_energy(gpu, measure_on(gpu), gpu.clock, top=2, marginal=False)
    truth = gpu.truth_j(range(len(NODES)))
    assert res.step_energy_j == pytest.approx(0.8 * truth, rel=0.03)


def test_isolated_and_in_step_energies_are_measured_on_clean_data() -> None:
    """Reset before every switched replay: no replay starts poisoned, so isolated groups and the randomized
    design see the step's real data (here: the truth), where unguarded they are 20 % low."""
    gpu = PoisonedGPU(NODES)
    measure = functools.partial(measure_on(gpu), between=gpu.restore_state)
    res = replay_energy(gpu, measure, gpu.clock, top=2, marginal=False)
    gemm = next(r for r in res.rows if r.group == "gemm")
    assert gemm.energy_j == pytest.approx(gpu.truth_j([0, 2]), rel=0.03)
    bad = Unguarded(NODES)
    res_bad = replay_energy(bad, measure_on(bad), bad.clock, top=2, marginal=False)
    gemm_bad = next(r for r in res_bad.rows if r.group == "gemm")
    assert gemm_bad.energy_j == pytest.approx(0.8 * bad.truth_j([0, 2]), rel=0.03)


class _Count:
    """What the replay reads of a guarded graph's state: how often it was found non-finite."""

    nonfinite = 0


class ProducerPoisons(PoisonedGPU):
    """Only a replay that runs the second gemm (node 2) without its producer, relu (node 1), leaves NaN."""

    def __init__(self, nodes: Sequence[FakeNode]) -> None:
        super().__init__(nodes, fixed_s=0.0005)  # a replay with no node enabled still takes time
        self.state = _Count()

    def replay(self) -> None:
        FakeGraphGPU.replay(self)
        if 1 not in self.enabled and 2 in self.enabled:
            self.poisoned = True

    def restore_state(self) -> bool:
        ok = super().restore_state()
        self.state.nonfinite += 0 if ok else 1
        return ok


def test_rows_and_design_configurations_record_which_replays_left_nan() -> None:
    gpu = ProducerPoisons(NODES)
    measure = functools.partial(measure_on(gpu), between=gpu.restore_state, target_rel_error=0.1, max_total_s=1.0)
    res = replay_energy(gpu, measure, gpu.clock, top=3, marginal=False, design=10, design_seed=3)
    rows = {r.group: r for r in res.rows}
    assert rows["gemm"].nonfinite_reps > 0  # gemm alone: node 2 runs, relu does not
    assert rows["norm"].nonfinite_reps == 0 and rows["relu"].nonfinite_reps == 0
    assert res.design is not None
    order = list(rows)  # the design's factors are the measurable groups, longest first
    cols = {g: k for k, g in enumerate(sorted((g for g in ("gemm", "relu", "norm")), key=order.index))}
    for c in res.design["configs"]:
        on = c["on"]
        poisoning = on[cols["gemm"]] == "1" and on[cols["relu"]] == "0"
        assert (c["nonfinite"] > 0) == poisoning, c
    assert res.design["nonfinite_configs"] == sum(1 for c in res.design["configs"] if c["nonfinite"] > 0) > 0


class CostlyCopy(PoisonedGPU):
    """The state copy takes 1 ms at 500 W on the board, as a real one takes time and energy."""

    def reset_state(self) -> None:
        super().reset_state()
        a = self.clock.now_s()
        self.clock.sleep(0.001)
        with self._lock:
            self.intervals.append((a, self.clock.now_s(), 500.0))


def test_the_state_copy_is_taken_out_of_switched_measurements() -> None:
    gpu = CostlyCopy(NODES, fixed_s=0.0005)
    measure = functools.partial(measure_on(gpu), between=gpu.restore_state)
    res = replay_energy(gpu, measure, gpu.clock, top=2, marginal=True, prime=True)
    rows = {r.group: r for r in res.rows}
    truth = gpu.truth_j([0, 2])
    assert rows["gemm"].energy_j == pytest.approx(truth + 0.0005 * 100.0, rel=0.03)  # alone: its c0, no copy
    assert rows["gemm"].marginal_j == pytest.approx(truth, rel=0.05)  # whole − without: no copy on either side
    assert any("state copy" in n and "taken out" in n for n in res.notes)

"""The prefix design: random prefixes of the step, so no kernel runs without the kernels before it.

On a real step a kernel whose producer is switched off reads what the graph left in the producer's buffer
and draws less power on it (docs/replay.md). Here each node after the first draws 80 % of its power in a
replay where the node before it is off: the halves design then puts the groups' in-step energies low, the
prefix design recovers them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from archline.measurement.attribute.replay import replay_energy
from archline.measurement.attribute.replay_context import prefix_rows
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure

FIXED_S, FIXED_W = 0.003, 100.0


class ProducerFed(FakeGraphGPU):
    """Node i draws 80 % of its power while node i − 1, its producer, is switched off."""

    def power_w(self, i: int, enabled: Sequence[int] | set[int]) -> float:
        p = super().power_w(i, enabled)
        return p * 0.8 if i > 0 and (i - 1) not in enabled else p


def interleaved(groups: int = 8, rounds: int = 4) -> list[FakeNode]:
    """``rounds`` passes over ``groups`` kernel names (a layer's kernels, layer after layer)."""
    rng = np.random.default_rng(7)
    kinds = [(float(rng.uniform(0.0005, 0.003)), float(rng.uniform(200.0, 600.0))) for _ in range(groups)]
    return [FakeNode(f"k{g}", t, p) for _ in range(rounds) for g, (t, p) in enumerate(kinds)]


def _errors(kind: str, seed: int) -> tuple[dict[str, float], dict[str, float]]:
    nodes = interleaved()
    gpu = ProducerFed(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed), gpu.clock, top=2, marginal=False,
                        design=60, design_seed=seed, design_kind=kind)  # fmt: skip
    every = list(range(len(nodes)))
    truth = {g: gpu.in_replay_j([n.index for n in gpu.nodes if n.name == g], every) for g in {n.name for n in nodes}}
    got = {r.group: r.context_j for r in res.rows if r.context_j is not None and r.group in truth}
    assert set(got) == set(truth)
    assert res.design is not None and res.design["kind"] == kind
    return {g: got[g] / truth[g] - 1.0 for g in truth}, truth


def test_prefixes_recover_in_step_energies_where_halves_read_corrupted_inputs() -> None:
    for seed in range(3):
        pre, truth = _errors("prefix", seed)
        halves, _ = _errors("halves", seed)
        w = {g: truth[g] / sum(truth.values()) for g in truth}
        assert sum(w[g] * abs(pre[g]) for g in truth) < 0.03, pre
        # every consumer read its producer's buffer half the time: about 10 % low
        assert sum(w[g] * halves[g] for g in truth) < -0.05, halves


def test_prefix_rows_enable_a_prefix_and_give_each_groups_share() -> None:
    cols = [[0, 2, 4], [1, 5], [3]]
    x, enabled = prefix_rows(cols, 12, np.random.default_rng(0))
    assert x.shape == (12, 3) and np.all(x[0] == 1.0) and np.all(x[1] == 0.0)
    for row, on in zip(x[2:], enabled, strict=True):
        assert on == list(range(len(on))) and 1 <= len(on) <= 6  # a prefix of the capture order
        assert row == pytest.approx([sum(i in on for i in c) / len(c) for c in cols])


def test_an_unknown_design_kind_is_refused() -> None:
    gpu = FakeGraphGPU(interleaved(2, 2), fixed_s=FIXED_S, fixed_w=FIXED_W)
    with pytest.raises(ValueError, match="design kind"):
        replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, design=10, design_kind="thirds")


@pytest.mark.parametrize("kind", ["halves", "prefix"])
def test_the_design_fits_each_groups_time_in_the_step_and_priors_carry_it(kind: str) -> None:
    from archline.measurement.attribute.prior import priors_from_replay

    nodes = interleaved()
    gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=1), gpu.clock, top=2, marginal=False, design=60,
                        design_seed=1, design_kind=kind)  # fmt: skip
    for r in res.rows:
        if r.context_time_s is not None:
            want = sum(n.time_s for n in nodes if n.name == r.group)
            assert r.context_time_s == pytest.approx(want, rel=1e-3), r.group  # the fake clock ticks in ~0.3 µs
    pri = priors_from_replay(res)
    assert pri["k0"].time_per_call_s == pytest.approx(nodes[0].time_s, rel=1e-3)  # the step's own, per call


def test_a_prefix_design_needs_two_nodes_and_says_so() -> None:
    with pytest.raises(ValueError, match="at least two nodes"):
        prefix_rows([[0]], 10, np.random.default_rng(0))
    gpu = FakeGraphGPU([FakeNode("only", 0.002, 400.0)], fixed_s=FIXED_S, fixed_w=FIXED_W)
    res = replay_energy(gpu, NoisyMeasure(gpu), gpu.clock, top=1, marginal=False, design=10, design_kind="prefix")
    assert res.design is None and any("at least two nodes" in n for n in res.notes)


def test_d_optimal_cuts_carry_more_information_than_random_ones() -> None:
    cols = [list(range(g, 48, 8)) for g in range(8)]  # 8 groups, 6 layers each
    x_d, en_d = prefix_rows(cols, 30, np.random.default_rng(1))
    x_r, _ = prefix_rows(cols, 30, np.random.default_rng(1), choose="random")

    def logdet(x: np.ndarray) -> float:  # the weighted information of the fit's model, noise relative to E
        a = np.hstack([np.ones((x.shape[0], 1)), x])
        w = 1.0 / (0.02 + x.mean(axis=1)) ** 2
        return float(np.linalg.slogdet((a * w[:, None]).T @ a)[1])

    assert logdet(x_d) > logdet(x_r)
    assert len({len(on) for on in en_d}) == len(en_d)  # distinct cuts while there are enough
    with pytest.raises(ValueError, match="way of choosing cuts"):
        prefix_rows(cols, 30, np.random.default_rng(1), choose="best")

"""A replay's fixed cost in isolated energies: what still has to come out of them (replay_result), and the run
report's comparison against graph replay taking it out of replays recorded before session 11."""

from __future__ import annotations

import pytest

from archline.measurement.attribute.replay_result import FIXED, PINNED, design_c0, fixed_cost_to_take_out
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

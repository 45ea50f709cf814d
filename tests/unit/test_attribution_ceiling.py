"""A kernel's bound on its mean power (measurement/attribute/ceiling.py): the limit where it fills the windows, the
measured burst ceiling between others; the shipped H100 burst measurement read back; and the attribution of a
steady loop whose kernels draw more than the limit in bursts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from archline.measurement.attribute.attribution import AttributionOptions
from archline.measurement.attribute.ceiling import (
    LIMIT_SLACK,
    ceiling_from_file,
    kernel_bounds,
    shipped_burst_ceiling,
)
from tests.helpers.attrib_steady import LAGGED_BUFFER
from tests.unit.test_attribution_prior import _attribute

ROOT = Path(__file__).resolve().parents[2]
H100_BURST = ROOT / "results" / "h100" / "bench" / "burst-power" / "burst_power-GPU-0e8d9f19.json"


def test_bounds_are_the_ceiling_between_others_and_the_limit_where_a_kernel_fills_a_window() -> None:
    # windows of 10 ms: column 0 fills one window, column 1 at most 20 % of one, column 2 at most 80 %
    x = np.array([[0.010, 0.0, 0.0], [0.006, 0.002, 0.002], [0.002, 0.0, 0.008]])
    b = kernel_bounds(x, 700.0, 959.0)
    assert b[0] == pytest.approx(LIMIT_SLACK * 700.0)
    assert b[1] == pytest.approx(LIMIT_SLACK * 959.0)  # 735 W / 0.2 is far above the ceiling
    assert b[2] == pytest.approx(LIMIT_SLACK * 700.0 / 0.8)  # 919 W: under the ceiling's 1007 W
    assert np.all(kernel_bounds(x, 700.0) == LIMIT_SLACK * 700.0)  # no ceiling: the limit everywhere
    assert np.all(kernel_bounds(x, 700.0, 650.0) == LIMIT_SLACK * 700.0)  # a ceiling under the limit adds nothing
    assert np.all(np.isinf(kernel_bounds(x, None, 959.0)))  # no limit known: no bound


def test_the_ceiling_of_a_burst_measurement_is_its_highest_power_measured_above_the_limit(tmp_path: Path) -> None:
    rows = [
        {"gemm_w": 706.0, "verdict": "below"},
        {"gemm_w": 889.0, "verdict": "above"},
        {"gemm_w": 1200.0, "verdict": "unresolved"},  # too noisy to count
        {"gemm_w": 939.0, "verdict": "above"},
    ]
    f = tmp_path / "h100" / "bench" / "burst-power" / "burst_power-GPU-x.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"board": "B", "uuid": "GPU-x", "rows": rows}))
    c = ceiling_from_file(f)
    assert c is not None and c.power_w == 939.0 and c.board == "B" and "939 W" in c.describe()
    got = shipped_burst_ceiling("B", [tmp_path])
    assert got is not None and got.power_w == 939.0 and got.source == f"{tmp_path.name}/h100/bench/burst-power/{f.name}"
    assert shipped_burst_ceiling("another board", [tmp_path]) is None
    f.write_text(json.dumps({"board": "B", "rows": rows[:1]}))
    assert ceiling_from_file(f) is None  # nothing above the limit: the limit holds
    f.write_text("{not json")
    assert ceiling_from_file(f) is None


def test_the_shipped_h100_measurements_give_their_highest_burst() -> None:
    files = sorted((ROOT / "results").glob("*/bench/burst-power/burst_power-*.json"))
    assert H100_BURST in files
    best = (0.0, "")
    for f in files:
        data = json.loads(f.read_text())
        if data["board"] != "NVIDIA H100 80GB HBM3":
            continue
        above = [r["gemm_w"] for r in data["rows"] if r["verdict"] == "above"]
        assert above and max(above) > LIMIT_SLACK * data["power_limit_w"]  # every H100 board bursts above its limit
        best = max(best, (max(above), data["uuid"]))
    c = shipped_burst_ceiling("NVIDIA H100 80GB HBM3", [ROOT / "results"])
    assert c is not None and (c.power_w, c.uuid) == best and c.source.startswith("results/h100/bench/burst-power/")


def test_a_kernel_between_others_may_draw_more_than_the_limit_one_that_fills_the_windows_may_not() -> None:
    # The steady loop's conv_fwd draws 450 W in 12 ms runs, conv_bwd 520 W in 25 ms runs, on a "400 W" board.
    # Bounded by the limit alone, both are pinned at 420 W. With a 600 W burst ceiling conv_fwd is recovered;
    # conv_bwd fills whole 20 ms windows, so its bound stays near the limit and it is still held there.
    by = {}
    for ceiling in (None, 600.0):
        opts = AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=400.0, power_ceiling_w=ceiling)
        by[ceiling] = _attribute(1, opts)[1]
    assert not by[None].table["conv_fwd"].identifiable and "limit" in by[None].table["conv_fwd"].note
    fwd = by[600.0].table["conv_fwd"]
    assert fwd.identifiable and fwd.mean_power_w == pytest.approx(450.0, rel=0.05)
    # above the limit × 1.05 and within its bound: identified, and its note says why that is possible
    assert "above the 400 W limit × 1.05" in fwd.note and "burst ceiling" in fwd.note
    assert (
        "above the" not in by[600.0].table["conv_bwd"].note.split(";")[-1]
        or not by[600.0].table["conv_bwd"].identifiable
    )
    bounds = by[600.0].extra["power_bound_w"]
    assert bounds["conv_fwd"] == pytest.approx(LIMIT_SLACK * 600.0)
    assert LIMIT_SLACK * 400.0 <= bounds["conv_bwd"] < LIMIT_SLACK * 600.0
    bwd = by[600.0].table["conv_bwd"]
    assert bwd.mean_power_w <= bounds["conv_bwd"] + 1e-6 and not bwd.identifiable and "bound" in bwd.note
    assert by[600.0].extra["power_ceiling_w"] == 600.0
    from archline.measurement.attribute.attribution import _bound_rule

    rule = _bound_rule(AttributionOptions(power_limit_w=400.0, power_ceiling_w=600.0))
    assert rule == "min(600 W burst ceiling, the 400 W limit / its largest share of a window) × 1.05"
    assert _bound_rule(AttributionOptions(power_limit_w=400.0)) == "the 400 W limit × 1.05"
    assert sum(r.energy_j for r in by[600.0].rows) == pytest.approx(by[600.0].total_energy_j, rel=1e-9)
    assert all(math.isfinite(v) for v in bounds.values())


def test_an_h200_gets_its_own_shipped_ceiling_not_the_h100s() -> None:
    # session 13: the first H200 burst measurement; before it an H200's rows were bounded by the limit alone
    c = shipped_burst_ceiling("NVIDIA H200", [ROOT / "results"])
    h100 = shipped_burst_ceiling("NVIDIA H100 80GB HBM3", [ROOT / "results"])
    assert c is not None and h100 is not None
    assert c.uuid.startswith("GPU-339faabf") and c.source.startswith("results/h200/bench/burst-power/")
    assert 1000.0 < c.power_w < 1100.0 and c.power_w != h100.power_w
    assert shipped_burst_ceiling("NVIDIA B200", [ROOT / "results"]) is None

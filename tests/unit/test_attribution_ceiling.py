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
    AT_LIMIT_WARN,
    LIMIT_SLACK,
    at_limit,
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


def test_the_share_at_the_limit_counts_the_readings_taken_while_kernels_ran() -> None:
    t = np.arange(10.0)
    p = np.array([120.0, 690.0, 700.0, 679.0, 500.0, 710.0, np.nan, 700.0, 699.0, 700.0])
    got = at_limit(t, p, (1.0, 8.0), 700.0)  # 1..8: 690 700 679 500 710 NaN 700 699 -> 7 finite readings
    assert got.readings == 7 and got.share == pytest.approx(6 / 7)  # ≥ 679 W (97 % of 700 W): all but the 500 W
    assert got.warned and "in 86 % of the power buffer's 7 readings" in got.warning()
    none = at_limit(t, p, (20.0, 30.0), 700.0)
    assert none.readings == 0 and none.share == 0.0 and not none.warned
    assert not at_limit(t, p, (1.0, 8.0), 2000.0).warned


def test_a_run_at_its_power_limit_is_warned_of_and_one_below_it_is_not() -> None:
    # the steady loop's convolutions draw 450–520 W: on a "400 W" board it sits at the limit much of its busy time
    at = _attribute(1, AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=400.0))[1]
    below = _attribute(1, AttributionOptions(buffer_model=LAGGED_BUFFER, power_limit_w=2000.0))[1]
    info = at.extra["at_limit"]
    assert info["share"] >= AT_LIMIT_WARN and info["readings"] > 100 and info["limit_w"] == 400.0
    assert sum(n.startswith("the board was at its power limit (≥ 97 % of 400 W) in ") for n in at.notes) == 1
    assert below.extra["at_limit"]["share"] == 0.0 and not any("at its power limit" in n for n in below.notes)
    assert _attribute(1, AttributionOptions(buffer_model=LAGGED_BUFFER))[1].extra["at_limit"] is None  # no limit known


def test_the_warning_is_read_back_from_an_attributions_extra() -> None:
    from archline.measurement.attribute.ceiling import at_limit_warning

    at = {"at_limit": {"share": 0.58, "readings": 612, "limit_w": 700.0, "fraction": 0.97}}
    assert (w := at_limit_warning(at)) is not None and "in 58 % of the power buffer's 612 readings" in w
    assert at_limit_warning({"at_limit": {"share": 0.1, "readings": 612, "limit_w": 700.0}}) is None
    for extra in ({}, {"at_limit": None}, {"at_limit": {"share": "x"}}, {"at_limit": {"readings": 3}}):
        assert at_limit_warning(extra) is None


def test_the_at_limit_table_finds_runs_and_says_what_it_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.bench import load_bench

    table = load_bench("at_limit_table")
    assert table.main([]) == 2
    assert table.main([str(tmp_path)]) == 2 and str(tmp_path) in capsys.readouterr().err
    run = tmp_path / "set" / "w-run"
    (run / "raw").mkdir(parents=True)
    (run / "raw" / "recording.npz").write_bytes(b"")
    assert table.runs([tmp_path / "set"]) == [run] and table.runs([run]) == [run]
    (run / "manifest.json").write_text("{}")
    assert table.main([str(tmp_path / "set")]) == 0
    assert capsys.readouterr().out.strip() == f"{run}: no raw CUPTI trace (scripts/restore_traces.sh)"
    (tmp_path / "set" / "summary.json").write_text('{"workloads": {"w": {"identifiable_within_15pct_share": 0.435}}}')
    assert table.within_15(run) == " 43.5"


def test_the_at_limit_table_stops_with_one_line_on_a_run_missing_its_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.bench import load_bench

    run = tmp_path / "w-run"
    (run / "raw").mkdir(parents=True)
    (run / "raw" / "recording.npz").write_bytes(b"")
    assert load_bench("at_limit_table").main([str(run)]) == 2  # no manifest.json
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(run) in err[0] and "manifest.json" in err[0]

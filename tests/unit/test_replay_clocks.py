"""Graph replay records what the clocks did while each group was measured alone (session 22: a GEMM alone above the
power limit ran 8 % lower in power in one process than in the next, and nothing said whether its clocks were held
down): the row's SM clock and clock-event reasons, replay.csv's columns, the report's warning, replay_across's line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archline.measurement.attribute.replay import replay_energy
from archline.records.replay import REPLAY_COLUMNS
from archline.report.replay import clock_warning, replay_table
from tests.helpers.bench import load_bench
from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure

NODES = [FakeNode("gemm", 0.004, 900.0), FakeNode("norm", 0.0015, 350.0), FakeNode("gemm", 0.004, 900.0),
         FakeNode("relu", 0.0005, 300.0)]  # fmt: skip
GEMMS = {0, 2}


@dataclass(frozen=True)
class _Clocked:
    energy_j: float
    energy_uncertainty_j: float
    time_s: float
    mean_power_w: float
    sm_clock_mhz: float | None
    clock_event_reasons: str


class _ClockedMeasure:
    """NoisyMeasure, with the board holding its clocks at ``held`` MHz (sw_power_cap) while the GEMMs run alone
    (None: never)."""

    def __init__(self, gpu: FakeGraphGPU, held: float | None, seed: int = 0) -> None:
        self.gpu, self.held, self.inner = gpu, held, NoisyMeasure(gpu, seed=seed)

    def __call__(self, fn: Callable[[], None]) -> _Clocked:
        alone = set(self.gpu.enabled) == GEMMS
        m = self.inner(fn)
        mhz, why = (self.held, "sw_power_cap") if alone and self.held is not None else (1980.0, "")
        return _Clocked(m.energy_j, m.energy_uncertainty_j, m.time_s, m.mean_power_w, mhz, why)


def _replay(held: float | None, seed: int = 0, repeats: int = 1) -> Any:
    gpu = FakeGraphGPU(NODES)
    return replay_energy(gpu, _ClockedMeasure(gpu, held, seed), gpu.clock, top=2, marginal=False, repeats=repeats)


def test_each_row_keeps_the_clocks_of_its_own_isolated_measurement() -> None:
    res = _replay(1700.0, repeats=2)
    rows = {r.group: r for r in res.rows}
    assert rows["gemm"].sm_clock_mhz == 1700.0 and rows["gemm"].clock_event_reasons == "sw_power_cap"
    assert rows["norm"].sm_clock_mhz == 1980.0 and rows["norm"].clock_event_reasons == ""
    row = rows["gemm"].to_row()
    assert {"sm_clock_mhz", "clock_event_reasons"} <= set(REPLAY_COLUMNS) and row["sm_clock_mhz"] == 1700.0


def test_the_report_shows_the_clocks_and_warns_of_groups_held_down() -> None:
    rows = [r.to_row() for r in _replay(1700.0).rows]
    t = replay_table(rows)
    col = t.header.index("SM clock alone (MHz; clock-event reasons)")
    got = {r[0]: r[col] for r in t.rows}
    assert got["gemm"] == "1700 (sw_power_cap)" and got["norm"] == "1980"
    warn = clock_warning(rows)
    assert warn is not None and warn.startswith("1 group measured alone while the board slowed its clocks: gemm")
    assert clock_warning([{**r, "clock_event_reasons": ""} for r in rows]) is None
    # replays from before session 22 have neither column: no column, no warning
    old = [{k: v for k, v in r.items() if k not in ("sm_clock_mhz", "clock_event_reasons")} for r in rows]
    assert "SM clock alone (MHz; clock-event reasons)" not in replay_table(old).header and clock_warning(old) is None


def test_replay_across_prints_each_runs_clock_where_the_replays_recorded_it(tmp_path: Path, capsys: Any) -> None:
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    dirs = []
    for k, held in enumerate((1700.0, None)):
        res = _replay(held, seed=k)
        rd = RunDir.create(tmp_path / f"r{k}", Manifest.new("replay", gpu={"name": "fake", "uuid": "GPU-fake"}))
        write_replay(rd, [r.to_row() for r in res.rows], res.summary())
        rd.finish("complete")
        dirs.append(str(rd.path))
    load_bench("replay_across").main(dirs)
    out = capsys.readouterr().out.splitlines()
    assert out.index("  SM clock alone, each run (MHz): 1980 1980  [norm]") < next(
        i for i, line in enumerate(out) if line.startswith("[all other nodes]")
    )
    assert "  SM clock alone, each run (MHz): 1700* 1980  * sw_power_cap  [gemm]" in out


def test_differences_and_means_keep_the_groups_own_clocks() -> None:
    import numpy as np

    from archline.measurement.attribute.replay_stats import Energy, mean_of_runs

    alone = Energy(1.0, 0.01, 0.002, 0, 1700.0, ("sw_power_cap",))
    base = Energy(0.1, 0.001, 0.0005, 0, 1980.0, ())
    diff = alone.minus(base)  # the group's isolated energy less the base's: the group's own clocks
    assert diff.sm_clock_mhz == 1700.0 and diff.clock_reasons == ("sw_power_cap",)
    bare = Energy(1.0, 0.01, 0.002)
    mean, _, _ = mean_of_runs([alone, bare, Energy(1.0, 0.01, 0.002, 0, 1900.0, ("hw_slowdown", "sw_power_cap"))])
    assert mean.sm_clock_mhz == 1800.0 and mean.clock_reasons == ("sw_power_cap", "hw_slowdown")
    assert mean_of_runs([bare, bare])[0].sm_clock_mhz is None

    def _m(mhz: Any = None, reasons: Any = None) -> _Clocked:
        return _Clocked(1.0, 0.01, 0.002, 500.0, mhz, reasons)

    assert Energy.of(_m(np.float32(1755.0))).sm_clock_mhz == 1755.0
    for bad in (True, float("nan"), "1980", None):
        assert Energy.of(_m(bad)).sm_clock_mhz is None
    assert Energy.of(_m(reasons="sw_power_cap,,hw_slowdown")).clock_reasons == (
        "sw_power_cap",
        "hw_slowdown",
    )


def test_the_rest_keeps_its_own_clocks_and_run_warns_of_a_capped_replay(tmp_path: Path, capsys: Any) -> None:
    from archline.cli.run_cmd import read_replay_priors
    from archline.measurement.attribute.replay import REST
    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay
    from archline.report.registry import render_run

    res = _replay(1700.0)
    assert {r.group: r for r in res.rows}[REST].sm_clock_mhz == 1980.0
    rd = RunDir.create(tmp_path / "r", Manifest.new("replay", gpu={"name": "fake", "uuid": "GPU-fake"}))
    write_replay(rd, [r.to_row() for r in res.rows], res.summary())
    rd.finish("complete")
    assert read_replay_priors(rd.path)
    err = capsys.readouterr().err
    assert "measured alone while the board slowed its clocks: gemm (sw_power_cap, 1700 MHz)" in " ".join(err.split())
    rep = render_run(rd.path)
    assert any("slowed its clocks" in w for w in rep.warnings)
    assert "SM clock alone (MHz; clock-event reasons)" in rep.markdown.read_text(encoding="utf-8")


def test_a_run_without_clocks_shows_a_dash_beside_one_with(tmp_path: Path, capsys: Any) -> None:
    import csv

    from archline.records import Manifest, RunDir
    from archline.records.replay import write_replay

    dirs = []
    for k in range(2):
        res = _replay(1700.0, seed=k)
        rows = [r.to_row() for r in res.rows]
        if k == 1:  # a replay from before session 22: no clock columns at all
            rows = [{c: v for c, v in r.items() if c not in ("sm_clock_mhz", "clock_event_reasons")} for r in rows]
        rd = RunDir.create(tmp_path / f"r{k}", Manifest.new("replay", gpu={"name": "fake", "uuid": "GPU-fake"}))
        write_replay(rd, rows, res.summary())
        rd.finish("complete")
        dirs.append(str(rd.path))
    with open(Path(dirs[1]) / "replay.csv", newline="", encoding="utf-8") as fh:
        assert all(r["sm_clock_mhz"] == "" for r in csv.DictReader(fh))
    load_bench("replay_across").main(dirs)
    assert "  SM clock alone, each run (MHz): 1700* -  * sw_power_cap  [gemm]" in capsys.readouterr().out


def test_archline_replay_prints_the_reports_warnings(tmp_path: Path, monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    import archline.measurement.attribute.replay as replay_mod
    from archline.cli.app import app
    from tests.helpers.fake_graph import write_fake_replay

    def fake_run_replay(step: Any, *, out: Any, force: bool, **kw: Any) -> Any:
        return write_fake_replay(out, force, _replay(1700.0))

    monkeypatch.setattr(replay_mod, "run_replay", fake_run_replay)
    script = tmp_path / "s.py"
    script.write_text("def make():\n    return lambda: None\n")
    res = CliRunner().invoke(app, ["replay", f"{script}:make", "-o", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "archline: warning: 1 group measured alone while the board slowed its clocks: gemm" in text

"""The report of `archline run` directories: per-kernel table as recorded, timeline with kernel lanes, graph replay."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from archline.errors import RunDirError
from archline.measurement.attribute.attribution import attribute_energy
from archline.measurement.attribute.io import save_raw
from archline.records import Manifest, RunDir
from archline.records.replay import REPLAY_COLUMNS, write_replay
from archline.report.doc import Missing
from archline.report.registry import render_run, renderer_for
from archline.report.run_report import power_limit_notes, render_run_report
from archline.report.run_tables import NO_DOMINANCE, kernel_labels, kernel_table, replay_comparison
from archline.report.run_timeline import timeline_spec
from tests.helpers.attrib_sim import SimKernel, simulate_program
from tests.helpers.mdtables import md_tables

GEMM = "void gemm<float>(float*, int)"


def _row(name: str, energy_j: float, **kw: Any) -> dict[str, Any]:
    """A row as attribution.json records it (an older run: no dominated_by unless given)."""
    calls = kw.pop("calls", 10)
    row = {
        "name": name,
        "kind": "kernel",
        "calls": calls,
        "time_s": 0.01,
        "energy_j": energy_j,
        "energy_lo_j": 0.9 * energy_j,
        "energy_hi_j": 1.1 * energy_j,
        "share": energy_j / 200.0,
        "mean_power_w": energy_j / 0.01,
        "method": "regression",
        "identifiable": True,
        "data_weight": 0.9,
        "note": "",
    }
    return {**row, **kw}


@pytest.fixture(scope="module")
def small_run() -> Any:
    ks = [SimKernel(GEMM, 0.0004, 400.0), SimKernel("relu", 0.0002, 250.0)]
    run = simulate_program(ks, seed=11, program_s=3.0)
    return run, attribute_energy(run.recording, run.activities, program_span=run.program_span)


def test_rows_sort_by_energy_as_numbers_and_each_column_has_one_format() -> None:
    rows = [_row("k9", 9.0), _row("k100", 100.0), _row("k10", 10.0, dominated_by="prior", identifiable=False)]
    t = kernel_table(rows, 0.95)
    assert [r[0] for r in t.rows] == ["k100", "k10", "k9"]  # text order would put k10 first
    col = {h: [r[i] for r in t.rows] for i, h in enumerate(t.header)}
    assert col["energy (J)"] == ["100", "10.0", "9.00"]  # three significant figures throughout
    assert col["power (W)"] == ["10000", "1000", "900"]
    assert col["share (%)"] == ["50.0", "5.0", "4.5"]
    assert col["95 % interval (J)"][0] == "90.0 – 110"
    assert col["energy per call (mJ)"] == ["10,000", "1000", "900"]
    assert col["method"][1] == "regression, not identifiable"
    assert t.sort_keys is not None and t.sort_keys[0][4] == 100.0 and t.header[4] == "energy (J)"


def test_dominated_by_is_read_never_invented() -> None:
    t = kernel_table([_row("old", 5.0), _row("new", 4.0, dominated_by="mixed")], 0.95)
    j = t.header.index("dominated by")
    assert t.rows[0][j] == Missing(NO_DOMINANCE)
    assert t.rows[1][j] == "mixed"
    assert t.sort_keys is not None and t.sort_keys[0][j] is None  # a missing value sorts last


def test_kernels_whose_short_names_collide_keep_apart() -> None:
    kernel = "void at::native::vectorized_elementwise_kernel"
    a = f"{kernel}<8, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int)"
    b = f"{kernel}<8, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int)"
    labels = kernel_labels([a, b, "relu"])
    assert labels["relu"] == "relu"
    assert "CUDAFunctor_add<…>" in labels[a] and "FillFunctor<…>" in labels[b]
    same = kernel_labels(["k<1>(int)", "k<2>(int)"], width=10)
    assert len(set(same.values())) == 2


def test_replay_comparison_per_call_against_isolated_energy() -> None:
    rows = [_row("hot", 20.0, calls=10), _row("cold", 1.0)]
    replay = [
        {"group": "hot", "kind": "kernel", "nodes_per_step": 2, "energy_j": 5.0, "energy_sigma_j": 0.1},
        {"group": "[rest]", "kind": "rest", "nodes_per_step": 7, "energy_j": 3.0, "energy_sigma_j": 0.2},
    ]
    t = replay_comparison(rows, replay, 0.95)
    assert t is not None and len(t.rows) == 1
    name, attributed, ci, ref, diff, dom = t.rows[0]
    # attributed 20 J / 10 calls = 2 J; replay 5 J / 2 nodes = 2.5 J ± 0.05 J
    assert (name, attributed, ci, ref, diff) == ("hot", "2000", "1800 – 2200", "2500 ± 50", "-20.0")
    assert isinstance(dom, Missing)
    assert replay_comparison([_row("other", 1.0)], replay, 0.95) is None


def test_rows_above_the_power_limit_are_flagged() -> None:
    rows = [_row("ok", 7.3), _row("impossible", 10.4), {"name": "(idle)", "kind": "idle", "mean_power_w": 900.0}]
    notes = power_limit_notes(rows, 700.0)  # 730 W is within 5 %, 1040 W is not
    assert len(notes) == 1 and notes[0].startswith("impossible: mean power 1040 W") and "700 W" in notes[0]
    assert notes[0].endswith("impossible, do not trust this row")
    assert power_limit_notes(rows, None) == []
    # within the row's bound (the burst ceiling) it is possible, and said so; above it, still impossible
    within = power_limit_notes(rows, 700.0, {"impossible": 1067.0})
    assert len(within) == 1 and "within its 1067 W bound" in within[0] and "possible" in within[0]
    assert "do not trust" not in within[0]
    above = power_limit_notes(rows, 700.0, {"impossible": 1000.0})
    assert len(above) == 1 and above[0].endswith("impossible, do not trust this row")


def test_timeline_has_power_counter_and_one_lane_per_top_kernel(small_run: Any) -> None:
    run, res = small_run
    spec = timeline_spec(run.recording, run.activities, res)
    assert spec is not None and spec["resolve"] == {"scale": {"x": "shared"}}
    power, lanes = spec["vconcat"]
    colors = [layer["mark"]["color"] for layer in power["layer"]]
    assert colors == ["#888", "black"]  # power buffer, energy counter
    zoom = power["layer"][0]["params"][0]
    assert zoom["bind"] == "scales" and zoom["select"] == {"type": "interval", "encodings": ["x"]}  # time only
    spans = lanes["data"]["values"]
    assert {s["kernel"] for s in spans} == {"1. gemm<…>(…)", "2. relu"}
    assert all(0 <= s["start"] <= s["end"] <= run.recording.end_s - run.recording.start_s for s in spans)
    json.dumps(spec, allow_nan=False)


def _run_dir(path: Path, rows: list[dict[str, Any]], **manifest: Any) -> RunDir:
    rd = RunDir.create(path, Manifest.new("run", command=("prog.py",), **manifest))
    doc = {
        "schema": "archline.attribution",
        "schema_version": 1,
        "rows": rows,
        "total_energy_j": 200.0,
        "span_start_s": 0.0,
        "span_end_s": 2.0,
        "window_source": "nvml.energy",
        "windows": 20,
        "window_period_s": 0.1,
        "counter_delay_s": 0.0,
        "delay_identified": False,
        "residual_rms_j": 0.1,
        "confidence": 0.95,
        "ci_method": "covariance",
        "long_call_min_s": 0.2,
        "idle_gap_s": 0.002,
    }
    rd.write_json("attribution.json", doc)
    rd.finish("complete")
    return RunDir.open(path)


def test_a_run_without_raw_traces_renders_its_recorded_table(tmp_path: Path) -> None:
    rows = [_row("k", 10.0), {**_row("(unexplained residual)", 1.0), "kind": "residual", "method": "residual"}]
    run = _run_dir(tmp_path / "run", rows)
    assert renderer_for("run") is render_run_report and renderer_for("attribute") is render_run_report
    rep = render_run(run.path, tmp_path / "out")
    assert rep.html is not None and rep.html.is_file() and rep.extra["total_energy_j"] == 200.0
    md = rep.markdown.read_text(encoding="utf-8")
    tables = md_tables(md)
    kernels = tables["Energy by kernel, 1 rows (report.html: click a header to sort)"]
    rest = tables["Energy not attributed to a kernel"]
    assert (
        kernels.cell("k", "energy (J)") == "10.0" and kernels.reason(kernels.cell("k", "dominated by")) == NO_DOMINANCE
    )
    assert rest.reason(rest.cell("(unexplained residual)", "95 % interval (J)")).startswith("total minus every other")
    assert "No power timeline" in md
    page = rep.html.read_text(encoding="utf-8")
    assert '<table class="sortable">' in page and 'data-v="10.0"' in page and "table.sortable" in page
    assert not (run.path / "report.md").exists()  # nothing written into the run directory


def test_a_run_keeps_its_own_timeline_png_and_its_replay(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", [_row("hot", 20.0)])
    (run.path / "timeline.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    rd = RunDir.open(run.path)
    write_replay(rd, [dict.fromkeys(REPLAY_COLUMNS, "") | {"group": "hot", "kind": "kernel", "nodes_per_step": 1,
                      "time_s": 0.001, "energy_j": 2.0, "energy_sigma_j": 0.1, "mean_power_w": 500.0}],
                 {"step_energy_j": 3.0, "step_sigma_j": 0.1, "step_time_s": 0.002, "sum_isolated_j": 2.9,
                  "sum_isolated_sigma_j": 0.1, "sum_vs_step_pct": -3.3})  # fmt: skip
    rep = render_run(run.path, tmp_path / "out")
    md = rep.markdown.read_text(encoding="utf-8")
    assert (tmp_path / "out" / "timeline.png").read_bytes().endswith(b"fake")
    assert "## Graph replay" in md and "Whole step: 3 ± 0.1 J" in md and "(-3.30 % of the step)" in md
    comparison = md_tables(md)["Attribution against graph replay (1 of 1 replayed groups matched by name)"]
    assert comparison.cell("hot", "attributed − replay (%)") == "+0.0"


def test_raw_traces_without_attribution_json_are_attributed_again(small_run: Any, tmp_path: Path) -> None:
    run, res = small_run
    rd = RunDir.create(tmp_path / "run", Manifest.new("attribute"))
    save_raw(rd.path, run.recording, run.activities, program_span=run.program_span)
    (rd.path / "trace.perfetto.json.gz").write_bytes(b"")  # the run keeps its trace compressed: so does its report
    rd.finish("complete")
    rep = render_run(rd.path, tmp_path / "out")
    trace = json.loads(gzip.decompress((tmp_path / "out" / "trace.perfetto.json.gz").read_bytes()))
    assert trace["traceEvents"] and not (tmp_path / "out" / "trace.perfetto.json").exists()
    assert any("redone from the raw traces" in w for w in rep.warnings)
    assert rep.extra["total_energy_j"] == pytest.approx(res.total_energy_j)
    page = rep.html.read_text(encoding="utf-8") if rep.html else ""
    assert re.search(r'class="vl-chart"|<img src="data:image/png', page)  # the chart, or its PNG without vl-convert
    kernels = md_tables(rep.markdown.read_text(encoding="utf-8"))[
        "Energy by kernel, 2 rows (report.html: click a header to sort)"
    ]
    assert kernels.cell("gemm<…>(…)", "dominated by") in ("data", "mixed", "prior")  # computed now, so shown


def test_a_corrupt_or_empty_run_is_one_line(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run", [_row("k", 1.0)])
    (run.path / "attribution.json").write_text("{not json")
    with pytest.raises(RunDirError, match=r"attribution.json: corrupt JSON"):
        render_run(run.path, tmp_path / "out")
    (run.path / "attribution.json").unlink()
    with pytest.raises(RunDirError, match=r"no attribution.json and no raw traces"):
        render_run(run.path, tmp_path / "out")

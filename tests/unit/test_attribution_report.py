"""Perfetto trace, timeline plot, run-directory outputs and re-analysis from raw traces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from archline.core.activity import ActivityRecord, demangle, short_name
from archline.measurement.attribute.attribution import attribute_energy
from archline.measurement.attribute.io import ChunkWriter, load_raw, read_chunks, reanalyze, save_raw
from archline.records.activity import read_activities, write_activities
from archline.report.attribution_run import write_attribution_outputs
from archline.report.perfetto import perfetto_events
from archline.report.timeline_plot import merge_spans, plot_timeline
from tests.helpers.attrib_sim import SimKernel, simulate_program


@pytest.fixture(scope="module")
def small_run():
    ks = [SimKernel("void gemm<float>(float*, int)", 0.0004, 400.0), SimKernel("relu", 0.0002, 250.0)]
    run = simulate_program(ks, seed=11, program_s=3.0)
    res = attribute_energy(run.recording, run.activities, program_span=run.program_span)
    return run, res


def test_perfetto_trace_has_power_counters_and_kernel_spans(small_run):
    run, res = small_run
    trace = perfetto_events(run.recording, run.activities, res, program_span=run.program_span)
    ev = trace["traceEvents"]
    counters = {e["name"] for e in ev if e["ph"] == "C"}
    assert "nvml.buffer (W)" in counters and "nvml.energy mean power (W)" in counters
    spans = [e for e in ev if e["ph"] == "X" and e["pid"] == 2]
    assert len(spans) == len(run.activities)
    first = run.activities[0]
    s0 = spans[0]
    assert s0["ts"] == pytest.approx((first.start_s - run.recording.start_s) * 1e6, abs=0.01)
    assert s0["dur"] == pytest.approx(first.duration_s * 1e6, abs=0.01)
    # Each span carries its attributed energy; together they make up the kernels' rows.
    total_mj = sum(e["args"]["energy_mJ"] for e in spans)
    assert total_mj * 1e-3 == pytest.approx(res.kernels.energy_j, rel=0.01)
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in ev)
    json.dumps(trace)  # strict JSON


def test_perfetto_limits_spans(small_run):
    run, _ = small_run
    trace = perfetto_events(run.recording, run.activities, max_spans=10)
    assert sum(1 for e in trace["traceEvents"] if e["ph"] == "X") == 10
    assert trace["otherData"]["spans_left_out"] == len(run.activities) - 10


def test_timeline_plot_writes_a_png(small_run, tmp_path):
    run, res = small_run
    p = tmp_path / "t.png"
    plot_timeline(p, run.recording, run.activities, res, program_span=run.program_span)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    q = tmp_path / "no_result.png"
    plot_timeline(q, run.recording, run.activities)
    assert q.stat().st_size > 1000


def test_merge_spans_joins_close_runs():
    s, e = merge_spans(np.array([0.0, 1.0, 1.05, 3.0]), np.array([0.5, 1.04, 2.0, 3.5]), 0.1)
    assert np.allclose(s, [0.0, 1.0, 3.0]) and np.allclose(e, [0.5, 2.0, 3.5])


def test_outputs_and_raw_traces_rebuild_the_same_result(small_run, tmp_path):
    run, res = small_run
    files = write_attribution_outputs(tmp_path, run.recording, run.activities, res, program_span=run.program_span)
    assert set(files) == {"kernels.csv", "attribution.json", "trace.perfetto.json", "timeline.png"}
    assert all(p.is_file() for p in files.values())
    save_raw(tmp_path, run.recording, run.activities, program_span=run.program_span, clock={"offset_s": 0.0})
    raw = load_raw(tmp_path)
    assert raw.program_span == pytest.approx(run.program_span)
    assert len(raw.activities) == len(run.activities)
    again = reanalyze(tmp_path)
    for r in res.kernels:
        assert again.table[r.name].energy_j == pytest.approx(r.energy_j, rel=1e-6)
    # a shipped run keeps its activities xz-compressed: read back the same
    import lzma

    plain = tmp_path / "raw" / "activities.csv"
    (tmp_path / "raw" / "activities.csv.xz").write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    assert load_raw(tmp_path).activities == raw.activities


def test_activities_csv_round_trip(tmp_path):
    recs = [
        ActivityRecord("k1", 1.5, 1.6, stream=3, correlation_id=9, start_ns=10, end_ns=20),
        ActivityRecord("[memcpy HtoD]", 2.0, 2.1, kind="memcpy", bytes=4096),
    ]
    write_activities(tmp_path / "a.csv", recs)
    assert read_activities(tmp_path / "a.csv") == recs


def test_chunks_keep_batches_until_removed(tmp_path):
    w = ChunkWriter(tmp_path)
    w([("kernel", "a\tb", 1, 2, 7, 1, 0, 0)])
    w([("memcpy", "[memcpy HtoD]", 3, 4, 7, 2, 0, 64)])
    back = read_chunks(tmp_path)
    assert back == [("kernel", "a b", 1, 2, 7, 1, 0, 0), ("memcpy", "[memcpy HtoD]", 3, 4, 7, 2, 0, 64)]
    w.remove()
    assert read_chunks(tmp_path) == []


def test_a_corrupt_chunk_is_a_one_line_error_naming_its_line(tmp_path):
    from archline.errors import TraceError

    (tmp_path / "activities.part-00001.tsv").write_text("kernel\t1\t2\t7\t1\t0\t0\tk\nkernel\t1\tx\t7\t1\t0\t0\tk\n")
    with pytest.raises(TraceError, match=r"part-00001.tsv:2: malformed activity chunk line"):
        read_chunks(tmp_path)


def test_short_and_demangled_names():
    assert short_name("void at::native::kernel<float, 4>(int, float*)") == "at::native::kernel<…>(…)"
    assert short_name("x" * 100, 10) == "x" * 9 + "…"
    names = demangle(["_Z3fooi", "plain"])
    assert names["plain"] == "plain"
    assert names["_Z3fooi"] in ("foo(int)", "_Z3fooi")


def test_report_renderer_rebuilds_a_run_directory(small_run, tmp_path):
    from archline.records import Manifest, RunDir
    from archline.report.run_report import render_run_report

    run, res = small_run
    rd = RunDir.create(tmp_path / "run", Manifest.new("run", command=("prog.py", "--x")))
    save_raw(rd.path, run.recording, run.activities, program_span=run.program_span)
    rd.finish("complete")
    out = tmp_path / "report"
    rep = render_run_report(RunDir.open(rd.path), out)
    md = rep.markdown.read_text()
    assert "prog.py --x" in md and "gemm<…>(…)" in md and "(unexplained residual)" in md
    assert (out / "timeline.png").is_file() and (out / "kernels.csv").is_file()
    assert rep.extra["total_energy_j"] == pytest.approx(res.total_energy_j)

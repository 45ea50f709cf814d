"""Trace and window CSVs from external meters, and archline's own .npz recordings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from archline.core.readings import Readings
from archline.core.recording import Recording, Region
from archline.errors import TraceError
from archline.records.traces import (
    check_windows,
    load_recording,
    read_trace_csv,
    read_windows_csv,
    save_recording,
    write_trace_csv,
    write_windows_csv,
)


def _w(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_meter_csv_with_comments_and_extra_columns(tmp_path: Path) -> None:
    p = _w(
        tmp_path,
        "m.csv",
        "# PowerMon export\n# rate 1 kHz\nvolts,time_s,power_w,amps\n12,0.0,100.5,8\n"
        "# gap\n12,0.001,101,8\n\n12,0.002,99.5,8\n",
    )
    r = read_trace_csv(p)
    assert r.t_s.tolist() == [0.0, 0.001, 0.002]
    assert r.value.tolist() == [100.5, 101.0, 99.5]
    assert r.quantity == "power"


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("time_s,power_w\n0,1\n1,abc\n", 3, "not a number"),
        ("time_s,power_w\n0,1\n2,2\n1,3\n", 4, "backwards"),
        ("time_s,power_w\n0,1\n1,inf\n", 3, "finite"),
        ("time_s,power_w\n0,1\n1\n", 3, "columns"),
        ("t,p\n0,1\n", 1, "no 'time_s' column"),
        ("time_s,power_w\n", 1, "no data rows"),
        ("time_s,power_w\n0,1\n", 1, "only 1 data row"),
    ],
)
def test_bad_traces_name_file_and_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    p = _w(tmp_path, "bad.csv", text)
    with pytest.raises(TraceError, match=what) as ei:
        read_trace_csv(p)
    assert ei.value.line == line
    assert str(ei.value).startswith(f"{p}:{line}: ")


def test_missing_and_empty_traces(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="file not found"):
        read_trace_csv(tmp_path / "none.csv")
    with pytest.raises(TraceError, match="empty"):
        read_trace_csv(_w(tmp_path, "e.csv", "# nothing\n\n"))


def test_windows_file(tmp_path: Path) -> None:
    p = _w(tmp_path, "w.csv", "name,start_s,end_s\nfirst,1.0,2.0\n# skip\n,3,4.5\n")
    ws = read_windows_csv(p)
    assert [(w.name, w.start_s, w.end_s) for w in ws] == [("first", 1.0, 2.0), ("window2", 3.0, 4.5)]
    assert ws[1].meta["line"] == 4
    bad = _w(tmp_path, "b.csv", "name,start_s,end_s\na,1,2\nb,3,3\n")
    with pytest.raises(TraceError, match="ends at or before") as ei:
        read_windows_csv(bad)
    assert ei.value.line == 3


def test_windows_outside_the_trace_name_their_line(tmp_path: Path) -> None:
    p = _w(tmp_path, "w.csv", "name,start_s,end_s\na,1,2\nb,9,11\n")
    ws = read_windows_csv(p)
    check_windows(ws[:1], 0.0, 10.0, p)
    with pytest.raises(TraceError, match="outside the trace") as ei:
        check_windows(ws, 0.0, 10.0, p)
    assert ei.value.line == 3


def test_trace_and_windows_round_trip(tmp_path: Path) -> None:
    r = Readings("x", "power", 1.7e9 + np.arange(5, dtype=np.float64) * 0.02, np.array([1.0, 2.5, 3.0, 4.0, 5.25]))
    write_trace_csv(tmp_path / "t.csv", r)
    back = read_trace_csv(tmp_path / "t.csv")
    assert np.allclose(back.t_s, r.t_s, rtol=0, atol=1e-6) and np.allclose(back.value, r.value)
    ws = (Region("a", 1.0, 2.0), Region("b", 2.5, 3.25))
    write_windows_csv(tmp_path / "w.csv", ws)
    assert [(w.name, w.start_s, w.end_s) for w in read_windows_csv(tmp_path / "w.csv")] == [
        (w.name, w.start_s, w.end_s) for w in ws
    ]


def test_recording_round_trip_keeps_every_source_region_and_meta(tmp_path: Path) -> None:
    rec = Recording(
        {
            "nvml.buffer": Readings(
                "nvml.buffer", "power", np.array([1.0, 2.0]), np.array([100.0, 200.0]), {"unit": "W"}
            ),
            "nvml.energy": Readings("nvml.energy", "energy", np.array([1.5]), np.array([12.5])),
        },
        regions=(Region("k", 1.1, 1.9, how="event", meta={"n": 3}),),
        start_s=1.0,
        end_s=2.0,
        meta={"gpu_uuid": "GPU-1", "driver_version": "580"},
    )
    p = tmp_path / "rec.npz"
    save_recording(p, rec)
    back = load_recording(p)
    assert set(back.readings) == {"nvml.buffer", "nvml.energy"}
    assert back.readings["nvml.energy"].quantity == "energy"
    assert back.readings["nvml.buffer"].meta == {"unit": "W"}
    assert np.array_equal(back.readings["nvml.buffer"].value, [100.0, 200.0])
    assert back.regions == rec.regions
    assert (back.start_s, back.end_s, back.meta) == (1.0, 2.0, rec.meta)
    # A Recording written as CSV keeps its power source; as .npz, everything.
    write_trace_csv(tmp_path / "r.csv", rec)
    assert read_trace_csv(tmp_path / "r.csv").value.tolist() == [100.0, 200.0]
    write_trace_csv(tmp_path / "r2.npz", rec)
    assert set(load_recording(tmp_path / "r2.npz").readings) == set(rec.readings)


def test_corrupt_recordings_are_refused(tmp_path: Path) -> None:
    p = _w(tmp_path, "x.npz", "not a zip")
    with pytest.raises(TraceError, match="corrupt recording"):
        load_recording(p)
    np.savez(tmp_path / "y.npz", a=np.zeros(2))
    with pytest.raises(TraceError, match="not an archline recording"):
        load_recording(tmp_path / "y.npz")
    with pytest.raises(TraceError, match="file not found"):
        load_recording(tmp_path / "none.npz")


def _recording_json(path: Path, doc: object) -> Path:
    import json

    np.savez(path, **{"recording.json": np.frombuffer(json.dumps(doc).encode("utf-8"), dtype=np.uint8)})
    return path


def test_malformed_recordings_are_one_line_errors_not_crashes(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(3.0))
    (tmp_path / "a.npz").write_bytes((tmp_path / "a.npy").read_bytes())
    with pytest.raises(TraceError, match="single array"):
        load_recording(tmp_path / "a.npz")
    with pytest.raises(TraceError, match="not a JSON object"):
        load_recording(_recording_json(tmp_path / "list.npz", [1, 2]))
    head = {"schema": "archline.recording", "schema_version": 1, "sources": []}
    with pytest.raises(TraceError, match="corrupt recording"):
        load_recording(_recording_json(tmp_path / "region.npz", {**head, "regions": [{"start_s": 0.0}]}))
    with pytest.raises(TraceError, match="corrupt recording"):
        load_recording(_recording_json(tmp_path / "span.npz", {**head, "start_s": None}))

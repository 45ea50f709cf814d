"""Run directories: atomic writes, manifest round trip, refusal of foreign or corrupt directories."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from archline.errors import RunDirError
from archline.records import Manifest, RunDir, atomic_open, read_csv, to_jsonable, write_csv


def test_atomic_open_keeps_old_content_when_the_writer_fails(tmp_path: Path) -> None:
    p = tmp_path / "t.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(p) as fh:
        fh.write("half")
        raise RuntimeError("interrupted")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["t.txt"]


def test_csv_round_trip_preserves_types_and_missing_values(tmp_path: Path) -> None:
    rows = [{"a": 1, "b": 2.5, "c": "x", "d": True}, {"a": 2, "b": float("nan"), "c": None, "d": False}]
    write_csv(tmp_path / "r.csv", rows)
    back = read_csv(tmp_path / "r.csv")
    assert back[0] == {"a": 1, "b": 2.5, "c": "x", "d": True}
    assert back[1]["b"] is None and back[1]["c"] is None and back[1]["d"] is False


def test_to_jsonable_handles_numpy_and_non_finite() -> None:
    out = to_jsonable({"x": np.float32(1.5), "y": np.arange(3), "z": math.inf, "p": Path("/a")})
    assert out == {"x": 1.5, "y": [0, 1, 2], "z": None, "p": "/a"}
    json.dumps(out, allow_nan=False)


def test_run_dir_create_open_finish(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path / "run", Manifest.new("characterize", gpu={"name": "H100"}))
    rd.write_csv("results.csv", [{"name": "k", "time_s": 1.0}])
    rd.finish("interrupted")
    again = RunDir.open(tmp_path / "run")
    assert again.manifest.kind == "characterize"
    assert again.manifest.status == "interrupted"
    assert again.manifest.gpu["name"] == "H100"
    assert again.read_csv("results.csv")[0]["time_s"] == 1.0
    assert "numpy" in again.manifest.packages


def test_run_dir_refuses_to_overwrite_or_adopt(tmp_path: Path) -> None:
    RunDir.create(tmp_path / "run", Manifest.new("x"))
    with pytest.raises(RunDirError, match="already exists"):
        RunDir.create(tmp_path / "run", Manifest.new("x"))
    RunDir.create(tmp_path / "run", Manifest.new("x"), overwrite=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    with pytest.raises(RunDirError, match="not an archline run directory"):
        RunDir.create(other, Manifest.new("x"), overwrite=True)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "not an archline run directory"),
        ("{not json", "corrupt manifest"),
        ('{"schema": "other"}', "not an archline run manifest"),
        ('{"schema": "archline.run", "schema_version": 99, "kind": "x"}', "schema version 99"),
    ],
)
def test_open_rejects_bad_manifests_with_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    d = tmp_path / "r"
    d.mkdir()
    if content is not None:
        (d / "manifest.json").write_text(content)
    with pytest.raises(RunDirError, match=message) as ei:
        RunDir.open(d)
    assert "\n" not in str(ei.value)


def test_open_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no such run directory"):
        RunDir.open(tmp_path / "nope")


def test_written_files_are_readable_by_others(tmp_path: Path) -> None:
    import os
    import stat

    write_csv(tmp_path / "r.csv", [{"a": 1}])
    mode = stat.S_IMODE(os.stat(tmp_path / "r.csv").st_mode)
    assert mode & stat.S_IRGRP and mode & stat.S_IROTH


def test_short_csv_rows_read_as_missing(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("a,b,c\n1,2\n")
    assert read_csv(tmp_path / "r.csv") == [{"a": 1, "b": 2, "c": None}]


def test_numpy_floats_are_written_as_plain_numbers(tmp_path: Path) -> None:
    write_csv(tmp_path / "r.csv", [{"x": np.float64(0.16), "y": np.float32(2.5)}])
    assert (tmp_path / "r.csv").read_text().splitlines()[1] == "0.16,2.5"


def test_gzipped_csv_reads_like_plain(tmp_path: Path) -> None:
    import gzip

    write_csv(tmp_path / "r.csv", [{"a": 1, "b": "x"}])
    (tmp_path / "r.csv.gz").write_bytes(gzip.compress((tmp_path / "r.csv").read_bytes()))
    assert read_csv(tmp_path / "r.csv.gz") == read_csv(tmp_path / "r.csv")


def test_xz_csv_reads_like_plain_and_a_corrupt_one_is_a_run_dir_error(tmp_path: Path) -> None:
    import lzma

    write_csv(tmp_path / "r.csv", [{"a": 1, "b": "x"}, {"a": 2.5, "b": "y"}])
    (tmp_path / "r.csv.xz").write_bytes(lzma.compress((tmp_path / "r.csv").read_bytes()))
    assert read_csv(tmp_path / "r.csv.xz") == read_csv(tmp_path / "r.csv") == [{"a": 1, "b": "x"}, {"a": 2.5, "b": "y"}]
    (tmp_path / "bad.csv.xz").write_bytes(b"not xz at all")
    with pytest.raises(RunDirError, match="bad.csv.xz: not a readable CSV file"):
        read_csv(tmp_path / "bad.csv.xz")

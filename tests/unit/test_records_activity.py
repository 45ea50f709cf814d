"""The activities CSV: written and read back exactly (device and stream 0 included), plain or compressed; a bad cell is
a TraceError naming the file, the line and the column."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from archline.core.activity import ActivityRecord
from archline.errors import TraceError
from archline.records.activity import read_activities, write_activities

RECORDS = [
    ActivityRecord("gemm", 1.0, 1.5, "kernel", stream=0, correlation_id=7, device=0, start_ns=10**9, end_ns=15 * 10**8),
    ActivityRecord("copy", 2.0, 2.25, "memcpy", stream=3, correlation_id=8, device=1, bytes=4096),
    ActivityRecord("007", 3.0, 3.0, "program"),
]


def test_records_come_back_as_written_plain_and_xz(tmp_path: Path) -> None:
    p = tmp_path / "activities.csv"
    write_activities(p, RECORDS)
    assert read_activities(p) == RECORDS
    xz = tmp_path / "activities.csv.xz"
    xz.write_bytes(lzma.compress(p.read_bytes()))
    assert read_activities(xz) == RECORDS


def test_short_rows_missing_columns_and_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("kind,name,start_s,end_s,stream\nkernel,k,1,2\n\nmemset,m,3,4.5,2,extra\n")
    got = read_activities(p)
    assert [(a.kind, a.name, a.start_s, a.end_s, a.stream, a.device, a.bytes, a.start_ns) for a in got] == [
        ("kernel", "k", 1.0, 2.0, -1, -1, 0, None),
        ("memset", "m", 3.0, 4.5, 2, -1, 0, None),
    ]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("kernel,k,abc,2,0", "column 'start_s' is not a finite number ('abc')"),
        ("kernel,k,1,inf,0", "column 'end_s' is not a finite number ('inf')"),
        ("kernel,k,1,,0", "column 'end_s' is not a finite number ('')"),
        ("kernel,k,1,2,x", "column 'stream' is not an integer ('x')"),
        ("kernel,k,2,1,0", "activity ends before it starts"),
        ("launch,k,1,2,0", "unknown activity kind 'launch'"),
    ],
)
def test_a_bad_cell_names_file_line_and_column(tmp_path: Path, row: str, message: str) -> None:
    p = tmp_path / "a.csv"
    p.write_text(f"kind,name,start_s,end_s,stream\nkernel,ok,0,1,0\n{row}\n")
    with pytest.raises(TraceError) as e:
        read_activities(p)
    assert str(e.value) == f"{p}:3: {message}"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("kind,name,start_s,end_s\nkernel,a,0,1\n\nlaunch,b,1,2\n", 4),  # after a blank line
        ('kind,name,start_s,end_s\nkernel,"a\nb",0,1\nlaunch,b,1,2\n', 4),  # after a quoted cell spanning two lines
        ("\nkind,name,start_s,end_s\nlaunch,b,1,2\n", 3),  # a blank line before the header
    ],
)
def test_the_line_named_is_the_rows_line_in_the_file(tmp_path: Path, text: str, line: int) -> None:
    p = tmp_path / "a.csv"
    p.write_text(text)
    with pytest.raises(TraceError) as e:
        read_activities(p)
    assert str(e.value) == f"{p}:{line}: unknown activity kind 'launch'"


def test_read_csv_gives_short_rows_none_and_drops_long_rows_extra_cells(tmp_path: Path) -> None:
    """As csv.DictReader did: a missing cell is None, an extra one dropped, numbers and booleans converted."""
    from archline.records.rundir import read_csv

    p = tmp_path / "t.csv"
    p.write_text("a,b,c\n1,x\n\n2.5,true,,9\n")
    assert read_csv(p) == [{"a": 1, "b": "x", "c": None}, {"a": 2.5, "b": True, "c": None}]

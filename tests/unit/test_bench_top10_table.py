"""benchmarks/top10_table.py: the shipped run sets' top-10 comparison, as in the docs; bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.bench import S18_RUN_SETS, load_bench

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_run_sets_print_the_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    s12 = sorted((ROOT / "results" / "h100" / "attribution-s12").glob("top-by-energy-GPU-*"))
    s11 = sorted((ROOT / "results" / "h100" / "attribution-s11").glob("heldout-burst-ceiling-GPU-*"))
    assert len(s12) == 2 and len(s11) == 2
    assert load_bench("top10_table").main([str(p) for p in s12 + s11]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table.txt").read_text().splitlines()
    # session 12 compares all ten on both workloads (sessions 10-11: 3-5)
    assert [line.split()[2] for line in got[1:5]] == ["10"] * 4


def test_a_run_set_with_a_broken_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "transformer-run").mkdir()
    (tmp_path / "transformer-run" / "attribution.json").write_text("{")
    assert load_bench("top10_table").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "transformer" in err[0] and str(tmp_path) in err[0]


def test_the_session_13_run_sets_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    sets = [
        ROOT / "results" / "h100" / "attribution-s13" / "top-by-energy-GPU-d61dff47",
        ROOT / "results" / "h200" / "attribution-s13" / "top-by-energy-GPU-339faabf",
    ]
    assert load_bench("top10_table").main([str(p) for p in sets]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s13.txt").read_text().splitlines()
    # every row compares ten; the H200's all fall inside their rows' intervals
    assert [line.split()[2] for line in got[1:]] == ["10"] * 4
    assert [line.split()[4] for line in got[3:]] == ["10", "10"]


def test_the_session_14_run_sets_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    sets = [
        ROOT / "results" / "h100" / "attribution-s14" / "replicates-GPU-5752653f",
        ROOT / "results" / "h200" / "attribution-s14" / "replicates-GPU-07aac0c1",
        ROOT / "results" / "h100" / "attribution-s14" / "links-GPU-b2a29c9b",
    ]
    assert load_bench("top10_table").main([str(p) for p in sets]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s14.txt").read_text().splitlines()
    assert [line.split()[2] for line in got[1:]] == ["10"] * 5


def test_the_session_15_run_sets_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    sets = [
        ROOT / "results" / "h100" / "attribution-s15" / f"heldout-GPU-{b}" for b in ("73c8ce09", "b141875d", "2979dd19")
    ]
    assert load_bench("top10_table").main([str(p) for p in sets]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s15.txt").read_text().splitlines()
    assert got[-1].split()[-3:] == ["10", "10", "10"]  # GPU-2979dd19: all ten within 15 % and inside their intervals


def test_the_session_16_run_sets_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    s16 = ROOT / "results" / "h200" / "attribution-s16"
    sets = [s16 / "heldout-resnet50cl-GPU-bfbb7738", s16 / "heldout-GPU-bfbb7738"]
    assert load_bench("top10_table").main([str(p) for p in sets]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s16.txt").read_text().splitlines()
    assert got[-1].split()[-3:] == ["10", "10", "10"]  # the H200's transformer: all ten within 15 %


def test_the_session_18_run_sets_print_their_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    sets = S18_RUN_SETS
    assert load_bench("top10_table").main([str(p) for p in sets]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s18.txt").read_text().splitlines()
    assert [line.split()[-3:] for line in got[1:3]] == [
        ["10", "8", "8"],
        ["10", "8", "8"],
    ]  # both transformers: 8 of 10


def test_the_session_19_run_set_prints_its_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    run = ROOT / "results" / "h100" / "attribution-s19" / "heldout-links-GPU-5b444d43"
    assert load_bench("top10_table").main([str(run)]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s19.txt").read_text().splitlines()
    assert got[1].split()[-3:] == ["10", "6", "8"]


def test_the_session_20_run_set_prints_its_docs_table(capsys: pytest.CaptureFixture[str]) -> None:
    """plan_s20a (H100 GPU-c4fd4b97, design of 320 configurations): all ten within 15 % of their isolated replay;
    plan_s20c's smoke run (32 configurations) 5 of 10."""
    s20 = ROOT / "results" / "h100" / "attribution-s20"
    run = s20 / "design320-GPU-c4fd4b97"
    assert load_bench("top10_table").main([str(run), str(s20 / "heldout-busy-time-GPU-48507455")]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == (ROOT / "docs" / "data" / "top10_table_s20.txt").read_text().splitlines()
    assert got[1].split()[-3:] == ["10", "10", "10"] and got[2].split()[-3:] == ["10", "5", "9"]

"""benchmarks/row_shares.py and session 29's figures (scripts/redo_s29.sh): docs/data/attribution_s29.txt is what the
four tables print on the shipped run sets; bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]
S29 = ROOT / "results" / "h100" / "attribution-s29"
SETS = [
    S29 / "transformer2k-GPU-67dc1090",
    S29 / "transformer2k-heldout-GPU-3f969882",
    ROOT / "results" / "h100" / "attribution-s22" / "batch128-GPU-6e0448a4",
]


def test_session_29s_docs_data_is_what_redo_s29_prints(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [str(p) for p in SETS]
    out: list[str] = []
    tools: list[tuple[str, list[str]]] = [("design_table", []), ("top10_table", []), ("design_power", [])]
    for tool, extra in [*tools, ("row_shares", ["--top", "6"])]:
        assert load_bench(tool).main([*extra, *runs]) == 0
        out += [f"== {tool}.py", *capsys.readouterr().out.splitlines()]
    assert out == (ROOT / "docs" / "data" / "attribution_s29.txt").read_text().splitlines()
    text = "\n".join(out)
    # what the docs say of it: GPU-67dc1090 43.5 % within ±15 % with 13 rows for 80 %, GPU-3f969882 0.0 % (the
    # windows refuted the priors), session 22's d = 512 step 18 rows
    assert "13 of 38 rows hold 80 % of the kernel energy" in text and "18 of 42 rows hold 80 %" in text
    assert "GPU-3f969882 transformer2k skipped: the windows refuted the priors' spread" in text


def test_each_rows_share_cumulates_to_the_kernel_energy(tmp_path: Path) -> None:
    rs = load_bench("row_shares")
    rows = [
        {"name": "a", "kind": "kernel", "energy_j": 6.0, "energy_lo_j": 5.4, "energy_hi_j": 6.6, "identifiable": True,
         "dominated_by": "prior"},
        {"name": "b", "kind": "kernel", "energy_j": 3.0, "energy_lo_j": 1.5, "energy_hi_j": 4.5, "identifiable": False,
         "dominated_by": "mixed"},
        {"name": "c", "kind": "memcpy", "energy_j": 1.0, "energy_lo_j": 0.5, "energy_hi_j": 1.5},
    ]  # fmt: skip
    lines = rs.show(rows, top=2)
    assert lines[0].split()[1:6] == ["60.0", "%", "60.0", "%", "±"] and "10.0 %" in lines[0]
    assert "30.0 %  90.0 %" in lines[1] and "± 50.0 %" in lines[1] and "mixed" in lines[1]
    assert lines[2] == "  2 of 3 rows hold 80 % of the kernel energy; the widest of them ±50.0 %"


def test_a_run_set_without_a_summary_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert load_bench("row_shares").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path) in err[0] and "summary.json" in err[0]

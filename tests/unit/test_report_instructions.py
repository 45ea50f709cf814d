"""The instruction-energy tables (instructions.csv, techniques.csv), Arafa's reference values and the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from archline.errors import RunDirError
from archline.records.instructions import (
    INSTRUCTION_COLUMNS,
    TECHNIQUE_COLUMNS,
    TechniqueRow,
    normalize_technique,
    per_instruction_energy,
    read_instruction_rows,
    read_technique_rows,
    summarize_techniques,
    write_instruction_rows,
    write_technique_rows,
)
from archline.report.arafa_reference import TABLE_I, VERIFICATION, match_reference
from archline.report.instructions import render, technique_finding
from archline.report.registry import RenderedReport
from tests.helpers.mdtables import MdTable, md_tables
from tests.helpers.rundirs import instruction_rows, make_instructions_run, technique_rows

SINGLE = "Energy per instruction, one thread in one block (shape of Arafa et al., CF '20, Table I)"
FULL = "Energy per instruction, the full GPU (every SM) (shape of Arafa et al., CF '20, Table I)"
VS = "This GPU against the paper (one thread in one block)"


# --------------------------------------------------------------------------- schema and helpers


def test_per_instruction_energy_is_arafa_eq_1() -> None:
    e = per_instruction_energy(10.0, 0.03, 4.0, 0.04, 1e9, active_lanes_per_warp=32)
    assert e.per_thread_pj == pytest.approx(6000.0)
    assert e.per_thread_uncertainty_pj == pytest.approx(50.0)
    assert e.per_warp_pj == pytest.approx(192000.0)
    assert e.per_warp_uncertainty_pj == pytest.approx(1600.0)
    assert e.resolvable
    single = per_instruction_energy(10.0, 0.03, 4.0, 0.04, 1e9, active_lanes_per_warp=1)
    assert single.per_warp_pj == pytest.approx(single.per_thread_pj)


@pytest.mark.parametrize(("kernel_j", "resolvable"), [(4.09, False), (4.11, True), (3.9, False)])
def test_resolvable_needs_two_sigma_above_overhead(kernel_j: float, resolvable: bool) -> None:
    # σ of the difference = hypot(0.03, 0.04) = 0.05 J, so 2σ = 0.1 J.
    assert per_instruction_energy(kernel_j, 0.03, 4.0, 0.04, 1e6).resolvable is resolvable


def test_per_instruction_energy_rejects_no_instructions() -> None:
    with pytest.raises(ValueError, match="positive"):
        per_instruction_energy(1.0, 0.0, 0.5, 0.0, 0)


def test_instruction_rows_round_trip(tmp_path: Path) -> None:
    rows = instruction_rows(failed=["sin.approx.f32"])
    write_instruction_rows(tmp_path / "instructions.csv", rows)
    header = (tmp_path / "instructions.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header == list(INSTRUCTION_COLUMNS)
    back = read_instruction_rows(tmp_path / "instructions.csv")
    assert back == rows


def test_technique_rows_round_trip_and_recompute_errors(tmp_path: Path) -> None:
    rows = technique_rows()
    write_technique_rows(tmp_path / "techniques.csv", rows)
    header = (tmp_path / "techniques.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header == list(TECHNIQUE_COLUMNS)
    back = read_technique_rows(tmp_path / "techniques.csv")
    assert back == rows
    assert back[0].error_pct == pytest.approx(2.0)
    assert back[0].error_j == pytest.approx(2.0)


def test_summary_mape_and_rmse_by_hand() -> None:
    rows = [
        TechniqueRow("1", "k", "mtsm", 110.0, 100.0),
        TechniqueRow("2", "k", "mtsm", 190.0, 200.0),
        TechniqueRow("1", "k", "PAPI", 130.0, 100.0),
        TechniqueRow("2", "k", "end-instant", None, 100.0),
    ]
    rows = [
        TechniqueRow(r.run, r.benchmark, normalize_technique(r.technique), r.energy_j, r.reference_energy_j)
        for r in rows
    ]
    s = {t.technique: t for t in summarize_techniques(rows)}
    assert s["mtsm"].n == 2
    assert s["mtsm"].mape_pct == pytest.approx(7.5)  # (10 % + 5 %) / 2
    assert s["mtsm"].rmse_j == pytest.approx(10.0)
    assert s["mtsm"].mean_error_pct == pytest.approx(2.5)
    assert s["end_instant"].n == 1 and s["end_instant"].mape_pct == pytest.approx(30.0)


def test_finding_says_whether_mtsm_beats_end_instant() -> None:
    better = technique_finding(technique_rows(mtsm_err_pct=2.0, end_err_pct=8.0))
    assert better.startswith("MTSM beats end-instant") and "as in the paper" in better
    worse = technique_finding(technique_rows(mtsm_err_pct=9.0, end_err_pct=3.0))
    assert worse.startswith("Finding: MTSM does not beat end-instant") and "unlike the paper" in worse
    assert "cannot be compared" in technique_finding([TechniqueRow("1", "k", "mtsm", 1.0, 1.0)])


def test_bad_instruction_csv_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "instructions.csv"
    p.write_text("instruction,category,opt_level,shape\nadd.u32,integer,3,single\nadd.u32,integer,high,single\n")
    with pytest.raises(RunDirError, match=r"instructions\.csv:3: column 'opt_level' is not a number"):
        read_instruction_rows(p)
    p.write_text("instruction,category,opt_level,shape\n,integer,3,single\n")
    with pytest.raises(RunDirError, match=r"instructions\.csv:2: instruction, opt_level and shape"):
        read_instruction_rows(p)


# --------------------------------------------------------------------------- the paper's Table I


def test_reference_table_transcription_spot_checks() -> None:
    assert len(TABLE_I) == 32
    udiv = match_reference("div.u32")
    assert udiv is not None and udiv.label == "{u} div"
    assert udiv.mtsm_uj("Volta", 3) == 3.8706
    assert udiv.papi_uj("Turing", 0) == 35.8200
    bfind = match_reference("bfind.u32")
    assert bfind is not None and bfind.papi_uj("Turing", 0) == 0.8010
    half = match_reference("add.f16")
    assert half is not None and half.mtsm_uj("Maxwell", 3) is None and half.mtsm_uj("Volta", 3) == 0.0624
    subc = match_reference("subc.u32")
    assert subc is not None and subc.mtsm_uj("Volta", 0) == 0.952467
    assert VERIFICATION["mtsm"].mape_pct == 6.39 and VERIFICATION["end_instant"].mape_pct == 10.24


@pytest.mark.parametrize(
    ("instr", "label"),
    [
        ("add.s32", "add / sub / min / max"),
        ("rem.s32", "{s} rem"),
        ("mad.lo.u32", "mul / mad"),
        ("fma.rn.f32", "mul / mad / fma"),
        ("div.rn.f32", "div"),
        ("sqrt.approx.f32", "approx.sqrt"),
        ("sqrt.rn.f32", "sqrt"),
        ("cos.approx.f32", "sin / cos"),
        ("addc.cc.u32", "add.cc / addc / sub.cc"),
        ("mad.cc.lo.u32", "mad.cc / madc"),
        ("mul24.lo.u32", "mul24() / mad24()"),
        ("xor.b32", "and / or / not / xor"),
        ("max.f64", "add / sub / min / max"),
        ("div.approx.f32", None),
        ("fma.rn.bf16x2", None),
        ("add.u64", None),
        ("cvt.rn.f32.f64", None),
    ],
)
def test_match_reference_is_like_for_like(instr: str, label: str | None) -> None:
    ref = match_reference(instr)
    assert (ref.label if ref else None) == label


# --------------------------------------------------------------------------- the report


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[RenderedReport, str, dict[str, MdTable]]:
    path = tmp_path_factory.mktemp("inst") / "run"
    make_instructions_run(path, rows=instruction_rows(unresolvable=["popc.b32"], failed=["sin.approx.f32"]))
    rep = render(path)
    md = rep.markdown.read_text(encoding="utf-8")
    return rep, md, md_tables(md)


def test_table_i_has_the_csv_values(report: tuple[RenderedReport, str, dict[str, MdTable]]) -> None:
    t = report[2][SINGLE]
    assert t.header[:3] == ["Instruction", "-O3 pJ (mtsm)", "-O0 pJ (mtsm)"]
    assert t.cell("`div.u32`", "-O3 pJ (mtsm)").startswith("3500.0 ±")
    assert t.cell("`div.u32`", "-O0 pJ (mtsm)").startswith("21,000.0 ±")
    assert t.cell("`div.u32`", "Repeat diff -O3") == "1.5 %"
    assert [r[0] for r in t.rows if r[0].startswith("**")][:3] == [
        "**(1) Integer arithmetic**",
        "**(3) Single precision**",
        "**(4) Double precision**",
    ]
    full = report[2][FULL]
    assert full.cell("`div.u32`", "-O3 pJ/thread-instr (mtsm)").startswith("87.50")
    assert full.cell("`div.u32`", "-O3 pJ/warp-instr (mtsm)").startswith("2800")


def test_unresolvable_and_failed_instructions_show_dashes(
    report: tuple[RenderedReport, str, dict[str, MdTable]],
) -> None:
    t = report[2][SINGLE]
    popc = t.cell("`popc.b32`", "-O3 pJ (mtsm)")
    assert popc.startswith("—") and "resolve" in t.reason(popc)
    sin = t.cell("`sin.approx.f32`", "-O3 pJ (mtsm)")
    assert sin.startswith("—") and "kernel timed out" in t.reason(sin)
    assert t.cell("`sin.approx.f32`", "-O0 pJ (mtsm)").startswith("1100.0 ±")
    assert "`popc.b32` -O3 single (mtsm): below what the sensor can resolve" in report[1]


def test_comparison_with_volta_and_turing(report: tuple[RenderedReport, str, dict[str, MdTable]]) -> None:
    t = report[2][VS]
    assert t.cell("`div.u32`", "Paper row") == "{u} div"
    assert t.cell("`div.u32`", "Volta -O3 (nJ)") == "3870"  # 3.8706 µJ
    assert t.cell("`div.u32`", "Turing -O3 (nJ)") == "6040"  # 6.038 µJ
    assert t.cell("`div.u32`", "This GPU -O3 (nJ)").startswith("3.5000 ±")
    bf16 = t.cell("`fma.rn.bf16`", "Paper row")
    assert bf16.startswith("—") and "no matching row" in t.reason(bf16)
    assert "Arafa et al., CF '20, Table I, MTSM figures" in report[1]


def test_techniques_and_plots(report: tuple[RenderedReport, str, dict[str, MdTable]]) -> None:
    rep, md, tables = report
    s = tables["Techniques against the reference (energy counter over long repeated runs)"]
    assert s.cell("mtsm", "MAPE (%)") == "2.00"
    assert s.cell("end_instant", "MAPE (%)") == "8.00"
    assert "MTSM beats end-instant on this GPU" in md
    names = {p.name for p in rep.files if p.suffix == ".png"}
    assert names == {
        "instructions_integer.png",
        "instructions_fp32.png",
        "instructions_fp64.png",
        "instructions_special.png",
        "instructions_intrinsic.png",
        "instructions_bf16.png",
        "techniques.png",
    }
    for p in rep.files:
        assert p.stat().st_size > 0
        if p.suffix == ".png":
            assert p.read_bytes().startswith(b"\x89PNG")


def test_report_without_techniques(tmp_path: Path) -> None:
    make_instructions_run(tmp_path / "run", techniques=[])
    md = render(tmp_path / "run").markdown.read_text(encoding="utf-8")
    assert "This run has no techniques.csv" in md
    assert SINGLE in md_tables(md)


def test_kernel_energies_are_listed(report: tuple[RenderedReport, str, dict[str, MdTable]]) -> None:
    t = report[2]["Kernel and overhead energies per launch"]
    row = next(r for r in t.rows if r[:3] == ["`div.u32`", "-O3", "single"])
    # instruction_rows(): overhead 50 J, kernel 50 J + 3500 pJ × 1e9 = 53.5 J, 1σ = 2e-5 × kernel.
    assert row[t.header.index("Overhead (J)")] == "50.0000 ± 0.0011"
    assert row[t.header.index("Kernel (J)")] == "53.5000 ± 0.0011"
    assert row[t.header.index("Instr/launch")] == "1.00e+09"
    assert row[t.header.index("ms/launch")] == "2000"

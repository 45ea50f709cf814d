"""The characterization report rendered from synthetic run directories: values, '—' cells, plots, flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archline.records import RunDir
from archline.report.characterize import render
from archline.report.classes import arith_class
from archline.report.interactive import charts_available
from archline.report.registry import RenderedReport
from tests.helpers.mdtables import MdTable, md_tables
from tests.helpers.rundirs import SyntheticRun, make_characterize_run

ARITH = "Arithmetic classes (shape of MIPP Table I)"
MEMORY = "Memory levels (shape of MIPP Table III)"
PNG = b"\x89PNG\r\n\x1a\n"


def _render(path: Path, **kw: object) -> tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]:
    run = make_characterize_run(path, **kw)  # type: ignore[arg-type]
    rep = render(path)
    md = rep.markdown.read_text(encoding="utf-8")
    return run, rep, md, md_tables(md)


@pytest.fixture(scope="module")
def complete(tmp_path_factory: pytest.TempPathFactory) -> tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]:
    return _render(
        tmp_path_factory.mktemp("complete") / "run",
        unresolvable=["arith.fp32.add"],
        throttled=["mem.dram.copy"],
        unverified=["sync.bar"],
    )


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]:
    """Interrupted (L2 and FP64 missing), popc failed, compute capability unknown."""
    return _render(
        tmp_path_factory.mktemp("broken") / "run",
        status="interrupted",
        missing=["mem.l2.read", "arith.fp64.fma"],
        failed=["arith.int32.popc"],
        unknown_cc=True,
        targets=False,
    )


def test_arithmetic_table_has_the_csv_values(
    complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    run, _, _, tables = complete
    t = tables[ARITH]
    assert t.header[1:4] == ["INT32 simple", "INT32 complex", "INT32 popc"]
    assert len(t.header) == 16  # label column + 11 MIPP/Hopper classes + 4 divisions
    assert t.cell("Benchmark", "FP32 simple") == "`arith.fp32.fma`"
    # arith.fp32.fma: 37.5 ms, spec 128, measured 125.3, 420 W × 37.5 ms = 15.75 J ± 1 %.
    assert t.cell("Execution time (ms)", "FP32 simple") == "37.5"
    assert t.cell("Spec throughput (ops/clk/SM)", "FP32 simple") == "128"
    assert t.cell("Measured throughput (ops/clk/SM)", "FP32 simple") == "125"
    assert t.cell("% of spec", "FP32 simple") == "97.9 %"
    assert t.cell("Average power (W)", "FP32 simple") == "420"
    assert t.cell("Max power (W)", "FP32 simple") == "441"
    assert t.cell("Energy per launch (J)", "FP32 simple") == "15.75 ± 0.16"
    nj = run.row("arith.fp32.fma")["nj_per_op"]
    assert t.cell("nJ per instruction", "FP32 simple").startswith(f"{nj:.5f}"[:6])
    assert "±" in t.cell("Dynamic nJ per instruction (above idle)", "FP32 simple")
    mips = run.row("arith.fp32.fma")["mips_per_w_per_sm"]
    assert t.cell("Energy efficiency (MIPS/W/SM)", "FP32 simple") == f"{mips:.0f}"
    assert t.cell("Execution time (ms)", "FP32 div IEEE, denormal") == "840"


def test_int64_has_no_spec_and_says_why(complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]) -> None:
    t = complete[3][ARITH]
    cell = t.cell("Spec throughput (ops/clk/SM)", "INT64 simple")
    assert cell.startswith("—")
    assert "never guessed" in t.reason(cell)
    assert t.cell("Measured throughput (ops/clk/SM)", "INT64 simple") == "20.5"


def test_memory_table_levels_and_bandwidth(
    complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    t = complete[3][MEMORY]
    assert {"DRAM stride", "DRAM stream", "DRAM copy", "L2 read", "Shared read", "Constant read"} <= set(t.header)
    assert t.header.index("DRAM copy") < t.header.index("L2 read") < t.header.index("Shared read")
    assert t.cell("Throughput (B/clk/SM)", "L2 read") == "40.0"
    # 40 B/clk/SM × 1980 MHz × 132 SMs = 10.45 TB/s.
    assert t.cell("Throughput (GB/s)", "L2 read") == "10,500"
    assert t.cell("Execution time (ms)", "DRAM stride") == "1170"
    assert t.cell("Flags", "DRAM copy") == "throttled"
    for row in ("10⁶ transactions per J", "nJ per transaction", "pJ per byte", "Dynamic pJ per byte (above idle)"):
        assert "±" in t.cell(row, "Shared read")


def test_unresolvable_energy_is_not_printed(
    complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    run, _, md, tables = complete
    t = tables["All arithmetic benchmarks"]
    row = next(r for r in t.rows if r[0] == "`arith.fp32.add`")
    energy = row[t.header.index("Energy (J)")]
    assert energy.startswith("—")
    assert "resolve" in t.reason(energy)
    assert f"{run.row('arith.fp32.add')['energy_j']:.4g}" not in md
    assert "unresolvable" in row[-1]


def test_sync_sweeps_targets_and_flags(complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]) -> None:
    _, _, md, tables = complete
    sync = tables["Synchronisation"]
    assert sync.cell("Execution time (ms)", "sync.atomic.shared.contended") == "800"
    coal = tables["DRAM coalescing (MIPP Fig. 6) — dram: points"]
    assert coal.column("coalescing") == ["1/32", "1/16", "1/8", "1/4", "1/2", "1"]
    assert coal.column("Time (ms)") == ["10.0", "20.0", "30.0", "40.0", "50.0", "60.0"]
    conflicts = tables["Shared-memory bank conflicts (MIPP Fig. 8) — shared: points"]
    assert conflicts.column("extra conflict ways") == ["0", "1", "3", "7", "15", "31"]
    targets = tables["Targets"]
    assert targets.column("Result")[:2] == ["PASS", "FAIL"]
    assert targets.reason(targets.column("Result")[2]) == "could not be evaluated"
    assert "missed by 8.8 points: power cap reached" in targets.column("Detail")
    assert "1 of 3 targets passed, 1 failed, 1 could not be evaluated." in md
    assert "`mem.dram.copy`: throttled (sw_power_cap)" in md
    assert "`sync.bar`: output not verified" in md
    assert "`arith.fp32.add`: energy below what the sensor can resolve" in md


def test_header_comes_from_the_manifest(complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]) -> None:
    md = complete[2]
    for text in (
        "| GPU | NVIDIA H100 80GB HBM3 |",
        "| Driver | 580.159.04 |",
        "| CUDA (driver) | 13.0 |",
        "| Memory | 80.00 GiB |",
        "| Board power before / after the run | 107.5 W before / 131 W after |",
        "| Clock-event reasons before / after the run | gpu_idle before / none after |",
        "| Compute capability | 9.0 |",
        "| Power limit | 700 W |",
        "| Persistence mode | on |",
        "| SM clock before / after the run | 345 MHz before / 1980 MHz after |",
        "| Duration | 42 min 17 s |",
        "archline 0.1.0, numpy 2.4.6",
    ):
        assert text in md
    assert re.search(r"\| SM clock under load \| 1980 MHz median", md)
    assert "| Status | complete:" in md


def test_plots_are_written_and_embedded(complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]) -> None:
    _, rep, md, _ = complete
    pngs = [p for p in rep.files if p.suffix == ".png"]
    names = {p.name for p in pngs}
    assert {"throughput_vs_spec.png", "sweep_coalescing_dram.png", "sweep_conflict_ways_shared.png"} <= names
    assert "sweep_access_bytes_dram.png" in names and "sweep_block_fp32.png" in names
    for p in pngs:
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 5000
        assert f"(plots/{p.name})" in md
    html = rep.html.read_text(encoding="utf-8") if rep.html else ""
    sweeps = [p for p in pngs if p.name.startswith("sweep_")]
    if charts_available():  # each sweep is an interactive chart (its data inline), the spec chart a PNG
        assert html.count('class="vl-chart"') == len(sweeps)
        assert html.count("data:image/png;base64,") == len(pngs) - len(sweeps)
        assert "http://" not in html.replace("http://www.w3.org", "") and "https://cdn" not in html
    else:  # no vl-convert-python: every plot is an embedded PNG, no script
        assert html.count("data:image/png;base64,") == len(pngs)
        assert "<script" not in html


def test_sweeps_sort_numerically_and_plot_throughput(
    complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    md = complete[2]
    block = md[md.index("threads per block") :]
    rows = [ln.split("|")[1].strip() for ln in block.splitlines() if ln.startswith("| ") and "occupancy." in ln]
    values = [float(v) for v in rows]
    assert values == sorted(values) and len(values) >= 2
    assert "throughput, average power and energy per launch" in md


def test_no_placeholder_numbers_leak(complete: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]]) -> None:
    md, tables = complete[2], complete[3]
    for bad in ("nan", "None", "inf "):
        assert bad not in md
    for caption in (ARITH, MEMORY, "Synchronisation", "All arithmetic benchmarks"):
        assert all(cell not in ("0", "0.0") for row in tables[caption].rows for cell in row), caption


def test_interrupted_run_names_the_missing_benchmarks(
    broken: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    _, rep, md, tables = broken
    assert "| Status | interrupted:" in md
    assert "missing: arith.fp64.fma, mem.l2.read" in md
    assert rep.status == "interrupted" and any("interrupted" in w for w in rep.warnings)
    t = tables[ARITH]
    fp64 = t.column("FP64 simple")
    assert all(c.startswith("—") for c in fp64)
    assert t.reason(fp64[1]) == "missing: the run was interrupted before arith.fp64.fma"
    mem = tables[MEMORY]
    l2 = mem.column("L2")
    assert all(c.startswith("—") for c in l2)
    assert mem.reason(l2[0]) == "missing: the run was interrupted before mem.l2.read"


def test_a_class_without_rows_says_why(tmp_path: Path) -> None:
    make_characterize_run(tmp_path / "run", missing=["arith.int64.add"], sweeps=False, targets=False)
    t = md_tables(render(tmp_path / "run").markdown.read_text(encoding="utf-8"))[ARITH]
    cell = t.cell("Execution time (ms)", "INT64 simple")
    assert t.reason(cell) == "missing: arith.int64.add planned but has no row in results.csv"
    RunDir.open(tmp_path / "run").update_manifest(extra={})
    t = md_tables(render(tmp_path / "run").markdown.read_text(encoding="utf-8"))[ARITH]
    assert t.reason(t.cell("Execution time (ms)", "INT64 simple")) == "not measured in this run"


def test_failed_row_shows_dashes_with_its_note(
    broken: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    _, rep, md, tables = broken
    t = tables[ARITH]
    popc = t.column("INT32 popc")
    assert popc[0] == "`arith.int32.popc`"
    for cell in popc[1:-1]:
        assert cell.startswith("—")
        assert "output check failed" in t.reason(cell)
    assert popc[-1] == "failed"
    assert "`arith.int32.popc`: failed — output check failed" in md
    assert any("not ok" in w for w in rep.warnings)


def test_unknown_compute_capability_leaves_spec_empty(
    broken: tuple[SyntheticRun, RenderedReport, str, dict[str, MdTable]],
) -> None:
    _, rep, md, tables = broken
    t = tables[ARITH]
    spec = [c for c in t.column("FP32 simple")[2:5]]
    assert spec[0].startswith("—") and "12.7" in t.reason(spec[0])
    assert spec[1] == "125"
    assert spec[2].startswith("—")
    assert "No spec throughput is recorded for compute capability 12.7" in md
    assert any(p.name == "throughput_vs_spec.png" for p in rep.files)
    assert "This run has no targets.csv." in md


def test_recorded_empty_values_show_as_dashes(tmp_path: Path) -> None:
    from archline.records import write_csv
    from archline.records.characterize import RESULT_COLUMNS

    run = make_characterize_run(tmp_path / "run", sweeps=False, targets=False)
    rows = [dict(r) for r in run.rows]
    for r in rows:
        if r["name"] == "arith.int32.add":
            r.update(energy_j=None, max_power_w=None, nj_per_op=None, dyn_nj_per_op=None, dynamic_energy_j=None)
    write_csv(tmp_path / "run" / "results.csv", rows, list(RESULT_COLUMNS))
    t = md_tables(render(tmp_path / "run").markdown.read_text(encoding="utf-8"))[ARITH]
    for label in ("Energy per launch (J)", "Max power (W)", "nJ per instruction"):
        cell = t.cell(label, "INT32 simple")
        assert cell.startswith("—"), label
        assert "not recorded" in t.reason(cell)
    assert t.cell("Average power (W)", "INT32 simple") == "310"
    assert "No sweep points in this run." in (tmp_path / "run" / "report.md").read_text(encoding="utf-8")


def test_render_into_another_folder_leaves_the_run_alone(tmp_path: Path) -> None:
    make_characterize_run(tmp_path / "run", sweeps=False)
    rep = render(tmp_path / "run", tmp_path / "out")
    assert rep.markdown == tmp_path / "out" / "report.md"
    assert (tmp_path / "out" / "plots" / "throughput_vs_spec.png").is_file()
    assert not (tmp_path / "run" / "report.md").exists()


@pytest.mark.parametrize(
    ("name", "unit", "cls"),
    [
        ("arith.int32.add", "int32", "int32_simple"),
        ("arith.int32.mul", "int32", "int32_complex"),
        ("arith.int32.min", "int32", "int32_compare"),
        ("arith.int32.and", "int32", "int32_bitop"),
        ("arith.int32.shr", "int32", "int32_shift"),
        ("arith.int32.popc", "int32", "int32_popc"),
        ("arith.u64.add", "", "int64_simple"),
        ("arith.fp32.mul", "fp32", "fp32_simple"),
        ("arith.fp32.sin", "", "fp32_special"),
        ("arith.sfu.ex2", "sfu", "fp32_special"),
        ("arith.fp64.add", "fp64", "fp64_simple"),
        ("arith.bf16x2.fma", "", "fp16_bf16"),
        ("arith.fp32.div_full_denormal", "fp32", "div_approx_denormal"),
        ("arith.fp32.div.ieee.normal", "fp32", "div_ieee_normal"),
        ("arith.fp64.div", "fp64", None),
        ("arith.mystery", "", None),
    ],
)
def test_arith_class_from_catalogue_names(name: str, unit: str, cls: str | None) -> None:
    assert arith_class(name, unit) == cls


def test_mipp_class_column_overrides_the_name() -> None:
    assert arith_class("arith.custom.thing", "", "int32_popc") == "int32_popc"


def test_a_characterize_run_with_a_roofline_gets_its_section(tmp_path):
    import shutil
    from pathlib import Path

    from archline.report.characterize import render as render_characterize

    root = Path(__file__).resolve().parents[2] / "results" / "h100"
    run = tmp_path / "run"
    shutil.copytree(root / "characterize-quick", run)
    for f in (root / "roofline").glob("roofline_*.[cj]s*"):
        shutil.copy(f, run / f.name)
    rep = render_characterize(run)
    md = rep.markdown.read_text(encoding="utf-8")
    assert "## Energy roofline: NVIDIA H100 80GB HBM3" in md
    assert "counted prediction" in md
    assert 'class="archline-roofline"' in rep.html.read_text(encoding="utf-8")
    assert any(p.name == "roofline_arch.png" for p in rep.files)

"""The counted model: ncu parsing and profiling flow, component energies, counted predictions, operand kernels."""

from __future__ import annotations

import json
import math
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from archline.characterize.kernels.operands import operand_dmma, operand_fma, operand_kernels
from archline.errors import InputError
from archline.hw import ncu
from archline.model.build import COMPONENTS_TABLE, COUNTS_TABLE, build_model, fit_run_dir
from archline.model.components import (
    COMPONENT_SOURCES,
    counts_from_dicts,
    derive_components,
    predict_counted,
)
from archline.model.io import load_model
from archline.model.sweep import HeldOutRow
from archline.records import write_csv
from tests.helpers.roofline_synth import H100_LIKE, write_run_dir

HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","device__attribute_confidential_computing_mode","dram__bytes_read.sum","launch__grid_size",'
    '"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum","gpu__time_duration.sum"'
)
UNITS = '"","","","","","","","","","","","","Kbyte","","inst","usecond"'


def _raw(*kernels: tuple[str, int, str, str, str]) -> str:
    lines = ["==PROF== Disconnected", HEAD, UNITS]
    for i, (name, grid, dram, ffma, t) in enumerate(kernels):
        lines.append(
            f'"{i}","7","python3","h","{name}","1","7","(32, 1, 1)","({grid}, 1, 1)","0","9.0","No-CC",'
            f'"{dram}","{grid}","{ffma}","{t}"'
        )
    return "\n".join(lines) + "\n"


RAW = _raw(
    (ncu.MARKER, 1, "0", "0", "1"),
    ("triad", 4096, "1,500.5", "1,000", "2.5"),
    (ncu.MARKER, 2, "0", "0", "1"),
    ("gemm_main", 512, "10", "5000", "20"),
    ("gemm_splitk", 64, "2", "0", "1"),
)


# --------------------------------------------------------------------------- ncu


def test_raw_csv_units_thousands_and_text_columns() -> None:
    kernels = ncu.parse_raw_csv(RAW)
    assert [k for k, _ in kernels] == [ncu.MARKER, "triad", ncu.MARKER, "gemm_main", "gemm_splitk"]
    triad = kernels[1][1]
    assert triad["dram__bytes_read.sum"] == pytest.approx(1_500_500.0)  # Kbyte → byte
    assert triad["gpu__time_duration.sum"] == pytest.approx(2500.0)  # usecond → ns
    assert "device__attribute_confidential_computing_mode" not in triad  # text attribute not read


def test_kernels_are_summed_per_workload_by_marker() -> None:
    counts = ncu.split_by_marker(ncu.parse_raw_csv(RAW), ["triad.w", "gemm.w"])
    assert counts["triad.w"].kernels == ["triad"]
    g = counts["gemm.w"]
    assert g.kernels == ["gemm_main", "gemm_splitk"]
    assert g.get("dram_read_b") == pytest.approx(12_000.0)
    assert g.flops_fp32 == pytest.approx(10_000.0)  # 2 × FFMA thread instructions
    assert math.isnan(g.flops_fp64)  # not collected
    assert math.isnan(g.get("l2_b"))
    row = g.as_row()
    assert row["kernels"] == 2 and row["kernel_names"] == "gemm_main | gemm_splitk"


def test_shared_bytes_fall_back_to_wavefronts() -> None:
    c = ncu.NcuCounts("x", values={"shared_wavefronts": 10.0})
    assert c.shared_bytes == 1280.0
    assert ncu.NcuCounts("x", values={"shared_ld_b": 4.0, "shared_st_b": 2.0}).shared_bytes == 6.0


def test_malformed_reports_name_the_line() -> None:
    with pytest.raises(InputError, match="no CSV rows"):
        ncu.parse_raw_csv("==PROF== nothing\n")
    bad = RAW.replace('"1,500.5"', '"lots"')
    with pytest.raises(InputError, match=r"ncu raw CSV:\d+: not a number"):
        ncu.parse_raw_csv(bad)
    short = RAW.rsplit("\n", 2)[0] + '\n"9","7"\n'
    with pytest.raises(InputError, match="fields, header has"):
        ncu.parse_raw_csv(short)
    with pytest.raises(InputError, match="names no workload"):
        ncu.split_by_marker(ncu.parse_raw_csv(RAW), ["only-one"])


def test_query_lists_base_names() -> None:
    text = (
        "Device GH100\n------\nMetric Name   Metric Type  Unit\ndram__bytes   Counter  byte  # of bytes\n   (wrapped)\n"
    )
    assert ncu.parse_query(text) == {"dram__bytes"}


FAKE_NCU = """#!{py}
import sys, pathlib
args = sys.argv[1:]
log = pathlib.Path({log!r})
log.write_text(log.read_text() + " ".join(args) + "\\n" if log.exists() else " ".join(args) + "\\n")
if "--query-metrics" in args:
    print("dram__bytes_read   Counter byte\\nlaunch__grid_size Counter\\n"
          "smsp__sass_thread_inst_executed_op_ffma_pred_on Counter\\ngpu__time_duration Counter")
    sys.exit(0)
if "--import" in args:
    sys.stdout.write(open({raw!r}).read())
    sys.exit(0)
if {fail!r}:
    print("==ERROR== ERR_NVGPUCTRPERM - no permission", file=sys.stderr)
    sys.exit(1)
sys.exit(0)
"""


CHILD = [sys.executable, "-m", "archline.characterize.ncu_child"]


def _fake_ncu(tmp_path: Path, fail: bool = False) -> tuple[Path, Path]:
    raw = tmp_path / "raw.csv"
    raw.write_text(RAW)
    log = tmp_path / "calls.log"
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.format(py=sys.executable, log=str(log), raw=str(raw), fail=fail))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe, log


def test_count_workloads_profiles_with_known_metrics_and_clocks_untouched(tmp_path: Path) -> None:
    exe, log = _fake_ncu(tmp_path)
    counts, metrics = ncu.count_workloads(["triad.w", "gemm.w"], ncu=str(exe), keep=tmp_path / "run", child=CHILD)
    assert set(counts) == {"triad.w", "gemm.w"}
    assert "dram__bytes_read.sum" in metrics and "lts__t_bytes.sum" not in metrics  # unknown to this ncu
    calls = log.read_text().splitlines()
    profile = next(c for c in calls if "--profile-from-start" in c)
    assert "--clock-control none" in profile
    assert "-m archline.characterize.ncu_child --gpu 0 --names triad.w,gemm.w" in profile
    assert (tmp_path / "run" / "roofline_ncu_raw.csv").read_text() == RAW


def test_count_workloads_reports_a_refused_profiler(tmp_path: Path) -> None:
    exe, _ = _fake_ncu(tmp_path, fail=True)
    with pytest.raises(ncu.NcuUnavailableError, match="no permission for GPU performance counters"):
        ncu.count_workloads(["triad.w"], ncu=str(exe), child=CHILD)
    with pytest.raises(ncu.NcuUnavailableError, match="could not start"):
        ncu.count_workloads(["triad.w"], ncu=str(tmp_path / "missing-ncu"), child=CHILD)


# --------------------------------------------------------------------------- components

TRUE_EPS = {
    "fp32_flop": 9e-12,
    "fp64_flop": 25e-12,
    "tensor_fp64_flop": 11e-12,
    "l2_byte": 38e-12,
    "shared_byte": 4e-12,
    "thread_inst": 14e-12,
}
PI0 = 110.0


def _component_rows(pi0: float = PI0) -> list[dict[str, object]]:
    rows = []
    for comp, (bench, col) in COMPONENT_SOURCES.items():
        n, t = 3e13, 0.9
        rows.append({"name": bench, "status": "ok", "time_s": t, "energy_j": pi0 * t + TRUE_EPS[comp] * n, col: n})
    return rows


def test_component_energies_are_recovered_above_pi0() -> None:
    comps = derive_components(_component_rows(), PI0)
    for k, v in TRUE_EPS.items():
        assert comps.get(k) == pytest.approx(v, rel=1e-9)
    assert "operand.fma.fp32" in comps.sources["fp32_flop"]


def test_missing_or_failed_components_are_nan_and_named() -> None:
    rows = [r for r in _component_rows() if r["name"] != "mem.l2.read"]
    rows[0] = {**rows[0], "status": "failed"}
    comps = derive_components(rows, PI0)
    assert math.isnan(comps.get("l2_byte")) and "not measured" in comps.sources["l2_byte"]
    assert math.isnan(comps.get("fp32_flop"))


def _counts_row(name: str, **v: float) -> dict[str, object]:
    base = dict.fromkeys(("flops_fp32", "flops_fp64", "dram_bytes", "l2_b", "shared_bytes", "thread_inst"), 0.0)
    return {"name": name, **base, **v}


@pytest.fixture(scope="module")
def params():  # type: ignore[no-untyped-def]
    return build_model(H100_LIKE.sweep(np.random.default_rng(5)), H100_LIKE.peaks()).parameters


def test_counted_prediction_equals_a_machine_that_follows_it(params) -> None:  # type: ignore[no-untyped-def]
    p = params.params("single")
    comps = derive_components(_component_rows(p.pi0_w), p.pi0_w)
    t = 0.01
    q, l2, sh, f32 = 2e9, 5e9, 1e10, 2e11
    e_true = p.pi0_w * t + p.eps_mem_j_per_b * q + TRUE_EPS["fp32_flop"] * f32 + 38e-12 * (l2 - q) + 4e-12 * sh
    held = [HeldOutRow("k", "single", f32, q, t, e_true)]
    counts = counts_from_dicts(
        [_counts_row("k", flops_fp32=f32, dram_bytes=q, l2_b=l2, shared_bytes=sh, thread_inst=f32 / 2, ffma=f32 / 2)],
        held,
    )
    s = predict_counted(params, comps, held, counts)
    (pred,) = s.predictions
    assert pred.error == pytest.approx(0.0, abs=1e-9) and s.target_met
    assert not pred.cap_active and "instructions" not in pred.terms
    with_inst = predict_counted(params, comps, held, counts, with_instructions=True)
    assert with_inst.predictions[0].terms["instructions"] == pytest.approx(0.0)  # every instruction was an FFMA


def test_tensor_flops_come_from_w_less_cuda_core_flops_and_power_is_capped(params) -> None:  # type: ignore[no-untyped-def]
    pi0 = params.params("double").pi0_w
    comps = derive_components(_component_rows(pi0), pi0)
    t = 0.02
    held = [HeldOutRow("dgemm", "double", 1.1e12, 1e9, t, 700.0 * t)]
    counts = counts_from_dicts([_counts_row("dgemm", flops_fp64=1e8, dram_bytes=2e10, l2_b=1e11)], held)
    assert counts["dgemm"].flops_tensor_fp64 == pytest.approx(1.1e12 - 1e8)
    (pred,) = predict_counted(params, comps, held, counts).predictions
    assert pred.cap_active and pred.energy_uncapped_j > pred.energy_j
    assert pred.energy_j == pytest.approx(params.power_limit_w * t)


def test_malformed_counts_are_refused_with_the_row() -> None:
    held = [HeldOutRow("k", "single", 1.0, 1.0, 1.0, 1.0)]
    with pytest.raises(InputError, match=r"counts:2: missing column flops_fp64"):
        counts_from_dicts([{"name": "k", "flops_fp32": 1}], held)
    with pytest.raises(InputError, match=r"counts:3: dram_bytes is not a non-negative number"):
        counts_from_dicts([_counts_row("k"), _counts_row("j", dram_bytes=-1.0)], held)


def test_run_directory_with_components_and_counts_round_trips(tmp_path: Path) -> None:
    d = tmp_path / "run"
    write_run_dir(d, H100_LIKE, np.random.default_rng(7))
    held_rows = list(__import__("csv").DictReader((d / "roofline_heldout.csv").open()))
    write_csv(d / COMPONENTS_TABLE, _component_rows())
    write_csv(
        d / COUNTS_TABLE,
        [_counts_row(r["name"], flops_fp32=float(r["flops"]), dram_bytes=float(r["bytes"])) for r in held_rows],
    )
    model = fit_run_dir(d)
    assert model.counted is not None and len(model.counted.predictions) == len(held_rows)
    again = load_model(d / "roofline_model.json")
    assert again.counted == model.counted
    json.loads((d / "roofline_model.json").read_text())  # strict JSON


# --------------------------------------------------------------------------- operand kernels


def test_fp32_operand_kernel_simulates_and_verifies() -> None:
    from tests.helpers.ptx_sim import simulate

    spec = operand_fma("fp32")
    run = simulate(spec, iters=3, grid=2, block=64)
    assert spec.verify is not None
    assert spec.verify(run.outputs, run.scalars) is None


def test_operand_verifier_rejects_a_blown_up_accumulator() -> None:
    from tests.helpers.ptx_sim import simulate

    spec = operand_fma("fp32")
    run = simulate(spec, iters=3, grid=2, block=64)
    out = {k: np.array(v, copy=True) for k, v in run.outputs.items()}
    words = out["out"].view(np.uint32)
    words[1 * 128 + 5] = np.float32(np.inf).view(np.uint32)  # accumulator 0 of thread 5
    assert spec.verify is not None
    assert "accumulator 0 of thread 5" in (spec.verify(out, run.scalars) or "")


def test_operand_kernels_count_their_work() -> None:
    f32, f64, mma = operand_kernels()
    assert f32.work.flops == 2 * f32.work.ops == 256.0
    assert f64.work.flops == 256.0
    assert mma.work.flops == 16 * 64.0 and mma.sass[0].opcode == "DMMA"
    assert operand_dmma(tiles=2).work.ops == 8.0


@pytest.mark.skipif(
    __import__("archline.hw.sass", fromlist=["find_ptxas"]).find_ptxas() is None
    or __import__("archline.hw.sass", fromlist=["find_nvdisasm"]).find_nvdisasm() is None,
    reason="ptxas or nvdisasm is not installed",
)
def test_operand_kernels_keep_their_ffma_dfma_dmma_in_sass() -> None:
    from archline.hw import sass

    for spec in operand_kernels():
        ins = sass.disassemble(sass.compile_ptx(spec.ptx))
        assert sass.check_sass(spec, ins) == [], spec.name

"""The counted ML model: component energies recovered from synthetic runs, the protocol's choices, the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.errors import InputError
from archline.model.ml import (
    RANDOM_ACTIVITY,
    MeasuredKernel,
    MlCounts,
    calibrate,
    counts_from_ncu_values,
    machine,
    score,
)
from archline.model.ml_run import analyze_ml_run, load_ml_model
from tests.helpers.ml_synth import EPS_MEM, LIMIT, PI0, TRUE, component_rows, kernels, params, write_ml_run_dir


def test_components_recovered_and_l1_chosen_on_calibration() -> None:
    rng = np.random.default_rng(1)
    m0 = machine(params(), component_rows(), {"single": 5e13})
    for comp, v in TRUE.items():
        assert m0.eps[comp] == pytest.approx(v, rel=1e-9), comp
    pairs = kernels(rng, 9, "calibration") + kernels(rng, 12, "heldout")
    m = calibrate(m0, pairs)
    # The truth has an L1 term and no instruction term: the protocol finds exactly that.
    assert "l1" in m.terms and "instructions" not in m.terms
    held = score(m, pairs, "heldout")
    assert len(held.predictions) == 12
    assert held.median_abs_error_measured_time < 1e-9
    assert held.met["median_measured_time"] and math.isfinite(held.median_abs_error_predicted_time)


def test_protocol_sees_only_calibration_kernels() -> None:
    rng = np.random.default_rng(2)
    m0 = machine(params(), component_rows(), {"single": 5e13})
    cal = kernels(rng, 6, "calibration")
    held = kernels(rng, 6, "heldout")
    # Corrupt the held-out measurements: the calibrated model must not change.
    bad = [(MeasuredKernel(k.name, k.group, k.time_s, k.energy_j * 3), c) for k, c in held]
    assert calibrate(m0, cal + held) == calibrate(m0, cal + bad)
    with pytest.raises(InputError, match="calibration"):
        calibrate(m0, held)


def test_activity_factor_from_the_toggle_sweep() -> None:
    m = machine(params(), component_rows(slope=0.2e-12), {"single": 5e13}).with_terms(["activity"])
    eps_r = TRUE["tensor_bf16_flop"]
    assert m.activity_factor(RANDOM_ACTIVITY) == pytest.approx(1.0)
    assert m.activity_factor(0.0) == pytest.approx((eps_r - 0.1e-12) / eps_r)
    assert m.activity_factor(1.0) == pytest.approx((eps_r + 0.1e-12) / eps_r)
    c = MlCounts(name="g", tensor={"bf16": 1e12})
    assert m.energy_terms(c, 0.0)["tensor_bf16"] < m.energy_terms(c, 1.0)["tensor_bf16"]
    assert m.with_terms([]).activity_factor(0.0) == 1.0


def test_power_cap_and_time_roofline() -> None:
    m = machine(params(), component_rows(), {"single": 5e13}).with_terms([])
    m = m.__class__(**{**vars(m), "eta": {"tensor": 0.8, "cuda": 1.0, "memory": 0.9}})
    c = MlCounts(name="gemm", tensor={"bf16": 9e14}, dram_bytes=1e8, l2_bytes=1e9)
    t_roof, t, unit = m.predicted_time(c)
    assert unit == "tensor_bf16" and t_roof == pytest.approx(1.0) and t == pytest.approx(1.25)
    p = m.predict(c, measured=MeasuredKernel("gemm", "x", 0.5, 300.0))
    # Dynamic energy 315 J + 20 J + 6 J over 0.5 s is far above 700 W: held at the limit.
    assert p.cap_active_measured and p.energy_at_measured_time_j == pytest.approx(LIMIT * 0.5)
    mem = MlCounts(name="copy", dram_bytes=3e12)
    assert m.predicted_time(mem)[2] == "dram"


def test_ncu_values_to_counts() -> None:
    v = {
        "ffma": 10.0,
        "fadd": 1.0,
        "dfma": 2.0,
        "dram_read_b": 100.0,
        "dram_write_b": 50.0,
        "l2_b": 400.0,
        "l1_b": 900.0,
        "shared_b": 64.0,
        "thread_inst": 1000.0,
        "inst_global_ld": 2.0,
        "tc_ops_bf16_dst_fp32": 1e6,
        "tc_ops_fp16": 2e6,
        "tc_ops_fp8": 3e6,
        "tc_ops_fp64": 4.0,
        "time_ns": 5000.0,
    }
    c = counts_from_ncu_values("k", v)
    assert c.flops_fp32 == 21 and c.flops_fp64 == 4 and c.dram_bytes == 150 and c.l1_bytes == 900
    assert c.tensor_flops("bf16") == 1e6 and c.tensor_flops("fp16") == 2e6 and c.tensor_flops("fp8") == 3e6
    assert c.other_inst == 1000 - 13 - 64 and c.ncu_time_s == pytest.approx(5e-6)


def _run_dir(tmp: Path) -> Path:
    """A roofline run directory with the tables the ML analysis reads, from the synthetic truth."""
    rng = np.random.default_rng(3)
    return write_ml_run_dir(tmp / "run", kernels(rng, 6, "calibration") + kernels(rng, 20, "heldout"))


def test_run_directory_round_trip_and_cli(tmp_path: Path) -> None:
    d = _run_dir(tmp_path)
    run = analyze_ml_run(d, params(sigma=0.5))
    assert run is not None
    assert len(run.heldout.predictions) == 20 and len(run.calibration.predictions) == 6
    assert run.heldout.median_abs_error_measured_time < 1e-6
    assert (d / "roofline_ml_predictions.csv").is_file()
    m = load_ml_model(d)
    assert m.terms == run.model.terms and m.eps == pytest.approx(run.model.eps)
    res = CliRunner().invoke(
        app,
        ["model", "predict", "--model", str(d), "--counts", "tensor_bf16=9e11,dram=3e8", "--time", "0.002", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    want = PI0 * 0.002 + TRUE["tensor_bf16_flop"] * 9e11 + EPS_MEM * 3e8
    assert out["energy_at_measured_time_j"] == pytest.approx(want, rel=1e-9)
    assert out["energy_at_measured_time_ci_j"] > 0 and math.isfinite(out["time_s"])
    table = CliRunner().invoke(app, ["model", "predict", "--model", str(d), "--counts", "tensor_bf16=9e11"])
    assert table.exit_code == 0 and "energy" in table.stdout


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["--counts", "tensor_bf16=abc"], "not a number"),
        (["--counts", "warp=3"], "KEY=VALUE"),
        (["--counts", "dram=1e8", "--activity", "2"], "--activity"),
        (["--ncu-csv", "missing.csv"], "cannot read"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], msg: str) -> None:
    d = _run_dir(tmp_path)
    analyze_ml_run(d, params())
    res = CliRunner().invoke(app, ["model", "predict", "--model", str(d), *args])
    assert res.exit_code == 2
    assert msg in res.output and "Traceback" not in res.output


def test_cli_ncu_csv(tmp_path: Path) -> None:
    d = _run_dir(tmp_path)
    analyze_ml_run(d, params())
    csv = tmp_path / "k.csv"
    csv.write_text(
        '"ID","Kernel Name","dram__bytes_read.sum","lts__t_bytes.sum","sm__ops_path_tensor_src_bf16_dst_fp32.sum"\n'
        '"","","byte","byte",""\n'
        '"0","gemm","1000000","2000000","900000000000"\n'
        '"1","gemm","1000000","2000000","900000000000"\n'
    )
    res = CliRunner().invoke(app, ["model", "predict", "--model", str(d), "--ncu-csv", str(csv), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["bound"] == "tensor_bf16" and "2 kernels" in out["source"]
    assert out["terms_j"]["tensor_bf16"] == pytest.approx(TRUE["tensor_bf16_flop"] * 1.8e12, rel=1e-9)

"""Protocol v2 of the ML model: κ (the dynamic energy a capped kernel spends) and the time source, recovered on a
synthetic board of known truth; its files beside the others; a model without ncu times falls back to the roofline."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from archline.model.ml import MeasuredKernel, MlCounts, calibrate, machine, score
from archline.model.ml_run import ML_MODEL_FILE, ML_V2_FILE, ML_V2_PREDICTIONS_TABLE, analyze_ml_run, load_ml_model
from archline.model.ml_v2 import V2_LABEL, calibrate_v2
from tests.helpers.ml_synth import PI0, TRUE, component_rows, params, uncapped_kernels, write_ml_run_dir

CAP = 770.0
KAPPA = 0.8


def _machine() -> Any:
    return machine(params(), component_rows(), {"single": 5e13})


def _dyn(c: MlCounts) -> float:
    """The true dynamic energy (the synthetic board's terms: L1 in, instructions out)."""
    m = replace(_machine(), terms=("l1",))
    return float(sum(m.energy_terms(c).values()))


def _capped(rng: np.random.Generator, n: int, group: str) -> list[tuple[MeasuredKernel, MlCounts]]:
    """BF16 tensor kernels that hit the cap and spend κ·E_dyn there: T = κ·E_dyn/(P_cap − π0), E = P_cap·T."""
    out = []
    for i in range(n):
        dram = float(rng.uniform(1e8, 5e8))
        c = MlCounts(
            name=f"{group}.c{i}",
            tensor={"bf16": float(rng.uniform(1e12, 3e12))},
            dram_bytes=dram,
            l2_bytes=2 * dram,
            l1_bytes=5 * dram,
            shared_bytes=1e9,
            other_inst=1e9,
        )
        t = KAPPA * _dyn(c) / (CAP - PI0)
        out.append(
            (MeasuredKernel(name=c.name, group=group, time_s=t, energy_j=CAP * t), replace(c, ncu_time_s=0.8 * t))
        )
    return out


def _with_ncu(pairs: list[tuple[MeasuredKernel, MlCounts]]) -> list[tuple[MeasuredKernel, MlCounts]]:
    """Uncapped kernels whose ncu duration is their measured time (capped ones keep their 0.8·T)."""
    return [(k, c if np.isfinite(c.ncu_time_s) else replace(c, ncu_time_s=k.time_s)) for k, c in pairs]


def _set(seed: int) -> list[tuple[MeasuredKernel, MlCounts]]:
    rng = np.random.default_rng(seed)
    return _with_ncu(
        uncapped_kernels(rng, 6, "calibration")
        + _capped(rng, 5, "calibration")
        + uncapped_kernels(rng, 7, "heldout")
        + _capped(rng, 6, "heldout")
    )


def test_v2_recovers_kappa_and_chooses_the_time_source_on_calibration() -> None:
    pairs = _set(21)
    m = calibrate_v2(_machine(), pairs)
    c = m.choices
    assert c["variant"] == "v2" and c["label"] == V2_LABEL
    assert m.power_limit_w == pytest.approx(CAP, rel=1e-12)
    assert m.cap_kappa == pytest.approx(KAPPA, rel=1e-9) and c["cap_kappa"] == m.cap_kappa
    assert sorted(c["cap_kappa_kernels"]) == [f"calibration.c{i}" for i in range(5)]
    for comp, v in TRUE.items():
        assert m.eps[comp] == pytest.approx(v, rel=1e-9), comp
    # The ncu durations are exact for the uncapped kernels, and the κ stretch restores the capped ones' time.
    scores = c["time_source_scores_median_abs_error_predicted_time"]
    assert m.time_source == "ncu" and scores["ncu"] < 1e-9 < scores["roofline"]
    held = score(m, pairs, "heldout")
    assert held.median_abs_error_predicted_time < 1e-9 and held.max_abs_error_measured_time < 1e-9
    for p in held.predictions:
        assert p.time_error == pytest.approx(0.0, abs=1e-9), p.name
        assert p.cap_active_predicted == (".c" in p.name)
    # The frozen stretch to E_dyn/(P_cap − π0) makes every capped kernel 1/κ − 1 too long.
    frozen_stretch = score(replace(m, cap_kappa=float("nan")), pairs, "heldout")
    long = [p.time_error for p in frozen_stretch.predictions if ".c" in p.name]
    assert long == pytest.approx([1 / KAPPA - 1] * 6, rel=1e-9)


def test_without_ncu_times_v2_predicts_from_the_roofline() -> None:
    pairs = [(k, replace(c, ncu_time_s=float("nan"))) for k, c in _set(22)]
    m = calibrate_v2(_machine(), pairs)
    assert m.time_source == "roofline" and not m.choices["time_source_ncu_available"]
    assert list(m.choices["time_source_scores_median_abs_error_predicted_time"]) == ["roofline"]
    assert m.cap_kappa == pytest.approx(KAPPA, rel=1e-9)


def test_no_capped_calibration_kernel_means_kappa_one() -> None:
    rng = np.random.default_rng(23)
    pairs = _with_ncu(uncapped_kernels(rng, 7, "calibration") + _capped(rng, 3, "heldout"))
    m = calibrate_v2(_machine(), pairs)
    assert m.cap_kappa == 1.0 and m.choices["cap_kappa_kernels"] == {}


def test_v2_is_an_option_of_calibrate_and_is_written_and_reloaded(tmp_path: Path) -> None:
    pairs = _set(24)
    m0 = _machine()
    assert calibrate(m0, pairs, variant="v2") == calibrate_v2(m0, pairs)
    d = write_ml_run_dir(tmp_path / "run", pairs)
    run = analyze_ml_run(d, params())
    assert run is not None and run.v2 is not None
    obj = json.loads((d / ML_V2_FILE).read_text())
    assert obj["variant"] == "v2" and obj["label"] == V2_LABEL and (d / ML_V2_PREDICTIONS_TABLE).is_file()
    frozen = json.loads((d / ML_MODEL_FILE).read_text())
    assert "cap_kappa" not in frozen["model"] and "variant" not in frozen
    back = load_ml_model(d / ML_V2_FILE)
    assert back.cap_kappa == pytest.approx(run.v2.model.cap_kappa) and back.time_source == run.v2.model.time_source
    # A kernel given by its counts alone (no ncu time) is predicted from the time roofline.
    _k, c = pairs[-1]
    bare = back.predict(replace(c, ncu_time_s=float("nan")))
    assert bare.time_s >= back.predicted_time(c)[1] and np.isfinite(bare.energy_at_predicted_time_j)


def test_model_predict_takes_protocol_v2_from_a_run_directory_unless_told(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from archline.cli.app import app

    d = write_ml_run_dir(tmp_path / "run", _set(25))
    analyze_ml_run(d, params())
    args = ["model", "predict", "--model", str(d), "--counts", "tensor_bf16=2e12,dram=3e8", "--json"]
    by = {}
    for proto in ("auto", "v1", "v2"):
        res = CliRunner().invoke(app, [*args, "--protocol", proto])
        assert res.exit_code == 0, res.output
        by[proto] = json.loads(res.stdout)
    assert by["auto"]["model_file"] == ML_V2_FILE == by["v2"]["model_file"]
    assert by["v1"]["model_file"] == ML_MODEL_FILE
    # Counts alone carry no ncu duration: v2 predicts from the time roofline, and says so.
    assert by["v2"]["time_from"] == "roofline"
    # This kernel is capped: v1 stretches its time to E_dyn/(P − π0), v2 to κ·E_dyn/(P_cap − π0), shorter.
    assert by["v2"]["time_s"] < by["v1"]["time_s"]
    bad = CliRunner().invoke(app, [*args, "--protocol", "v3"])
    assert bad.exit_code == 2 and "protocol must be one of" in bad.output and "Traceback" not in bad.output

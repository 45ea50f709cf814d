"""The post-hoc variant of the ML model's protocol (cap at the observed capped power, terms scored on uncapped
calibration kernels), and the frozen protocol's figures on the shipped H100 run, reproduced unchanged."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from archline.errors import InputError
from archline.model.build import fit_run_dir
from archline.model.ml import POSTHOC_LABEL, calibrate, calibrate_posthoc, machine, score
from archline.model.ml_run import (
    ML_MODEL_FILE,
    ML_POSTHOC_FILE,
    ML_POSTHOC_PREDICTIONS_TABLE,
    ML_PREDICTIONS_TABLE,
    analyze_ml_run,
    load_ml_model,
    write_ml_run,
)
from tests.helpers.ml_synth import (
    LIMIT,
    TRUE,
    capped_kernels,
    component_rows,
    params,
    uncapped_kernels,
    write_ml_run_dir,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "results" / "h100" / "roofline-ml"
#: What the synthetic board's capped kernels draw: above the 700 W it is given, as the H100's do.
CAP = 770.0


def _machine() -> Any:
    return machine(params(), component_rows(), {"single": 5e13})


def _set(seed: int, cal: tuple[int, int], held: tuple[int, int]) -> list[Any]:
    rng = np.random.default_rng(seed)
    return (
        uncapped_kernels(rng, cal[0], "calibration")
        + capped_kernels(rng, cal[1], "calibration", cap_w=CAP)
        + uncapped_kernels(rng, held[0], "heldout")
        + capped_kernels(rng, held[1], "heldout", cap_w=CAP)
    )


def test_posthoc_recovers_the_capped_power_and_the_component_energies() -> None:
    pairs = _set(11, (6, 5), (8, 6))
    m = calibrate_posthoc(_machine(), pairs)
    c = m.choices
    assert c["capped_power_w"] == pytest.approx(CAP, rel=1e-12) and m.power_limit_w == pytest.approx(CAP, rel=1e-12)
    assert c["power_limit_nominal_w"] == LIMIT and c["variant"] == "posthoc-cap" and c["label"] == POSTHOC_LABEL
    assert sorted(c["capped_calibration_kernels"]) == [f"calibration.c{i}" for i in range(5)]
    assert c["term_selection_kernels"] == [f"calibration.u{i}" for i in range(6)]
    for comp, v in TRUE.items():
        assert m.eps[comp] == pytest.approx(v, rel=1e-9), comp
    assert m.terms == ("l1",)  # the truth's terms
    held = score(m, pairs, "heldout")
    # Every held-out kernel, capped or not, comes out exact.
    assert held.max_abs_error_measured_time < 1e-9
    # The frozen protocol holds the capped ones at the nominal 700 W: 700/770 − 1 = −9.1 % each.
    frozen = score(calibrate(_machine(), pairs), pairs, "heldout")
    capped = [p.error_measured_time for p in frozen.predictions if ".c" in p.name]
    assert capped == pytest.approx([LIMIT / CAP - 1] * 6, rel=1e-9)


def test_term_selection_ignores_the_capped_calibration_kernels() -> None:
    # Five capped of nine: at the nominal limit each misses by 9.1 % whatever the terms, so that is the median of
    # every subset and the frozen rule keeps the smallest (base). Scored on the uncapped four, L1 wins.
    pairs = _set(12, (4, 5), (3, 3))
    base_errors = [abs(calibrate(_machine(), pairs).predict(c, measured=k).error_measured_time) for k, c in pairs[:4]]
    assert max(base_errors) < 1 - LIMIT / CAP  # the premise: L1 is missed by less than the cap error
    frozen, post = calibrate(_machine(), pairs), calibrate_posthoc(_machine(), pairs)
    assert frozen.terms == () and post.terms == ("l1",)
    scores = post.choices["term_scores_median_abs_error"]
    assert scores["l1"] < 1e-9 < scores["base"]
    # The capped kernels' measured power moves the cap, never the scores of the terms.
    scaled = [(replace(k, energy_j=k.energy_j * (1.0 + 0.01 * i)), c) if ".c" in k.name else (k, c)
              for i, (k, c) in enumerate(pairs)]  # fmt: skip
    again = calibrate_posthoc(_machine(), scaled)
    assert again.choices["capped_power_w"] != pytest.approx(CAP)
    assert again.choices["term_scores_median_abs_error"] == scores and again.terms == post.terms


def test_without_capped_calibration_kernels_the_variant_is_the_frozen_protocol() -> None:
    rng = np.random.default_rng(13)
    pairs = uncapped_kernels(rng, 7, "calibration") + capped_kernels(rng, 4, "heldout", cap_w=CAP)
    m0 = _machine()
    frozen, post = calibrate(m0, pairs), calibrate_posthoc(m0, pairs)
    assert post.choices["capped_power_w"] == LIMIT == post.power_limit_w
    assert post.choices["capped_power_source"].startswith("nominal limit")
    assert replace(post, choices={}) == replace(frozen, choices={})
    shared = ("term_scores_median_abs_error", "terms", "eta_ratios", "calibration_median_abs_error_measured_time")
    assert all(post.choices[k] == frozen.choices[k] for k in shared)


def test_variant_is_an_explicit_option_of_calibrate() -> None:
    pairs = _set(14, (4, 3), (2, 2))
    m0 = _machine()  # one instance: its NaN uncertainties compare equal only to themselves
    assert calibrate(m0, pairs, variant="posthoc-cap") == calibrate_posthoc(m0, pairs)
    assert calibrate(m0, pairs, variant="frozen") == calibrate(m0, pairs)
    with pytest.raises(InputError, match="variant"):
        calibrate(m0, pairs, variant="best-of")  # type: ignore[arg-type]


def test_run_directory_gets_the_posthoc_files_beside_the_frozen_ones(tmp_path: Path) -> None:
    d = write_ml_run_dir(tmp_path / "run", _set(15, (5, 4), (6, 5)))
    run = analyze_ml_run(d, params())
    assert run is not None and run.posthoc is not None
    frozen = json.loads((d / ML_MODEL_FILE).read_text())
    post = json.loads((d / ML_POSTHOC_FILE).read_text())
    assert "variant" not in frozen and frozen["model"]["power_limit_w"] == LIMIT
    assert post["variant"] == "posthoc-cap" and post["label"] == POSTHOC_LABEL
    assert post["heldout"]["max_abs_error_measured_time"] < 1e-9
    assert load_ml_model(d / ML_POSTHOC_FILE).power_limit_w == pytest.approx(CAP)
    assert (d / ML_POSTHOC_PREDICTIONS_TABLE).read_text() != (d / ML_PREDICTIONS_TABLE).read_text()
    # Writing the variant alone leaves the frozen files byte for byte.
    before = {f: (d / f).read_bytes() for f in (ML_MODEL_FILE, ML_PREDICTIONS_TABLE)}
    (d / ML_POSTHOC_FILE).unlink()
    (d / ML_MODEL_FILE).write_bytes(before[ML_MODEL_FILE])
    write_ml_run(d, run, frozen=False)
    assert {f: (d / f).read_bytes() for f in before} == before and (d / ML_POSTHOC_FILE).is_file()


# --------------------------------------------------------------------------- the shipped H100 run


def _close(got: Any, want: Any, where: str = "") -> None:
    """``got`` equals ``want`` (the model file's JSON), floats to 1e-9 relative, None for a non-finite float."""
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for k in want:
            _close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-300), where
    else:
        assert got == want, where


def _pct1(*fractions: float) -> tuple[float, ...]:
    return tuple(round(100 * f, 1) for f in fractions)


@pytest.fixture(scope="module")
def shipped() -> Any:
    files = sorted(p.name for p in SHIPPED.iterdir())
    stamp = {f: (SHIPPED / f).stat().st_mtime_ns for f in files}
    run = analyze_ml_run(SHIPPED, fit_run_dir(SHIPPED, write=False).parameters, write=False)
    assert sorted(p.name for p in SHIPPED.iterdir()) == files  # nothing written
    assert {f: (SHIPPED / f).stat().st_mtime_ns for f in files} == stamp
    assert run is not None and run.posthoc is not None
    return run


def test_shipped_h100_frozen_figures_are_reproduced_by_the_same_code_path(shipped: Any) -> None:
    from archline.model.ml_run import ml_model_json, ml_prediction_rows
    from archline.records import read_csv

    want = json.loads((SHIPPED / ML_MODEL_FILE).read_text())
    got = json.loads(json.dumps(ml_model_json(shipped)))
    _close(got, want)
    rows = read_csv(SHIPPED / ML_PREDICTIONS_TABLE)
    new = ml_prediction_rows(shipped)
    assert [r["name"] for r in new] == [r["name"] for r in rows]
    for r, n in zip(rows, new, strict=True):
        for k in ("measured_energy_j", "energy_at_measured_time_j", "error_measured_time", "error_predicted_time"):
            assert n[k] == pytest.approx(r[k], rel=1e-9), (r["name"], k)
    # The figures docs/roofline.md §10c quotes.
    h = want["heldout"]
    assert (
        round(100 * h["median_abs_error_measured_time"], 1),
        round(100 * h["median_abs_error_predicted_time"], 1),
    ) == (9.3, 21.5)
    assert len(h["over_20pct"]) == 13 and want["model"]["terms"] == []


def test_shipped_h100_posthoc_files_are_the_variant_of_this_code(shipped: Any) -> None:
    from archline.model.ml_run import ml_model_json

    want = json.loads((SHIPPED / ML_POSTHOC_FILE).read_text())
    _close(json.loads(json.dumps(ml_model_json(shipped.posthoc, posthoc=True))), want)
    c = want["model"]["choices"]
    assert want["label"] == POSTHOC_LABEL and round(c["capped_power_w"], 1) == 775.2
    assert c["power_limit_nominal_w"] == 700.0 and len(c["capped_calibration_kernels"]) == 5
    h = want["heldout"]
    assert (
        round(100 * h["median_abs_error_measured_time"], 1),
        round(100 * h["median_abs_error_predicted_time"], 1),
    ) == (7.5, 19.8)
    assert len(h["over_20pct"]) == 12 and math.isfinite(want["model"]["model_sigma"])


# --------------------------------------------------------------------------- benchmarks/validate_model_ml.py


@pytest.fixture(scope="module")
def validate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("validate_model_ml", ROOT / "benchmarks" / "validate_model_ml.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_model_ml"] = mod
    spec.loader.exec_module(mod)
    return mod


def _copy_shipped(tmp: Path) -> Path:
    d = tmp / "run"
    d.mkdir()
    for f in SHIPPED.iterdir():
        if f.suffix in (".csv", ".json") and not f.name.startswith(("roofline_ml_posthoc", "roofline_sweep_all")):
            shutil.copy2(f, d / f.name)
    return d


def test_validate_writes_the_posthoc_files_and_prints_frozen_first(
    validate: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _copy_shipped(tmp_path)
    frozen = {f: (d / f).read_bytes() for f in (ML_MODEL_FILE, ML_PREDICTIONS_TABLE)}
    assert validate.report(d, refit=False, write_posthoc=True) is False  # the frozen model misses its targets
    out = capsys.readouterr().out
    assert {f: (d / f).read_bytes() for f in frozen} == frozen
    assert (d / ML_POSTHOC_FILE).is_file() and (d / ML_POSTHOC_PREDICTIONS_TABLE).is_file()
    head, _, tail = out.partition("POST HOC")
    assert "FROZEN PROTOCOL" in head and "9.3 % (target ≤ 5 %)" in head and "21.5 % (target ≤ 12 %)" in head
    assert POSTHOC_LABEL in tail and "775.2 W" in tail and "7.5 % (target ≤ 5 %)" in tail
    # docs/roofline.md §10c quotes these summaries as printed.
    doc = (ROOT / "docs" / "roofline.md").read_text(encoding="utf-8")
    section = doc[doc.index("## 10c.") : doc.index("## 11.")]
    summaries = [ln for ln in out.splitlines() if ln.startswith(("calibration:", "heldout:", "cap:", "post hoc held"))]
    assert len(summaries) == 6 and all(ln in section for ln in summaries)


def test_validate_exit_status_is_the_frozen_models(
    validate: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _copy_shipped(tmp_path)
    validate.report(d, refit=False, write_posthoc=True)

    def set_met(name: str, met: bool) -> None:
        obj = json.loads((d / name).read_text())
        obj["heldout"]["met"] = {k: met for k in obj["heldout"]["met"]}
        (d / name).write_text(json.dumps(obj))

    set_met(ML_POSTHOC_FILE, True)
    assert validate.report(d, refit=False) is False
    set_met(ML_MODEL_FILE, True)
    set_met(ML_POSTHOC_FILE, False)
    assert validate.report(d, refit=False) is True
    capsys.readouterr()

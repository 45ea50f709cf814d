"""`archline model fit` and `archline model predict` through the real Typer app."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.model.build import MODEL_FILE
from archline.model.io import load_model
from tests.helpers.roofline_synth import H100_LIKE, write_run_dir

runner = CliRunner()


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run_dir(tmp_path_factory.mktemp("cli") / "run", H100_LIKE, np.random.default_rng(51))
    res = runner.invoke(app, ["model", "fit", str(run), "--no-render"])
    assert res.exit_code == 0, res.output
    return run / MODEL_FILE


def test_fit_writes_the_model_and_states_the_verdict(fitted: Path) -> None:
    m = load_model(fitted)
    assert m.device == "Synthetic H100"
    assert m.heldout is not None  # roofline_heldout.csv was picked up
    res = runner.invoke(app, ["model", "fit", str(fitted.parent), "--no-render", "--json"])
    assert res.exit_code == 0
    d = json.loads(res.stdout)
    assert d["schema"] == "archline.roofline_model"
    assert set(d["race_to_halt"]["holds"]) == {"single", "double"}


def test_predict_json(fitted: Path) -> None:
    # I = 1000 flop/B: compute-bound and below the power cap, so T = W·τ_flop.
    res = runner.invoke(
        app, ["model", "predict", "--model", str(fitted), "--flops", "1e12", "--bytes", "1e9", "--json"]
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    m = load_model(fitted)
    p = m.parameters.params("single")
    t = max(1e12 * p.tau_flop_s, 1e9 * p.tau_mem_s_per_b)
    assert d["time_s"] == pytest.approx(t)
    assert d["energy_j"] == pytest.approx(1e12 * p.eps_flop_j + 1e9 * p.eps_mem_j_per_b + p.pi0_w * t)
    assert d["power_w"] == pytest.approx(d["energy_j"] / d["time_s"])
    assert d["energy_sigma_j"] > 0
    assert d["cap_active"] is False
    assert "measured_time_s" not in d
    near_b_tau = runner.invoke(
        app, ["model", "predict", "-m", str(fitted), "--flops", "2e10", "--bytes", "1e9", "--json"]
    )
    capped = json.loads(near_b_tau.stdout)
    assert capped["cap_active"] is True
    assert capped["power_w"] == pytest.approx(m.parameters.power_limit_w)


def test_predict_with_measured_time(fitted: Path) -> None:
    args = ["model", "predict", "-m", str(fitted), "--flops", "1e12", "--bytes", "1e10", "--time", "0.05"]
    res = runner.invoke(app, [*args, "--precision", "double", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    p = load_model(fitted).parameters.params("double")
    assert d["energy_at_measured_time_j"] == pytest.approx(
        1e12 * p.eps_flop_j + 1e10 * p.eps_mem_j_per_b + p.pi0_w * 0.05
    )
    assert d["power_at_measured_time_w"] == pytest.approx(d["energy_at_measured_time_j"] / 0.05)
    table = runner.invoke(app, args)
    assert table.exit_code == 0
    assert "energy at T = 50 ms" in table.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--flops", "0", "--bytes", "1e9"], "--flops must be a positive number"),
        (["--flops", "-5", "--bytes", "1e9"], "--flops must be a positive number"),
        (["--flops", "1e9", "--bytes", "-1"], "--bytes must be a positive number"),
        (["--flops", "1e9", "--bytes", "1e9", "--time", "0"], "--time must be a positive number"),
        (["--flops", "1e9", "--bytes", "1e9", "--precision", "half"], "--precision must be single or double"),
    ],
)
def test_predict_bad_input(fitted: Path, extra: list[str], message: str) -> None:
    res = runner.invoke(app, ["model", "predict", "--model", str(fitted), *extra])
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1


def test_predict_missing_or_wrong_model(tmp_path: Path, fitted: Path) -> None:
    res = runner.invoke(
        app, ["model", "predict", "--model", str(tmp_path / "none.json"), "--flops", "1", "--bytes", "1"]
    )
    assert res.exit_code == 2
    assert "model file not found" in res.stderr
    d = json.loads(fitted.read_text())
    d["schema_version"] = 99
    bad = tmp_path / "v99.json"
    bad.write_text(json.dumps(d))
    res = runner.invoke(app, ["model", "predict", "--model", str(bad), "--flops", "1", "--bytes", "1"])
    assert res.exit_code == 2
    assert "schema version 99 is not supported" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_fit_missing_run_dir(tmp_path: Path) -> None:
    res = runner.invoke(app, ["model", "fit", str(tmp_path / "nope")])
    assert res.exit_code == 2
    assert "no such run directory" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["model", "fit", str(empty)])
    assert res.exit_code == 2
    assert "roofline_sweep.csv: file not found" in res.stderr


def test_predict_warns_where_it_extrapolates_the_sweep(fitted: Path) -> None:
    """An intensity far beyond the sweep the model was fitted on is predicted, with a warning naming the range."""
    res = runner.invoke(app, ["model", "predict", "-m", str(fitted), "--flops", "1e15", "--bytes", "1"])
    assert res.exit_code == 0 and "outside the" in res.output and "extrapolates the fit" in res.output
    inside = runner.invoke(app, ["model", "predict", "-m", str(fitted), "--flops", "1e10", "--bytes", "1e9"])
    assert inside.exit_code == 0 and "extrapolates" not in inside.output

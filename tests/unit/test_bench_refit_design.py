"""benchmarks/refit_design.py: a replay's design refitted from replay.json, with or without the configurations
that computed on NaN; the shipped session-8 run reproduces its own figures; bad input is a one-line exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from archline.measurement.attribute.replay_design import draw_design
from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ROOT / "results" / "h100" / "attribution-clean" / "transformer-replay"


def _load() -> ModuleType:
    return load_bench("refit_design")


def test_the_shipped_design_refits_to_its_own_figures() -> None:
    mod = _load()
    design = json.loads((CLEAN / "replay.json").read_text())["design"]
    f = mod.refit(design, drop_nonfinite=False)
    assert f["configurations"] == design["configurations"] and f["left_out"] == 0
    assert f["c0_j"] == pytest.approx(design["c0_j"], rel=1e-9)
    assert f["rho_up"] == pytest.approx(design["rho_up"]) and f["sum_vs_step_pct"] == pytest.approx(
        design["sum_vs_step_pct"], rel=1e-9
    )


def test_configurations_that_computed_on_nan_can_be_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _load()
    rng = np.random.default_rng(0)
    x = draw_design(4, 30, rng)
    e = np.array([0.4, 0.3, 0.2, 0.1])
    y = 0.05 + x @ e
    bad = [k for k in range(2, 30) if x[k, 0] and not x[k, 1]][:3]  # group 0 on without group 1: poisoned
    y[bad] *= 0.8
    configs = [{"on": "".join("1" if v else "0" for v in row), "energy_j": float(v), "sigma_j": 0.001,
                "nonfinite": 2 if k in bad else 0} for k, (row, v) in enumerate(zip(x, y, strict=True))]  # fmt: skip
    design = {"configs": configs, "step_j": float(y[0])}
    all_, clean = mod.refit(design, False), mod.refit(design, True)
    assert clean["left_out"] == 3 and all_["left_out"] == 0
    assert clean["energy_j"] == pytest.approx(list(e), rel=1e-6)  # the clean configurations are exact
    assert max(abs(a / b - 1) for a, b in zip(all_["energy_j"], e, strict=True)) > 0.01
    (tmp_path / "replay.json").write_text(json.dumps({"design": design}))
    assert mod.main([str(tmp_path), "--drop-nonfinite"]) == 0
    assert "3 left out" in capsys.readouterr().out
    assert mod.main([str(tmp_path / "nope")]) == 2
    assert "no randomized design" in capsys.readouterr().err

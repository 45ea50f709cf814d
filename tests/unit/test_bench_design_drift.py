"""benchmarks/design_drift.py: a drift put into a synthetic design is found and divided out (τ̂ falls to the grid's
floor), none is taken out where there is none; the tally over designs; a shipped design prints its lines of
docs/data/design_drift_s19.txt (every shipped design with ARCHLINE_SLOW_TESTS=1, ~25 s); bad input is one line,
exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tests.helpers.bench import load_bench

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("design_drift")


def synthetic_design(
    drift: float, seed: int = 0, factors: int = 10, configs: int = 60, reps: int = 15
) -> dict[str, Any]:
    """An additive step (no neighbour dependence) measured with 0.2 % noise and a relative drift ``drift`` from the
    sequence's start to its end; the replicates come after the configurations, as archline measures them."""
    rng = np.random.default_rng(seed)
    e = rng.uniform(0.05, 0.3, factors)
    x = np.vstack([np.ones(factors), np.zeros(factors), rng.random((configs - 2, factors)) < 0.5])
    total = configs + reps
    rows = rng.choice(configs, reps, replace=False)
    u = np.arange(total) / total - 0.5

    def measured(i: int, row: int) -> tuple[float, float]:
        true = 0.05 + float(x[row] @ e)
        s = 0.002 * true
        return true * (1 + drift * u[i]) + s * float(rng.normal()), s

    configs_out = []
    for i in range(configs):
        en, s = measured(i, i)
        configs_out.append({"on": "".join("1" if v else "0" for v in x[i]), "energy_j": en, "sigma_j": s})
    repeats = []
    for k, row in enumerate(rows):
        en, s = measured(configs + k, int(row))
        repeats.append({"row": int(row), "energy_j": en, "sigma_j": s})
    return {"kind": "halves", "model": "additive", "configs": configs_out, "repeats": repeats}


def test_a_drift_is_found_and_divided_out(mod: ModuleType) -> None:
    d = synthetic_design(0.04)
    mean, corr, p = mod.replicate_drift(d)
    assert mean > 0.005 and corr > 0.5 and p < 0.01  # the replicates came later, so they read higher
    as_is, linear = mod.refit(d, 0), mod.refit(d, 1)
    assert as_is["tau"] >= 0.005
    assert linear["a1"] == pytest.approx(0.04, abs=0.004)
    assert linear["tau"] <= 0.0025 and linear["chi2_red"] < as_is["chi2_red"]


def test_without_a_drift_nothing_is_taken_out(mod: ModuleType) -> None:
    d = synthetic_design(0.0, seed=1)
    as_is, linear = mod.refit(d, 0), mod.refit(d, 1)
    assert abs(linear["a1"]) < 0.003
    assert linear["share_within_15"] == pytest.approx(as_is["share_within_15"], abs=0.02)
    assert linear["median_rel_sigma"] == pytest.approx(as_is["median_rel_sigma"], rel=0.1)


def test_the_tally_counts_raised_lowered_unchanged_and_zero(mod: ModuleType) -> None:
    line = mod.tally([(40.0, 30.0, 45.0), (0.0, 0.0, 0.0), (10.0, 10.2, 0.0), (0.0, 20.0, 0.0)])
    assert line == (
        "4 designs, the share within ±15 % against d0: d1 raises 1, lowers 1, leaves 1 within 0.5 points and 1 at "
        "0 %; d2 raises 1, lowers 1, leaves 0 within 0.5 points and 2 at 0 %"
    )


def test_a_shipped_design_prints_its_docs_lines(mod: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    d = ROOT / "results/h100/attribution-s18/heldout-links-GPU-4626eead/transformer-replay"
    assert mod.main([str(d)]) == 0
    out = capsys.readouterr().out.splitlines()
    doc = (ROOT / "docs/data/design_drift_s19.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(doc) if "GPU-4626eead" in line)
    assert [line.split(": ", 1)[1] if i == 0 else line for i, line in enumerate(out)] == [
        line.split(": ", 1)[1] if i == 0 else line for i, line in enumerate(doc[start : start + 4])
    ]
    assert "within ±15 % 49.4 %" in out[1] and "within ±15 % 41.8 %" in out[2]


@pytest.mark.skipif(not os.environ.get("ARCHLINE_SLOW_TESTS"), reason="every shipped design: set ARCHLINE_SLOW_TESTS=1")
def test_every_shipped_design_prints_the_docs_table(
    mod: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    dirs = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("results/*/attribution-s1[4-8]/*/*-replay"))
    assert mod.main(dirs) == 0
    assert capsys.readouterr().out.splitlines() == (ROOT / "docs/data/design_drift_s19.txt").read_text().splitlines()


@pytest.mark.parametrize("setup", ["missing", "no-design", "no-replicates", "bad-row"])
def test_bad_input_is_one_line_exit_2(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str
) -> None:
    if setup != "missing":
        design = synthetic_design(0.0)
        if setup == "bad-row":
            design["repeats"][0]["row"] = -1
        doc = {"design": None} if setup == "no-design" else {"design": {**design, "repeats": []}}
        if setup == "bad-row":
            doc = {"design": design}
        (tmp_path / "replay.json").write_text(json.dumps(doc))
    assert mod.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("design_drift: ")

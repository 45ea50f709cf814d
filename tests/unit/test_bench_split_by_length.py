"""benchmarks/split_by_length.py: where a name's calls are split by length, the classes' renamed calls and their priors
at the name's power, and a missing run or replay a one-line exit 2."""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest

from archline.core.activity import ActivityRecord
from archline.measurement.attribute.prior import KernelPrior
from tests.helpers.bench import load_bench


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    return load_bench("split_by_length")


def test_two_shapes_under_one_name_split_between_them(mod: ModuleType) -> None:
    cut = mod.cuts([56e-6] * 50 + [182e-6] * 50)
    assert len(cut) == 1 and math.log(56e-6) < cut[0] < math.log(182e-6)
    # a spread under 1.25x, or a class under 5 % of the calls, is no split
    assert mod.cuts([100e-6, 110e-6, 120e-6] * 20) == []
    assert mod.cuts([56e-6] * 2 + [182e-6] * 98) == []
    assert mod.cuts([1e-3]) == []


def test_each_class_is_a_column_with_its_names_prior_at_the_names_power(mod: ModuleType) -> None:
    acts = [ActivityRecord("gemm", float(i), float(i) + (1e-4 if i % 2 else 3e-4)) for i in range(40)]
    acts.append(ActivityRecord("[memcpy HtoD]", 100.0, 100.1, kind="memcpy"))
    acts.append(ActivityRecord("relu", 101.0, 101.0001))
    prior = KernelPrior(0.2, 0.02, time_per_call_s=2e-4, time_source="busy")
    out, priors, split = mod.split_activities(acts, {"gemm": prior})
    assert split == {"gemm": 2}
    names = {a.name for a in out}
    assert names == {"gemm [class 0]", "gemm [class 1]", "[memcpy HtoD]", "relu"}
    for cls, t in (("gemm [class 0]", 1e-4), ("gemm [class 1]", 3e-4)):
        p = priors[cls]
        # the name's power (0.2 J over 0.2 ms = 1000 W) at the class's own time per call
        assert p.energy_per_call_j / p.time_per_call_s == pytest.approx(1000.0)
        assert p.time_per_call_s == pytest.approx(t) and p.sd_j / p.energy_per_call_j == pytest.approx(0.1)
    assert priors["gemm"] is prior


def test_a_missing_run_or_replay_is_one_line(
    mod: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mod.main([str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "manifest.json: no such file" in err[0]


def test_a_redos_line_counts_identifiable_rows_within_15_percent(mod: ModuleType) -> None:
    from types import SimpleNamespace as NS

    rows = [
        NS(kind="kernel", energy_j=60.0, energy_lo_j=55.0, energy_hi_j=65.0, identifiable=True),  # ±8.3 %: counts
        NS(kind="kernel", energy_j=30.0, energy_lo_j=20.0, energy_hi_j=40.0, identifiable=True),  # ±33 %: not
        NS(kind="memcpy", energy_j=10.0, energy_lo_j=9.9, energy_hi_j=10.1, identifiable=False),  # narrow, not ident.
        NS(kind="gap", energy_j=500.0, energy_lo_j=0.0, energy_hi_j=1000.0, identifiable=False),  # not a kernel row
    ]
    fit = {"scale": 0.97, "refuted": False, "rho_up": 0.4}
    res = NS(rows=rows, extra={"fit_windows": "buffer", "prior_fit": {"replay": fit}})
    assert mod.line(res) == (
        "3 kernel rows, within ±15 % 60.0 %, fitted on the buffer's windows; replay priors' scale 0.970, "
        "refuted False, ρ's bound 40.0 %"
    )
    res.extra["prior_fit"] = {}
    assert mod.line(res).endswith("replay priors' scale —, refuted False, ρ's bound — %")

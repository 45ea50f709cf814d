"""A replay measured before archline restored the step's state says so, in its report and to `archline run`."""

from __future__ import annotations

import shutil
from pathlib import Path

from archline.report.replay import state_warning

ROOT = Path(__file__).resolve().parents[2]


def test_the_warning_names_what_is_missing() -> None:
    assert state_warning({}) is None  # no summary at all: nothing to judge
    old = state_warning({"step_energy_j": 1.0})
    assert old is not None and "predates" in old and "NaN" in old
    guarded = {"step_energy_j": 1.0, "state": {"guarded": True, "tensors": 3}}
    assert state_warning(guarded) is None
    unguarded = state_warning({"step_energy_j": 1.0, "state": {"guarded": False, "why_not": "too large"}})
    assert unguarded is not None and "too large" in unguarded


def test_a_shipped_replay_from_before_the_fix_warns_in_its_report(tmp_path: Path) -> None:
    from archline.report.registry import render_run

    run = tmp_path / "r"
    shutil.copytree(ROOT / "results/h100/replay-design-smoke/transformer", run)
    rep = render_run(run)
    assert any("predates" in w for w in rep.warnings)
    assert "Warning: this replay predates" in rep.markdown.read_text(encoding="utf-8")
    fixed = tmp_path / "f"
    shutil.copytree(ROOT / "results/h100/attribution-clean/transformer-replay", fixed)
    assert render_run(fixed).warnings == ()

"""benchmarks/model_vs_replay.py on session 25's shipped run sets: docs/attribution.md's figures come from it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import model_vs_replay  # noqa: E402

SETS = {b: ROOT / f"results/h100/attribution-s25/model-priors-GPU-{b}" for b in ("974e716a", "861b3378")}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="names are demangled with c++filt, as on the device")
@pytest.mark.parametrize("board", sorted(SETS))
def test_the_shipped_text_is_the_commands_output(board, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert model_vs_replay.main([str(SETS[board].relative_to(ROOT))]) == 0
    assert capsys.readouterr().out == (ROOT / f"docs/data/model_vs_replay_s25_{board}.txt").read_text()


def test_each_error_is_the_model_prior_at_replays_busy_time_against_its_in_step_energy(monkeypatch):
    from archline.characterize.model_priors import read_model_priors

    monkeypatch.chdir(ROOT)
    s = model_vs_replay.compare(SETS["974e716a"].relative_to(ROOT))
    assert s["model"] == "results/h100/roofline-ml-v2-8908fa3f" and "GPU-974e716a" in s["board"]
    mp = read_model_priors(s["model"], s["counts"])
    for row in s["rows"]:
        p = mp.priors[row["name"]]
        e = p.power_at(row["busy_s"]) * row["busy_s"]
        assert row["err"] == pytest.approx(e / row["replay_j"] - 1.0)
    st = s["all"]
    within = sum(r["replay_j"] for r in s["rows"] if abs(r["err"]) <= 0.15) / sum(r["replay_j"] for r in s["rows"])
    assert st["within_15pct_share"] == pytest.approx(within) and st["groups"] == len(s["rows"])
    assert 0 < s["isolated"]["with_model"] == sum(1 for r in s["rows"] if "err_isolated" in r) < len(s["rows"])

"""The replay report says how switched replays were prepared and which rows computed on NaN."""

from __future__ import annotations

from archline.report.replay import preparation_text, replay_summary_text, replay_table


def test_the_summary_says_whether_replays_were_primed_and_buffers_kept() -> None:
    assert preparation_text({}) == ""  # replays from before either record say nothing
    both = preparation_text({"primed": True, "kept_buffers": True})
    assert "preceded by one unmeasured whole step" in both and "every buffer its own" in both
    neither = preparation_text({"primed": False, "kept_buffers": False})
    assert "none was primed" in neither and "another tensor's data" in neither
    s = {"step_energy_j": 2.7, "step_sigma_j": 0.01, "step_time_s": 0.005, "primed": True, "kept_buffers": False}
    assert preparation_text(s) in replay_summary_text(s)


def test_rows_that_computed_on_nan_get_a_column_and_clean_tables_none() -> None:
    row = {"group": "gemm", "nodes_per_step": 4, "time_s": 0.001, "energy_j": 0.4, "energy_sigma_j": 0.004,
           "mean_power_w": 400.0, "marginal_j": None, "marginal_sigma_j": None}  # fmt: skip
    clean = replay_table([row, {**row, "group": "relu", "nonfinite_reps": 0}])
    assert "repetitions on NaN" not in clean.header
    t = replay_table([row, {**row, "group": "relu", "nonfinite_reps": "3"}])
    col = t.header.index("repetitions on NaN")
    assert [r[col] for r in t.rows] == ["0", "3"]

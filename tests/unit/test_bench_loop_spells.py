"""loop_spells.py's analysis: a copy's loops against its GPU's clock and a spinning CPU, from made-up samples."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "loop_spells.py"


@pytest.fixture(scope="module")
def ls():
    spec = importlib.util.spec_from_file_location("loop_spells", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["loop_spells"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_slow_loops_of_a_slow_cpu_correlate_with_the_spin_not_the_clock(ls):
    # loops of 0.3 s, 0.6 s inside a spell [10, 20) s where the spin also halves; the clock wanders on its own
    wall, thread, t = [0], [0], 0.0
    while t < 30:
        w = 0.6 if 10 <= t < 20 else 0.3
        t += w
        wall.append(int(t * 1e9))
        thread.append(thread[-1] + int(0.95 * w * 1e9))
    spin = [(k * 0.25, 2000.0 if 10 <= k * 0.25 < 20 else 4000.0) for k in range(130)]
    clock = [(k * 0.25, 1500.0 + (300.0 if k % 7 < 3 else 0.0)) for k in range(130)]
    s = ls.summarize({"wall_ns": wall, "thread_ns": thread, "syncs_per_step": 2, "cpu": 16}, clock, spin)
    assert s["cpu_share_median"] == pytest.approx(0.95, abs=1e-6)
    assert s["corr_loop_vs_spin_rate"] < -0.9
    assert abs(s["corr_loop_vs_sm_clock"]) < 0.3
    assert s["median_loop_s"] in (pytest.approx(0.3), pytest.approx(0.6)) and s["max_loop_s"] == pytest.approx(0.6)


def test_mean_over_a_loop_takes_the_nearest_sample_where_none_falls_inside(ls):
    series = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]
    assert ls.mean_over(series, 0.5, 2.0) == pytest.approx(4.0)
    assert ls.mean_over(series, 1.2, 1.4) == 5.0
    assert ls.mean_over([], 0, 1) is None


def test_nvidia_smi_rows_are_read_per_gpu(ls, tmp_path):
    p = tmp_path / "smi.csv"
    p.write_text(
        "2026/11/27 20:45:01.250, 0, 1980, 35\n2026/11/27 20:45:01.250, 1, 345, 0\nNo devices were found\n"
        "2026/11/27 20:45:01.500, 0, 1755, 40\n"
    )
    rows = ls.read_smi(p)
    assert [r[1:] for r in rows[0]] == [(1980.0, 35.0), (1755.0, 40.0)]
    assert rows[0][1][0] - rows[0][0][0] == pytest.approx(0.25)
    assert rows[1][0][1] == 345.0


def test_a_saved_run_is_analysed_again_and_bad_input_is_one_line(ls, tmp_path, capsys):
    import json

    wall = [int((1000.0 + 0.3 * k) * 1e9) for k in range(40)]
    saved = {
        "copies": [{"gpu": 0, "raw": {"wall_ns": wall, "thread_ns": wall, "syncs_per_step": 1, "cpu": 16}}],
        "spin": {"cpu": 8, "bins": [[1000.0 + 0.25 * k, 4000 if k < 20 else 8000] for k in range(60)]},
        "smi": {"0": [[1000.0 + 0.25 * k, 1980.0, 12.0] for k in range(60)]},
    }
    p = tmp_path / "spells.json"
    p.write_text(json.dumps(saved))
    assert ls.main(["--from-json", str(p)]) == 0
    out = capsys.readouterr().out
    assert "SM clock 1980 MHz throughout its loops" in out
    assert "main thread on the CPU 100 %" in out and "(2.00x)" in out and "GPU utilisation (nvidia-smi) 12 %" in out
    assert "while the copies' loops ran (12 s): over 2 s 4000 .. 8000 (2.00x)" in out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert ls.main(["--from-json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err

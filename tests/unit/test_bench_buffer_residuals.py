"""benchmarks/buffer_residuals.py: the power buffer's fit without priors, and its residuals' structure (session 26's
diagnosis): white residuals read as white, a profile missed once a step as periodic, a slow drift in the 1 s block
means; a shipped run's fit; bad input one line and exit 2."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "h100" / "run" / "cupy-mix-inject"


@pytest.fixture(scope="module")
def br() -> ModuleType:
    spec = importlib.util.spec_from_file_location("buffer_residuals", ROOT / "benchmarks" / "buffer_residuals.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["buffer_residuals"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_white_periodic_and_drifting_residuals_are_told_apart(br: ModuleType) -> None:
    rng = np.random.default_rng(7)
    white = rng.normal(0.0, 10.0, 5000)
    s = br.residual_structure(white)
    assert s["n"] == 5000 and s["rms_w"] == pytest.approx(10.0, rel=0.05)
    assert all(abs(v) < 0.06 for v in s["autocorr"].values())
    assert s["block_sd_w"] == pytest.approx(s["block_sd_independent_w"], rel=0.25)
    # a step profile the fit misses, seen every 20 ms on a 40 ms step: it comes back every second reading
    periodic = white + 15.0 * np.cos(np.pi * np.arange(5000))
    p = br.residual_structure(periodic)
    assert p["autocorr"][2] > 0.5 and p["autocorr"][1] < -0.5
    drift = white + np.repeat(rng.normal(0.0, 10.0, 100), 50)  # a level that moves once a second
    d = br.residual_structure(drift)
    assert d["block_sd_w"] > 2.5 * d["block_sd_independent_w"] and d["autocorr"][10] > 0.3


def test_the_periodogram_finds_a_misfit_that_comes_back_every_other_reading(br: ModuleType) -> None:
    rng = np.random.default_rng(3)
    t = np.arange(4000) * 0.02
    r = rng.normal(0.0, 5.0, t.size) + 20.0 * np.sin(2 * np.pi * 24.0 * t)  # 24 Hz read every 20 ms
    hz, share = br.spectral_peak(r, 0.02)
    assert hz == pytest.approx(24.0, abs=0.05) and share > 0.8
    hz_w, share_w = br.spectral_peak(rng.normal(0.0, 5.0, t.size), 0.02)
    assert 2.0 <= hz_w <= 25.0 and share_w < 0.1


def test_the_step_is_its_rarest_kernels_interval_and_shows_aliased(br: ModuleType) -> None:
    names = ["gemm"] * 40 + ["opt"] * 10 + ["rare"] * 2
    starts = [0.035 * (i // 4) for i in range(40)] + [0.035 * i + 0.01 for i in range(10)] + [0.0, 0.2]
    assert br.step_period(names, starts, 0.35) == ("opt", pytest.approx(0.035))
    assert br.step_period(["a"], [0.0], 10.0) is None
    assert br.alias_hz(1 / 0.035, 0.020) == pytest.approx(50.0 - 1 / 0.035)  # 28.6 Hz read at 50 Hz
    assert br.alias_hz(10.0, 0.020) == pytest.approx(10.0) and br.alias_hz(60.0, 0.020) == pytest.approx(10.0)


def test_the_busy_share_is_the_union_of_kernels_past_the_start_up(br: ModuleType) -> None:
    # start-up (one kernel of ten), then two overlapping kernels, a gap and the rest: busy 3.5 of the last 4 s
    iv = [(0.0, 0.1), (10.0, 12.0), (11.0, 13.0), (13.5, 14.0)] + [(13.9, 14.0)] * 6
    share, span = br.busy_share(iv, skip=0.1)
    assert span == pytest.approx(4.0) and share == pytest.approx(3.5 / 4.0)
    assert br.busy_share([(0.0, 1.0)])[1] == 0.0


def test_least_squares_residuals_ignore_silent_columns(br: ModuleType) -> None:
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.random(200), np.zeros(200), rng.random(200)])
    y = x @ np.array([300.0, 0.0, 120.0])
    assert np.max(np.abs(br.ols_residuals(x, y))) < 1e-9
    noisy = y + rng.normal(0.0, 1.0, 200)
    assert float(np.std(br.ols_residuals(x, noisy))) == pytest.approx(1.0, rel=0.15)


def test_a_shipped_runs_buffer_fit_is_diagnosed(br: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert br.main([str(RUN)]) == 0
    out = capsys.readouterr().out
    assert "buffer model: delay" in out and "fit without priors on" in out and "autocorrelation by lag" in out
    assert "long-run variance ratio" in out and "largest peak above 2 Hz" in out and "the step: " in out
    assert "kernels busy" in out


def test_bad_input_is_one_line_and_exit_2(br: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert br.main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "manifest.json: no such file" in err and len(err.strip().splitlines()) == 1


def test_alternation_is_found_where_busy_and_not_in_noise(br: ModuleType, tmp_path: Path) -> None:
    """--alternation (session 27): readings that alternate ±15 W from one to the next while busy read far above what
    noise alone gives, and idle readings without it read at the noise's level; a recording is read from its file."""
    import json

    rng = np.random.default_rng(11)
    n = 6000
    t = np.arange(n) * 0.02
    busy = (np.arange(n) // 1000) % 2 == 1  # 20 s idle, 20 s busy, …
    v = np.where(busy, 600.0, 120.0) + rng.normal(0.0, 3.0, n)
    with_alt = v + np.where(busy, 15.0 * (-1.0) ** np.arange(n), 0.0)
    a = br.alternation(t, with_alt)
    assert a["busy"]["alternation_w"] == pytest.approx(15.0, rel=0.1)
    assert a["busy"]["lag1"] < -0.8 and a["busy"]["lag2"] > 0.8
    assert a["idle"]["alternation_w"] < 1.5 * a["idle"]["noise_only_w"]
    plain = br.alternation(t, v)
    assert plain["busy"]["alternation_w"] < 1.5 * plain["busy"]["noise_only_w"]
    assert br.alternation(t[:50], v[:50]) == {}
    rec = tmp_path / "run" / "raw" / "recording.npz"
    rec.parent.mkdir(parents=True)
    meta = {"sources": [{"source": "nvml.buffer", "index": 0}]}
    np.savez(rec, **{"t/0": t, "v/0": with_alt, "recording.json": np.frombuffer(json.dumps(meta).encode(), np.uint8)})
    line, summary = br.alternation_table([tmp_path])
    want = "busy alternation above twice what noise alone gives: 1 of 1 recordings with a busy stretch"
    assert summary == f"{want} ({tmp_path / 'run'})"
    assert line.startswith(f"{tmp_path / 'run'}: busy 600 W: alternation 15.") and "idle 120 W" in line
    bad = tmp_path / "bad" / "raw" / "recording.npz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not npz")
    assert any("cannot read" in s for s in br.alternation_table([bad]))

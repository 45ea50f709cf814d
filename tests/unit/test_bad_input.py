"""Issue 11's bad inputs: one line naming the cause and exit 2, or a clear warning for suspicious data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.core.recording import Recording
from archline.records.traces import load_recording, save_recording

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000.0


def _trace(path: Path, power: np.ndarray, t: np.ndarray | None = None) -> Path:
    t = T0 + np.arange(power.size) * 0.02 if t is None else t
    path.write_text("time_s,power_w\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(t, power, strict=True)))
    return path


def _pulse() -> np.ndarray:
    x = np.arange(250) * 0.02
    return np.where((x > 1) & (x < 3), 300.0, 100.0)


@pytest.fixture
def windows(tmp_path: Path) -> Path:
    p = tmp_path / "w.csv"
    p.write_text(f"name,start_s,end_s\nk,{T0 + 1!r},{T0 + 3!r}\n")
    return p


def _one_line_error(args: list[str], *needles: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    errors = [ln for ln in res.output.splitlines() if "archline: error:" in ln]
    assert len(errors) == 1, res.output
    for n in needles:
        assert n in errors[0], errors[0]


def test_absurd_power_is_refused(tmp_path: Path, windows: Path) -> None:
    p = _pulse()
    p[100] = 1e32
    _one_line_error(["analyze", str(_trace(tmp_path / "t.csv", p)), "--windows", str(windows)], "1e+32 W", "units")


@pytest.mark.parametrize(("value", "needle"), [("0", "must be > 0"), ("1e9", "not a sensor's lag"), ("-1", "> 0")])
def test_capacitance_out_of_range_is_exit_2(tmp_path: Path, windows: Path, value: str, needle: str) -> None:
    trace = _trace(tmp_path / "t.csv", _pulse())
    args = ["analyze", str(trace), "--windows", str(windows), "--sensor", "lagged", "--capacitance", value]
    _one_line_error(args, needle)


def test_negative_power_and_repeated_stamps_are_warnings(tmp_path: Path, windows: Path) -> None:
    t = T0 + np.arange(250) * 0.02
    t[51] = t[50]
    res = runner.invoke(
        app, ["analyze", str(_trace(tmp_path / "t.csv", _pulse() - 150.0, t)), "--windows", str(windows)]
    )
    assert res.exit_code == 0, res.output
    assert "warning:" in res.output and "negative" in res.output and "repeat the previous timestamp" in res.output


def test_truncated_and_region_less_recordings(tmp_path: Path) -> None:
    full = REPO / "results/h100/sensor/validation/traces.npz"
    data = full.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    _one_line_error(["analyze", str(tmp_path / "cut.npz")], "cut.npz", "not a complete .npz")
    rec = load_recording(full)
    save_recording(tmp_path / "bare.npz", Recording(rec.readings, (), rec.start_s, rec.end_s, rec.meta))
    _one_line_error(["analyze", str(tmp_path / "bare.npz")], "recording has no regions", "--windows")


def test_a_measured_time_faster_than_the_gpu_is_refused() -> None:
    model = REPO / "results/h100/roofline/roofline_model.json"
    args = ["model", "predict", "--model", str(model), "--flops", "1e9", "--bytes", "1e9"]
    _one_line_error([*args, "--time", "1e-6"], "shorter than this kernel can run")
    ok = runner.invoke(app, [*args, "--time", "5e-4"])
    assert ok.exit_code == 0, ok.output

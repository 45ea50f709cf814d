"""``archline analyze`` and ``archline sensor fit`` through the CLI: JSON shape, tables, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from archline.cli.app import app
from archline.cli.sensor import sensor_app
from archline.core.recording import Recording
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.records.traces import save_recording, write_trace_csv, write_windows_csv
from tests.helpers.signals import Scenario, calibration_loads, kernels

runner = CliRunner()
WINDOW_KEYS = {
    "name",
    "start_s",
    "end_s",
    "duration_s",
    "energy_j",
    "energy_uncertainty_j",
    "mean_power_w",
    "resolvable",
}


def _files(tmp_path: Path, sc: Scenario, sensor: SimulatedSensor) -> tuple[Path, Path]:
    trace, wins = tmp_path / "trace.csv", tmp_path / "windows.csv"
    write_trace_csv(trace, simulate_power(sc.signal, sensor, seed=1))
    write_windows_csv(wins, sc.windows)
    return trace, wins


def _fails_cleanly(args: list[str], what: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code != 0
    assert "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("archline: error:")
    assert what in res.output


def test_analyze_json_shape_and_values(tmp_path: Path) -> None:
    sc = kernels([(0.0, 1.0), (2.0, 0.6)], busy_w=[300.0, 250.0])
    trace, wins = _files(tmp_path, sc, SimulatedSensor.averaging(0.02, noise_w=0.3))
    res = runner.invoke(app, ["analyze", str(trace), "--windows", str(wins), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out) == {"sensor", "windows"}
    assert out["sensor"]["kind"] == "averaging"
    assert out["sensor"]["update_period_s"] == pytest.approx(0.02, rel=0.01)
    assert [set(w) for w in out["windows"]] == [WINDOW_KEYS, WINDOW_KEYS]
    got = np.array([w["energy_j"] for w in out["windows"]])
    assert np.allclose(got, sc.true_energy_j, rtol=0.02)
    assert all(w["resolvable"] for w in out["windows"])


def test_analyze_table_and_overrides(tmp_path: Path) -> None:
    sc = kernels([(0.0, 2.0)], trail_s=6.0)
    trace, wins = _files(tmp_path, sc, SimulatedSensor.k20())
    res = runner.invoke(
        app, ["analyze", str(trace), "--windows", str(wins), "--sensor", "lagged", "--capacitance", "0.84"]
    )
    assert res.exit_code == 0, res.output
    assert "lagged" in res.output and "k0" in res.output
    res = runner.invoke(
        app, ["analyze", str(trace), "--windows", str(wins), "--sensor", "lagged", "--capacitance", "0.84", "--json"]
    )
    out = json.loads(res.stdout)
    assert out["sensor"]["lag_constant_s"] == 0.84
    assert out["windows"][0]["energy_j"] == pytest.approx(sc.true_energy_j[0], rel=0.01)


def test_analyze_a_recording_uses_its_regions(tmp_path: Path) -> None:
    sc = kernels([(0.0, 1.0)])
    rec = Recording({"nvml.buffer": simulate_power(sc.signal, SimulatedSensor.averaging(0.02))}, regions=sc.windows)
    save_recording(tmp_path / "r.npz", rec)
    res = runner.invoke(app, ["analyze", str(tmp_path / "r.npz"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["windows"][0]["name"] == "k0"


def test_sensor_fit_reports_the_model_and_saves_a_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cal = calibration_loads()
    trace, wins = _files(tmp_path, cal, SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3))
    res = runner.invoke(
        app,
        [
            "sensor",
            "fit",
            str(trace),
            "--windows",
            str(wins),
            "--json",
            "--save",
            "--gpu-uuid",
            "GPU-t",
            "--driver",
            "580",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["kind"] == "part-time"
    assert out["averaging_window_s"] == pytest.approx(0.025, abs=0.002)
    assert out["update_period_s"] == pytest.approx(0.1, rel=0.01)
    for k in ("lag_constant_s", "idle_w", "active_idle_w"):
        assert k in out
    saved = Path(out["saved_to"])
    assert saved == tmp_path / "cache" / "archline" / "sensors" / "GPU-t.json"
    # The saved profile drives a later analysis.
    res = runner.invoke(app, ["analyze", str(trace), "--windows", str(wins), "--profile", str(saved), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["sensor"]["origin"] == "profile"
    table = runner.invoke(app, ["sensor", "fit", str(trace), "--windows", str(wins)])
    assert table.exit_code == 0 and "update period" in table.output


def test_sensor_group_is_exposed_for_more_commands() -> None:
    assert isinstance(sensor_app, typer.Typer)
    assert any(c.name == "fit" for c in sensor_app.registered_commands)


@pytest.mark.parametrize(
    ("trace_text", "windows_text", "what"),
    [
        (None, "name,start_s,end_s\na,0,1\n", "file not found"),
        ("", "name,start_s,end_s\na,0,1\n", "empty"),
        ("time_s,power_w\n0,1\n2,1\n1,1\n", "name,start_s,end_s\na,0,1\n", "backwards"),
        ("time_s,power_w\n0,1\n1,x\n2,1\n", "name,start_s,end_s\na,0,1\n", "not a number"),
        ("time_s,power_w\n0,1\n1,1\n2,1\n", "name,start_s,end_s\na,1,5\n", "outside the trace"),
        ("time_s,power_w\n0,1\n1,1\n2,1\n", "name,start_s,end_s\na,1,1\n", "ends at or before"),
    ],
)
def test_bad_input_gives_one_line_and_nonzero_exit(
    tmp_path: Path, trace_text: str | None, windows_text: str, what: str
) -> None:
    trace = tmp_path / "t.csv"
    if trace_text is not None:
        trace.write_text(trace_text)
    wins = tmp_path / "w.csv"
    wins.write_text(windows_text)
    _fails_cleanly(["analyze", str(trace), "--windows", str(wins)], what)
    _fails_cleanly(["sensor", "fit", str(trace), "--windows", str(wins)], what)


def test_bad_options_fail_cleanly(tmp_path: Path) -> None:
    sc = kernels([(0.0, 1.0)])
    trace, wins = _files(tmp_path, sc, SimulatedSensor.averaging(0.02))
    _fails_cleanly(["analyze", str(trace), "--windows", str(wins), "--sensor", "magic"], "unknown sensor kind")
    _fails_cleanly(["analyze", str(trace)], "give the windows to measure with --windows")
    bad_profile = tmp_path / "p.json"
    bad_profile.write_text("{")
    _fails_cleanly(["analyze", str(trace), "--windows", str(wins), "--profile", str(bad_profile)], "not a JSON file")
    # A negative lag constant is bad input (exit 2), with or without a profile to override.
    res = CliRunner().invoke(app, ["analyze", str(trace), "--windows", str(wins), "--capacitance", "-1"])
    assert res.exit_code == 2 and "--capacitance must be > 0 s" in res.output


def test_a_file_that_cannot_be_written_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the profile cache lies under a file
    sc = kernels([(0.0, 1.0)])
    trace, wins = _files(tmp_path, sc, SimulatedSensor.averaging(0.02))
    save = ["--save", "--gpu-uuid", "GPU-t", "--driver", "580"]
    _fails_cleanly(["sensor", "fit", str(trace), "--windows", str(wins), *save], "Not a directory")


def test_saving_a_profile_needs_the_gpu_and_driver_it_belongs_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sc = kernels([(0.0, 1.0)])
    trace, wins = _files(tmp_path, sc, SimulatedSensor.averaging(0.02))
    _fails_cleanly(
        ["sensor", "fit", str(trace), "--windows", str(wins), "--save"], "--save needs --gpu-uuid and --driver"
    )
    args = ["sensor", "fit", str(trace), "--windows", str(wins), "--save", "--gpu-uuid", "GPU-t"]
    _fails_cleanly(args, "--save needs --driver")
    assert not (tmp_path / "cache").exists()


def test_numbers_are_never_cut_at_80_columns() -> None:
    """Issue 17: in an 80-column pipe every number --json gives appears in full in the table."""
    import json as _json
    from pathlib import Path as _Path

    trace = _Path(__file__).resolve().parents[2] / "results/h100/characterize/traces.npz"
    env = {"COLUMNS": "80"}
    table = CliRunner().invoke(app, ["analyze", str(trace)], env=env)
    data = CliRunner().invoke(app, ["analyze", str(trace), "--json"], env=env)
    assert table.exit_code == 0 and data.exit_code == 0, table.output
    assert "…" not in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    for w in _json.loads(data.stdout)["windows"]:
        assert f"{w['energy_j']:.5g}" in table.stdout
        assert f"{w['mean_power_w']:.1f}" in table.stdout


def test_a_clean_step_from_a_simulator_keeps_its_repeats_when_told(tmp_path: Path) -> None:
    """A fresh user's review (session 17): a 1 kHz trace of exact values (100 W, then 400 W for 0.5–1.5 s) loses its
    repeats as if a sensor had repeated its last update, leaving 3 readings (a 750 ms 'update'): not resolvable.
    The data cannot tell that from a slow sensor polled fast over a quiet stretch (keeping such repeats put a
    burst far outside its interval in review), so a note says what was assumed and --keep-repeats takes every
    reading: 400 J."""
    t = np.arange(0.0, 2.0, 0.001)
    p = np.where((t >= 0.5) & (t < 1.5), 400.0, 100.0)
    trace, windows = tmp_path / "tr.csv", tmp_path / "w.csv"
    trace.write_text("time_s,power_w\n" + "".join(f"{a:.4f},{b}\n" for a, b in zip(t, p, strict=True)))
    windows.write_text("name,start_s,end_s\nload,0.5,1.5\n")
    res = CliRunner().invoke(app, ["analyze", str(trace), "-w", str(windows), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert not d["windows"][0]["resolvable"]
    assert any("only 3 of 2000 readings change value" in n and "--keep-repeats" in n for n in d["sensor"]["notes"])
    res = CliRunner().invoke(app, ["analyze", str(trace), "-w", str(windows), "--json", "--keep-repeats"])
    assert res.exit_code == 0, res.output
    w = json.loads(res.stdout)["windows"][0]
    assert abs(w["energy_j"] - 400.0) < 2.0 and w["resolvable"]


def test_an_nvml_source_of_a_known_board_takes_the_shipped_prior_not_a_guess() -> None:
    """A fresh user's review (session 17): auto mode inferred nvml.average's model from the recording alone and put
    the first arith.int32.add window at 174.28 ± 1.7 J, 26 % below the buffer's 235.23 ± 0.56 J and called it
    resolvable. A recording in a run directory names its board: the prior archline ships for its generation is
    used, and the first window's interval reaches the buffer's figure within 3 σ."""
    root = Path(__file__).resolve().parents[2] / "results/h100/characterize-quick/traces.npz"
    res = CliRunner().invoke(app, ["analyze", str(root), "--source", "nvml.average", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["sensor"]["origin"] == "profile"
    assert any("prior (shipped calibration" in n for n in d["sensor"]["notes"])
    first = next(w for w in d["windows"] if w["name"] == "arith.int32.add")
    buf = CliRunner().invoke(app, ["analyze", str(root), "--source", "nvml.buffer", "--json"])
    ref = next(w for w in json.loads(buf.stdout)["windows"] if w["name"] == "arith.int32.add")
    assert abs(first["energy_j"] - ref["energy_j"]) <= 3.0 * first["energy_uncertainty_j"]


def test_archline_analyze_from_python_gives_the_commands_figures(tmp_path: Path) -> None:
    """A user's review (session 17): there was no Python equivalent of `archline analyze`, and the internal route
    chose another sensor model (233.96 ± 1.9 J where the command gives 235.23 ± 0.56 J). archline.analyze is the
    command's own path."""
    import archline
    from archline.errors import InputError

    rec = Path(__file__).resolve().parents[2] / "results/h100/characterize-quick/traces.npz"
    res = archline.analyze(rec, source="nvml.buffer")
    cli = CliRunner().invoke(app, ["analyze", str(rec), "--source", "nvml.buffer", "--json"])
    rows = json.loads(cli.stdout)["windows"]
    assert [w.name for w in res.windows] == [w["name"] for w in rows]
    for w, c in zip(res.windows, rows, strict=True):
        assert w.energy_j == pytest.approx(c["energy_j"], rel=1e-12)
        assert w.energy_uncertainty_j == pytest.approx(c["energy_uncertainty_j"], rel=1e-12)
    assert res.model.origin == "profile"
    with pytest.raises(InputError, match="no regions"):
        trace = tmp_path / "t.csv"
        trace.write_text("time_s,power_w\n0,1\n1,1\n2,1\n")
        archline.analyze(trace)


@pytest.mark.parametrize("source", ["nvml.average", "nvml.usage"])
def test_every_power_source_of_the_shipped_recording_is_analysed(source: str) -> None:
    """A review (session 17): a rising edge whose previous reading came 14.5 ms before it put the ramp fit's start
    outside its bounds, and `archline analyze results/h100/characterize/traces.npz --source nvml.instant`
    (average, usage) ended in scipy's traceback; the start is now clipped into the bounds."""
    rec = Path(__file__).resolve().parents[2] / "results/h100/characterize/traces.npz"
    res = CliRunner().invoke(app, ["analyze", str(rec), "--source", source, "--json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["windows"]) > 10


def test_analyze_from_python_refuses_no_windows_and_takes_max_rows_0_as_every_row(tmp_path: Path) -> None:
    import archline
    from archline.core.recording import Region
    from archline.errors import InputError

    trace = tmp_path / "t.csv"
    trace.write_text("time_s,power_w\n" + "".join(f"{i * 0.01:.2f},{100 + (i % 7)}\n" for i in range(300)))
    with pytest.raises(InputError, match="no windows"):
        archline.analyze(trace, [])
    res = archline.analyze(trace, [Region("a", 0.5, 2.0)], max_rows=0)
    assert len(res.windows) == 1 and res.windows[0].energy_j > 0
    with pytest.raises(InputError, match="max_rows"):
        archline.analyze(trace, [Region("a", 0.5, 2.0)], max_rows=-1)


def test_sensor_fit_takes_keep_repeats_too(tmp_path: Path) -> None:
    """A clean simulated step fails to fit with its repeats dropped, and says how to keep them; with --keep-repeats
    it fits."""
    t = np.arange(0.0, 2.0, 0.001)
    p = np.where((t >= 0.5) & (t < 1.5), 400.0, 100.0)
    trace, windows = tmp_path / "tr.csv", tmp_path / "w.csv"
    trace.write_text("time_s,power_w\n" + "".join(f"{a:.4f},{b}\n" for a, b in zip(t, p, strict=True)))
    windows.write_text("name,start_s,end_s\nload,0.5,1.5\n")
    res = CliRunner().invoke(app, ["sensor", "fit", str(trace), "-w", str(windows)])
    assert res.exit_code != 0 and "--keep-repeats" in res.output
    res = CliRunner().invoke(app, ["sensor", "fit", str(trace), "-w", str(windows), "--keep-repeats"])
    assert res.exit_code == 0, res.output

"""Traces of any size: gzip CSV, Parquet and Arrow read like CSV; long traces binned as they stream (energy
conserved, rows bounded); progress reported; a calibration run's profiles.json usable with --profile."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from archline.cli.app import app
from archline.errors import TraceError
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.records.trace_files import read_columns
from archline.records.traces import read_trace_csv, write_trace_csv, write_windows_csv
from tests.helpers.signals import kernels

pa = pytest.importorskip("pyarrow")
ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _table(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = 1.7e9 + np.arange(1, n + 1) * 1e-3
    w = 100.0 + 200.0 * (np.sin(np.arange(n) / 500.0) > 0) + rng.normal(0, 0.5, n)
    return t, np.round(w, 3)


def _write_all(tmp: Path, t: np.ndarray, w: np.ndarray) -> dict[str, Path]:
    import gzip

    from pyarrow import feather, parquet

    tbl = pa.table({"time_s": t, "power_w": w, "volts": np.full(t.size, 12.0)})
    paths = {fmt: tmp / f"trace.{fmt}" for fmt in ("csv", "csv.gz", "parquet", "arrow")}
    lines = "".join(f"{a!r},{b!r},12.0\n" for a, b in zip(t.tolist(), w.tolist(), strict=True))
    paths["csv"].write_text("# a meter's comment\ntime_s,power_w,volts\n" + lines)
    with gzip.open(paths["csv.gz"], "wt") as fh:
        fh.write("Time_S,Power_W,volts\n" + lines)
    parquet.write_table(tbl, paths["parquet"])
    feather.write_feather(tbl, paths["arrow"], compression="uncompressed")
    return paths


def test_every_format_reads_the_same_columns(tmp_path: Path) -> None:
    t, w = _table(5000)
    for fmt, path in _write_all(tmp_path, t, w).items():
        r = read_trace_csv(path)
        assert np.array_equal(r.t_s, t) and np.array_equal(r.value, w), fmt


def test_columns_of_any_numeric_type_read_as_float64_with_nulls_refused(tmp_path: Path) -> None:
    from pyarrow import feather, parquet

    # Integer stamps and float32 power (of a slice of a table) read as float64, the same values.
    tbl = pa.table(
        {"time_s": pa.array(range(10), pa.int64()), "power_w": pa.array(np.arange(10.0) + 0.5, pa.float32())}
    )
    feather.write_feather(tbl.slice(3), tmp_path / "t.arrow", compression="uncompressed")
    (t, w), _ = read_columns(tmp_path / "t.arrow")
    assert t.dtype == w.dtype == np.float64
    assert t.tolist() == list(range(3, 10)) and w.tolist() == [v + 0.5 for v in range(3, 10)]
    # An empty cell is a missing value (NaN), and the trace names its row.
    parquet.write_table(pa.table({"time_s": [0.0, 1.0, 2.0], "power_w": [1.0, None, 3.0]}), tmp_path / "n.parquet")
    (t, w), _ = read_columns(tmp_path / "n.parquet")
    assert w[0] == 1.0 and np.isnan(w[1]) and w[2] == 3.0
    with pytest.raises(TraceError, match="data row 2: power_w is empty"):
        read_trace_csv(tmp_path / "n.parquet")


def test_long_traces_are_binned_as_they_stream_with_energy_conserved(tmp_path: Path) -> None:
    t, w = _table(100_003)
    path = _write_all(tmp_path, t, w)["parquet"]
    (tt, ww), k = read_columns(path, max_rows=10_000)
    assert k >= 8 and (k & (k - 1)) == 0  # pairs merged: a power of two
    assert 5_000 <= tt.size <= 10_000
    full = float(np.sum(w[1:] * np.diff(t)))
    binned = float(np.sum(ww[1:] * np.diff(tt)))
    # Only the first bin's energy (before the first binned stamp) is outside the binned integral.
    assert binned == pytest.approx(full - float(np.sum(w[1:k] * np.diff(t[:k]))), rel=1e-9)
    assert np.all(np.diff(tt) > 0)


def test_progress_follows_the_read_to_the_end(tmp_path: Path) -> None:
    t, w = _table(20_000)
    path = _write_all(tmp_path, t, w)["csv.gz"]
    seen: list[tuple[int, int]] = []
    read_trace_csv(path, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] == path.stat().st_size
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_unreadable_files_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "trace.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(TraceError, match=r"trace.parquet: cannot be read as parquet"):
        read_trace_csv(bad)
    other = tmp_path / "trace.xlsx"
    other.write_bytes(b"x")
    res = runner.invoke(app, ["analyze", str(other), "--windows", str(other)])
    assert res.exit_code == 2 and "not a trace file" in res.output and "Traceback" not in res.output


def test_profile_takes_a_calibration_runs_profiles_file(tmp_path: Path) -> None:
    import gzip

    profiles = ROOT / "results/h100/sensor/calibration/profiles.json"
    sc = kernels([(0.0, 1.0), (2.0, 0.6)], busy_w=[300.0, 250.0])
    csv, wins = tmp_path / "trace.csv", tmp_path / "windows.csv"
    write_trace_csv(csv, simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=0.3), seed=1))
    write_windows_csv(wins, sc.windows)
    trace = tmp_path / "trace.csv.gz"  # analyze takes gzip CSV as it takes CSV
    trace.write_bytes(gzip.compress(csv.read_bytes()))
    base = ["analyze", str(trace), "--windows", str(wins), "--profile", str(profiles)]
    res = runner.invoke(app, [*base, "--source", "nvml.buffer", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["sensor"]["origin"] == "profile" and out["sensor"]["source"] == "trace:trace.csv.gz"
    assert np.allclose([w["energy_j"] for w in out["windows"]], sc.true_energy_j, rtol=0.03)
    res = runner.invoke(app, base)  # three sources in the file, none chosen: say which there are
    assert res.exit_code == 2
    assert "holds profiles of 3 sources (nvml.average, nvml.buffer, nvml.instant): pick one with --source" in res.output

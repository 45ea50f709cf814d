"""benchmarks/redo_attribution.py: a shipped run's attribution redone on the CPU from its raw CUPTI trace (gzipped,
as scripts/device.sh returns large traces), with bad input a one-line exit 2."""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "h100" / "run" / "cupy-mix-inject"


@pytest.fixture(scope="module")
def redo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("redo_attribution", ROOT / "benchmarks" / "redo_attribution.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["redo_attribution"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_run_without_its_activities_is_rebuilt_from_the_gzipped_trace(
    redo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    for f in (d / "raw").glob("activities.csv*"):
        f.unlink()
    (bin_,) = (d / "raw" / "cupti").glob("*.bin")
    gz = tmp_path / f"large-h100+run+cupy-mix-inject+raw+cupti+{bin_.name}.gz"
    gz.write_bytes(gzip.compress(bin_.read_bytes()))
    shutil.rmtree(d / "raw" / "cupti")
    saved = tmp_path / "redone.json"
    assert redo.main([str(d), "--cupti", str(gz), "--json", "--save", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "rebuilt" in out and "1809 records" in out
    s = json.loads(out[out.index("{") :])
    stored = json.loads((RUN / "attribution.json").read_text())
    kernels = [r for r in stored["rows"] if r["kind"] in ("kernel", "memcpy", "memset")]
    assert s["kernel_rows"] == len(kernels) and s["kernel_energy_j"] > 0
    # --save writes the redone attribution itself, not the run's stored one
    redone = json.loads(saved.read_text())
    assert sum(r["energy_j"] for r in redone["rows"]) == pytest.approx(redone["total_energy_j"], rel=1e-9)
    assert "capped_priors_w" in redone["extra"] and not list(tmp_path.glob("*.tmp"))


def test_bad_input_is_one_line_and_exit_2(redo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert redo.main([str(tmp_path / "missing")]) == 2
    assert "manifest.json: cannot read" in capsys.readouterr().err
    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    for f in (d / "raw").glob("activities.csv*"):
        f.unlink()
    assert redo.main([str(d)]) == 2
    assert "give the raw CUPTI trace with --cupti" in capsys.readouterr().err


def test_a_run_whose_activities_are_xz_compressed_is_redone_without_its_trace(
    redo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shipped runs may keep their activities as .csv.xz (session 18): no --cupti needed, the same rows."""
    import lzma

    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    plain = d / "raw" / "activities.csv"
    assert redo.main([str(d), "--json"]) == 0
    before = capsys.readouterr().out
    (d / "raw" / "activities.csv.xz").write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    assert redo.main([str(d), "--json"]) == 0
    after = capsys.readouterr().out
    assert json.loads(after[after.index("{") :]) == json.loads(before[before.index("{") :])


def test_sensor_profiles_give_the_buffer_model_and_bad_files_are_one_line(
    redo: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--sensor-profiles (session 27): the power buffer's model from a calibration's profiles.json, not the one the
    run took; the model is the file's, and a file without one is exit 2 with one line naming it."""
    prof = ROOT / "results" / "h100" / "sensor" / "calibration" / "profiles.json"
    model, where = redo.profile_model(prof)
    stored = json.loads(prof.read_text())["profiles"]["nvml.buffer"]["model"]
    assert model.lag_s == pytest.approx(stored["lag_s"]) and model.delay_s == pytest.approx(stored["delay_s"])
    assert "GPU-591bd772" in where
    # a model changed in the file is the one the redo uses
    d = json.loads(prof.read_text())
    d["profiles"]["nvml.buffer"]["model"]["delay_s"] = 0.0123
    other = tmp_path / "profiles.json"
    other.write_text(json.dumps(d))
    assert redo.profile_model(other)[0].delay_s == pytest.approx(0.0123)
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    assert redo.main([str(run), "--sensor-profiles", str(other), "--json"]) == 0
    assert f"buffer model: the calibration of GPU-591bd772 in {other}" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text('{"profiles": {}}')
    assert redo.main([str(run), "--sensor-profiles", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "no nvml.buffer profile" in err[0]


def test_buffer_filters_keep_the_powers_and_take_out_what_they_name(redo: ModuleType) -> None:
    """--buffer-filter (session 27): filtering the design and the readings alike leaves the regression's powers; AR
    whitening finds the order of an AR(2) noise and whitens it, the notch takes out an alternation next to the Nyquist
    rate and keeps the slow mix; unknown kinds and short series are said so."""
    import numpy as np

    rng = np.random.default_rng(3)
    n = 4000
    k = np.arange(n)
    # two columns whose mix moves slowly (a few Hz in readings every 20 ms), true powers 300 and 600 W
    share = 0.5 + 0.4 * np.sin(2 * np.pi * 1.3 * k * 0.02)
    x = np.column_stack([share, 1.0 - share])
    e = np.zeros(n)
    w = rng.normal(0.0, 5.0, n)
    for i in range(2, n):  # AR(2) noise
        e[i] = 0.5 * e[i - 1] - 0.3 * e[i - 2] + w[i]
    y = x @ np.array([300.0, 600.0]) + e
    p, phi = redo.ar_order(e)
    assert p == 2 and phi == pytest.approx([0.5, -0.3], abs=0.05)
    xf, yf, what = redo.filter_buffer("ar", x, y, 0.02)
    assert what.startswith("ar: AR(2)") and xf.shape == (n - 2, 2) and yf.shape == (n - 2,)
    beta = np.linalg.lstsq(xf, yf, rcond=None)[0]
    assert beta == pytest.approx([300.0, 600.0], abs=3.0)
    resid = yf - xf @ beta
    assert abs(np.corrcoef(resid[:-1], resid[1:])[0, 1]) < 0.05  # whitened
    # an alternation at 24.7 Hz on top of white noise: the notch takes it out, the powers stay
    alt = 20.0 * np.cos(2 * np.pi * 24.7 * k * 0.02)
    y2 = x @ np.array([300.0, 600.0]) + rng.normal(0.0, 2.0, n) + alt
    xn, yn, what = redo.filter_buffer("notch", x, y2, 0.02)
    assert what.startswith("notch: 23.0-24.9 Hz") and xn.shape[0] == n - 120
    beta = np.linalg.lstsq(xn, yn, rcond=None)[0]
    assert beta == pytest.approx([300.0, 600.0], abs=2.0)
    assert np.std(yn - xn @ beta) < 4.0 < np.std(y2 - x @ np.array([300.0, 600.0]))
    # readings too slow to show the band, too few readings, an unknown kind
    assert redo.filter_buffer("notch", x, y2, 0.1)[2].endswith("not filtered")
    assert redo.filter_buffer("ar", x[:50], y[:50], 0.02)[2] == "ar: too few readings (50), not filtered"
    with pytest.raises(ValueError, match="unknown buffer filter"):
        redo.filter_buffer("lowpass", x, y, 0.02)

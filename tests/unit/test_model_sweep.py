"""Reading the model's inputs: sweep and held-out tables and the peaks file, with one-line errors naming the line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from archline.errors import InputError
from archline.model.sweep import SWEEP_COLUMNS, read_heldout_csv, read_peaks_json, read_sweep_csv

HEADER = "precision,intensity,flops,bytes,time_s,energy_j,energy_uncertainty_j,avg_power_w,block\n"


def _csv(tmp_path: Path, body: str, header: str = HEADER) -> Path:
    p = tmp_path / "sweep.csv"
    p.write_text(header + body)
    return p


def test_reads_rows_and_ignores_knob_columns(tmp_path: Path) -> None:
    rows = read_sweep_csv(
        _csv(tmp_path, "single,0.25,1e9,4e9,0.002,1.2,0.01,,256\nfp64,512,2e12,4e9,0.07,40,,600,128\n")
    )
    assert [r.precision for r in rows] == ["single", "double"]
    assert rows[0].measured_intensity == pytest.approx(0.25)
    assert rows[0].power_w == pytest.approx(1.2 / 0.002)  # avg_power_w empty: E/T
    assert rows[1].power_w == 600.0
    assert math.isnan(rows[1].energy_uncertainty_j)
    assert math.isnan(rows[0].power_limit_w)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("single,1,1e9,1e9,0.1,1,,,1\nquad,1,1e9,1e9,0.1,1,,,1\n", r"sweep.csv:3: precision must be single or double"),
        ("single,1,1e9,-5,0.1,1,,,1\n", r"sweep.csv:2: 'bytes' must be positive"),
        ("single,1,1e9,1e9,,1,,,1\n", r"sweep.csv:2: missing value for 'time_s'"),
        ("single,1,1e9,1e9,0.1,abc,,,1\n", r"sweep.csv:2: 'energy_j' is not a number"),
        ("single,1,1e9,1e9,0.1,inf,,,1\n", r"sweep.csv:2: 'energy_j' is not finite"),
        ("", r"sweep.csv: no rows"),
    ],
)
def test_bad_rows_name_the_line(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        read_sweep_csv(_csv(tmp_path, body))
    assert "\n" not in str(err.value)


def test_missing_column(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing column"):
        read_sweep_csv(_csv(tmp_path, "single,1,1\n", header="precision,flops,bytes\n"))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_sweep_csv(tmp_path / "nope.csv")


def test_columns_are_documented() -> None:
    for col in ("precision", "intensity", "flops", "bytes", "time_s", "energy_j", "energy_uncertainty_j"):
        _unit, meaning = SWEEP_COLUMNS[col]
        assert meaning


def test_heldout_table(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text(
        "name,precision,flops,bytes,time_s,energy_j,cache_bytes\nsgemm.n4096,single,1.4e11,2e8,0.003,1.9,3e9\n"
    )
    (row,) = read_heldout_csv(p)
    assert row.name == "sgemm.n4096" and row.cache_bytes == 3e9
    p.write_text("name,precision,flops,bytes,time_s,energy_j\n,single,1,1,1,1\n")
    with pytest.raises(InputError, match=r"h.csv:2: missing value for 'name'"):
        read_heldout_csv(p)


def test_peaks_file(tmp_path: Path) -> None:
    p = tmp_path / "peaks.json"
    p.write_text(json.dumps({"copy_bytes_per_s": 3e12, "peak_flops_per_s": {"single": 6e13}, "power_limit_w": 700}))
    peaks = read_peaks_json(p)
    assert peaks.peak_for("single") == 6e13 and math.isnan(peaks.peak_for("double"))
    p.write_text(json.dumps({"copy_bytes_per_s": 3e12, "peak_flops_per_s": {"half": 1e14}, "power_limit_w": 700}))
    with pytest.raises(InputError, match="unknown precision 'half'"):
        read_peaks_json(p)
    p.write_text("{")
    with pytest.raises(InputError, match="not valid JSON"):
        read_peaks_json(p)

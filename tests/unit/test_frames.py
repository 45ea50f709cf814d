"""Result tables as pandas DataFrames and as HTML in Jupyter (core/frames.py and the result classes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archline.records.attribution import AttributionResult
from archline.records.csvload import load_csv
from archline.report.rundata import RESULT_TYPES

pd = pytest.importorskip("pandas")
ROOT = Path(__file__).resolve().parents[2]


def test_attribution_result_and_its_kernel_table_as_dataframes() -> None:
    res = AttributionResult.read(ROOT / "results/h100/run/cupy-mix/attribution.json")
    df = res.to_pandas()
    assert len(df) == len(res.rows)
    assert {"name", "calls", "time_s", "energy_j", "mean_power_w", "method"} <= set(df.columns)
    assert df["energy_j"].sum() == pytest.approx(res.total_energy_j, rel=1e-9)
    k = res.kernels.to_pandas()
    assert list(k["name"]) == res.kernels.names
    html = res._repr_html_()
    assert html.startswith("<table><caption>GPU energy by kernel") and "energy_j" in html
    assert html.count("<tr>") == len(res.rows) + 1


def test_run_directory_tables_keep_their_types() -> None:
    table = load_csv(ROOT / "results/h100/characterize/results.csv", RESULT_TYPES, ("name", "group"))
    df = table.to_pandas()
    assert len(df) == len(table.rows) and list(df.columns) == list(table.columns)
    assert df["energy_j"].dtype.kind == "f" and df["name"].iloc[0] == table.rows[0].text("name")
    html = table._repr_html_()
    assert html.count("<tr>") == min(len(table.rows), 60) + 1
    assert len(table.rows) <= 60 or f"… {len(table.rows) - 60} more rows" in html

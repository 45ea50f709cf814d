"""In an 80-column terminal (and a pipe, which Rich treats as 80 columns), tables never cut a number: every figure
that --json gives is shown in full, names fold instead, and the narrow table shows what the wide one does."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from archline.cli import measure_cmd, run_cmd
from archline.cli.app import app
from archline.cli.tables import Col, fit_table
from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.records.attribution import AttributionResult
from archline.records.traces import write_trace_csv, write_windows_csv
from tests.helpers.roofline_synth import H100_LIKE, write_run_dir
from tests.helpers.signals import kernels
from tests.helpers.terminal import cells, column, shown, table_lines

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _both(args: list[str]) -> tuple[str, str, Any]:
    """The command's table at 80 columns (twice: the second stands in for a wide terminal's column count only
    where nothing was left out) and its --json output."""
    narrow = runner.invoke(app, args, env={"COLUMNS": "80"})
    js = runner.invoke(app, [*args, "--json"])
    for r in (narrow, js):
        assert r.exit_code == 0, r.output
    return narrow.stdout, narrow.stdout, json.loads(js.stdout)


def _no_cut_numbers(narrow: str, wide: str) -> None:
    # Tables fit; messages may be longer (the terminal wraps them: they are not hard-wrapped at 80).
    assert max(len(ln) for ln in table_lines(narrow)) <= 80
    assert not any(ch.isdigit() and nxt == "…" for ch, nxt in itertools.pairwise(narrow))
    # A column left out at 80 columns is one of low priority: the wide table has at least as many.
    assert len(table_lines(wide)[0]) >= len(table_lines(narrow)[0]) or not table_lines(wide)


def test_analyze_shows_every_window_figure(tmp_path: Path) -> None:
    sc = kernels([(0.0, 1.0), (2.0, 0.6), (3.5, 0.25)], busy_w=[312.5, 251.25, 410.0])
    trace, wins = tmp_path / "a_trace_with_a_long_name.csv", tmp_path / "windows.csv"
    write_trace_csv(trace, simulate_power(sc.signal, SimulatedSensor.averaging(0.02, noise_w=0.3), seed=1))
    write_windows_csv(wins, sc.windows)
    narrow, wide, js = _both(["analyze", str(trace), "--windows", str(wins)])
    _no_cut_numbers(narrow, wide)
    shown_cells = cells(narrow)
    for w in js["windows"]:
        for key in ("energy_j", "energy_uncertainty_j", "mean_power_w", "duration_s"):
            assert shown(w[key], shown_cells), (key, w[key])


def test_model_predict_shows_every_figure(tmp_path: Path) -> None:
    run = write_run_dir(tmp_path / "run", H100_LIKE, np.random.default_rng(5), heldout=False)
    assert runner.invoke(app, ["model", "fit", str(run), "--no-render"]).exit_code == 0
    args = ["model", "predict", "-m", str(run / "roofline_model.json"), "--flops", "3.3e12", "--bytes", "1.7e9"]
    narrow, wide, js = _both(args)
    _no_cut_numbers(narrow, wide)
    c = cells(narrow)
    assert shown(js["energy_j"], c) and shown(js["energy_sigma_j"], c) and shown(js["power_w"], c)
    assert shown(js["time_s"], c, (1e3,)) and shown(js["intensity"], c)


def _console(width: int) -> Console:
    return Console(width=width, record=True, force_terminal=False, color_system=None)


def test_run_table_shows_every_kernel_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    res = AttributionResult.read(ROOT / "results/h100/run/cupy-mix/attribution.json")
    out = {}
    for width in (80, 250):
        con = _console(width)
        monkeypatch.setattr(run_cmd, "console", con)
        con.print(run_cmd.render_table(res))
        out[width] = con.export_text()
    _no_cut_numbers(out[80], out[250])
    c = cells(out[80])
    for r in res.to_json()["rows"]:
        assert shown(r["energy_j"], c, (1.0, 1e3, 1e6)), r["name"]  # J, mJ or µJ
        assert shown(100 * r["share"], c), r["name"]


def test_measure_shows_per_gpu_energy_time_and_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = {
        "energy_j": 1234.5678,
        "energy_uncertainty_j": 1.2345,
        "energy_counter_j": 1236.0412,
        "energy_counter_uncertainty_j": 0.5,
        "mean_power_w": 411.52,
        "max_power_w": 698.7,
    }
    out = {"command": ["python", "train_a_model_with_a_long_name.py", "--epochs", "3"], "time_s": 3.00012}
    multi = {**out, "gpus": [{"gpu": 0, **gpu}, {"gpu": 1, **gpu, "energy_j": 99.25}], "total": {**gpu}}
    for js in ({**out, "gpu": 0, **gpu}, multi):
        text = {}
        for width in (80, 250):
            con = _console(width)
            monkeypatch.setattr(measure_cmd, "console", con)
            measure_cmd._display(js, 0)
            text[width] = con.export_text()
        _no_cut_numbers(text[80], text[250])
        c = cells(text[80])
        for key in ("energy_j", "energy_uncertainty_j", "energy_counter_j", "time_s"):
            assert shown(js.get(key, gpu.get(key)), c), key
        assert "gpu_energy {0: 1234.57 J" in text[80]


def test_report_list_names_every_run_uncut() -> None:
    narrow = runner.invoke(app, ["report", "--list"], env={"COLUMNS": "80"})
    js = json.loads(runner.invoke(app, ["report", "--list", "--json"]).stdout)
    assert narrow.exit_code == 0
    assert "…" not in narrow.stdout
    names = column(narrow.stdout, 0)
    for run in js["runs"]:
        assert run["key"] in names


def test_numbers_never_cut_even_when_nothing_can_be_dropped() -> None:
    rows = [["a" * 30, "12345.678901", "98765.4321 ± 12.3", "1.5e-09"]]
    cols = [Col("name", "name"), Col("energy J"), Col("power W"), Col("x")]
    for width in (80, 40):
        con = _console(width)
        table, _ = fit_table(cols, rows, console=con)
        con.print(table)
        text = con.export_text()
        for value in rows[0][1:]:
            assert value in text, (width, text)


def test_a_name_too_long_for_its_column_breaks_after_its_dots() -> None:
    """A fresh user's review (session 17): at 80 columns identifiers folded mid-word ('arith.int32.ad' / 'd'); they
    now break after a dot, slash, underscore or colon, and a name that fits is left whole."""
    from rich.console import Console

    from archline.cli.tables import Col, _fold_name, fit_table

    assert _fold_name("arith.int32.add", 14) == "arith.int32.\nadd"
    assert (
        _fold_name("h100/run/attribution-validation/cublas_gemm", 24)
        == "h100/run/\nattribution-validation/\ncublas_gemm"
    )
    assert _fold_name("short", 14) == "short"
    con = Console(width=80, record=True)
    cols = [Col("window", "name"), Col("start s", drop=2), Col("duration s", drop=1), Col("energy J"),
            Col("± J (1σ)"), Col("mean W"), Col("resolvable", "text")]  # fmt: skip
    rows = [["arith.fp32.div.approx.denormal", "300.000000", "0.9999", "350.83", "0.71", "350.9", "yes"]]
    table, _ = fit_table(cols, rows, console=con)
    con.print(table)
    text = con.export_text()
    assert "arith.fp32.div." in text and "approx." in text and "denormal" in text  # whole parts, broken at dots
    assert "350.83" in text and max(len(line) for line in text.splitlines()) <= 80

"""CLI: ``archline analyze``: the energy of each window of a power trace, corrected for the sensor."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from archline.cli._common import (
    KEEP_REPEATS_HELP,
    console,
    err_console,
    handle_errors,
    print_json,
    print_para,
    read_progress_bar,
)
from archline.cli.tables import Col, fit_table
from archline.core.readings import Readings
from archline.core.recording import Region
from archline.errors import InputError
from archline.measurement.analyze_api import MAX_ROWS, analyze_readings, check_capacitance
from archline.measurement.analyze_api import load_trace as _load_trace

__all__ = ["load_trace", "register"]


def load_trace(
    trace: Path, source: str | None, profile: Path | None = None, max_rows: int | None = MAX_ROWS
) -> tuple[Readings, tuple[Region, ...]]:
    """:func:`archline.measurement.analyze_api.load_trace`, with a progress bar for a large CSV trace."""
    if trace.suffix.lower() == ".npz" or not trace.is_file() or trace.stat().st_size < _PROGRESS_BYTES:
        return _load_trace(trace, source, profile, max_rows)
    with read_progress_bar() as bar:
        task = bar.add_task(f"reading {trace.name}", total=trace.stat().st_size)
        return _load_trace(trace, source, profile, max_rows, lambda done, total: bar.update(task, completed=done))


#: Files from this size on show a progress bar while they are read (~1 s of CSV).
_PROGRESS_BYTES = 64 << 20


def _levels(r: Readings, model: Any, wins: tuple[Region, ...]) -> dict[str, float | None]:
    """Idle and active-idle power seen around the windows (W), for the sensor summary."""
    from archline.measurement.idle import idle_levels
    from archline.measurement.lagged import correct_lag
    from archline.measurement.windows import prepare_series

    settle = model.mixing_s + 2 * model.period_s
    if not model.correct_lag:
        lv = idle_levels(r.t_s, r.value, wins, settle_s=settle)
        return {"idle_w": lv.idle_w, "active_idle_w": lv.active_idle_w}
    # A strongly lagged sensor is read through Burtscher's correction (on cleaned readings).
    s, _ = prepare_series(r, model)
    y = correct_lag(s.t_s, s.y_w, model.lag_s)
    shifted = [Region(w.name, w.start_s - s.t0_s, w.end_s - s.t0_s) for w in wins]
    lv = idle_levels(s.t_s, y, shifted, settle_s=settle)
    return {"idle_w": lv.idle_w, "active_idle_w": lv.active_idle_w}


def _table(model: Any, rows: list[dict[str, Any]], notes: list[str], t0_s: float) -> tuple[Table, list[str]]:
    """The windows as a table; why a window is unresolvable goes to numbered footnotes."""
    cols = [
        Col("window", "name"),
        Col("start s", drop=2),
        Col("duration s", drop=1),
        Col("energy J"),
        Col("± J (1σ)"),
        Col("mean W"),
        Col("resolvable", "text"),
    ]
    foot: list[str] = []
    body: list[list[str]] = []
    for w, note in zip(rows, notes, strict=True):
        mark = "yes"
        if not w["resolvable"]:
            if note not in foot:
                foot.append(note)
            mark = f"[yellow]no[/] [{foot.index(note) + 1}]"
        body.append(
            [
                escape(str(w["name"])),
                f"{w['start_s'] - t0_s:.6f}",
                f"{w['duration_s']:.4g}",
                f"{w['energy_j']:.5g}",
                f"{w['energy_uncertainty_j']:.2g}",
                f"{w['mean_power_w']:.1f}",
                mark,
            ]
        )
    t, dropped = fit_table(
        cols,
        body,
        console=console,
        title=f"sensor: {model.kind} ({model.origin}), update {1e3 * model.period_s:.1f} ms, "
        f"C = {1e3 * model.lag_s:.1f} ms, coverage {100 * model.coverage:.0f} %",
        caption=f"start relative to the trace's first reading, t0 = {t0_s!r} s",
    )
    extra = (
        [f"(left out to fit {console.width} columns: {', '.join(dropped)}; --json has every field)"] if dropped else []
    )
    return t, [f"[{i + 1}] {n}" for i, n in enumerate(foot)] + extra


def register(app: typer.Typer) -> None:
    """Add ``archline analyze``."""

    @app.command("analyze")
    @handle_errors
    def analyze(
        trace: Annotated[
            Path,
            typer.Argument(
                help="Power trace with columns time_s,power_w: CSV (plain or .csv.gz), Parquet or Arrow/Feather; "
                "or an archline .npz recording."
            ),
        ],
        windows: Annotated[
            Path | None,
            typer.Option(
                "--windows",
                "-w",
                help="CSV with name,start_s,end_s on the trace's clock (default for .npz: its regions).",
            ),
        ] = None,
        sensor: Annotated[
            str, typer.Option("--sensor", help="Sensor model: auto, lagged, averaging or part-time.")
        ] = "auto",
        capacitance: Annotated[
            float | None, typer.Option("--capacitance", help="Lag constant C in s (lagged sensors).")
        ] = None,
        profile: Annotated[
            Path | None,
            typer.Option(
                "--profile",
                help="Sensor profile JSON: from 'archline sensor fit', or a calibration run's profiles.json "
                "(the recording's source, or --source, picks the profile).",
            ),
        ] = None,
        source: Annotated[
            str | None, typer.Option("--source", help="Source in an .npz recording (default nvml.buffer).")
        ] = None,
        max_rel: Annotated[
            float, typer.Option("--max-rel-uncertainty", help="Above this 1σ/energy a window is unresolvable.")
        ] = 0.2,
        max_rows: Annotated[
            int,
            typer.Option(
                "--max-rows",
                help="Analyse at most this many rows: a denser trace is averaged in bins of k rows as it is read "
                "(energy is conserved; edges are timed to the bin). 0: every row.",
            ),
        ] = MAX_ROWS,
        keep_repeats: Annotated[bool, typer.Option("--keep-repeats", help=KEEP_REPEATS_HELP)] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Energy of each window with a 1σ uncertainty, after correcting for the sensor's behaviour."""
        if max_rel <= 0:
            raise InputError("--max-rel-uncertainty must be positive")
        if capacitance is not None:  # also with --profile, which skips the model's check
            check_capacitance(capacitance)
        if max_rows < 0:
            raise InputError("--max-rows must be ≥ 0 (0: every row)")
        r, regions = load_trace(trace, source, profile, max_rows or None)
        k = int(r.meta.get("bin_rows", 1))
        if k > 1:
            err_console.print(
                f"archline: note: {trace.name} has about {k * len(r):,} rows: analysed as {len(r):,} means of {k} "
                "rows each (energy conserved); --max-rows 0 analyses every row",
                soft_wrap=True,
            )
        if windows is None and not regions:
            kind = "recording has no regions" if trace.suffix == ".npz" else "CSV trace has no regions"
            raise InputError(f"{trace}: the {kind}: give the windows to measure with --windows FILE")
        for warning in r.meta.get("warnings", ()):
            err_console.print(f"archline: warning: {escape(warning)}", soft_wrap=True)
        done = analyze_readings(
            r, regions, trace, windows, source=source, profile=profile, sensor=sensor, capacitance=capacitance,
            keep_repeats=keep_repeats, max_rel_uncertainty=max_rel,
        )  # fmt: skip
        r, model, res = done.readings, done.model, done.windows
        wins = tuple(Region(w.name, w.start_s, w.end_s) for w in res)
        keys = (
            "name",
            "start_s",
            "end_s",
            "duration_s",
            "energy_j",
            "energy_uncertainty_j",
            "mean_power_w",
            "resolvable",
        )
        rows = [{k: w.to_json()[k] for k in keys} for w in res]
        sensor_json = {"source": r.source, "bin_rows": k, **model.to_json(), **_levels(r, model, wins)}
        if as_json:
            print_json({"sensor": sensor_json, "windows": rows})
            return
        table, foot = _table(model, rows, [w.note for w in res], float(r.t_s[0]))
        console.print(table)
        for f in foot:
            console.print(f, markup=False)
        for n in model.notes:
            print_para(f"note: {n}", style="dim")

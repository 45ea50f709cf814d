"""CLI: ``archline analyze``: the energy of each window of a power trace, corrected for the sensor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from archline.cli._common import console, err_console, handle_errors, print_json, print_para, read_progress_bar
from archline.cli.tables import Col, fit_table
from archline.core.readings import Readings
from archline.core.recording import Region
from archline.errors import InputError, ModelFileError, TraceError
from archline.measurement.clean import KEEP_REPEATS

__all__ = ["load_trace", "register", "resolve_model"]


#: Files from this size on show a progress bar while they are read (~1 s of CSV).
_PROGRESS_BYTES = 64 << 20


#: Rows analysed at most by default: a denser trace is averaged in bins while it is read (energy conserved).
MAX_ROWS = 200_000


def load_trace(
    trace: Path, source: str | None, profile: Path | None = None, max_rows: int | None = MAX_ROWS
) -> tuple[Readings, tuple[Region, ...]]:
    """A power series from a CSV trace, or one source of an archline recording (.npz) with its regions."""
    from archline.records.traces import load_recording, read_trace_csv

    if trace.suffix.lower() == ".npz":
        rec = load_recording(trace)
        name = source or ("nvml.buffer" if rec.get("nvml.buffer") is not None else None)
        if name is None:
            power = [k for k, r in rec.readings.items() if r.quantity == "power"]
            if len(power) != 1:
                raise InputError(f"{trace}: pick a power source with --source (it has: {', '.join(power) or 'none'})")
            name = power[0]
        r = rec.get(name)
        if r is None:
            raise InputError(f"{trace}: no source {name!r} (it has: {', '.join(sorted(rec.readings))})")
        if r.quantity != "power":
            raise InputError(f"{trace}: source {name!r} measures {r.quantity}, not power")
        if len(r) < 2:
            raise TraceError(trace, f"source {name!r} has fewer than 2 readings")
        return r, rec.regions
    if source is not None and profile is None:
        raise InputError("--source applies to .npz recordings, or picks the profile of a --profile file")
    if not trace.is_file() or trace.stat().st_size < _PROGRESS_BYTES:
        return read_trace_csv(trace, max_rows=max_rows), ()
    with read_progress_bar() as bar:
        task = bar.add_task(f"reading {trace.name}", total=trace.stat().st_size)
        r = read_trace_csv(trace, progress=lambda done, total: bar.update(task, completed=done), max_rows=max_rows)
    return r, ()


def _profile_entries(d: Any) -> list[tuple[str, dict[str, Any]]]:
    """(source, profile) pairs of a profile file: one profile, ``{"profile": ...}``, a calibration run's
    ``{"profiles": {source: profile}}``, or ``{"profiles": {driver: {source: profile}}}``."""
    if isinstance(d, dict) and isinstance(d.get("profile"), dict):
        d = d["profile"]
    if not (isinstance(d, dict) and isinstance(d.get("profiles"), dict)):
        return [(str(d.get("source", "")), d)] if isinstance(d, dict) else []
    out: list[tuple[str, dict[str, Any]]] = []
    for key, v in d["profiles"].items():
        if not isinstance(v, dict):
            continue
        if "model" in v or "source" in v:  # keyed by source
            out.append((str(v.get("source", key)), v))
        else:  # keyed by driver, then source
            out += [(str(e.get("source", src)), e) for src, e in v.items() if isinstance(e, dict)]
    return out


def _profile_model(path: Path, source: str | None) -> Any:
    from archline.measurement.calibrate.profile import SensorProfile

    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFileError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: not a JSON file ({exc})") from None
    entries = _profile_entries(d)
    if not entries:
        raise ModelFileError(f"{path}: not a sensor profile")
    if len(entries) > 1:
        names = ", ".join(sorted({src for src, _ in entries}))
        picked = [e for e in entries if e[0] == source]
        if not picked:
            why = f"none for source {source!r}" if source else "pick one with --source"
            raise ModelFileError(f"{path}: holds profiles of {len(entries)} sources ({names}): {why}")
        if len(picked) > 1:
            raise ModelFileError(f"{path}: holds {len(picked)} profiles of source {source!r} (several drivers)")
        entries = picked
    return SensorProfile.from_json(entries[0][1], where=str(path)).model


#: Burtscher's K20 has C = 0.84 s; a lag beyond 10 s would smear every kernel into the next minute.
MAX_CAPACITANCE_S = 10.0


def check_capacitance(c: float) -> None:
    """--capacitance: a positive lag constant of at most 10 s, in seconds."""
    if not c > 0:
        raise InputError(f"--capacitance must be > 0 s (got {c!r}); for a sensor without lag use --sensor averaging")
    if c > MAX_CAPACITANCE_S:
        raise InputError(
            f"--capacitance {c!r} s is not a sensor's lag (at most {MAX_CAPACITANCE_S:g} s; K20's is 0.84 s)"
        )


def _identity_of(trace: Path) -> Any:
    """The board that recorded an archline recording (.npz): its run directory's manifest, beside it; else None."""
    from archline.errors import ArchlineError
    from archline.measurement.choose import GpuIdentity
    from archline.records import RunDir

    if trace.suffix.lower() != ".npz" or not (trace.parent / "manifest.json").is_file():
        return None
    try:
        gpu = RunDir.open(trace.parent).manifest.gpu
    except ArchlineError:
        return None
    return GpuIdentity.from_static(gpu) if isinstance(gpu, dict) and gpu.get("name") else None


def resolve_model(
    r: Readings, sensor: str, capacitance: float | None, profile: Path | None, source: str | None,
    identity: Any = None,
) -> Any:  # fmt: skip
    """The sensor model: from a profile file; for an NVML source of a known board with no override, this board's
    calibration or the prior archline ships for its generation (measurement.choose: a model inferred from one
    recording's data alone was 26 % low on the shipped H100 quick run's nvml.average); else chosen from the data
    (with overrides)."""
    from archline.measurement.sensor_model import infer_model, parse_kind

    if profile is None and identity is not None and sensor == "auto" and capacitance is None:
        from archline.errors import ArchlineError
        from archline.measurement.choose import choose_model

        try:
            choice = choose_model(r.source, r, identity=identity)
        except ArchlineError:
            choice = None
        if choice is not None and choice.how != "inferred":
            return choice.model.with_(notes=(*choice.model.notes, f"{choice.describe}"))

    if profile is not None:
        # A recording's source picks its profile from a calibration run's file (profiles of several sources).
        model = _profile_model(profile, source or (r.source if not r.source.startswith("trace:") else None))
        if sensor != "auto":
            model = model.with_(kind=parse_kind(sensor), origin="override")
        if capacitance is not None:
            model = model.with_(lag_s=capacitance, lag_sigma_s=0.0, origin="override")
        return model
    return infer_model(r, kind=None if sensor == "auto" else sensor, capacitance_s=capacitance)


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
        keep_repeats: Annotated[
            bool,
            typer.Option(
                "--keep-repeats",
                help="Every reading is a sample (an exact meter or a simulator): equal readings are constant power, "
                "not a sensor repeating its last update.",
            ),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    ) -> None:
        """Energy of each window with a 1σ uncertainty, after correcting for the sensor's behaviour."""
        from archline.measurement.windows import window_energies
        from archline.records.traces import check_windows, read_windows_csv

        if max_rel <= 0:
            raise InputError("--max-rel-uncertainty must be positive")
        if capacitance is not None:  # also with --profile, which skips the model's check
            check_capacitance(capacitance)
        if max_rows < 0:
            raise InputError("--max-rows must be ≥ 0 (0: every row)")
        r, regions = load_trace(trace, source, profile, max_rows or None)
        if keep_repeats:
            r = Readings(r.source, r.quantity, r.t_s, r.value, {**r.meta, KEEP_REPEATS: True})
        k = int(r.meta.get("bin_rows", 1))
        if k > 1:
            err_console.print(
                f"archline: note: {trace.name} has about {k * len(r):,} rows: analysed as {len(r):,} means of {k} "
                "rows each (energy conserved); --max-rows 0 analyses every row",
                soft_wrap=True,
            )
        if windows is not None:
            wins = read_windows_csv(windows)
            where: Path = windows
        elif regions:
            wins, where = regions, trace
        else:
            kind = "recording has no regions" if trace.suffix == ".npz" else "CSV trace has no regions"
            raise InputError(f"{trace}: the {kind}: give the windows to measure with --windows FILE")
        for warning in r.meta.get("warnings", ()):
            err_console.print(f"archline: warning: {escape(warning)}", soft_wrap=True)
        check_windows(wins, float(r.t_s[0]), float(r.t_s[-1]), where)
        model = resolve_model(r, sensor, capacitance, profile, source, _identity_of(trace))
        res = window_energies(r, model, wins, max_rel_uncertainty=max_rel)
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

"""CLI: ``archline sensor``: fit a sensor's model from a trace of known loads (``fit``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from archline.cli._common import KEEP_REPEATS_HELP, console, handle_errors, print_json, print_para
from archline.cli.tables import Col, fit_table
from archline.errors import InputError

__all__ = ["register", "sensor_app"]

#: The ``archline sensor`` group; other modules add commands to it (e.g. ``calibrate``).
sensor_app = typer.Typer(
    name="sensor",
    help="Characterize a power sensor: its update period, averaging window, lag and idle levels.",
    no_args_is_help=True,
)


def _summary(p: Any) -> dict[str, Any]:
    m = p.model
    return {
        "kind": m.kind,
        "update_period_s": m.period_s,
        "update_jitter_s": m.period_jitter_s,
        "lag_constant_s": m.lag_s,
        "averaging_window_s": m.period_s if m.window_s is None else m.window_s,
        "window_tiles_timeline": m.window_s is None,
        "delay_s": m.delay_s,
        "coverage": m.coverage,
        "idle_w": p.idle_w,
        "active_idle_w": p.active_idle_w,
        "tail_s": p.tail_s,
        "repeat_fraction": p.repeat_fraction,
        "edge_sigma_s": m.edge_sigma_s,
        "findings": list(p.findings),
        "profile": p.to_json(),
    }


def _table(p: Any) -> Table:
    m = p.model

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{1e3 * v:.2f} ms"

    def w(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f} W"

    rows = [
        ("kind", m.kind),
        ("update period", f"{ms(m.period_s)} (jitter {ms(m.period_jitter_s)})"),
        ("averaging window", "interval since previous reading" if m.window_s is None else ms(m.window_s)),
        ("lag constant C", f"{ms(m.lag_s)} ± {ms(m.lag_sigma_s)}"),
        ("delay", ms(m.delay_s)),
        ("coverage", f"{100 * m.coverage:.0f} %"),
        ("idle power", w(p.idle_w)),
        ("active-idle power", w(p.active_idle_w)),
        ("tail after a load", ms(p.tail_s)),
        ("repeated readings", f"{100 * p.repeat_fraction:.1f} %"),
        ("edge timing 1σ", ms(m.edge_sigma_s)),
    ]
    t, _ = fit_table(
        [Col("property", "name"), Col("value")],
        [list(r) for r in rows],
        console=console,
        title=f"sensor {p.source} of {p.gpu_uuid} (driver {p.driver_version})",
    )
    return t


@sensor_app.command("fit")
@handle_errors
def fit(
    trace: Annotated[Path, typer.Argument(help="Power trace: CSV with time_s,power_w, or an archline .npz recording.")],
    windows: Annotated[
        Path | None,
        typer.Option("--windows", "-w", help="Known loads: CSV name,start_s,end_s (default for .npz: its regions)."),
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Source in an .npz recording (default nvml.buffer).")
    ] = None,
    save: Annotated[
        bool, typer.Option("--save", help="Store the profile in the sensor cache for later measurements.")
    ] = False,
    gpu_uuid: Annotated[str | None, typer.Option("--gpu-uuid", help="GPU UUID to file the profile under.")] = None,
    driver: Annotated[str | None, typer.Option("--driver", help="Driver version to file the profile under.")] = None,
    keep_repeats: Annotated[bool, typer.Option("--keep-repeats", help=KEEP_REPEATS_HELP)] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Fit the sensor model (kind, update period, lag C, window, idle levels) to known loads."""
    from archline.cli.analyze import load_trace
    from archline.measurement.calibrate.fit import fit_sensor
    from archline.measurement.calibrate.profile import SensorProfile, save_profile
    from archline.records.traces import check_windows, load_recording, read_windows_csv

    r, regions = load_trace(trace, source)
    if keep_repeats:
        from archline.measurement.clean import keep_repeats as keep_every_reading

        r = keep_every_reading(r)
    meta: dict[str, Any] = {}
    if trace.suffix.lower() == ".npz":
        meta = load_recording(trace).meta
    if windows is not None:
        loads = read_windows_csv(windows)
        where: Path = windows
    elif regions:
        loads, where = regions, trace
    else:
        kind = "recording has no regions" if trace.suffix == ".npz" else "CSV trace has no regions"
        raise InputError(f"{trace}: the {kind}: give the loads to fit with --windows FILE")
    check_windows(loads, float(r.t_s[0]), float(r.t_s[-1]), where)
    uuid = gpu_uuid or meta.get("gpu_uuid")
    drv = driver or meta.get("driver_version")
    if save and not (uuid and drv):
        # A profile is looked up by GPU and driver: filed under 'unknown', no measurement would find it.
        missing = " and ".join(f for f, v in (("--gpu-uuid", uuid), ("--driver", drv)) if not v)
        raise InputError(f"{trace}: --save needs {missing} (the trace does not say which GPU and driver it is from)")
    result = fit_sensor(r, loads)
    profile = SensorProfile.from_fit(
        result,
        gpu_uuid=str(uuid or "unknown-gpu"),
        driver_version=str(drv or "unknown-driver"),
        source=r.source,
    )
    saved = save_profile(profile) if save else None
    if as_json:
        out = _summary(profile)
        if saved is not None:
            out["saved_to"] = str(saved)
        print_json(out)
        return
    console.print(_table(profile))
    for f in profile.findings:
        print_para(f"- {f}")
    if saved is not None:
        console.print(f"saved to {saved}")


def register(app: typer.Typer) -> None:
    """Add the ``archline sensor`` group."""
    app.add_typer(sensor_app, name="sensor")

"""The energy of each window of a power trace from Python, as ``archline analyze`` computes it.

>>> res = archline.analyze("trace.npz")             # doctest: +SKIP
>>> res.windows[0].energy_j, res.windows[0].energy_uncertainty_j, res.model.kind   # doctest: +SKIP

The sensor model is chosen as the command chooses it (:func:`resolve_model`): a profile file; for an NVML source
of a recording whose run directory names its board, that board's calibration or the prior archline ships for its
generation; else inferred from the data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archline.core.readings import Readings
from archline.core.recording import Region
from archline.errors import InputError, ModelFileError, TraceError
from archline.measurement.clean import keep_repeats as keep_every_reading

if TYPE_CHECKING:  # the estimator pulls in scipy: imported when a trace is analysed, not when the CLI starts
    from archline.measurement.sensor_model import SensorModel
    from archline.measurement.windows import WindowEnergy

__all__ = [
    "MAX_ROWS",
    "Analysis",
    "analyze",
    "analyze_readings",
    "check_capacitance",
    "identity_of",
    "load_trace",
    "resolve_model",
]

#: Rows analysed at most by default: a denser trace is averaged in bins while it is read (energy conserved).
MAX_ROWS = 200_000


def load_trace(
    trace: Path,
    source: str | None,
    profile: Path | None = None,
    max_rows: int | None = MAX_ROWS,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Readings, tuple[Region, ...]]:
    """A power series from a CSV trace, or one source of an archline recording (.npz) with its regions.
    ``progress(done, total)`` is told the bytes read of a CSV trace as it goes."""
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
    return read_trace_csv(trace, progress=progress, max_rows=max_rows), ()


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


def identity_of(trace: Path) -> Any:
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


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyze` found: the readings it used, the sensor model and each window's energy (J, 1 σ)."""

    readings: Readings
    model: SensorModel
    windows: list[WindowEnergy]


def analyze(
    trace: str | Path,
    windows: str | Path | Sequence[Region] | None = None,
    *,
    source: str | None = None,
    profile: str | Path | None = None,
    sensor: str = "auto",
    capacitance: float | None = None,
    keep_repeats: bool = False,
    max_rows: int | None = MAX_ROWS,
    max_rel_uncertainty: float = 0.2,
) -> Analysis:
    """The energy of each window of ``trace`` (a CSV/Parquet/Arrow power trace, or an archline ``.npz``
    recording), corrected for its sensor, as ``archline analyze`` gives it. ``windows``: a windows CSV, regions, or
    None for a recording's own regions. The other keywords are the command's options (``max_rows=None``: every
    row). Bad input raises :class:`~archline.errors.InputError` naming the file."""
    if not max_rel_uncertainty > 0:
        raise InputError("max_rel_uncertainty must be positive")
    if capacitance is not None:
        check_capacitance(capacitance)
    if max_rows is not None and max_rows < 0:
        raise InputError("max_rows must be ≥ 0 (0 or None: every row)")
    max_rows = max_rows or None
    path = Path(trace)
    prof = Path(profile) if profile is not None else None
    r, regions = load_trace(path, source, prof, max_rows)
    return analyze_readings(
        r, regions, path, windows, source=source, profile=prof, sensor=sensor, capacitance=capacitance,
        keep_repeats=keep_repeats, max_rel_uncertainty=max_rel_uncertainty,
    )  # fmt: skip


def analyze_readings(
    r: Readings,
    regions: Sequence[Region],
    trace: Path,
    windows: str | Path | Sequence[Region] | None,
    *,
    source: str | None,
    profile: Path | None,
    sensor: str,
    capacitance: float | None,
    keep_repeats: bool,
    max_rel_uncertainty: float,
) -> Analysis:
    """:func:`analyze` of readings already loaded from ``trace`` (the command loads them with a progress bar)."""
    from archline.measurement.windows import window_energies
    from archline.records.traces import check_windows, read_windows_csv

    if keep_repeats:
        r = keep_every_reading(r)
    if windows is None:
        if not regions:
            raise InputError(f"{trace}: it has no regions: give the windows to measure")
        wins, where = tuple(regions), trace
    elif isinstance(windows, (str, Path)):
        wins, where = tuple(read_windows_csv(Path(windows))), Path(windows)
    else:
        wins, where = tuple(windows), trace
    if not wins:
        raise InputError(f"{where}: no windows to measure")
    check_windows(wins, float(r.t_s[0]), float(r.t_s[-1]), where)
    model = resolve_model(r, sensor, capacitance, profile, source, identity_of(trace))
    return Analysis(r, model, list(window_energies(r, model, wins, max_rel_uncertainty=max_rel_uncertainty)))

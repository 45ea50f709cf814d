"""The model's inputs: intensity-sweep rows, the device's peaks and held-out kernel rows, with their CSV/JSON forms."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from archline.errors import InputError
from archline.records import read_csv

__all__ = [
    "HELDOUT_COLUMNS",
    "PRECISIONS",
    "SWEEP_COLUMNS",
    "HeldOutRow",
    "Peaks",
    "Precision",
    "SweepRow",
    "heldout_rows_from_dicts",
    "peaks_from_json",
    "read_heldout_csv",
    "read_peaks_json",
    "read_sweep_csv",
    "sweep_rows_from_dicts",
]

Precision = Literal["single", "double"]
PRECISIONS: tuple[Precision, ...] = ("single", "double")

#: Columns of the sweep table (``roofline_sweep.csv``): column → (unit, meaning). Extra
#: columns (tuning knobs such as ``block`` or ``loads_per_thread``) are allowed and ignored.
SWEEP_COLUMNS: dict[str, tuple[str, str]] = {
    "precision": ("", "single or double: the precision of the FMAs"),
    "intensity": ("flop/B", "planned intensity W/Q of the sweep point"),
    "flops": ("flop", "W: floating-point operations per launch (FMA = 2)"),
    "bytes": ("B", "Q: DRAM bytes per launch (reads plus writes)"),
    "time_s": ("s", "T: kernel time per launch"),
    "energy_j": ("J", "E: board energy per launch, corrected"),
    "energy_uncertainty_j": ("J", "1-sigma uncertainty of energy_j (empty or 0: unknown)"),
    "avg_power_w": ("W", "mean board power while the kernel ran (empty: energy_j / time_s)"),
    "idle_power_w": ("W", "board power at idle just before the point (optional)"),
    "sm_clock_mhz": ("MHz", "mean SM clock while the kernel ran (optional)"),
    "power_limit_w": ("W", "the board's enforced power limit (optional if given with the peaks)"),
}
_SWEEP_REQUIRED = ("precision", "flops", "bytes", "time_s", "energy_j")

#: Columns of the held-out kernel table (``roofline_heldout.csv``): column → (unit, meaning).
HELDOUT_COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("", "workload name, e.g. sgemm.n4096"),
    "precision": ("", "single or double: the precision of the kernel's flops"),
    "flops": ("flop", "W counted for one invocation"),
    "bytes": ("B", "Q: DRAM bytes for one invocation (each input read once, each output written once)"),
    "time_s": ("s", "measured time of one invocation"),
    "energy_j": ("J", "measured board energy of one invocation"),
    "energy_uncertainty_j": ("J", "1-sigma uncertainty of energy_j (optional)"),
    "cache_bytes": ("B", "estimated on-chip cache traffic, for the optional cache-energy term (optional)"),
}
_HELDOUT_REQUIRED = ("name", "precision", "flops", "bytes", "time_s", "energy_j")


@dataclass(frozen=True)
class SweepRow:
    """One point of the intensity sweep: a kernel of known W and Q, measured for time and energy."""

    precision: Precision
    intensity: float
    flops: float
    bytes: float
    time_s: float
    energy_j: float
    energy_uncertainty_j: float = math.nan
    avg_power_w: float = math.nan
    idle_power_w: float = math.nan
    sm_clock_mhz: float = math.nan
    power_limit_w: float = math.nan

    @property
    def measured_intensity(self) -> float:
        """W/Q from the counts (the planned ``intensity`` may be rounded)."""
        return self.flops / self.bytes

    @property
    def power_w(self) -> float:
        """Mean power: the measured ``avg_power_w`` where given, else E/T."""
        return self.avg_power_w if math.isfinite(self.avg_power_w) else self.energy_j / self.time_s


@dataclass(frozen=True)
class Peaks:
    """The device's peaks measured in the same run, and its power limit.

    ``copy_bytes_per_s`` counts bytes read plus bytes written, as Q does.
    """

    copy_bytes_per_s: float
    peak_flops_per_s: dict[str, float]
    power_limit_w: float
    device: str = ""

    def peak_for(self, precision: str) -> float:
        """Peak FLOP/s for ``precision`` (NaN if it was not measured)."""
        return float(self.peak_flops_per_s.get(precision, math.nan))


@dataclass(frozen=True)
class HeldOutRow:
    """A real kernel not used in the fit, with its counts and its measured time and energy."""

    name: str
    precision: Precision
    flops: float
    bytes: float
    time_s: float
    energy_j: float
    energy_uncertainty_j: float = math.nan
    cache_bytes: float = 0.0


# --------------------------------------------------------------------------- parsing


def _where(source: str, index: int | None) -> str:
    # Line numbers count the CSV header as line 1, as an editor shows them.
    return f"{source}:{index + 2}" if index is not None else source


def _number(row: Mapping[str, Any], key: str, where: str, *, positive: bool, required: bool) -> float:
    raw = row.get(key)
    if raw is None or raw == "":
        if required:
            raise InputError(f"{where}: missing value for '{key}'")
        return math.nan
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise InputError(f"{where}: '{key}' is not a number ({raw!r})") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: '{key}' is not finite ({raw!r})")
    if positive and value <= 0.0:
        raise InputError(f"{where}: '{key}' must be positive (got {value:g})")
    return value


def _precision(row: Mapping[str, Any], where: str) -> Precision:
    p = str(row.get("precision", "")).strip().lower()
    aliases = {"fp32": "single", "f32": "single", "fp64": "double", "f64": "double"}
    p = aliases.get(p, p)
    if p not in PRECISIONS:
        raise InputError(f"{where}: precision must be single or double (got {row.get('precision')!r})")
    return p


def _check_columns(rows: Sequence[Mapping[str, Any]], required: Iterable[str], source: str) -> None:
    if not rows:
        raise InputError(f"{source}: no rows")
    missing = [c for c in required if c not in rows[0]]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}")


def sweep_rows_from_dicts(rows: Sequence[Mapping[str, Any]], source: str = "sweep") -> list[SweepRow]:
    """Validate tidy dicts (as read from the sweep CSV) into :class:`SweepRow` objects."""
    _check_columns(rows, _SWEEP_REQUIRED, source)
    out: list[SweepRow] = []
    for i, r in enumerate(rows):
        where = _where(source, i)
        flops = _number(r, "flops", where, positive=True, required=True)
        nbytes = _number(r, "bytes", where, positive=True, required=True)
        intensity = _number(r, "intensity", where, positive=True, required=False)
        unc = _number(r, "energy_uncertainty_j", where, positive=False, required=False)
        out.append(
            SweepRow(
                precision=_precision(r, where),
                intensity=intensity if math.isfinite(intensity) else flops / nbytes,
                flops=flops,
                bytes=nbytes,
                time_s=_number(r, "time_s", where, positive=True, required=True),
                energy_j=_number(r, "energy_j", where, positive=True, required=True),
                energy_uncertainty_j=unc if unc > 0.0 else math.nan,
                avg_power_w=_number(r, "avg_power_w", where, positive=True, required=False),
                idle_power_w=_number(r, "idle_power_w", where, positive=True, required=False),
                sm_clock_mhz=_number(r, "sm_clock_mhz", where, positive=True, required=False),
                power_limit_w=_number(r, "power_limit_w", where, positive=True, required=False),
            )
        )
    return out


def heldout_rows_from_dicts(rows: Sequence[Mapping[str, Any]], source: str = "held-out") -> list[HeldOutRow]:
    """Validate tidy dicts (as read from the held-out CSV) into :class:`HeldOutRow` objects."""
    _check_columns(rows, _HELDOUT_REQUIRED, source)
    out: list[HeldOutRow] = []
    for i, r in enumerate(rows):
        where = _where(source, i)
        name = str(r.get("name") or "").strip()
        if not name:
            raise InputError(f"{where}: missing value for 'name'")
        unc = _number(r, "energy_uncertainty_j", where, positive=False, required=False)
        cache = _number(r, "cache_bytes", where, positive=False, required=False)
        out.append(
            HeldOutRow(
                name=name,
                precision=_precision(r, where),
                flops=_number(r, "flops", where, positive=True, required=True),
                bytes=_number(r, "bytes", where, positive=True, required=True),
                time_s=_number(r, "time_s", where, positive=True, required=True),
                energy_j=_number(r, "energy_j", where, positive=True, required=True),
                energy_uncertainty_j=unc if unc > 0.0 else math.nan,
                cache_bytes=cache if math.isfinite(cache) and cache > 0.0 else 0.0,
            )
        )
    return out


def peaks_from_json(d: Any, source: str = "peaks") -> Peaks:
    """Validate a peaks object: ``{"copy_bytes_per_s", "peak_flops_per_s": {"single", "double"}, "power_limit_w"}``."""
    if not isinstance(d, Mapping):
        raise InputError(f"{source}: peaks must be a JSON object")
    flops = d.get("peak_flops_per_s")
    if not isinstance(flops, Mapping) or not flops:
        raise InputError(f"{source}: 'peak_flops_per_s' must map single/double to FLOP/s")
    peak: dict[str, float] = {}
    for k in flops:
        if k not in PRECISIONS:
            raise InputError(f"{source}: unknown precision {k!r} in 'peak_flops_per_s'")
        peak[k] = _number(flops, k, source, positive=True, required=True)
    return Peaks(
        copy_bytes_per_s=_number(d, "copy_bytes_per_s", source, positive=True, required=True),
        peak_flops_per_s=peak,
        power_limit_w=_number(d, "power_limit_w", source, positive=True, required=True),
        device=str(d.get("device") or ""),
    )


def read_sweep_csv(path: str | os.PathLike[str]) -> list[SweepRow]:
    """Read and validate a sweep table (columns in :data:`SWEEP_COLUMNS`)."""
    return sweep_rows_from_dicts(read_csv(path), source=str(path))


def read_heldout_csv(path: str | os.PathLike[str]) -> list[HeldOutRow]:
    """Read and validate a held-out kernel table (columns in :data:`HELDOUT_COLUMNS`)."""
    return heldout_rows_from_dicts(read_csv(path), source=str(path))


def read_peaks_json(path: str | os.PathLike[str]) -> Peaks:
    """Read and validate a peaks JSON file (see :func:`peaks_from_json`)."""
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: not valid JSON ({exc})") from None
    return peaks_from_json(d, source=str(p))

"""Sensor profiles: a fitted sensor model per GPU, driver and source, kept in the user's cache."""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archline.core.recording import Recording, Region
from archline.errors import ModelFileError, SensorError
from archline.measurement.calibrate.fit import SensorFit, fit_sensor
from archline.measurement.sensor_model import SensorModel, parse_kind
from archline.records import write_json

__all__ = [
    "PROFILE_SCHEMA",
    "PROFILE_SCHEMA_VERSION",
    "SensorProfile",
    "fit_profile",
    "load_profile",
    "profile_path",
    "save_profile",
    "sensor_cache_dir",
]

PROFILE_SCHEMA = "archline.sensor_profiles"
PROFILE_SCHEMA_VERSION = 1


def _now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class SensorProfile:
    """What a calibration found about one sensor channel of one GPU under one driver.

    Times in s, powers in W. ``model`` is what measurements use; the rest is the evidence:
    ``coverage`` is the fraction of each update period a reading responds to,
    ``repeat_fraction`` the share of readings equal to their predecessor (after the 4 ms
    rule) and ``stale_repeat_fraction`` the share of those taken while the power moved.
    """

    gpu_uuid: str
    driver_version: str
    source: str
    model: SensorModel
    idle_w: float | None = None
    active_idle_w: float | None = None
    tail_s: float | None = None
    repeat_fraction: float = 0.0
    stale_repeat_fraction: float = 0.0
    displaced_fraction: float = 0.0
    fit_rms_w: float | None = None
    findings: tuple[str, ...] = ()
    created_utc: str = field(default_factory=_now_utc)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.model.kind

    @property
    def coverage(self) -> float:
        return self.model.coverage

    @classmethod
    def from_fit(
        cls, fit: SensorFit, *, gpu_uuid: str, driver_version: str, source: str, extra: Mapping[str, Any] | None = None
    ) -> SensorProfile:
        checks = [
            {
                "name": c.name,
                "duration_s": c.duration_s,
                "count": c.count,
                "power_w": c.power_w,
                "model_median_error": c.model_median_error,
                "model_spread": c.model_spread,
                "naive_median_error": c.naive_median_error,
                "naive_spread": c.naive_spread,
                "resolvable": c.resolvable,
            }
            for c in fit.checks
        ]
        return cls(
            gpu_uuid=gpu_uuid,
            driver_version=driver_version,
            source=source,
            model=fit.model,
            idle_w=fit.idle.idle_w,
            active_idle_w=fit.idle.active_idle_w,
            tail_s=fit.tail_s,
            repeat_fraction=fit.repeat_fraction,
            stale_repeat_fraction=fit.stale_repeat_fraction,
            displaced_fraction=fit.displaced_fraction,
            fit_rms_w=fit.fit_rms_w,
            findings=fit.findings,
            extra={"candidates": list(fit.candidates), "checks": checks, "quantum_w": fit.quantum_w, **(extra or {})},
        )

    def to_json(self) -> dict[str, Any]:
        m = self.model
        return {
            "gpu_uuid": self.gpu_uuid,
            "driver_version": self.driver_version,
            "source": self.source,
            "created_utc": self.created_utc,
            "model": {
                "kind": m.kind,
                "period_s": m.period_s,
                "window_s": m.window_s,
                "lag_s": m.lag_s,
                "delay_s": m.delay_s,
                "period_jitter_s": m.period_jitter_s,
                "undisplace": m.undisplace,
                "noise_w": m.noise_w,
                "lag_sigma_s": m.lag_sigma_s,
                "delay_sigma_s": m.delay_sigma_s,
                "window_sigma_s": m.window_sigma_s,
                "edge_sigma_s": m.edge_sigma_s,
            },
            "coverage": self.coverage,
            "idle_w": self.idle_w,
            "active_idle_w": self.active_idle_w,
            "tail_s": self.tail_s,
            "repeat_fraction": self.repeat_fraction,
            "stale_repeat_fraction": self.stale_repeat_fraction,
            "displaced_fraction": self.displaced_fraction,
            "fit_rms_w": self.fit_rms_w,
            "findings": list(self.findings),
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "profile") -> SensorProfile:
        try:
            md = d["model"]
            model = SensorModel(
                kind=parse_kind(str(md["kind"])),
                period_s=float(md["period_s"]),
                window_s=None if md.get("window_s") is None else float(md["window_s"]),
                lag_s=float(md.get("lag_s", 0.0)),
                delay_s=float(md.get("delay_s", 0.0)),
                period_jitter_s=float(md.get("period_jitter_s", 0.0)),
                undisplace=bool(md.get("undisplace", False)),
                noise_w=None if md.get("noise_w") is None else float(md["noise_w"]),
                lag_sigma_s=float(md.get("lag_sigma_s", 0.0)),
                delay_sigma_s=float(md.get("delay_sigma_s", 0.0)),
                window_sigma_s=float(md.get("window_sigma_s", 0.0)),
                edge_sigma_s=None if md.get("edge_sigma_s") is None else float(md["edge_sigma_s"]),
                origin="profile",
            )
            return cls(
                gpu_uuid=str(d["gpu_uuid"]),
                driver_version=str(d["driver_version"]),
                source=str(d["source"]),
                model=model,
                idle_w=_opt(d.get("idle_w")),
                active_idle_w=_opt(d.get("active_idle_w")),
                tail_s=_opt(d.get("tail_s")),
                repeat_fraction=float(d.get("repeat_fraction", 0.0)),
                stale_repeat_fraction=float(d.get("stale_repeat_fraction", 0.0)),
                displaced_fraction=float(d.get("displaced_fraction", 0.0)),
                fit_rms_w=_opt(d.get("fit_rms_w")),
                findings=tuple(str(x) for x in d.get("findings", ())),
                created_utc=str(d.get("created_utc", "")),
                extra=dict(d.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelFileError(f"{where}: malformed sensor profile ({exc.__class__.__name__}: {exc})") from None


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def sensor_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/archline/sensors`` (default ``~/.cache/archline/sensors``)."""
    e = os.environ if env is None else env
    base = e.get("XDG_CACHE_HOME") or str(Path(e.get("HOME", str(Path.home()))) / ".cache")
    return Path(base) / "archline" / "sensors"


def profile_path(gpu_uuid: str, cache_dir: Path | None = None) -> Path:
    """The profile file of one GPU: ``<cache>/<gpu-uuid>.json``."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in gpu_uuid) or "unknown-gpu"
    return (cache_dir or sensor_cache_dir()) / f"{safe}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"schema": PROFILE_SCHEMA, "schema_version": PROFILE_SCHEMA_VERSION, "profiles": {}}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: corrupt sensor profile file ({exc})") from None
    if not isinstance(d, dict) or d.get("schema") != PROFILE_SCHEMA:
        raise ModelFileError(f"{path}: not an archline sensor profile file")
    if d.get("schema_version") != PROFILE_SCHEMA_VERSION:
        raise ModelFileError(
            f"{path}: sensor profile schema version {d.get('schema_version')} is not supported "
            f"(expects {PROFILE_SCHEMA_VERSION}); run the calibration again"
        )
    if not isinstance(d.get("profiles"), dict):
        raise ModelFileError(f"{path}: malformed sensor profile file (no 'profiles' object)")
    return d


def save_profile(profile: SensorProfile, cache_dir: Path | None = None) -> Path:
    """Store ``profile`` (atomically), replacing any profile of the same driver and source."""
    path = profile_path(profile.gpu_uuid, cache_dir)
    d = _read(path)
    d["gpu_uuid"] = profile.gpu_uuid
    d["profiles"].setdefault(profile.driver_version, {})[profile.source] = profile.to_json()
    write_json(path, d)
    return path


def load_profile(
    gpu_uuid: str, driver_version: str, source: str, cache_dir: Path | None = None
) -> SensorProfile | None:
    """The stored profile of this GPU, driver and source, or None if there is none.

    A profile measured under another driver is not used: the driver decides how the sensor
    is read out, so a new driver needs a new calibration.
    """
    path = profile_path(gpu_uuid, cache_dir)
    if not path.exists():
        return None
    d = _read(path)
    entry = d["profiles"].get(driver_version, {}).get(source)
    if entry is None:
        return None
    return SensorProfile.from_json(entry, where=str(path))


def fit_profile(
    recording: Recording,
    loads: Sequence[Region],
    source: str = "nvml.buffer",
    *,
    gpu_uuid: str | None = None,
    driver_version: str | None = None,
) -> SensorProfile:
    """Fit the sensor profile of ``source`` from a recording of known loads.

    The GPU UUID and driver version default to ``recording.meta['gpu_uuid']`` and
    ``recording.meta['driver_version']``.
    """
    r = recording.get(source)
    if r is None:
        raise SensorError(f"the recording has no source {source!r} (it has: {', '.join(sorted(recording.readings))})")
    if r.quantity != "power":
        raise SensorError(f"source {source!r} measures {r.quantity}, not power")
    fit = fit_sensor(r, loads)
    uuid = gpu_uuid or str(recording.meta.get("gpu_uuid", "unknown-gpu"))
    drv = driver_version or str(recording.meta.get("driver_version", "unknown-driver"))
    return SensorProfile.from_fit(fit, gpu_uuid=uuid, driver_version=drv, source=source)

"""One way to choose a sensor model, for every entry point: override, calibration, prior, or the recording.

Order (issue 11): an explicit override; else the stored calibration of this GPU and driver
(``archline sensor calibrate``); else a prior for this GPU's generation, taken from the
calibrations shipped under ``results/<gpu>/sensor/calibration`` and refined by the recording
when it shows enough rising edges; else inference from the recording alone. Every result
says which one it used (:attr:`ModelChoice.describe`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from archline.core.readings import Readings
from archline.errors import ArchlineError
from archline.measurement.calibrate.profile import SensorProfile, load_profile
from archline.measurement.sensor_model import SensorModel, infer_model
from archline.records.shipped import shipped_roots

__all__ = ["GpuIdentity", "ModelChoice", "choose_model", "generation", "shipped_priors"]

How = Literal["override", "calibration", "prior", "inferred"]


@dataclass(frozen=True)
class GpuIdentity:
    """What picks a calibration or a prior: the board's UUID, its driver and its product name."""

    uuid: str
    driver: str
    name: str

    @classmethod
    def from_static(cls, static: Mapping[str, Any]) -> GpuIdentity:
        return cls(str(static.get("uuid", "")), str(static.get("driver_version", "")), str(static.get("name", "")))


@dataclass(frozen=True)
class ModelChoice:
    """The sensor model used, how it was chosen, and from what (a board's UUID prefix, a file)."""

    model: SensorModel
    how: How
    detail: str

    @property
    def describe(self) -> str:
        return f"sensor model: {self.model.kind}, {self.how} ({self.detail})"


#: Product-name fragments → generation, for priors shared by boards of one generation.
_GENERATIONS = (
    ("Hopper", ("H100", "H200", "H800", "H20", "GH200")),
    ("Blackwell", ("B100", "B200", "GB200", "B300", "RTX PRO 6000", "RTX 50")),
    ("Ada", ("L40", "L4", "RTX 40", "RTX 6000 Ada")),
    ("Ampere", ("A100", "A800", "A40", "A30", "A10", "RTX 30", "RTX A")),
    ("Volta", ("V100", "TITAN V")),
)


def generation(name: str) -> str | None:
    """The GPU generation a product name belongs to (None if unknown)."""
    for gen, fragments in _GENERATIONS:
        if any(f.lower() in name.lower() for f in fragments):
            return gen
    return None


@lru_cache(maxsize=4)
def _shipped(roots: tuple[Path, ...]) -> tuple[tuple[str, str, str, SensorProfile], ...]:
    out: list[tuple[str, str, str, SensorProfile]] = []
    for root in roots:
        for path in sorted(root.glob("*/sensor/calibration/profiles.json")):
            try:
                name = str(json.loads((path.parent / "manifest.json").read_text())["gpu"]["name"])
                for source, entry in json.loads(path.read_text())["profiles"].items():
                    prof = SensorProfile.from_json(entry, where=str(path))
                    out.append((name, source, str(path), prof))
            except (OSError, KeyError, TypeError, ValueError, ArchlineError):
                continue  # a damaged shipped file is no prior; it never stops a measurement
    return tuple(out)


def shipped_priors(name: str, source: str, roots: tuple[Path, ...] | None = None) -> list[tuple[str, SensorProfile]]:
    """Shipped calibrations of ``source`` for this product first, then for its generation."""
    entries = _shipped(roots if roots is not None else tuple(shipped_roots()))
    same = [(p, prof) for n, s, p, prof in entries if s == source and n == name]
    gen = generation(name)
    kin = [(p, prof) for n, s, p, prof in entries if s == source and gen is not None and generation(n) == gen]
    return same + [k for k in kin if k not in same]


def _refined(prior: SensorModel, readings: Readings | None) -> tuple[SensorModel, str]:
    """The prior, with the lag the recording's own rising edges show when they show the same kind."""
    if readings is None or len(readings) < 8:
        return prior, "as shipped"
    try:
        seen = infer_model(readings)
    except ArchlineError:
        return prior, "as shipped"
    if seen.identified and seen.kind == prior.kind == "lagged" and 0.3 < seen.lag_s / max(prior.lag_s, 1e-9) < 3:
        refined = dataclasses.replace(prior, lag_s=seen.lag_s, lag_sigma_s=seen.lag_sigma_s)
        return refined, "lag refined by the recording"
    return prior, "as shipped"


def choose_model(
    source: str,
    readings: Readings | None,
    *,
    override: SensorModel | None = None,
    identity: GpuIdentity | None = None,
    cache_dir: Path | None = None,
    roots: tuple[Path, ...] | None = None,
) -> ModelChoice:
    """The sensor model for ``source`` of this GPU (see the module docstring for the order)."""
    if override is not None:
        return ModelChoice(override, "override", "given by the caller")
    if identity is not None and identity.uuid:
        prof = load_profile(identity.uuid, identity.driver, source, cache_dir)
        if prof is not None:
            return ModelChoice(prof.model, "calibration", f"{identity.uuid[:12]}, driver {identity.driver}")
        priors = shipped_priors(identity.name, source, roots)
        if priors:
            path, prof = priors[0]
            model, how = _refined(prof.model, readings)
            board = f"{prof.gpu_uuid[:12]}" if prof.gpu_uuid else Path(path).parent.parent.parent.name
            return ModelChoice(model, "prior", f"shipped calibration of {board} ({generation(identity.name)}), {how}")
    if readings is None or len(readings) < 3:
        raise ArchlineError(f"no {source} readings to infer a sensor model from, and no calibration or prior")
    return ModelChoice(infer_model(readings), "inferred", "from this recording alone")

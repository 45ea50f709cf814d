"""The H200 probe recording (tests/data): NVML buffer, fields and energy counter, and the known loads."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from archline.core.readings import Readings
from archline.core.recording import Region

DATA = Path(__file__).resolve().parent.parent / "data"


@functools.lru_cache(maxsize=1)
def _npz() -> dict[str, np.ndarray]:
    with np.load(DATA / "h200_probe_sensor.npz") as z:
        return {k: z[k] for k in z.files}


def buffer() -> Readings:
    """NVML's 20 ms sample buffer: its own µs timestamps, mW values."""
    b = _npz()["buf"]
    return Readings("nvml.buffer", "power", b[:, 0] / 1e6, b[:, 1] / 1e3)


def field(field_id: int) -> Readings:
    """Field 186 (instant) or 185 (average), stamped at the host time of each query."""
    f = _npz()["fields"]
    m = f[:, 1] == field_id
    name = {186: "nvml.instant", 185: "nvml.average"}[field_id]
    return Readings(name, "power", f[m, 0] / 1e9, f[m, 3] / 1e3)


def energy() -> Readings:
    """The cumulative energy counter (J), stamped at the middle of each 2–4 ms call."""
    e = _npz()["energy"]
    return Readings("nvml.energy", "energy", (e[:, 0] + e[:, 1]) / 2e9, e[:, 2] / 1e3)


@functools.lru_cache(maxsize=1)
def loads() -> tuple[Region, ...]:
    """The FP32-FMA kernels, with the kernels' own %globaltimer stamps as the truth."""
    ev = json.loads((DATA / "h200_probe_events.json").read_text())
    return tuple(Region(e[0], e[3] / 1e9, e[4] / 1e9, how="globaltimer") for e in ev)

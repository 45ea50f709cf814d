"""The most power a kernel can draw while it runs: the limit where it runs on, a measured burst ceiling between others.

The board's power limit is enforced on an average: a bf16 GEMM of 0.02–1.4 ms between idle gaps drew
up to 1016 W while it ran on five H100s limited to 700 W, at the full SM clock, and about 700 W back to back,
its clock held by the software power cap (``benchmarks/burst_power.py``, results/h100/bench/burst-power/).
So a kernel's mean power is bounded by the limit only where it fills the board's time; a kernel that
runs in bursts among lower-power ones is bounded by what such a kernel was measured to draw.

A column's bound is ``min(C, L / f)``, ``L`` the limit × :data:`LIMIT_SLACK`, ``C`` the burst ceiling ×
LIMIT_SLACK (at least ``L``), ``f`` the column's largest share of any window's time: assuming a window's
average cannot exceed the limit (the limiter's time constant is not measured), and the rest of the window
draws at least nothing. Calls long enough to be integrated are not among a window's busy times, so beside
one ``f`` is overstated and the bound tighter. Without a measured ceiling ``C = L``: every column is
bounded by the limit, as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.records.shipped import shipped_roots

__all__ = [
    "AT_LIMIT_FRACTION",
    "AT_LIMIT_WARN",
    "BURST_GLOB",
    "LIMIT_SLACK",
    "AtLimit",
    "BurstCeiling",
    "at_limit",
    "at_limit_warning",
    "ceiling_from_file",
    "kernel_bounds",
    "shipped_burst_ceiling",
]

F64 = NDArray[np.float64]

#: How far above a bound a power may be before it is impossible (sensor and clock tolerance).
LIMIT_SLACK = 1.05
#: Where the burst measurements of a shipped results folder are (``<root>/<gpu>/bench/burst-power/``).
BURST_GLOB = "*/bench/burst-power/burst_power-*.json"


#: A power-buffer reading at or above this share of the enforced limit counts as the board at its limit.
AT_LIMIT_FRACTION = 0.97
#: From this share of the busy readings at the limit on, a run's notes warn that the per-kernel model may not hold.
#: Session 30, a warning, nothing scored by it; on the shipped runs of sessions 22–30 (docs/data/at_limit_s30.txt,
#: scripts/at_limit_s30.sh): 0–2.6 % on the H100 transformer and ResNet-50 runs, 0 % on the H200s at batch 16,
#: 4.3–10.2 % on VGG-16, 30.2–33.7 % on the H200s at batch 128, 55.7–68.3 % on the d = 2048 transformer.
AT_LIMIT_WARN = 0.25


@dataclass(frozen=True)
class AtLimit:
    """The share of the power buffer's readings at the power limit over a program's traced busy span (its first
    kernel's start to its last one's end, idle gaps inside it included)."""

    share: float
    readings: int
    limit_w: float

    def to_json(self) -> dict[str, float | int]:
        return {"share": self.share, "readings": self.readings, "limit_w": self.limit_w, "fraction": AT_LIMIT_FRACTION}

    @property
    def warned(self) -> bool:
        return self.readings > 0 and self.share >= AT_LIMIT_WARN

    def warning(self) -> str:
        return (
            f"the board was at its power limit (≥ {100 * AT_LIMIT_FRACTION:.0f} % of {self.limit_w:.0f} W) in "
            f"{100 * self.share:.0f} % of the power buffer's {self.readings} readings from the first kernel to the "
            "last: its power controller then lowers the clocks, so a kernel's power depends on what runs around it, "
            "which the per-kernel fit does not model; rows can disagree with graph replay's isolated energies, "
            "measured below the limit (docs/attribution.md, 'Session 30')"
        )


def at_limit_warning(extra: Mapping[str, Any]) -> str | None:
    """The warning an attribution's ``extra["at_limit"]`` calls for, or None (below the share, or not measured)."""
    got = extra.get("at_limit")
    if not isinstance(got, Mapping):
        return None
    try:
        lim = AtLimit(float(got["share"]), int(got["readings"]), float(got["limit_w"]))
    except (KeyError, TypeError, ValueError):
        return None
    return lim.warning() if lim.warned else None


def at_limit(t_s: F64, power_w: F64, busy: tuple[float, float], limit_w: float) -> AtLimit:
    """The share of the readings taken inside ``busy`` (the first kernel's start to the last one's end, on the
    readings' clock) at or above :data:`AT_LIMIT_FRACTION` × ``limit_w``."""
    t = np.asarray(t_s, np.float64)
    p = np.asarray(power_w, np.float64)
    inside = (t >= busy[0]) & (t <= busy[1]) & np.isfinite(p)
    n = int(inside.sum())
    share = float(np.mean(p[inside] >= AT_LIMIT_FRACTION * limit_w)) if n else 0.0
    return AtLimit(share, n, float(limit_w))


@dataclass(frozen=True)
class BurstCeiling:
    """The highest board power a kernel was measured to draw while it ran (W), where, and on which board."""

    power_w: float
    board: str
    uuid: str
    source: str

    def describe(self) -> str:
        return (
            f"{self.power_w:.0f} W, the most a bf16 GEMM between idle gaps drew while it ran on an {self.board} "
            f"({self.uuid[:12]}, {self.source})"
        )


def ceiling_from_file(path: Path) -> BurstCeiling | None:
    """The ceiling a burst measurement (``burst_power.py --json``) shows: its highest GEMM power among the rows
    measured above the limit × 1.05 by more than 2 σ; None where no row is (the limit holds), or the file is
    not such a measurement."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data["rows"]
        above = [float(r["gemm_w"]) for r in rows if r.get("verdict") == "above" and math.isfinite(float(r["gemm_w"]))]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not above:
        return None
    return BurstCeiling(max(above), str(data.get("board", "")), str(data.get("uuid", "")), str(path))


def shipped_burst_ceiling(board: str, roots: list[Path] | None = None) -> BurstCeiling | None:
    """The highest shipped burst ceiling of boards named ``board`` (NVML's name, e.g. 'NVIDIA H100 80GB HBM3'),
    None where archline ships no burst measurement of that board."""
    best: BurstCeiling | None = None
    for root in shipped_roots() if roots is None else roots:
        for path in sorted(root.glob(BURST_GLOB)):
            c = ceiling_from_file(path)
            if c is not None and c.board == board and (best is None or c.power_w > best.power_w):
                best = replace(c, source=f"{root.name}/{path.relative_to(root)}")
    return best


def kernel_bounds(x: F64, limit_w: float | None, ceiling_w: float | None = None) -> F64:
    """Each column's bound on its mean power (W) from the windows' busy times ``x`` (windows × columns, s; the
    short calls' and gaps' columns of a window together cover its time, but for integrated long calls):
    ``min(C, L / f)`` (module docstring). inf where no limit."""
    n = x.shape[1]
    if limit_w is None or not limit_w > 0:
        return np.full(n, np.inf)
    cap = LIMIT_SLACK * limit_w
    burst = LIMIT_SLACK * max(limit_w, ceiling_w) if ceiling_w is not None and ceiling_w > 0 else cap
    if burst <= cap or x.shape[0] == 0:
        return np.full(n, cap)
    span = x.sum(axis=1)
    share = np.divide(x, span[:, None], out=np.zeros_like(x), where=span[:, None] > 0)
    f: F64 = share.max(axis=0)
    by_share: F64 = np.divide(cap, f, out=np.full_like(f, np.inf), where=f > 0)
    return np.minimum(burst, by_share)

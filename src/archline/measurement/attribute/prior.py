"""Priors on each kernel's power for attribution: from graph replay, a counted energy model, or a weak default."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from archline.core.activity import demangle

__all__ = ["REPLAY_MIN_REL_SD", "REPLAY_TINY_REL_SD", "KernelPrior", "dominance", "priors_from_replay"]

#: A replay's isolated energy carries the idle share of the replay and the timing of its
#: neighbours (docs/replay.md): with ``prior_scale="fixed"`` a replay prior is never taken as
#: tighter than this fraction (``"fit"`` calibrates the scale and spread on the run instead).
REPLAY_MIN_REL_SD = 0.15
#: The smallest relative spread ``priors_from_replay`` gives by default, so a replay without
#: repeats (σ = 0) still makes a valid prior.
REPLAY_TINY_REL_SD = 1e-3


@dataclass(frozen=True)
class KernelPrior:
    """What is known about one kernel name before the run: energy per call (J) with a 1 σ spread.

    ``source`` names where it came from (``replay``, ``model``); the attribution turns it into
    a prior on the kernel's power while it runs, dividing by the mean call time it traced.
    """

    energy_per_call_j: float
    sd_j: float
    source: str = "replay"
    #: The relative spread of this kernel's energy with its neighbours, measured where the prior came from
    #: (graph replay's randomized design: its ρ's 95 % bound); NaN where nothing measured it.
    context_rel_sd: float = math.nan
    #: The kernel's time per call where the prior was measured (s); NaN where unknown.
    time_per_call_s: float = math.nan

    def __post_init__(self) -> None:
        if not (math.isfinite(self.energy_per_call_j) and self.energy_per_call_j > 0):
            raise ValueError(f"prior energy per call must be positive, not {self.energy_per_call_j!r}")
        if not (math.isfinite(self.sd_j) and self.sd_j > 0):
            raise ValueError(f"prior spread must be positive, not {self.sd_j!r}")


def priors_from_replay(
    rows: Iterable[Mapping[str, Any]] | Any, *, min_rel_sd: float = REPLAY_TINY_REL_SD
) -> dict[str, KernelPrior]:
    """Priors from graph replay's isolated energies: a ``ReplayResult``, or the rows of ``replay.csv``.

    Names are demangled as the attribution's are. Each group's isolated energy per replay is
    divided by its nodes per step; the spread is the
    larger of its measured σ and ``min_rel_sd`` of the energy (by default a tiny floor: how far the
    isolated energy is from the in-context one is the attribution's to calibrate, see ``prior_fit.py``).
    The lumped rest and copy groups give none.
    """
    if hasattr(rows, "rows"):
        rows = [r.to_row() for r in rows.rows]
    rows = list(rows)
    # Graph nodes carry mangled names (cuFuncGetName); the attribution's rows are demangled.
    names = demangle([str(r.get("group", "")) for r in rows])
    out: dict[str, KernelPrior] = {}
    for r in rows:
        name = str(r.get("group", ""))
        if not name or name.startswith("["):
            continue
        try:
            n = int(r.get("nodes_per_step") or 0)
            e = float(r.get("energy_j") or math.nan)
            s = float(r.get("energy_sigma_j") or 0.0)
        except (TypeError, ValueError):
            continue
        if n <= 0 or not math.isfinite(e) or e <= 0:
            continue
        e_call = e / n
        sd = max(abs(s) / n if math.isfinite(s) else 0.0, min_rel_sd * e_call, REPLAY_TINY_REL_SD * 1e-3 * e_call)
        out[names.get(name, name)] = KernelPrior(e_call, sd, "replay")
    return out


def dominance(data_weight: float) -> str:
    """``data`` (≥ 0.8 of the estimate from the data), ``prior`` (≤ 0.2) or ``mixed``.

    ``data_weight`` is 1 − posterior variance / prior variance of the row's power.
    """
    if data_weight >= 0.8:
        return "data"
    if data_weight <= 0.2:
        return "prior"
    return "mixed"

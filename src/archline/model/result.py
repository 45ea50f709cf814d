"""The complete energy-roofline result for one GPU: the model file's content."""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field

from archline.model.balance import Balances, RaceToHalt
from archline.model.capped import CapComparison
from archline.model.components import CountedSummary
from archline.model.fit import EnergyFit
from archline.model.parameters import ParameterSet
from archline.model.predict import HeldOutSummary
from archline.model.sweep import Peaks
from archline.model.time_costs import TimeCosts

__all__ = ["MODEL_SCHEMA", "MODEL_SCHEMA_VERSION", "RooflineModel"]

MODEL_SCHEMA = "archline.roofline_model"
MODEL_SCHEMA_VERSION = 1


def _now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RooflineModel:
    """Fit, measured time costs, derived balances, cap comparison and held-out predictions of one GPU.

    ``parameters`` is what predictions need (θ, its covariance and the power limit); the rest
    records how the model was obtained and how well it explains the data. ``counted`` holds the
    held-out predictions from Nsight Compute counts and component energies (Choi §V-C extended). ``idle_power_w``
    is the median idle power of the sweep rows, to set beside the fitted π0.
    """

    device: str
    peaks: Peaks
    time_costs: TimeCosts
    fit: EnergyFit
    parameters: ParameterSet
    balances: dict[str, Balances]
    race_to_halt: RaceToHalt
    capped: CapComparison
    heldout: HeldOutSummary | None = None
    counted: CountedSummary | None = None
    idle_power_w: float = math.nan
    notes: tuple[str, ...] = ()
    created_utc: str = field(default_factory=_now_utc)
    schema: str = MODEL_SCHEMA
    schema_version: int = MODEL_SCHEMA_VERSION

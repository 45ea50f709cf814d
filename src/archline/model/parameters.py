"""The fitted machine as one parameter vector with its covariance: energy coefficients plus measured time costs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.errors import InputError
from archline.model.energy_roofline import RooflineParams
from archline.model.fit import EnergyFit
from archline.model.time_costs import TimeCosts
from archline.model.uncertainty import propagate

__all__ = ["ParameterSet", "make_parameter_set"]

_TAU_NAMES = {"single": "tau_flop_single_s", "double": "tau_flop_double_s"}
_TAU_MEM = "tau_mem_s_per_b"


@dataclass(frozen=True)
class ParameterSet:
    """θ = (ε_s, ε_mem, π0[, Δ_d], τ_flop per precision, τ_mem) with a block-diagonal covariance.

    The energy block comes from the fit of eq. (9); the time costs are measured independently
    (their variances from the spread at the sweep's ends), so the blocks do not covary.
    ``power_limit_w`` is the board's enforced limit, used by the cap-aware model.
    """

    names: tuple[str, ...]
    values: tuple[float, ...]
    covariance: tuple[tuple[float, ...], ...]
    precisions: tuple[str, ...]
    power_limit_w: float

    @property
    def theta(self) -> NDArray[np.float64]:
        return np.asarray(self.values, dtype=float)

    @property
    def cov(self) -> NDArray[np.float64]:
        return np.asarray(self.covariance, dtype=float)

    def params(self, precision: str, theta: Sequence[float] | NDArray[np.float64] | None = None) -> RooflineParams:
        """The machine for ``precision`` at ``theta`` (default: the fitted values)."""
        if precision not in self.precisions:
            raise InputError(f"model: no {precision}-precision parameters (fitted: {', '.join(self.precisions)})")
        t = self.theta if theta is None else np.asarray(theta, dtype=float)
        v = dict(zip(self.names, t, strict=True))
        eps = v["eps_s_j"] + (v.get("delta_d_j", 0.0) if precision == "double" else 0.0)
        return RooflineParams(
            tau_flop_s=float(v[_TAU_NAMES[precision]]),
            tau_mem_s_per_b=float(v[_TAU_MEM]),
            eps_flop_j=float(eps),
            eps_mem_j_per_b=float(v["eps_mem_j_per_b"]),
            pi0_w=float(v["pi0_w"]),
        )

    def propagate(self, precision: str, fn: Callable[[RooflineParams], float]) -> tuple[float, float]:
        """``fn`` of the machine for ``precision`` and its 1-sigma error (delta method over θ)."""
        return propagate(lambda t: fn(self.params(precision, t)), self.theta, self.cov)


def make_parameter_set(fit: EnergyFit, times: TimeCosts, power_limit_w: float) -> ParameterSet:
    """Join the energy fit and the measured time costs into one :class:`ParameterSet`."""
    precisions = tuple(p for p in ("single", "double") if p in times.tau_flop_s)
    if "double" in precisions and "delta_d_j" not in fit.names:
        raise InputError("model: double-precision time costs but no Δ_d in the energy fit")
    names = (*fit.names, *(_TAU_NAMES[p] for p in precisions), _TAU_MEM)
    values = (
        *fit.values,
        *(times.tau_flop_s[p].value for p in precisions),
        times.tau_mem_s_per_b.value,
    )
    k = len(fit.names)
    tau_se = [times.tau_flop_s[p].stderr for p in precisions] + [times.tau_mem_s_per_b.stderr]
    cov = np.zeros((len(names), len(names)))
    cov[:k, :k] = np.asarray(fit.covariance)
    cov[k:, k:] = np.diag(np.nan_to_num(np.square(tau_se), nan=0.0))
    return ParameterSet(
        names=tuple(names),
        values=tuple(float(v) for v in values),
        covariance=tuple(tuple(float(c) for c in row) for row in cov),
        precisions=precisions,
        power_limit_w=float(power_limit_w),
    )

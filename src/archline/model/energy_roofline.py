"""The energy-roofline equations of Choi et al. (IPDPS 2013): time roofline, arch line and power line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "Overlap",
    "RooflineParams",
    "arch_line",
    "effective_energy_balance",
    "effective_energy_balance_point",
    "energy_j",
    "power_line_w",
    "roofline",
    "time_s",
]

Overlap = Literal["perfect", "none"]


@dataclass(frozen=True)
class RooflineParams:
    """The machine of §II for one precision, in SI units.

    ``tau_flop_s`` s/flop, ``tau_mem_s_per_b`` s/B, ``eps_flop_j`` J/flop, ``eps_mem_j_per_b``
    J/B, ``pi0_w`` constant power (W).
    """

    tau_flop_s: float
    tau_mem_s_per_b: float
    eps_flop_j: float
    eps_mem_j_per_b: float
    pi0_w: float

    @property
    def b_tau(self) -> float:
        """Time balance B_τ = τ_mem/τ_flop (flop/B)."""
        return self.tau_mem_s_per_b / self.tau_flop_s

    @property
    def b_eps(self) -> float:
        """Energy balance B_ε = ε_mem/ε_flop (flop/B)."""
        return self.eps_mem_j_per_b / self.eps_flop_j

    @property
    def eps0_j(self) -> float:
        """Constant energy per flop ε_0 = π0·τ_flop (J)."""
        return self.pi0_w * self.tau_flop_s

    @property
    def eps_hat_flop_j(self) -> float:
        """Actual energy of one flop with constant power, ε̂_flop = ε_flop + ε_0 (J)."""
        return self.eps_flop_j + self.eps0_j

    @property
    def eta_flop(self) -> float:
        """Constant-flop energy efficiency η_flop = ε_flop/ε̂_flop."""
        return self.eps_flop_j / self.eps_hat_flop_j

    @property
    def pi_flop_w(self) -> float:
        """Power of flops alone, π_flop = ε_flop/τ_flop (W)."""
        return self.eps_flop_j / self.tau_flop_s

    @property
    def max_power_w(self) -> float:
        """Uncapped power at I = B_τ, eq. (8) plus constant power: π0 + π_flop(1 + B_ε/B_τ) (W)."""
        return self.pi0_w + self.pi_flop_w * (1.0 + self.b_eps / self.b_tau)


def _as(x: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(x, dtype=float)


def _out(x: NDArray[np.float64]) -> float | NDArray[np.float64]:
    # Scalars in, scalar out: callers computing one kernel get a plain float.
    return float(x) if x.ndim == 0 else x


def time_s(
    flops: ArrayLike, nbytes: ArrayLike, p: RooflineParams, overlap: Overlap = "perfect"
) -> float | NDArray[np.float64]:
    """Eq. (1)/(3): T = max(W·τ_flop, Q·τ_mem); with ``overlap='none'``, T = W·τ_flop + Q·τ_mem."""
    t_flops = _as(flops) * p.tau_flop_s
    t_mem = _as(nbytes) * p.tau_mem_s_per_b
    t = np.maximum(t_flops, t_mem) if overlap == "perfect" else t_flops + t_mem
    return _out(t)


def energy_j(flops: ArrayLike, nbytes: ArrayLike, t_s: ArrayLike, p: RooflineParams) -> float | NDArray[np.float64]:
    """Eq. (2)/(4): E = W·ε_flop + Q·ε_mem + π0·T."""
    e = _as(flops) * p.eps_flop_j + _as(nbytes) * p.eps_mem_j_per_b + p.pi0_w * _as(t_s)
    return _out(e)


def effective_energy_balance(intensity: ArrayLike, p: RooflineParams) -> float | NDArray[np.float64]:
    """Eq. (6): B̂_ε(I) = η_flop·B_ε + (1 − η_flop)·max(0, B_τ − I) (flop/B)."""
    i = _as(intensity)
    eta = p.eta_flop
    b = eta * p.b_eps + (1.0 - eta) * np.maximum(0.0, p.b_tau - i)
    return _out(b)


def effective_energy_balance_point(p: RooflineParams) -> float:
    """The intensity I* with B̂_ε(I*) = I*, where the arch line is half its peak (Fig. 4's B̂_ε).

    Solving eq. (6): I* = η·B_ε when that is ≥ B_τ, else I* = (η·B_ε + (1−η)·B_τ)/(2 − η).
    """
    eta = p.eta_flop
    if eta * p.b_eps >= p.b_tau:
        return eta * p.b_eps
    return (eta * p.b_eps + (1.0 - eta) * p.b_tau) / (2.0 - eta)


def roofline(intensity: ArrayLike, p: RooflineParams) -> float | NDArray[np.float64]:
    """Normalised speed W·τ_flop/T = min(1, I/B_τ) (Fig. 2a, red)."""
    i = _as(intensity)
    return _out(np.minimum(1.0, i / p.b_tau))


def arch_line(intensity: ArrayLike, p: RooflineParams) -> float | NDArray[np.float64]:
    """Normalised energy efficiency W·ε̂_flop/E = 1/(1 + B̂_ε(I)/I), eq. (5) (Fig. 2a, blue)."""
    i = _as(intensity)
    return _out(1.0 / (1.0 + _as(effective_energy_balance(i, p)) / i))


def power_line_w(intensity: ArrayLike, p: RooflineParams) -> float | NDArray[np.float64]:
    """Eq. (7): average power P = (π_flop/η_flop)·[min(I, B_τ)/B_τ + B̂_ε(I)/max(I, B_τ)] (W).

    Computed as E/T per byte moved, which equals eq. (7) and stays finite when ε_flop = 0.
    """
    i = _as(intensity)
    t_per_b = np.maximum(i * p.tau_flop_s, p.tau_mem_s_per_b)
    e_per_b = i * p.eps_flop_j + p.eps_mem_j_per_b + p.pi0_w * t_per_b
    return _out(e_per_b / t_per_b)

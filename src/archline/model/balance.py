"""Derived balances of §II (B_τ, B_ε, ε_0, η_flop, B̂_ε, balance gap) and the race-to-halt verdict."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from archline.model.energy_roofline import RooflineParams, effective_energy_balance_point
from archline.model.parameters import ParameterSet

__all__ = ["BALANCE_FIELDS", "Balances", "RaceToHalt", "balances_from_params", "measured_balances", "race_to_halt"]

#: Field → (unit, meaning) of :class:`Balances`, in the order of the paper's Table I/II.
BALANCE_FIELDS: dict[str, tuple[str, str]] = {
    "tau_flop_s": ("s/flop", "time per flop τ_flop"),
    "tau_mem_s_per_b": ("s/B", "time per DRAM byte τ_mem"),
    "b_tau": ("flop/B", "time balance B_τ = τ_mem/τ_flop"),
    "eps_flop_j": ("J/flop", "energy per flop ε_flop"),
    "eps_mem_j_per_b": ("J/B", "energy per DRAM byte ε_mem"),
    "b_eps": ("flop/B", "energy balance B_ε = ε_mem/ε_flop"),
    "pi0_w": ("W", "constant power π0"),
    "eps0_j": ("J/flop", "constant energy per flop ε_0 = π0·τ_flop"),
    "eps_hat_flop_j": ("J/flop", "actual energy per flop ε̂_flop = ε_flop + ε_0"),
    "eta_flop": ("", "constant-flop energy efficiency η_flop = ε_flop/ε̂_flop"),
    "pi_flop_w": ("W", "flop power π_flop = ε_flop/τ_flop"),
    "b_eps_hat_point": ("flop/B", "effective energy-balance point: I with B̂_ε(I) = I"),
    "balance_gap": ("", "balance gap B_ε/B_τ"),
    "effective_gap": ("", "effective balance gap B̂_ε point / B_τ"),
    "max_power_w": ("W", "uncapped model power at I = B_τ"),
}

_GETTERS: dict[str, Callable[[RooflineParams], float]] = {
    "tau_flop_s": lambda p: p.tau_flop_s,
    "tau_mem_s_per_b": lambda p: p.tau_mem_s_per_b,
    "b_tau": lambda p: p.b_tau,
    "eps_flop_j": lambda p: p.eps_flop_j,
    "eps_mem_j_per_b": lambda p: p.eps_mem_j_per_b,
    "b_eps": lambda p: p.b_eps,
    "pi0_w": lambda p: p.pi0_w,
    "eps0_j": lambda p: p.eps0_j,
    "eps_hat_flop_j": lambda p: p.eps_hat_flop_j,
    "eta_flop": lambda p: p.eta_flop,
    "pi_flop_w": lambda p: p.pi_flop_w,
    "b_eps_hat_point": effective_energy_balance_point,
    "balance_gap": lambda p: p.b_eps / p.b_tau,
    "effective_gap": lambda p: effective_energy_balance_point(p) / p.b_tau,
    "max_power_w": lambda p: p.max_power_w,
}


@dataclass(frozen=True)
class Balances:
    """The derived quantities of one machine and precision (fields as in :data:`BALANCE_FIELDS`).

    ``stderr`` maps a field to its 1-sigma error where the machine was measured (empty for
    the paper's reference platforms). ``race_to_halt`` is True when B̂_ε's point ≤ B_τ: a
    kernel that is compute-bound in time is then within a factor 2 of its best energy
    efficiency (§II-D, §V-B).
    """

    precision: str
    tau_flop_s: float
    tau_mem_s_per_b: float
    b_tau: float
    eps_flop_j: float
    eps_mem_j_per_b: float
    b_eps: float
    pi0_w: float
    eps0_j: float
    eps_hat_flop_j: float
    eta_flop: float
    pi_flop_w: float
    b_eps_hat_point: float
    balance_gap: float
    effective_gap: float
    max_power_w: float
    race_to_halt: bool
    stderr: dict[str, float] = field(default_factory=dict)


def _safe(fn: Callable[[RooflineParams], float], p: RooflineParams) -> float:
    try:
        return float(fn(p))
    except ZeroDivisionError:
        return math.nan


def balances_from_params(precision: str, p: RooflineParams, stderr: Mapping[str, float] | None = None) -> Balances:
    """All derived quantities of ``p`` (no uncertainties unless ``stderr`` is given)."""
    vals = {k: _safe(fn, p) for k, fn in _GETTERS.items()}
    return Balances(
        precision=precision,
        race_to_halt=bool(vals["effective_gap"] <= 1.0),
        stderr=dict(stderr or {}),
        **vals,
    )


def measured_balances(params: ParameterSet) -> dict[str, Balances]:
    """Derived quantities per fitted precision, with 1-sigma errors by the delta method."""
    out: dict[str, Balances] = {}
    for prec in params.precisions:
        se = {k: params.propagate(prec, lambda p, fn=fn: _safe(fn, p))[1] for k, fn in _GETTERS.items()}  # type: ignore[misc]
        out[prec] = balances_from_params(prec, params.params(prec), se)
    return out


@dataclass(frozen=True)
class RaceToHalt:
    """Whether race-to-halt holds on the measured GPU, compared with the paper's GTX 580.

    Per precision: the measured effective gap (B̂_ε point / B_τ) and raw gap (B_ε/B_τ), the
    GTX 580's, and a one-line ``verdict`` built from those numbers.
    """

    holds: dict[str, bool]
    effective_gap: dict[str, float]
    balance_gap: dict[str, float]
    reference_effective_gap: dict[str, float]
    reference_balance_gap: dict[str, float]
    reference_name: str
    verdict: dict[str, str]


def race_to_halt(
    measured: Mapping[str, Balances], reference: Mapping[str, Balances], reference_name: str
) -> RaceToHalt:
    """Compare the measured balance gaps with the reference platform's, precision by precision."""
    holds: dict[str, bool] = {}
    eff: dict[str, float] = {}
    raw: dict[str, float] = {}
    ref_eff: dict[str, float] = {}
    ref_raw: dict[str, float] = {}
    verdict: dict[str, str] = {}
    for prec, b in measured.items():
        holds[prec] = b.race_to_halt
        eff[prec], raw[prec] = b.effective_gap, b.balance_gap
        r = reference.get(prec)
        ref_eff[prec] = r.effective_gap if r else math.nan
        ref_raw[prec] = r.balance_gap if r else math.nan
        se0 = b.stderr.get("effective_gap", math.nan)
        undecided = math.isfinite(se0) and abs(b.effective_gap - 1.0) < 2 * se0
        word = (
            ("would hold" if b.race_to_halt else "would not hold") + " on the point estimate, undecided"
            if undecided
            else ("holds" if b.race_to_halt else "does not hold")
        )
        cmp_ = ""
        if r is not None:
            rel = "smaller" if b.effective_gap < r.effective_gap else "larger"
            cmp_ = (
                f"; its effective gap is {rel} than the {reference_name}'s {r.effective_gap:.3g}"
                f" (raw B_ε/B_τ {b.balance_gap:.3g} vs {r.balance_gap:.3g})"
            )
        se = b.stderr.get("effective_gap", math.nan)
        gap = f"{b.effective_gap:.3g} ± {se:.2g}" if math.isfinite(se) else f"{b.effective_gap:.3g}"
        margin = " — within 2σ of 1" if undecided else ""
        verdict[prec] = (
            f"{prec} precision: race-to-halt {word} (B̂_ε point {b.b_eps_hat_point:.3g} flop/B vs "
            f"B_τ {b.b_tau:.3g} flop/B, effective gap {gap}{margin}){cmp_}"
        )
    return RaceToHalt(holds, eff, raw, ref_eff, ref_raw, reference_name, verdict)

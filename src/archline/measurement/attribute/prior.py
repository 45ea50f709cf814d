"""Priors on each kernel's power for attribution: from graph replay, a counted energy model, or a weak default."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from archline.core.activity import demangle
from archline.measurement.attribute.replay_context import fold_sigma, fold_typical

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
    #: What that time is: ``busy``, the kernel's own duration as CUPTI traces it (as the attribution times a
    #: program's calls); ``step``, the group's share of the replays' wall time (the design's additive fit); ``alone``,
    #: its lone replay's time beyond an empty one; "" where unknown.
    time_source: str = ""
    #: The part of the relative spread (``sd_j`` / ``energy_per_call_j``) that is the design's neighbour dependence
    #: folded in (replay_context.fold_sigma's ρ term: a longer design narrows it only as far as ρ's own uncertainty
    #: goes; the rest, the design's own noise, it narrows); NaN where the prior has no design's in-step σ.
    context_fold_rel: float = math.nan
    #: A prior from a counted energy model (``source`` ``model``): the board's constant power (W) that the model
    #: charges over a call's time, the rest of ``energy_per_call_j`` (at ``time_per_call_s``) being the call's
    #: dynamic energy, which does not depend on its time. The attribution then takes the power of a call here as
    #: ``constant_w + dynamic energy / its time here`` (at most ``cap_w``), not the energy over that time (it still
    #: widens the prior by the ratio of the two times: the launches counted may not be the program's mix); NaN for
    #: priors measured as energies (graph replay).
    constant_w: float = math.nan
    #: The most the model lets a call draw (W; its calibrated cap); NaN: no cap of its own.
    cap_w: float = math.nan

    def power_at(self, time_s: float) -> float:
        """The prior's power (W) for a call of ``time_s`` seconds: a model prior's constant power plus its
        dynamic energy over that time (at most its cap); any other prior's energy per call over that time."""
        if not math.isfinite(self.constant_w):
            return self.energy_per_call_j / time_s
        dynamic = max(self.energy_per_call_j - self.constant_w * self.time_per_call_s, 0.0)
        p = self.constant_w + dynamic / time_s
        return min(p, self.cap_w) if math.isfinite(self.cap_w) else p

    def __post_init__(self) -> None:
        if not (math.isfinite(self.energy_per_call_j) and self.energy_per_call_j > 0):
            raise ValueError(f"prior energy per call must be positive, not {self.energy_per_call_j!r}")
        if not (math.isfinite(self.sd_j) and self.sd_j > 0):
            raise ValueError(f"prior spread must be positive, not {self.sd_j!r}")
        if math.isfinite(self.constant_w) and not (
            self.constant_w >= 0 and math.isfinite(self.time_per_call_s) and self.time_per_call_s > 0
        ):
            raise ValueError("a model prior needs a constant power ≥ 0 and the call time its energy is given at")


def priors_from_replay(
    rows: Iterable[Mapping[str, Any]] | Any,
    *,
    min_rel_sd: float = REPLAY_TINY_REL_SD,
    design: Mapping[str, Any] | None = None,
) -> dict[str, KernelPrior]:
    """Priors from graph replay: a ``ReplayResult``, or the rows of ``replay.csv`` (with ``design``, the
        ``design`` entry of its ``replay.json``).

        Where the replay ran its randomized design (a row's ``context_j``), the prior is the group's energy
        inside the step, ``context_j`` ± ``context_sigma_j`` (the design's measured neighbour dependence ρ
        already folded in), and carries the ρ folded in (√E[ρ²], or the 95 % bound for replays before session 12)
    as :attr:`KernelPrior.context_rel_sd`; otherwise
        its isolated energy ± its σ, floored at ``min_rel_sd`` (by default tiny: how far the isolated energy is
        from the in-context one is then the attribution's to calibrate, ``prior_fit.py``). Either is divided
        by the group's nodes per step, and carries the group's time per call: with a design, its kernels' busy time in
        the whole step as CUPTI traced it (``busy_time_s``, from session 20 on; else the design's ``factor_busy_s``
        where a busy model ran), which is how the attribution times the program's calls, else its time in the step
        (``context_time_s``, the design's fit of the replays' wall times); an isolated energy, its own time beyond an
        empty replay (``group_time_s``), where measured. Names are
        demangled as the attribution's are; the lumped and copy groups give none, nor does an isolated energy whose
        repetitions ended with the step's state non-finite (``nonfinite_reps``).
    """
    if hasattr(rows, "rows"):
        design = design if design is not None else getattr(rows, "design", None)
        rows = [r.to_row() for r in rows.rows]
    rows = list(rows)
    # the ρ the design folded into its σ: √E[ρ²] since session 12, its 95 % bound before
    rho = _num((design or {}).get("rho_fold", (design or {}).get("rho_up")))
    # a busy-model design's CUPTI busy time of each factor in the whole step, for replays without busy_time_s
    d = design or {}
    f_names, f_busy = d.get("factor_names") or [], d.get("factor_busy_s") or []
    factor_busy = dict(zip(f_names, f_busy, strict=True)) if len(f_names) == len(f_busy) else {}
    # Graph nodes carry mangled names (cuFuncGetName); the attribution's rows are demangled.
    names = demangle([str(r.get("group", "")) for r in rows])
    # the fold's ⟨e²⟩ and p (replay_context.fold_sigma): the mean squared in-step energy of the design's factors (the
    # rows with one), and the share of configurations each factor was on in
    ctx_all = [c for c in (_num(r.get("context_j")) for r in rows) if math.isfinite(c)]
    typical = sum(c * c for c in ctx_all) / len(ctx_all) if ctx_all else math.nan
    # where the design's dependence scaled as |e|^(α/2) (its "rho_alpha"; 2 where absent:
    # replay_design.interaction_load)
    alpha = _num(d.get("rho_alpha"))
    alpha = alpha if math.isfinite(alpha) and alpha > 0 else 2.0
    e_rms = 1.0
    if alpha != 2.0:  # then ρ (context_rel_sd below) is the dependence at a group of the factors' RMS energy
        typical, e_rms = fold_typical(ctx_all, alpha)
    p_on = _num(d.get("p_on")) if d.get("kind", "halves") == "halves" else 0.5  # a prefix design folds as at ½
    p_on = p_on if math.isfinite(p_on) and 0.0 < p_on < 1.0 else 0.5
    out: dict[str, KernelPrior] = {}
    for r in rows:
        name = str(r.get("group", ""))
        n = int(_num(r.get("nodes_per_step")) if math.isfinite(_num(r.get("nodes_per_step"))) else 0)
        if not name or name.startswith("[") or n <= 0:
            continue
        # The group's own time (beyond an empty replay's), never the isolated replay's whole time.
        t = _num(r.get("group_time_s"))
        t_call, t_src = (t / n, "alone") if math.isfinite(t) and t > 0 else (math.nan, "")
        # Like with like: the kernels' CUPTI busy time in the whole step, as the program's calls are timed.
        busy = _num(r.get("busy_time_s"))
        busy = busy if math.isfinite(busy) and busy > 0 else _num(factor_busy.get(name))
        busy_call = (busy / n, "busy") if math.isfinite(busy) and busy > 0 else None
        ctx, ctx_sd = _num(r.get("context_j")), _num(r.get("context_sigma_j"))
        if math.isfinite(ctx) and ctx > 0 and math.isfinite(ctx_sd) and ctx_sd > 0:
            # The design's energy goes with the design's time in the step; an isolated replay's time carries
            # the lone replay's launch per node (30-60 % more per call on the H100 runs, docs/attribution.md).
            tc = _num(r.get("context_time_s"))
            call, src = busy_call or ((tc / n, "step") if math.isfinite(tc) and tc > 0 else (t_call, t_src))
            fold = fold_sigma(ctx, 0.0, rho, typical, p_on, alpha, e_rms) / ctx  # the ρ term alone, relative
            out[names.get(name, name)] = KernelPrior(
                ctx / n, ctx_sd / n, "replay", context_rel_sd=rho if math.isfinite(rho) else math.nan,
                time_per_call_s=call, time_source=src,
                context_fold_rel=min(fold, ctx_sd / ctx) if math.isfinite(fold) else math.nan,
            )  # fmt: skip
            continue
        e, sig = _num(r.get("energy_j")), _num(r.get("energy_sigma_j"))
        if not math.isfinite(e) or e <= 0:
            continue
        if _num(r.get("nonfinite_reps")) > 0:
            continue  # measured partly on NaN weights: no evidence of the kernel's energy in the program
        e_call = e / n
        sd = max(abs(sig) / n if math.isfinite(sig) else 0.0, min_rel_sd * e_call, REPLAY_TINY_REL_SD * 1e-3 * e_call)
        # an isolated energy goes with the lone replay's time: the kernel's busy time in the whole step is not the
        # time of the call it measured (its launch and its company differ), and no common shift is its to share
        out[names.get(name, name)] = KernelPrior(e_call, sd, "replay", time_per_call_s=t_call, time_source=t_src)
    return out


def _num(v: Any) -> float:
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def dominance(data_weight: float) -> str:
    """``data`` (≥ 0.8 of the estimate from the data), ``prior`` (≤ 0.2) or ``mixed``.

    ``data_weight`` is 1 − posterior variance / prior variance of the row's power.
    """
    if data_weight >= 0.8:
        return "data"
    if data_weight <= 0.2:
        return "prior"
    return "mixed"

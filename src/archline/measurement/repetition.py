"""Measuring one short call: how to repeat it, and its energy from the recording of the repetitions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from archline.core.recording import Recording, Region
from archline.errors import InputError, SensorError
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import DEFAULT_MAX_REL_UNCERTAINTY, DEFAULT_SHAPE_KAPPA, window_energies

__all__ = ["CallEnergy", "RepetitionPlan", "estimate_call_energy", "plan_repetitions", "updates_for"]


def updates_for(target_rel_error: float) -> int:
    """Sensor updates one measurement must span for ``target_rel_error``.

    Burtscher et al. (ICPE'14, §4.3): "on the order of ten power samples" for 5 %, i.e. the
    error of half an update at each end, spread over n updates: 1/(2n).
    """
    return max(1, math.ceil(1.0 / (2.0 * target_rel_error) - 1e-9))


@dataclass(frozen=True)
class RepetitionPlan:
    """How to repeat a call: ``calls_per_repetition`` back-to-back calls form one repetition;
    repetition ``j`` starts after an idle gap of ``gaps_s[j]`` (s), which moves it by
    ``phase_shifts_s[j]`` within the sensor period so that every phase gets sampled."""

    call_duration_s: float
    calls_per_repetition: int
    repetitions: int
    gaps_s: tuple[float, ...]
    phase_shifts_s: tuple[float, ...]
    repetition_s: float
    updates_per_repetition: float
    expected_rel_error: float
    total_s: float
    notes: tuple[str, ...] = ()


def _edge_sigma(model: SensorModel) -> float:
    if model.edge_sigma_s is not None:
        return model.edge_sigma_s
    return max(model.period_jitter_s, model.period_s / math.sqrt(12.0))


def _expected_rel_error(model: SensorModel, span_s: float, reps: int) -> float:
    edge = math.sqrt(2.0) * _edge_sigma(model) / span_s / math.sqrt(reps)
    readings = max(reps * span_s / model.period_s, 1.0)
    shape = (1.0 - min(model.coverage, 1.0)) * DEFAULT_SHAPE_KAPPA / math.sqrt(readings)
    return math.hypot(edge, shape)


def plan_repetitions(
    call_duration_s: float,
    model: SensorModel,
    target_rel_error: float = 0.05,
    *,
    min_repetitions: int = 3,
    settle_s: float | None = None,
    max_total_s: float = 120.0,
) -> RepetitionPlan:
    """Plan the repetitions of a call of ``call_duration_s`` for ``target_rel_error`` (1 σ).

    Each repetition spans at least :func:`updates_for` sensor updates. Repetitions are
    separated by idle gaps of at least ``settle_s`` (default: the time over which one reading
    mixes neighbouring power, plus two periods), so the idle level between them is measured;
    each gap adds a fraction of the period, so the repetitions start at evenly spread phases
    of the sensor's period (Yang et al., SC'24: a part-time sensor sees only some phases). A
    part-time sensor gets at least 2/coverage phases. More repetitions are added until the
    expected error meets the target or ``max_total_s`` would be exceeded.
    """
    if call_duration_s <= 0:
        raise InputError(f"call duration must be positive, got {call_duration_s} s")
    if not 0 < target_rel_error < 1:
        raise InputError(f"target relative error must be in (0, 1), got {target_rel_error}")
    period = model.period_s
    n_upd = updates_for(target_rel_error)
    calls = max(1, math.ceil(n_upd * period / call_duration_s - 1e-9))
    span = calls * call_duration_s
    notes: list[str] = []
    cov = model.coverage
    phases = max(min_repetitions, 1)
    if cov < 1.0:
        phases = max(phases, math.ceil(2.0 / max(cov, 0.05)))
        notes.append(f"part-time sensor (coverage {100 * cov:.0f} %): {phases} phases per period")
    reps = phases
    gap0 = settle_s if settle_s is not None else model.mixing_s + 2 * period
    err = _expected_rel_error(model, span, reps)
    while err > target_rel_error:
        total = reps * (span + gap0 + period)
        if total + span + gap0 + period > max_total_s:
            notes.append(f"stopped at {reps} repetitions: the time limit of {max_total_s:g} s")
            break
        reps += phases
        err = _expected_rel_error(model, span, reps)
    shifts = tuple(float((j % phases) * period / phases) for j in range(reps))
    gaps = tuple(gap0 + s for s in shifts)
    total = float(sum(gaps) + reps * span)
    return RepetitionPlan(
        call_duration_s=call_duration_s,
        calls_per_repetition=calls,
        repetitions=reps,
        gaps_s=gaps,
        phase_shifts_s=shifts,
        repetition_s=span,
        updates_per_repetition=span / period,
        expected_rel_error=err,
        total_s=total,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class CallEnergy:
    """One call's energy (J) with its 1 σ, from the repetitions of it.

    ``per_repetition_j`` are the repetitions estimated one by one (per call); their spread
    gives the empirical σ, which the reported uncertainty never undercuts.
    """

    energy_j: float
    energy_uncertainty_j: float
    mean_power_w: float
    call_duration_s: float
    repetitions: int
    per_repetition_j: tuple[float, ...]
    resolvable: bool
    note: str = ""


def estimate_call_energy(
    recording: Recording,
    repetitions: Sequence[Region],
    calls_per_repetition: int,
    model: SensorModel,
    *,
    source: str = "nvml.buffer",
    max_rel_uncertainty: float = DEFAULT_MAX_REL_UNCERTAINTY,
) -> CallEnergy:
    """The energy of one call from the recording of its repetitions.

    All repetitions are assumed to draw the same power, so they share one level in the
    deconvolution (see :func:`~archline.measurement.windows.window_energies` with ``groups``):
    phases the sensor misses in one repetition are seen in another.
    """
    r = recording.get(source)
    if r is None:
        raise SensorError(f"the recording has no source {source!r}")
    if not repetitions:
        raise InputError("no repetitions to estimate a call from")
    if calls_per_repetition < 1:
        raise InputError(f"calls per repetition must be >= 1, got {calls_per_repetition}")
    tied = window_energies(r, model, repetitions, groups=["call"] * len(repetitions), max_rel_uncertainty=1.0)
    alone = window_energies(r, model, repetitions, max_rel_uncertainty=1.0)
    dur = np.array([w.duration_s for w in repetitions])
    per_call_dur = float(np.mean(dur)) / calls_per_repetition
    e_tied = np.array([w.energy_j for w in tied]) / calls_per_repetition
    s_tied = np.array([w.energy_uncertainty_j for w in tied]) / calls_per_repetition
    energy = float(np.mean(e_tied))
    # Errors of the tied estimate are common to all repetitions: its σ does not shrink by √n.
    sigma_model = float(np.mean(s_tied))
    per = tuple(float(w.energy_j) / calls_per_repetition for w in alone)
    seen = [w.resolvable for w in alone]
    sigma_emp = float(np.std(per, ddof=1) / math.sqrt(len(per))) if len(per) > 1 else 0.0
    sigma = max(sigma_model, sigma_emp)
    ok = bool(np.isfinite(energy) and sigma <= max_rel_uncertainty * abs(energy))
    note = "" if ok else f"uncertainty above {100 * max_rel_uncertainty:.0f} % of the energy"
    if not all(seen) and ok:
        note = f"{len(seen) - sum(seen)} of {len(seen)} repetitions unresolved alone; resolved together"
    return CallEnergy(
        energy_j=energy,
        energy_uncertainty_j=sigma,
        mean_power_w=energy / per_call_dur if per_call_dur > 0 else float("nan"),
        call_duration_s=per_call_dur,
        repetitions=len(repetitions),
        per_repetition_j=per,
        resolvable=ok,
        note=note,
    )

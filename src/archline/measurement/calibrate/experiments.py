"""Sensor experiments on a real GPU: calibration loads and Burtscher-style validation, and their analysis."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from archline.core.recording import Recording, Region
from archline.measurement.calibrate.load_runs import BusyLoad
from archline.measurement.counter import counter_energy
from archline.measurement.energy import WindowEstimate, estimate_window

__all__ = [
    "CALIBRATION_PULSES_S",
    "CALIBRATION_SQUARE_PERIODS_S",
    "ValidationRow",
    "analyze_validation",
    "checks_passed",
    "run_calibration_loads",
    "run_validation_loads",
    "validation_table",
]

CALIBRATION_SQUARE_PERIODS_S: tuple[float, ...] = (0.010, 0.020, 0.030, 0.040, 0.050, 0.100, 0.200)
CALIBRATION_PULSES_S: tuple[float, ...] = (0.002, 0.005, 0.010, 0.020, 0.050, 0.100, 0.200, 0.500, 1.000)
STEADY_DURATIONS_S: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)


def run_calibration_loads(
    load: BusyLoad,
    *,
    step_s: float = 3.0,
    square_s: float = 2.0,
    periods_s: Sequence[float] = CALIBRATION_SQUARE_PERIODS_S,
    pulses_s: Sequence[float] = CALIBRATION_PULSES_S,
    pulse_reps: int = 5,
    gap_s: float = 0.6,
    progress: Callable[[str], None] | None = None,
) -> list[Region]:
    """Idle, a long step, square waves at several periods, and isolated pulses of many lengths.

    Pulses are separated by ``gap_s`` plus a pseudo-random extra (0–20 ms) so they land at
    every phase of the sensor's period, which is what separates a part-time sensor from an
    averaging one.
    """
    say = progress or (lambda _m: None)
    rng = np.random.default_rng(2024)
    regions: list[Region] = []
    say("idle")
    load.idle(2.0)
    say("step")
    regions.append(load.pulse(step_s, "step"))
    load.idle(1.5)
    for p in periods_s:
        say(f"square wave {p * 1e3:.0f} ms")
        regions += load.square_wave(p, square_s, f"square_{p * 1e3:.0f}ms")
        load.idle(1.0)
    for d in pulses_s:
        say(f"pulses {d * 1e3:.0f} ms")
        for _ in range(pulse_reps):
            regions.append(load.pulse(d, f"pulse_{d * 1e3:.0f}ms"))
            load.idle(gap_s + float(rng.uniform(0.0, 0.02)))
    return regions


def run_validation_loads(
    load: BusyLoad,
    *,
    durations_s: Sequence[float] = STEADY_DURATIONS_S,
    isolated_reps: int = 3,
    repeated_total_s: float = 8.0,
    gap_s: float = 1.0,
    progress: Callable[[str], None] | None = None,
) -> list[Region]:
    """The real-GPU validation of the issue: steady kernels, the doubling and back-to-back tests.

    Region names: ``steady_<ms>_iso`` (isolated invocations), ``steady_<ms>_rep`` (one
    invocation inside a long back-to-back run), ``steady_<ms>_run`` (the whole run),
    ``double_a``/``double_b`` (300 ms and 600 ms, isolated), ``b2b_first``/``b2b_second``.
    """
    say = progress or (lambda _m: None)
    regions: list[Region] = []
    for d in durations_s:
        ms = f"{d * 1e3:.0f}"
        say(f"steady {ms} ms: isolated")
        for _ in range(isolated_reps):
            load.idle(gap_s)
            regions.append(load.pulse(d, f"steady_{ms}_iso"))
        load.idle(gap_s)
        say(f"steady {ms} ms: repeated")
        n = max(3, math.ceil(repeated_total_s / d))
        reps = load.back_to_back([d] * n, f"steady_{ms}_rep")
        regions += [Region(f"steady_{ms}_rep", r.start_s, r.end_s, r.how, r.meta) for r in reps]
        regions.append(Region(f"steady_{ms}_run", reps[0].start_s, reps[-1].end_s, "globaltimer", {"n": n}))
    for _ in range(isolated_reps):
        say("doubling")
        load.idle(gap_s)
        regions.append(load.pulse(0.3, "double_a"))
        load.idle(gap_s)
        regions.append(load.pulse(0.6, "double_b"))
    for _ in range(isolated_reps):
        say("back to back")
        load.idle(gap_s)
        a, b = load.back_to_back([0.3, 0.3], "b2b")
        regions += [Region("b2b_first", a.start_s, a.end_s, a.how, a.meta)]
        regions += [Region("b2b_second", b.start_s, b.end_s, b.how, b.meta)]
    load.idle(gap_s)
    return regions


@dataclass(frozen=True)
class ValidationRow:
    """One check of the validation: the figure, what it is compared with, and the verdict."""

    check: str
    measured: float
    reference: float
    error_pct: float
    limit_pct: float
    passed: bool | None  # None for the raw rows, shown for comparison only
    n: int
    detail: str


def _energies(rec: Recording, name: str, est: Callable[[Recording, Region], WindowEstimate]) -> list[float]:
    out = []
    for r in rec.regions:
        if r.name == name:
            e = est(rec, r).energy_j
            if e is not None:
                out.append(e)
    return out


def analyze_validation(
    rec: Recording,
    estimator: Callable[[Recording, Region], WindowEstimate] = estimate_window,
    raw_estimator: Callable[[Recording, Region], WindowEstimate] | None = None,
    limit_pct: float = 2.0,
) -> list[ValidationRow]:
    """Turn the validation recording into pass/fail rows (energies in J, errors in %)."""
    rows: list[ValidationRow] = []
    en = rec.get("nvml.energy")
    names = sorted({r.name for r in rec.regions if r.name.startswith("steady_") and r.name.endswith("_run")})
    for run_name in names:
        ms = run_name.split("_")[1]
        run = rec.region(run_name)
        n = int(run.meta.get("n", 1))
        ref = counter_energy(en, run.start_s, run.end_s) if en is not None else None
        if ref is None:
            continue
        ref_per = ref / n
        for kind, label in (("iso", "isolated invocation"), ("rep", "invocation inside the repeated run")):
            es = _energies(rec, f"steady_{ms}_{kind}", estimator)
            if not es:
                continue
            m = float(np.mean(es))
            err = (m / ref_per - 1.0) * 100.0
            rows.append(
                ValidationRow(
                    f"steady {ms} ms: {label} (20 ms samples) vs energy counter / {n} over the repeated run",
                    m,
                    ref_per,
                    err,
                    limit_pct,
                    abs(err) <= limit_pct,
                    len(es),
                    f"spread of invocations {np.std(es) / m * 100:.2f} %" if len(es) > 1 else "",
                )
            )
    for a_name, b_name, factor, label in (
        ("double_a", "double_b", 2.0, "doubling: E(600 ms) / E(300 ms) = 2"),
        ("b2b_first", "b2b_second", 1.0, "back to back: E(second) / E(first) = 1"),
    ):
        for est_name, est in (("corrected", estimator), ("raw", raw_estimator)):
            if est is None:
                continue
            ea, eb = _energies(rec, a_name, est), _energies(rec, b_name, est)
            if not ea or not eb:
                continue
            ratio = float(np.mean(eb) / np.mean(ea))
            err = (ratio / factor - 1.0) * 100.0
            rows.append(
                ValidationRow(
                    f"{label} ({est_name})",
                    ratio,
                    factor,
                    err,
                    limit_pct,
                    abs(err) <= limit_pct if est_name == "corrected" else None,
                    min(len(ea), len(eb)),
                    f"E(a) = {np.mean(ea):.3f} J, E(b) = {np.mean(eb):.3f} J",
                )
            )
    return rows


def checks_passed(rows: Sequence[ValidationRow]) -> bool | None:
    """Whether every check passed; None when there was no check to pass (e.g. no energy counter)."""
    judged = [r.passed for r in rows if r.passed is not None]
    return all(judged) if judged else None


def validation_table(rows: Sequence[ValidationRow]) -> list[dict[str, Any]]:
    """Rows as dicts for CSV/JSON."""
    return [r.__dict__ for r in rows]

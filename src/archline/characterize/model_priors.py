"""Kernel priors from this GPU's counted energy model: a program's ncu counts × the model's component energies.

The counts come from ``ncu`` profiling the program (``archline counts``: its raw CSV, one row per launch, the names
mangled as CUPTI traces them). Each launch's dynamic energy is the model's (:meth:`MlModel.energy_terms`: DRAM, L2,
shared, FP32/FP64 and tensor-core terms); its time is ncu's (else the model's time roofline). A kernel name's prior
is the mean over its launches: energy per call π0·t + E_dyn at that time, with the model's own 1 σ at that energy
(its calibrated spread and its parameters' uncertainties). The prior keeps π0 and E_dyn apart
(:attr:`KernelPrior.constant_w`), so the attribution takes a call's power as π0 + E_dyn / its traced time, not the
profiled time's power, bounded by the model's calibrated cap; it still widens the prior by the two times' ratio, as the
launches counted may not be the program's mix of them (a partial count, or one per launch configuration, weights the
configurations unlike the program).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from archline.core.activity import demangle
from archline.errors import InputError
from archline.hw.ncu import METRICS, parse_raw_csv
from archline.measurement.attribute.prior import KernelPrior
from archline.model.ml.counts import _Z95, MlCounts, counts_from_ncu_values
from archline.model.ml.machine import MeasuredKernel, MlModel
from archline.model.ml_run import load_ml_model

__all__ = ["ModelPriors", "model_priors", "read_model_priors"]

#: ncu's metric name → archline's count key (:data:`archline.hw.ncu.METRICS` turned round).
_KEY_OF = {v: k for k, v in METRICS.items()}


@dataclass(frozen=True)
class ModelPriors:
    """The priors by (demangled) kernel name, and what made them."""

    priors: dict[str, KernelPrior]
    launches: int
    #: Launches whose counts gave no energy (no counted work, or no time): left without a prior.
    skipped: int
    model_path: str
    counts_path: str

    @property
    def names(self) -> int:
        """Kernel names with a prior."""
        return len(self.priors)


def _launch(m: MlModel, c: MlCounts) -> tuple[float, float, float] | None:
    """(time s, dynamic energy J, 1 σ J at that time) of one launch, or None where it gives none."""
    t = c.ncu_time_s
    if not (math.isfinite(t) and t > 0):
        t = m.predicted_time(c)[1]
    if not (math.isfinite(t) and t > 0):
        return None
    dyn = float(sum(m.energy_terms(c).values()))
    if not (math.isfinite(dyn) and dyn >= 0):
        return None
    p = m.predict(c, measured=MeasuredKernel(c.name, "program", t, math.nan))
    sd = p.energy_at_measured_time_ci_j / _Z95
    if not (math.isfinite(sd) and sd > 0):
        return None
    return t, dyn, sd


def model_priors(
    m: MlModel, launches: Iterable[tuple[str, Mapping[str, float]]], *, model_path: str = "", counts_path: str = ""
) -> ModelPriors:
    """Priors by kernel name from ``launches``: (kernel name as ncu printed it, {archline count key: value}).

    Names are demangled as the attribution's rows are. A name's prior is the mean of its launches: time t̄, dynamic
    energy Ē_dyn, energy per call π0·t̄ + Ē_dyn (the cap applies to its power at a call's time) and the mean of the
    launches' 1 σ
    (the model's error is the kernel's, not its launches': it does not average down).
    """
    pairs = list(launches)
    names = demangle([n for n, _ in pairs])
    by: dict[str, list[tuple[float, float, float]]] = {}
    skipped = 0
    for raw_name, vals in pairs:
        name = names.get(raw_name, raw_name)
        got = _launch(m, counts_from_ncu_values(name, vals))
        if got is None:
            skipped += 1
            continue
        by.setdefault(name, []).append(got)
    cap = m.power_limit_w if math.isfinite(m.power_limit_w) and m.power_limit_w > m.pi0_w else math.nan
    out: dict[str, KernelPrior] = {}
    for name, rows in by.items():
        n = len(rows)
        t = sum(r[0] for r in rows) / n
        dyn = sum(r[1] for r in rows) / n
        sd = sum(r[2] for r in rows) / n
        e = m.pi0_w * t + dyn  # uncapped: the cap applies to the power at the call's time here (power_at)
        if not (e > 0):
            skipped += n
            continue
        out[name] = KernelPrior(
            e, sd, "model", time_per_call_s=t, time_source="model", constant_w=max(m.pi0_w, 0.0), cap_w=cap
        )
    return ModelPriors(out, len(pairs), skipped, model_path, counts_path)


def _keyed(vals: Mapping[str, float]) -> dict[str, float]:
    return {_KEY_OF[k]: v for k, v in vals.items() if k in _KEY_OF and math.isfinite(v)}


def read_model_priors(model: str | os.PathLike[str], counts: str | os.PathLike[str]) -> ModelPriors:
    """Priors from a calibrated model (a ``archline roofline`` run directory, or its model file) and a program's
    ncu raw CSV (``archline counts``). Bad input is an :class:`InputError` naming the file."""
    cp = Path(counts)
    if not cp.is_file():
        raise InputError(f"{cp}: file not found (make it with `archline counts -o {cp.name} -- PROGRAM`)")
    m = load_ml_model(model)
    try:
        text = cp.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{cp}: cannot read it ({exc})") from None
    launches = [(name, _keyed(vals)) for name, vals in parse_raw_csv(text, str(cp))]
    if not any(v for _, v in launches):
        raise InputError(f"{cp}: no archline count (e.g. {METRICS['dram_read_b']}) in its columns")
    mp = model_priors(m, launches, model_path=str(model), counts_path=str(cp))
    if not mp.priors:
        raise InputError(f"{cp}: no launch gave a positive energy under the model {model}")
    return mp

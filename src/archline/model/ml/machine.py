"""The ML model of one machine: components, unit rates and activity line; a kernel's predicted time and energy."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from archline.model.ml.counts import (
    _Z95,
    ML_COMPONENT_SOURCES,
    RANDOM_ACTIVITY,
    TENSOR_PRECISIONS,
    TOGGLE_PREFIX,
    UNIT_CLASS,
    MlCounts,
    _fin,
    _num,
)
from archline.model.parameters import ParameterSet

# --------------------------------------------------------------------------- the machine


@dataclass(frozen=True)
class MeasuredKernel:
    """A measured kernel: ``group`` is ``calibration`` or ``heldout``; ``precision`` picks π0's sweep."""

    name: str
    group: str
    time_s: float
    energy_j: float
    energy_uncertainty_j: float = math.nan
    precision: str = "single"
    library: str = ""
    activity: float = RANDOM_ACTIVITY


@dataclass(frozen=True)
class MlPrediction:
    """One kernel's prediction: at its measured time and from the time roofline, with 95 % intervals."""

    name: str
    group: str
    terms: dict[str, float]
    dynamic_j: float
    bound: str
    time_roofline_s: float
    time_s: float
    time_ci_s: float
    energy_at_predicted_time_j: float
    energy_at_predicted_time_ci_j: float
    power_at_predicted_time_w: float
    cap_active_predicted: bool
    measured_time_s: float = math.nan
    measured_energy_j: float = math.nan
    energy_at_measured_time_j: float = math.nan
    energy_at_measured_time_ci_j: float = math.nan
    cap_active_measured: bool = False
    error_measured_time: float = math.nan
    error_predicted_time: float = math.nan
    time_error: float = math.nan
    ncu_time_s: float = math.nan
    error_ncu_time: float = math.nan

    def as_row(self) -> dict[str, Any]:
        row = {k: v for k, v in vars(self).items() if k != "terms"}
        row.update({f"term_{k}_j": v for k, v in self.terms.items()})
        return row


@dataclass(frozen=True)
class MlModel:
    """The machine's components, unit rates, activity line and the protocol's frozen choices."""

    pi0_w: float
    pi0_sigma_w: float
    eps_mem_j_per_b: float
    eps_mem_sigma: float
    power_limit_w: float
    eps: dict[str, float]
    eps_sigma: dict[str, float]
    sources: dict[str, str]
    rates: dict[str, float]
    activity_intercept: float = math.nan
    activity_slope: float = math.nan
    terms: tuple[str, ...] = ()
    eta: dict[str, float] = field(default_factory=dict)
    model_sigma: float = 0.0
    model_sigma_predicted: float = 0.0
    time_sigma: float = 0.0
    choices: dict[str, Any] = field(default_factory=dict)
    #: Protocol v2 (:mod:`archline.model.ml_v2`): the dynamic energy a capped kernel spends, as a fraction of its
    #: components' sum (NaN: the frozen stretch to E_dyn/(P_lim − π0)), and the time a prediction starts from.
    cap_kappa: float = math.nan
    time_source: str = "roofline"

    def with_terms(self, terms: Iterable[str]) -> MlModel:
        return replace(self, terms=tuple(sorted(set(terms))))

    def _e(self, key: str) -> float:
        return _fin(self.eps.get(key, math.nan))

    def activity_factor(self, alpha: float) -> float:
        """a(α) = line(α)/line(½) from the toggle sweep (1 without the activity term or its sweep)."""
        if "activity" not in self.terms:
            return 1.0
        a, b = self.activity_intercept, self.activity_slope
        if not (math.isfinite(a) and math.isfinite(b)) or a + b * RANDOM_ACTIVITY <= 0:
            return 1.0
        return max(a + b * alpha, 0.0) / (a + b * RANDOM_ACTIVITY)

    def energy_terms(self, c: MlCounts, alpha: float = RANDOM_ACTIVITY) -> dict[str, float]:
        """The dynamic terms (J) of ``c``: every always-on term, plus the chosen optional ones."""
        act = self.activity_factor(alpha)
        t = {
            "dram": self.eps_mem_j_per_b * c.dram_bytes,
            "l2": self._e("l2_byte") * max(c.l2_bytes - c.dram_bytes, 0.0),
            "shared": self._e("shared_byte") * c.shared_bytes,
            "fp32": self._e("fp32_flop") * c.flops_fp32,
            "fp64": self._e("fp64_flop") * c.flops_fp64,
            "tensor_fp64": self._e("tensor_fp64_flop") * c.tensor_flops("fp64"),
        }
        for p in TENSOR_PRECISIONS:
            t[f"tensor_{p}"] = act * self._e(f"tensor_{p}_flop") * c.tensor_flops(p)
        if "l1" in self.terms:
            t["l1"] = self._e("l1_byte") * max(c.l1_bytes - c.l2_bytes, 0.0)
        if "instructions" in self.terms:
            t["instructions"] = self._e("thread_inst") * c.other_inst
        return t

    def _param_var(self, c: MlCounts, t: float) -> float:
        """Variance (J²) of the prediction from the components' and π0's own uncertainties."""
        counts = {
            "l2_byte": max(c.l2_bytes - c.dram_bytes, 0.0),
            "shared_byte": c.shared_bytes,
            "fp32_flop": c.flops_fp32,
            "fp64_flop": c.flops_fp64,
            "tensor_fp64_flop": c.tensor_flops("fp64"),
            **{f"tensor_{p}_flop": c.tensor_flops(p) for p in TENSOR_PRECISIONS},
        }
        if "l1" in self.terms:
            counts["l1_byte"] = max(c.l1_bytes - c.l2_bytes, 0.0)
        if "instructions" in self.terms:
            counts["thread_inst"] = c.other_inst
        var = (t * _fin(self.pi0_sigma_w)) ** 2 + (c.dram_bytes * _fin(self.eps_mem_sigma)) ** 2
        var += sum((n * _fin(self.eps_sigma.get(k, math.nan))) ** 2 for k, n in counts.items())
        return var

    def time_roofline(self, c: MlCounts) -> tuple[float, str]:
        """(max over units of count/rate, the bounding unit), before η."""
        work = {
            **{f"tensor_{p}": c.tensor_flops(p) for p in (*TENSOR_PRECISIONS, "fp64")},
            "fp32": c.flops_fp32,
            "fp64": c.flops_fp64,
            "dram": c.dram_bytes,
            "l2": c.l2_bytes,
            "l1": c.l1_bytes,
            "shared": c.shared_bytes,
        }
        best, unit = 0.0, "dram"
        for k, n in work.items():
            r = self.rates.get(k, math.nan)
            if n > 0 and math.isfinite(r) and r > 0 and n / r > best:
                best, unit = n / r, k
        return best, unit

    def predicted_time(self, c: MlCounts) -> tuple[float, float, str]:
        """(time roofline, time after η of its class, bounding unit)."""
        t0, unit = self.time_roofline(c)
        eta = self.eta.get(UNIT_CLASS.get(unit, "memory"), 1.0)
        return t0, t0 / eta if eta > 0 else t0, unit

    def predict(
        self,
        c: MlCounts,
        *,
        measured: MeasuredKernel | None = None,
        alpha: float = RANDOM_ACTIVITY,
        group: str = "",
    ) -> MlPrediction:
        """Time, energy and power of ``c``: from the time roofline, and at the measured time if given."""
        terms = self.energy_terms(c, alpha)
        dyn = float(sum(terms.values()))
        lim = self.power_limit_w if math.isfinite(self.power_limit_w) else math.inf
        t_roof, t_pred, unit = self.predicted_time(c)
        if self.time_source == "ncu" and math.isfinite(c.ncu_time_s) and c.ncu_time_s > 0:
            t_pred = c.ncu_time_s
        cap_p = False
        e_pred = self.pi0_w * t_pred + dyn
        if t_pred > 0 and self.pi0_w + dyn / t_pred > lim and lim > self.pi0_w:
            cap_p = True
            if math.isfinite(self.cap_kappa):
                # Under the cap the card spends κ·E_dyn (lower clock and voltage), at the capped power.
                t_pred = max(t_pred, self.cap_kappa * dyn / (lim - self.pi0_w))
                e_pred = lim * t_pred
            else:
                t_pred = dyn / (lim - self.pi0_w)
                e_pred = self.pi0_w * t_pred + dyn
        rel = math.hypot(self.model_sigma_predicted, 0.0)
        ci_pred = _Z95 * math.sqrt(self._param_var(c, t_pred) + (rel * e_pred) ** 2)
        out = MlPrediction(
            name=c.name,
            group=group or (measured.group if measured else ""),
            terms={"constant": self.pi0_w * t_pred, **terms},
            dynamic_j=dyn,
            bound=unit,
            time_roofline_s=t_roof,
            time_s=t_pred,
            time_ci_s=_Z95 * self.time_sigma * t_pred,
            energy_at_predicted_time_j=e_pred,
            energy_at_predicted_time_ci_j=ci_pred,
            power_at_predicted_time_w=e_pred / t_pred if t_pred > 0 else math.nan,
            cap_active_predicted=cap_p,
            ncu_time_s=c.ncu_time_s,
        )
        if measured is None:
            return out
        t = measured.time_s
        e_unc = self.pi0_w * t + dyn
        e = min(e_unc, lim * t)
        ci = _Z95 * math.sqrt(self._param_var(c, t) + (self.model_sigma * e) ** 2)
        e_ncu = math.nan
        if math.isfinite(c.ncu_time_s) and c.ncu_time_s > 0:
            e_ncu = min(self.pi0_w * c.ncu_time_s + dyn, lim * c.ncu_time_s)
        return replace(
            out,
            terms={**out.terms, "constant": self.pi0_w * t},
            measured_time_s=t,
            measured_energy_j=measured.energy_j,
            energy_at_measured_time_j=e,
            energy_at_measured_time_ci_j=ci,
            cap_active_measured=e_unc > lim * t,
            error_measured_time=(e - measured.energy_j) / measured.energy_j,
            error_predicted_time=(e_pred - measured.energy_j) / measured.energy_j,
            time_error=(t_pred - t) / t,
            error_ncu_time=(e_ncu - measured.energy_j) / measured.energy_j,
        )


# --------------------------------------------------------------------------- building the machine


def _components(
    rows: Sequence[Mapping[str, Any]], pi0_w: float
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    by = {str(r.get("name")): r for r in rows if str(r.get("status", "ok")) == "ok"}
    eps: dict[str, float] = {}
    sig: dict[str, float] = {}
    src: dict[str, str] = {}
    for comp, (bench, col) in ML_COMPONENT_SOURCES.items():
        r = by.get(bench)
        t, e, n = (_num(r, k) for k in ("time_s", "energy_j", col)) if r else (math.nan,) * 3
        if not (math.isfinite(t) and math.isfinite(e) and math.isfinite(n) and n > 0):
            eps[comp], sig[comp] = math.nan, math.nan
            src[comp] = f"{bench}: not measured" if r is None else f"{bench}: incomplete row"
            continue
        eps[comp] = (e - pi0_w * t) / n
        sig[comp] = _num(r or {}, "energy_uncertainty_j") / n
        src[comp] = f"{bench}: (E − π0·T)/{col}, E {e:.4g} J, T {t:.4g} s, {col} {n:.4g}"
    return eps, sig, src


def _rates(rows: Sequence[Mapping[str, Any]], peaks: Mapping[str, float], dram_bps: float) -> dict[str, float]:
    by = {str(r.get("name")): r for r in rows if str(r.get("status", "ok")) == "ok"}

    def rate(bench: str, col: str) -> float:
        r = by.get(bench)
        if r is None:
            return math.nan
        n, t = _num(r, col), _num(r, "time_s")
        return n / t if n > 0 and t > 0 else math.nan

    out = {f"tensor_{p}": rate(row, "flops") for p, row in TENSOR_PRECISIONS.items()}
    out["tensor_fp64"] = rate("operand.dmma.fp64", "flops")
    out["fp32"] = float(peaks.get("single", math.nan))
    out["fp64"] = float(peaks.get("double", math.nan))
    out["dram"] = dram_bps
    out["l2"] = rate("mem.l2.read", "bytes")
    out["l1"] = rate("mem.l1.read", "bytes")
    out["shared"] = rate("mem.shared.read", "bytes")
    return out


def _activity(rows: Sequence[Mapping[str, Any]], pi0_w: float) -> tuple[float, float, int]:
    """Line ε(α) = a + b·α (J/flop) through the toggle sweep's rows; NaNs with fewer than 2 points."""
    xs, ys = [], []
    for r in rows:
        name = str(r.get("name", ""))
        if not name.startswith(TOGGLE_PREFIX) or str(r.get("status", "ok")) != "ok":
            continue
        t, e, n = _num(r, "time_s"), _num(r, "energy_j"), _num(r, "flops")
        try:
            pct = float(name[len(TOGGLE_PREFIX) :])
        except ValueError:
            continue
        if math.isfinite(t) and math.isfinite(e) and n > 0:
            xs.append(pct / 100.0)
            ys.append((e - pi0_w * t) / n)
    if len(set(xs)) < 2:
        return math.nan, math.nan, len(xs)
    b, a = np.polyfit(np.asarray(xs), np.asarray(ys), 1)
    return float(a), float(b), len(xs)


def machine(
    params: ParameterSet,
    component_rows: Sequence[Mapping[str, Any]],
    peaks_flops: Mapping[str, float],
) -> MlModel:
    """The components, unit rates and activity line of one run (no protocol choices yet)."""
    names = list(params.names)
    cov = params.cov

    def sd(name: str) -> float:
        return float(math.sqrt(max(cov[names.index(name), names.index(name)], 0.0))) if name in names else math.nan

    p = params.params("single" if "single" in params.precisions else params.precisions[0])
    eps, sig, src = _components(component_rows, p.pi0_w)
    a, b, n = _activity(component_rows, p.pi0_w)
    src["activity"] = f"{n} toggle-sweep rows ({TOGGLE_PREFIX}0…100): ε(α) = a + b·α"
    return MlModel(
        pi0_w=p.pi0_w,
        pi0_sigma_w=sd("pi0_w"),
        eps_mem_j_per_b=p.eps_mem_j_per_b,
        eps_mem_sigma=sd("eps_mem_j_per_b"),
        power_limit_w=params.power_limit_w,
        eps=eps,
        eps_sigma=sig,
        sources=src,
        rates=_rates(component_rows, peaks_flops, 1.0 / p.tau_mem_s_per_b if p.tau_mem_s_per_b > 0 else math.nan),
        activity_intercept=a,
        activity_slope=b,
    )

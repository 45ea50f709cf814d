"""The counted energy model of ML kernels: tensor-core, cache and DRAM terms, a frozen protocol, roofline time.

Every component is an energy per counted unit above the constant power π0, from one
microbenchmark of the same run, ε_x = (E − π0·T)/count (:mod:`archline.model.components`):

    E = π0·T + ε_mem·Q_DRAM + ε_L2·(B_L2 − Q_DRAM) + ε_sh·B_sh + ε32·F32 + ε64·F64
        + ε_tc,fp64·F_fp64 + Σ_p a(α)·ε_tc,p·F_tc,p         (p = bf16, fp16, fp8; wgmma, random data)
        [+ ε_L1·(B_L1 − B_L2)] [+ ε_inst·I_other] [activity a(α) from the toggle sweep, else a = 1]

with Nsight Compute's counts of the kernel (tensor flops are ncu's ``sm__ops_path_tensor_src_*``,
which count a multiply-add as 2, as the calibration GEMMs confirm). Time is either measured or
predicted from the time roofline, T = max over units of count/(η_class·rate), rates measured in
the same run and η per class (tensor, CUDA core, memory) from the calibration kernels. Above
the board's power limit the cap-aware rule holds power at the limit: with a measured time,
E = P_lim·T; with a predicted time, T stretches to E_dyn/(P_lim − π0).

The **protocol** (:func:`calibrate`) is frozen code: it sees only the calibration kernels, picks
the optional terms (L1, instructions, activity) by their median |error| there, fits η and the
model's own error (the RMS relative error on calibration), and is then applied unchanged to the
held-out kernels (:func:`score`). :func:`calibrate_posthoc` is a variant chosen after that scoring
(:data:`POSTHOC_LABEL`): the cap at the calibration kernels' observed capped power, and the terms
chosen on the uncapped calibration kernels.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from archline.errors import InputError
from archline.model.components import COMPONENT_SOURCES
from archline.model.parameters import ParameterSet

__all__ = [
    "ML_COMPONENT_SOURCES",
    "OPTIONAL_TERMS",
    "POSTHOC_LABEL",
    "RANDOM_ACTIVITY",
    "TENSOR_PRECISIONS",
    "TIME_SOURCES",
    "V2_LABEL",
    "MeasuredKernel",
    "MlCounts",
    "MlModel",
    "MlPrediction",
    "MlScore",
    "Variant",
    "calibrate",
    "calibrate_posthoc",
    "calibrate_v2",
    "counts_from_ncu_values",
    "counts_from_row",
    "score",
]

#: Tensor-core precisions with a wgmma microbenchmark, and the bench row each ε comes from.
TENSOR_PRECISIONS: dict[str, str] = {
    "bf16": "tensor.wgmma.bf16",
    "fp16": "tensor.wgmma.fp16",
    "fp8": "tensor.wgmma.fp8e4m3",
}
#: Every component of the ML model → (microbenchmark row, its count column).
ML_COMPONENT_SOURCES: dict[str, tuple[str, str]] = {
    **COMPONENT_SOURCES,
    "l1_byte": ("mem.l1.read", "bytes"),
    **{f"tensor_{p}_flop": (row, "flops") for p, row in TENSOR_PRECISIONS.items()},
}
#: The terms the protocol may add; everything else is always in.
OPTIONAL_TERMS: tuple[str, ...] = ("l1", "instructions", "activity")
#: Toggle rate of the sign and mantissa bits of independent random operands (the benchmarks' random mode).
RANDOM_ACTIVITY = 0.5
#: Rows of the operand-toggle sweep the activity factor is fitted on.
TOGGLE_PREFIX = "tensor.wgmma.bf16.toggle-"
#: Units of the time roofline and their class (η is fitted per class).
UNIT_CLASS: dict[str, str] = {
    "tensor_bf16": "tensor",
    "tensor_fp16": "tensor",
    "tensor_fp8": "tensor",
    "tensor_fp64": "tensor",
    "fp32": "cuda",
    "fp64": "cuda",
    "dram": "memory",
    "l2": "memory",
    "l1": "memory",
    "shared": "memory",
}
#: The protocol: the frozen one of docs/roofline.md §10b, or the post-hoc variant (:func:`calibrate_posthoc`).
Variant = Literal["frozen", "posthoc-cap", "v2"]
#: How the post-hoc variant is labelled wherever it is written or shown.
POSTHOC_LABEL = "post hoc: chosen after the frozen protocol was scored on H100 GPU-cab9fa05's held-out kernels"
_FP_INST = ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul")
_MEM_INST = ("inst_global_ld", "inst_global_st", "inst_shared_ld", "inst_shared_st", "inst_ldgsts", "inst_tensor_pipe")
_Z95 = 1.959963984540054


def _num(row: Mapping[str, Any], key: str) -> float:
    v = row.get(key)
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def _fin(x: float) -> float:
    return x if math.isfinite(x) else 0.0


# --------------------------------------------------------------------------- counts


@dataclass(frozen=True)
class MlCounts:
    """One kernel's (or one workload's summed) counts from Nsight Compute."""

    name: str
    flops_fp32: float = 0.0
    flops_fp64: float = 0.0
    tensor: Mapping[str, float] = field(default_factory=dict)
    dram_bytes: float = 0.0
    l2_bytes: float = 0.0
    l1_bytes: float = 0.0
    shared_bytes: float = 0.0
    other_inst: float = 0.0
    ncu_time_s: float = math.nan

    def tensor_flops(self, precision: str) -> float:
        return float(self.tensor.get(precision, 0.0))


def _tensor_from(v: Mapping[str, float]) -> dict[str, float]:
    def get(*keys: str) -> float:
        return sum(_fin(v.get(k, math.nan)) for k in keys)

    fp16 = (
        get("tc_ops_fp16")
        if math.isfinite(v.get("tc_ops_fp16", math.nan))
        else get("tc_ops_fp16_dst_fp16", "tc_ops_fp16_dst_fp32")
    )
    fp8 = (
        get("tc_ops_fp8")
        if math.isfinite(v.get("tc_ops_fp8", math.nan))
        else get("tc_ops_fp8_dst_fp16", "tc_ops_fp8_dst_fp32")
    )
    return {
        "bf16": get("tc_ops_bf16_dst_fp32"),
        "fp16": fp16,
        "fp8": fp8,
        "tf32": get("tc_ops_tf32_dst_fp32"),
        "int8": get("tc_ops_int8"),
        "fp64": get("tc_ops_fp64"),
    }


def counts_from_ncu_values(name: str, v: Mapping[str, float]) -> MlCounts:
    """Counts from summed ncu values keyed by :data:`archline.hw.ncu.METRICS`'s names."""

    def g(k: str) -> float:
        return _fin(v.get(k, math.nan))

    f32 = 2.0 * g("ffma") + g("fadd") + g("fmul")
    f64 = 2.0 * g("dfma") + g("dadd") + g("dmul")
    shared = v.get("shared_b", math.nan)
    if not math.isfinite(shared):
        shared = g("shared_ld_b") + g("shared_st_b") if ("shared_ld_b" in v or "shared_st_b" in v) else 0.0
    fp_inst = sum(g(k) for k in _FP_INST)
    mem_inst = 32.0 * sum(g(k) for k in _MEM_INST)
    return MlCounts(
        name=name,
        flops_fp32=f32,
        flops_fp64=f64,
        tensor=_tensor_from(v),
        dram_bytes=g("dram_read_b") + g("dram_write_b"),
        l2_bytes=g("l2_b"),
        l1_bytes=g("l1_b"),
        shared_bytes=shared,
        other_inst=max(g("thread_inst") - fp_inst - mem_inst, 0.0),
        ncu_time_s=v.get("time_ns", math.nan) * 1e-9,
    )


def counts_from_row(row: Mapping[str, Any], where: str) -> MlCounts:
    """Counts from one row of a run's counts table (:meth:`archline.hw.ncu.NcuCounts.as_row`)."""
    name = str(row.get("name") or "")
    if not name:
        raise InputError(f"{where}: missing kernel name")
    vals = {str(k): _num(row, str(k)) for k in row if k not in ("name", "kernel_names", "kernels")}
    bad = [k for k in ("dram_read_b", "l2_b", "thread_inst") if k in vals and vals[k] < 0]
    if bad:
        raise InputError(f"{where}: {bad[0]} is negative")
    return counts_from_ncu_values(name, vals)


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


# --------------------------------------------------------------------------- the protocol


def _rms(x: Sequence[float]) -> float:
    v = [e for e in x if math.isfinite(e)]
    return float(math.sqrt(np.mean(np.square(v)))) if v else math.nan


def _median_abs(x: Sequence[float]) -> float:
    v = [abs(e) for e in x if math.isfinite(e)]
    return float(np.median(v)) if v else math.nan


def _fit_eta(m: MlModel, cal: Sequence[tuple[MeasuredKernel, MlCounts]]) -> tuple[MlModel, dict[str, list[float]]]:
    """Step 1: η per class, the median of T_roofline/T_measured over the calibration kernels it bounds."""
    ratios: dict[str, list[float]] = {}
    for k, c in cal:
        t0, unit = m.time_roofline(c)
        if t0 > 0 and k.time_s > 0:
            ratios.setdefault(UNIT_CLASS.get(unit, "memory"), []).append(t0 / k.time_s)
    eta = {cls: float(np.median(v)) for cls, v in ratios.items()}
    for cls in ("tensor", "cuda", "memory"):
        eta.setdefault(cls, 1.0)
    return replace(m, eta=eta), ratios


def _choose_terms(
    m: MlModel, scored: Sequence[tuple[MeasuredKernel, MlCounts]]
) -> tuple[tuple[str, ...], dict[str, float]]:
    """Step 2: every subset of the optional terms by its median |error| at measured time on ``scored``."""
    scores: dict[str, float] = {}
    best: tuple[float, int, tuple[str, ...]] | None = None
    for r in range(len(OPTIONAL_TERMS) + 1):
        for subset in itertools.combinations(OPTIONAL_TERMS, r):
            mm = m.with_terms(subset)
            err = _median_abs([mm.predict(c, measured=k).error_measured_time for k, c in scored])
            scores["+".join(subset) or "base"] = err
            key = (round(err, 3), r, subset)
            if best is None or key < best:
                best = key
    assert best is not None
    return best[2], scores


def _finish(
    chosen: MlModel,
    cal: Sequence[tuple[MeasuredKernel, MlCounts]],
    ratios: Mapping[str, list[float]],
    scores: Mapping[str, float],
) -> MlModel:
    """Step 3: the model's own error on every calibration kernel, and the choices as written."""
    preds = [chosen.predict(c, measured=k, alpha=k.activity) for k, c in cal]
    return replace(
        chosen,
        model_sigma=_rms([p.error_measured_time for p in preds]),
        model_sigma_predicted=_rms([p.error_predicted_time for p in preds]),
        time_sigma=_rms([p.time_error for p in preds]),
        choices={
            "calibration_kernels": [k.name for k, _ in cal],
            "eta_ratios": {cls: sorted(v) for cls, v in ratios.items()},
            "term_scores_median_abs_error": dict(scores),
            "terms": list(chosen.terms),
            "calibration_median_abs_error_measured_time": _median_abs([p.error_measured_time for p in preds]),
            "calibration_median_abs_error_predicted_time": _median_abs([p.error_predicted_time for p in preds]),
        },
    )


def calibrate(
    m: MlModel, kernels: Sequence[tuple[MeasuredKernel, MlCounts]], *, variant: Variant = "frozen"
) -> MlModel:
    """The frozen protocol (docs/roofline.md §10b), on calibration kernels only; or, with
    ``variant="posthoc-cap"``, the post-hoc variant of :func:`calibrate_posthoc`; with ``variant="v2"``,
    protocol v2 (:func:`archline.model.ml_v2.calibrate_v2`).

    1. η per class (tensor, CUDA core, memory): the median of T_roofline/T_measured over the
       calibration kernels the class bounds (1 where none is).
    2. The optional terms: every subset of :data:`OPTIONAL_TERMS` is scored by the median
       |energy error| at the measured time; the lowest wins, the smaller subset on a tie
       (within 0.1 percentage point).
    3. The model's own error: the RMS relative energy error of the chosen model on the
       calibration kernels, at measured time and at predicted time, and of the predicted time.
    """
    if variant == "posthoc-cap":
        return calibrate_posthoc(m, kernels)
    if variant == "v2":
        return calibrate_v2(m, kernels)
    if variant != "frozen":
        raise InputError(f"model: unknown protocol variant {variant!r} (frozen, posthoc-cap or v2)")
    cal = _calibration(kernels)
    m, ratios = _fit_eta(m, cal)
    terms, scores = _choose_terms(m, cal)
    return _finish(m.with_terms(terms), cal, ratios, scores)


def _calibration(kernels: Sequence[tuple[MeasuredKernel, MlCounts]]) -> list[tuple[MeasuredKernel, MlCounts]]:
    cal = [(k, c) for k, c in kernels if k.group == "calibration"]
    if not cal:
        raise InputError("model: no calibration kernels with counts; the protocol needs them")
    return cal


def calibrate_posthoc(m: MlModel, kernels: Sequence[tuple[MeasuredKernel, MlCounts]]) -> MlModel:
    """The post-hoc variant (:data:`POSTHOC_LABEL`): the frozen protocol with two changes, on calibration kernels only.

    (a) The cap is the *observed* capped power: the median measured power E/T of the calibration
        kernels whose uncapped prediction (always-on terms, measured time) exceeds the nominal
        limit; the nominal limit where none does. The nominal limit stays in ``choices``.
    (b) The optional terms are scored on the uncapped calibration kernels only (a capped
        kernel's prediction is P·T whatever the terms); on all of them where every one is capped.

    η and the model's own error are as in the frozen protocol.
    """
    cal = _calibration(kernels)
    nominal = m.power_limit_w
    base = m.with_terms(())
    capped = [(k, c) for k, c in cal if base.predict(c, measured=k).cap_active_measured]
    power_w = {k.name: k.energy_j / k.time_s for k, _ in capped}
    cap_w = float(np.median(list(power_w.values()))) if power_w else nominal
    m, ratios = _fit_eta(replace(m, power_limit_w=cap_w), cal)
    uncapped = [(k, c) for k, c in cal if k.name not in power_w]
    terms, scores = _choose_terms(m, uncapped or cal)
    out = _finish(m.with_terms(terms), cal, ratios, scores)
    return replace(
        out,
        choices={
            **out.choices,
            "variant": "posthoc-cap",
            "label": POSTHOC_LABEL,
            "power_limit_nominal_w": nominal,
            "capped_power_w": cap_w,
            "capped_power_source": (
                f"median E/T of {len(power_w)} capped calibration kernels" if power_w else "nominal limit: none capped"
            ),
            "capped_calibration_kernels": power_w,
            "term_selection_kernels": [k.name for k, _ in (uncapped or cal)],
        },
    )


# --------------------------------------------------------------------------- protocol v2 (docs/roofline.md §10e)

#: Where protocol v2's predicted time may start from, in order of preference on a tie.
TIME_SOURCES: tuple[str, ...] = ("roofline", "ncu")
#: How protocol v2 is labelled wherever it is written or shown.
V2_LABEL = (
    "protocol v2 (docs/roofline.md §10e), frozen before its scoring runs; its rules were chosen after protocol v1 "
    "was scored on H100 GPU-cab9fa05 and H200 GPU-9af93dd4, on the same kernel set"
)


def capped_kappa(m: MlModel, cal: Sequence[tuple[MeasuredKernel, MlCounts]], capped: Sequence[str]) -> dict[str, float]:
    """(E − π0·T)/E_dyn of each capped calibration kernel (its measured dynamic energy over the components' sum)."""
    out: dict[str, float] = {}
    for k, c in cal:
        if k.name not in capped:
            continue
        dyn = float(sum(m.energy_terms(c, k.activity).values()))
        if dyn > 0 and k.time_s > 0:
            out[k.name] = (k.energy_j - m.pi0_w * k.time_s) / dyn
    return out


def calibrate_v2(m: MlModel, kernels: Sequence[tuple[MeasuredKernel, MlCounts]]) -> MlModel:
    """Protocol v2 (module docstring), on the calibration kernels of ``kernels`` only."""
    cal = _calibration(kernels)
    ph = calibrate_posthoc(m, kernels)
    capped = list((ph.choices.get("capped_calibration_kernels") or {}).keys())
    ratios = capped_kappa(ph, cal, capped)
    kappa = float(np.median(list(ratios.values()))) if ratios else 1.0
    have_ncu = all(math.isfinite(c.ncu_time_s) and c.ncu_time_s > 0 for _, c in cal)
    scores: dict[str, float] = {}
    for src in TIME_SOURCES:
        if src == "ncu" and not have_ncu:
            continue
        mm = replace(ph, cap_kappa=kappa, time_source=src)
        scores[src] = _median_abs([mm.predict(c, measured=k, alpha=k.activity).error_predicted_time for k, c in cal])
    best = min(scores, key=lambda s: (round(scores[s], 3), TIME_SOURCES.index(s)))
    chosen = replace(ph, cap_kappa=kappa, time_source=best)
    out = _finish(
        chosen,
        cal,
        ph.choices.get("eta_ratios") or {},
        ph.choices.get("term_scores_median_abs_error") or {},
    )
    return replace(
        out,
        choices={
            **ph.choices,
            **out.choices,
            "variant": "v2",
            "label": V2_LABEL,
            "cap_kappa": kappa,
            "cap_kappa_kernels": ratios,
            "time_source": best,
            "time_source_scores_median_abs_error_predicted_time": scores,
            "time_source_ncu_available": have_ncu,
        },
    )


@dataclass(frozen=True)
class MlScore:
    """The frozen model scored on one group of kernels, against the issue's targets."""

    group: str
    predictions: tuple[MlPrediction, ...]
    median_abs_error_measured_time: float
    median_abs_error_predicted_time: float
    median_abs_error_ncu_time: float
    max_abs_error_measured_time: float
    over_20pct: tuple[str, ...]
    target_measured: float = 0.05
    target_predicted: float = 0.12
    notes: tuple[str, ...] = ()

    @property
    def met(self) -> dict[str, bool]:
        return {
            "median_measured_time": self.median_abs_error_measured_time <= self.target_measured,
            "median_predicted_time": self.median_abs_error_predicted_time <= self.target_predicted,
            "none_over_20pct": not self.over_20pct,
        }


def score(m: MlModel, kernels: Sequence[tuple[MeasuredKernel, MlCounts]], group: str = "heldout") -> MlScore:
    """Apply the calibrated model unchanged to the kernels of ``group``."""
    preds = tuple(m.predict(c, measured=k, alpha=k.activity) for k, c in kernels if k.group == group)
    em = [p.error_measured_time for p in preds]
    return MlScore(
        group=group,
        predictions=preds,
        median_abs_error_measured_time=_median_abs(em),
        median_abs_error_predicted_time=_median_abs([p.error_predicted_time for p in preds]),
        median_abs_error_ncu_time=_median_abs([p.error_ncu_time for p in preds]),
        max_abs_error_measured_time=max((abs(e) for e in em if math.isfinite(e)), default=math.nan),
        over_20pct=tuple(
            p.name for p in preds if max(abs(_fin(p.error_measured_time)), abs(_fin(p.error_predicted_time))) > 0.20
        ),
    )

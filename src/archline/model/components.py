"""Choi §V-C extended: per-component energies from microbenchmarks, and counted (ncu) energy of real kernels.

Eq. (9)'s W and Q leave out what real kernels also pay for: operand data (the sweep's flops
multiply by −1; real ones multiply random data), FP64 tensor-core flops, L2 and shared-memory
traffic. Each missing term gets an energy per unit from one microbenchmark of the same run,
taken above the fitted constant power, ε_x = (E − π0·T)/count:

    E = π0·T + ε_mem·Q_DRAM + ε32·F32 + ε64·F64 + ε_tc·F_tc + ε_L2·(B_L2 − Q_DRAM) + ε_sh·B_sh
        [+ ε_inst·I_other]

with the counts of each held-out kernel from Nsight Compute. Nothing is fitted on the held-out
kernels. The cap-aware rule of the model applies: predicted power above the board's limit is
held at the limit (E = P_limit·T at the measured T). ``ε_inst`` (other thread instructions,
from an integer-add kernel) is reported but left out of the prediction unless asked for: it
counts address arithmetic as if every instruction toggled like a data-path add.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from archline.errors import InputError
from archline.model.parameters import ParameterSet
from archline.model.sweep import HeldOutRow

__all__ = [
    "COMPONENT_SOURCES",
    "ComponentEnergies",
    "CountedPrediction",
    "CountedSummary",
    "KernelCounts",
    "counts_from_dicts",
    "derive_components",
    "predict_counted",
]

#: Component → (microbenchmark row name, the row's count column it is divided by).
COMPONENT_SOURCES: dict[str, tuple[str, str]] = {
    "fp32_flop": ("operand.fma.fp32", "flops"),
    "fp64_flop": ("operand.fma.fp64", "flops"),
    "tensor_fp64_flop": ("operand.dmma.fp64", "flops"),
    "l2_byte": ("mem.l2.read", "bytes"),
    "shared_byte": ("mem.shared.read", "bytes"),
    "thread_inst": ("arith.int32.add", "ops"),
}


@dataclass(frozen=True)
class ComponentEnergies:
    """ε per component (J per flop, byte or thread instruction) above π0, and where each came from.

    ``values`` holds NaN for a component whose microbenchmark is missing or failed.
    """

    pi0_w: float
    values: dict[str, float]
    sources: dict[str, str]

    def get(self, key: str) -> float:
        return self.values.get(key, math.nan)


def _num(row: Mapping[str, object], key: str) -> float:
    v = row.get(key)
    try:
        return float(v) if v not in (None, "") else math.nan  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def derive_components(rows: Sequence[Mapping[str, object]], pi0_w: float) -> ComponentEnergies:
    """ε of each component from the run's microbenchmark rows (``name``, ``time_s``, ``energy_j`` and counts)."""
    by_name = {str(r.get("name")): r for r in rows if str(r.get("status", "ok")) == "ok"}
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for comp, (bench, col) in COMPONENT_SOURCES.items():
        r = by_name.get(bench)
        if r is None:
            values[comp] = math.nan
            sources[comp] = f"{bench}: not measured"
            continue
        t, e, n = _num(r, "time_s"), _num(r, "energy_j"), _num(r, col)
        if not (math.isfinite(t) and math.isfinite(e) and math.isfinite(n) and n > 0):
            values[comp] = math.nan
            sources[comp] = f"{bench}: incomplete row"
            continue
        values[comp] = (e - pi0_w * t) / n
        sources[comp] = f"{bench}: (E − π0·T)/{col}, E {e:.4g} J, T {t:.4g} s, {col} {n:.4g}"
    return ComponentEnergies(pi0_w=float(pi0_w), values=values, sources=sources)


@dataclass(frozen=True)
class KernelCounts:
    """A held-out kernel's counted work from Nsight Compute (sums over its kernels)."""

    name: str
    flops_fp32: float
    flops_fp64: float
    flops_tensor_fp64: float
    dram_bytes: float
    l2_bytes: float
    shared_bytes: float
    other_thread_inst: float


_REQUIRED = ("name", "flops_fp32", "flops_fp64", "dram_bytes", "l2_b", "shared_bytes", "thread_inst")
_MEM_INST = ("inst_global_ld", "inst_global_st", "inst_shared_ld", "inst_shared_st", "inst_ldgsts", "inst_tensor_pipe")
_FP_INST = ("ffma", "fadd", "fmul", "dfma", "dadd", "dmul")


def counts_from_dicts(
    rows: Sequence[Mapping[str, object]], heldout: Sequence[HeldOutRow], source: str = "counts"
) -> dict[str, KernelCounts]:
    """Counts per held-out kernel from the ncu table (one row per workload, :meth:`NcuCounts.as_row`).

    FP64 tensor-core flops are the kernel's known W less its FP64 CUDA-core flops (cuBLAS DGEMM
    on Hopper runs on DMMA); other thread instructions are all thread instructions less the
    counted floating-point and memory ones. Raises :class:`InputError` naming the row for a
    malformed one.
    """
    w_of = {h.name: h for h in heldout}
    out: dict[str, KernelCounts] = {}
    for i, r in enumerate(rows):
        where = f"{source}:{i + 2}"
        missing = [k for k in _REQUIRED if k not in r]
        if missing:
            raise InputError(f"{where}: missing column {missing[0]}")
        name = str(r["name"])
        v = {k: _num(r, k) for k in r if k != "name" and k != "kernel_names"}
        bad = [k for k in _REQUIRED[1:] if not math.isfinite(v[k]) or v[k] < 0]
        if bad:
            raise InputError(f"{where}: {bad[0]} is not a non-negative number")
        h = w_of.get(name)
        tensor = 0.0
        if h is not None and h.precision == "double":
            tensor = max(h.flops - v["flops_fp64"], 0.0)
        fp_inst = sum(v.get(k, 0.0) for k in _FP_INST if math.isfinite(v.get(k, math.nan)))
        mem_inst = 32.0 * sum(v.get(k, 0.0) for k in _MEM_INST if math.isfinite(v.get(k, math.nan)))
        out[name] = KernelCounts(
            name=name,
            flops_fp32=v["flops_fp32"],
            flops_fp64=v["flops_fp64"],
            flops_tensor_fp64=tensor,
            dram_bytes=v["dram_bytes"],
            l2_bytes=v["l2_b"],
            shared_bytes=v["shared_bytes"],
            other_thread_inst=max(v["thread_inst"] - fp_inst - mem_inst, 0.0),
        )
    return out


@dataclass(frozen=True)
class CountedPrediction:
    """One held-out kernel's counted prediction at its measured time: terms (J), total, cap, error."""

    name: str
    precision: str
    time_s: float
    measured_energy_j: float
    terms: dict[str, float]
    energy_uncapped_j: float
    energy_j: float
    cap_active: bool
    error: float
    dram_bytes: float
    l2_bytes: float
    shared_bytes: float
    flops_tensor_fp64: float


@dataclass(frozen=True)
class CountedSummary:
    """The counted predictions, their median |error|, the component energies used and the target."""

    components: ComponentEnergies
    predictions: tuple[CountedPrediction, ...]
    median_abs_error: float
    target: float
    target_met: bool
    with_instructions: bool = False
    eq9_ncu_median_abs_error: float = math.nan
    notes: tuple[str, ...] = field(default_factory=tuple)


def predict_counted(
    params: ParameterSet,
    components: ComponentEnergies,
    heldout: Sequence[HeldOutRow],
    counts: Mapping[str, KernelCounts],
    *,
    target: float = 0.10,
    with_instructions: bool = False,
) -> CountedSummary:
    """Predict every held-out kernel that has counts, at its measured time, with the counted model.

    Also reports eq. (9) alone with ncu's W and Q (no new terms), to show what each step adds.
    A component whose ε is unknown (NaN) contributes nothing and is named in the notes.
    """
    notes: list[str] = []
    unknown = [k for k, v in components.values.items() if not math.isfinite(v)]
    if unknown:
        notes.append(f"component energies not measured: {', '.join(unknown)} (left out)")

    def eps(key: str) -> float:
        v = components.get(key)
        return v if math.isfinite(v) else 0.0

    preds: list[CountedPrediction] = []
    eq9_errs: list[float] = []
    for h in heldout:
        c = counts.get(h.name)
        if c is None:
            notes.append(f"{h.name}: no ncu counts")
            continue
        p = params.params(h.precision)
        t = h.time_s
        extra_l2 = max(c.l2_bytes - c.dram_bytes, 0.0)
        terms = {
            "constant": p.pi0_w * t,
            "dram": p.eps_mem_j_per_b * c.dram_bytes,
            "fp32": eps("fp32_flop") * c.flops_fp32,
            "fp64": eps("fp64_flop") * c.flops_fp64,
            "tensor_fp64": eps("tensor_fp64_flop") * c.flops_tensor_fp64,
            "l2": eps("l2_byte") * extra_l2,
            "shared": eps("shared_byte") * c.shared_bytes,
        }
        if with_instructions:
            terms["instructions"] = eps("thread_inst") * c.other_thread_inst
        e_unc = float(sum(terms.values()))
        cap = params.power_limit_w * t if math.isfinite(params.power_limit_w) else math.inf
        e = min(e_unc, cap)
        preds.append(
            CountedPrediction(
                name=h.name,
                precision=h.precision,
                time_s=t,
                measured_energy_j=h.energy_j,
                terms=terms,
                energy_uncapped_j=e_unc,
                energy_j=e,
                cap_active=e_unc > cap,
                error=(e - h.energy_j) / h.energy_j,
                dram_bytes=c.dram_bytes,
                l2_bytes=c.l2_bytes,
                shared_bytes=c.shared_bytes,
                flops_tensor_fp64=c.flops_tensor_fp64,
            )
        )
        # Eq. (9) alone, with ncu's flops (tensor flops at the sweep's ε of that precision) and DRAM bytes.
        w = c.flops_fp32 + c.flops_fp64 + c.flops_tensor_fp64
        e9 = p.pi0_w * t + p.eps_flop_j * w + p.eps_mem_j_per_b * c.dram_bytes
        eq9_errs.append((e9 - h.energy_j) / h.energy_j)
    med = float(np.median(np.abs([q.error for q in preds]))) if preds else math.nan
    return CountedSummary(
        components=components,
        predictions=tuple(preds),
        median_abs_error=med,
        target=target,
        target_met=bool(med <= target),
        with_instructions=with_instructions,
        eq9_ncu_median_abs_error=float(np.median(np.abs(eq9_errs))) if eq9_errs else math.nan,
        notes=tuple(notes),
    )

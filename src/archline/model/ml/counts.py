"""The ML model's vocabulary and inputs: tensor precisions, terms, units, and one kernel's Nsight Compute counts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from archline.errors import InputError
from archline.model.components import COMPONENT_SOURCES

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

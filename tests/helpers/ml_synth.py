"""A synthetic GPU for the counted ML model: known component energies, a power limit, and kernels whose counts and
measured energies follow them exactly (optionally drawing a known power above the nominal limit when capped)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from archline.model.ml import RANDOM_ACTIVITY, MeasuredKernel, MlCounts
from archline.model.parameters import ParameterSet
from archline.records import write_csv

__all__ = [
    "BENCH",
    "EPS_MEM",
    "LIMIT",
    "PI0",
    "TRUE",
    "capped_kernels",
    "component_rows",
    "kernels",
    "params",
    "true_energy",
    "uncapped_kernels",
    "write_ml_run_dir",
]

PI0 = 120.0
EPS_MEM = 60e-12
#: The nominal power limit the model is given.
LIMIT = 700.0
#: The truth: J per counted unit above π0.
TRUE = {
    "fp32_flop": 5e-12,
    "fp64_flop": 12e-12,
    "tensor_fp64_flop": 4e-12,
    "l2_byte": 20e-12,
    "shared_byte": 6e-12,
    "thread_inst": 3e-12,
    "l1_byte": 4e-12,
    "tensor_bf16_flop": 0.35e-12,
    "tensor_fp16_flop": 0.34e-12,
    "tensor_fp8_flop": 0.2e-12,
}
BENCH = {
    "fp32_flop": ("operand.fma.fp32", "flops", 2e13),
    "fp64_flop": ("operand.fma.fp64", "flops", 1e13),
    "tensor_fp64_flop": ("operand.dmma.fp64", "flops", 5e13),
    "l2_byte": ("mem.l2.read", "bytes", 5e12),
    "shared_byte": ("mem.shared.read", "bytes", 2e13),
    "thread_inst": ("arith.int32.add", "ops", 3e13),
    "l1_byte": ("mem.l1.read", "bytes", 3e13),
    "tensor_bf16_flop": ("tensor.wgmma.bf16", "flops", 9e14),
    "tensor_fp16_flop": ("tensor.wgmma.fp16", "flops", 9e14),
    "tensor_fp8_flop": ("tensor.wgmma.fp8e4m3", "flops", 1.6e15),
}


def params(sigma: float = 0.0) -> ParameterSet:
    names = ("eps_s_j", "eps_mem_j_per_b", "pi0_w", "tau_flop_single_s", "tau_mem_s_per_b")
    values = (5e-12, EPS_MEM, PI0, 1 / 5e13, 1 / 3e12)
    cov = np.diag([0.0, 0.0, sigma**2, 0.0, 0.0])
    return ParameterSet(
        names=names,
        values=values,
        covariance=tuple(tuple(float(x) for x in r) for r in cov),
        precisions=("single",),
        power_limit_w=LIMIT,
    )


def component_rows(slope: float = 0.2e-12) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for comp, (name, col, n) in BENCH.items():
        t = 1.0
        rows.append({"name": name, "status": "ok", "time_s": t, "energy_j": PI0 * t + TRUE[comp] * n, col: n})
    # ε(α) = a + b·α through the toggle sweep, with ε(½) equal to the random row's.
    a = TRUE["tensor_bf16_flop"] - slope * RANDOM_ACTIVITY
    for pct in (0, 50, 100):
        n = 9e14
        e = PI0 + (a + slope * pct / 100) * n
        rows.append(
            {"name": f"tensor.wgmma.bf16.toggle-{pct}", "status": "ok", "time_s": 1.0, "energy_j": e, "flops": n}
        )
    return rows


def _dynamic(c: MlCounts, *, l1: bool = True, inst: bool = False) -> float:
    e = EPS_MEM * c.dram_bytes + TRUE["l2_byte"] * max(c.l2_bytes - c.dram_bytes, 0)
    e += TRUE["shared_byte"] * c.shared_bytes + TRUE["fp32_flop"] * c.flops_fp32 + TRUE["fp64_flop"] * c.flops_fp64
    e += TRUE["tensor_fp64_flop"] * c.tensor_flops("fp64")
    e += sum(TRUE[f"tensor_{p}_flop"] * c.tensor_flops(p) for p in ("bf16", "fp16", "fp8"))
    if l1:
        e += TRUE["l1_byte"] * max(c.l1_bytes - c.l2_bytes, 0)
    if inst:
        e += TRUE["thread_inst"] * c.other_inst
    return e


def true_energy(c: MlCounts, t: float, *, l1: bool = True, inst: bool = False, cap_w: float = LIMIT) -> float:
    """The energy the synthetic board measures: π0·T plus the true terms, held at ``cap_w``·T above it."""
    return min(PI0 * t + _dynamic(c, l1=l1, inst=inst), cap_w * t)


def _counts(rng: np.random.Generator, name: str, tensor: bool) -> MlCounts:
    tc = {"bf16": float(rng.uniform(1e11, 5e11))} if tensor else {}
    dram = float(rng.uniform(1e8, 5e8))
    return MlCounts(
        name=name,
        flops_fp32=float(rng.uniform(0, 1e9)),
        tensor=tc,
        dram_bytes=dram,
        l2_bytes=dram * float(rng.uniform(1.2, 3)),
        l1_bytes=dram * float(rng.uniform(3, 8)),
        shared_bytes=float(rng.uniform(0, 1e9)),
        other_inst=float(rng.uniform(1e8, 1e10)),
    )


def kernels(rng: np.random.Generator, n: int, group: str) -> list[tuple[MeasuredKernel, MlCounts]]:
    """Kernels of random counts and times (every third a BF16 tensor-core one), measured at the nominal limit."""
    out = []
    for i in range(n):
        c = _counts(rng, f"{group}.k{i}", i % 3 == 0)
        t = float(rng.uniform(2e-4, 2e-3))
        out.append((MeasuredKernel(name=c.name, group=group, time_s=t, energy_j=true_energy(c, t)), c))
    return out


def uncapped_kernels(
    rng: np.random.Generator, n: int, group: str, *, max_power_w: float = 450.0, prefix: str = "u"
) -> list[tuple[MeasuredKernel, MlCounts]]:
    """Kernels slow enough that every term, instructions included, keeps their power below ``max_power_w``."""
    out = []
    for i in range(n):
        c = _counts(rng, f"{group}.{prefix}{i}", i % 3 == 0)
        t = max(float(rng.uniform(2e-4, 2e-3)), _dynamic(c, inst=True) / (max_power_w - PI0))
        out.append((MeasuredKernel(name=c.name, group=group, time_s=t, energy_j=true_energy(c, t)), c))
    return out


def capped_kernels(
    rng: np.random.Generator, n: int, group: str, *, cap_w: float, prefix: str = "c"
) -> list[tuple[MeasuredKernel, MlCounts]]:
    """Tensor-core kernels fast enough that even their always-on terms exceed ``cap_w``: measured at ``cap_w``·T."""
    out = []
    for i in range(n):
        c = _counts(rng, f"{group}.{prefix}{i}", True)
        t = _dynamic(c, l1=False) / (float(rng.uniform(1.5, 3.0)) * cap_w - PI0)
        out.append((MeasuredKernel(name=c.name, group=group, time_s=t, energy_j=true_energy(c, t, cap_w=cap_w)), c))
    return out


def write_ml_run_dir(d: Path, pairs: list[tuple[MeasuredKernel, MlCounts]]) -> Path:
    """A roofline run directory with the tables the ML analysis reads (components, peaks, ML kernels and counts)."""
    d.mkdir(parents=True)
    write_csv(d / "roofline_components.csv", component_rows())
    (d / "roofline_peaks.json").write_text(json.dumps({"peak_flops_per_s": {"single": 5e13}}))
    ml, counts = [], []
    for k, c in pairs:
        ml.append({"name": k.name, "group": k.group, "status": "ok", "time_s": k.time_s, "energy_j": k.energy_j})
        counts.append(
            {
                "name": c.name,
                "ffma": c.flops_fp32 / 2,
                "dram_read_b": c.dram_bytes,
                "dram_write_b": 0.0,
                "l2_b": c.l2_bytes,
                "l1_b": c.l1_bytes,
                "shared_b": c.shared_bytes,
                "thread_inst": c.other_inst + c.flops_fp32 / 2,
                "tc_ops_bf16_dst_fp32": c.tensor_flops("bf16"),
                "time_ns": k.time_s * 1e9,
            }
        )
    ml.append({"name": "broken", "group": "heldout", "status": "failed"})
    write_csv(d / "roofline_ml.csv", ml)
    write_csv(d / "roofline_ml_counts.csv", counts)
    return d

"""Arithmetic throughput kernels (MIPP Table I columns plus Hopper types) and the occupancy sweeps."""

from __future__ import annotations

from dataclasses import dataclass

from archline.characterize.kernels.chain_kernel import chain_kernel, rounds_for
from archline.characterize.kernels.chain_table import CHAINS
from archline.characterize.kernels.chains import ChainDef
from archline.core.kernel import KernelSpec, Launch

__all__ = ["ARITH_TABLE", "BLOCK_SWEEP", "BPS_SWEEP", "ArithEntry", "arithmetic_kernels", "fp32_fma_occupancy"]

#: SASS instructions the unrolled loop body aims at: 512 x 16 B = 8 KB, well inside the
#: instruction cache, with the 4-instruction loop overhead under 1 %.
BODY_SASS = 512


@dataclass(frozen=True)
class ArithEntry:
    name: str
    chain: str
    chains: int
    spec_key: str | None
    what: str
    blocks_per_sm: int = 8


ARITH_TABLE: tuple[ArithEntry, ...] = (
    ArithEntry("arith.int32.add", "add.u32", 6, "int32.add", "INT32 simple: add.u32 leapfrog pairs"),
    ArithEntry("arith.int32.mul", "mul.lo.u32", 8, "int32.mul", "INT32 complex: mul.lo.u32 by a run-time odd k"),
    ArithEntry("arith.int32.mad", "mad.lo.u32", 8, "int32.mul", "INT32 complex: mad.lo.u32 x*k + c"),
    ArithEntry("arith.int32.popc", "popc.b32", 8, "popc", "population count (popc, with an IMAD carrier)"),
    ArithEntry("arith.int32.shift", "rot.b32", 8, "int32.shift", "shift: funnel-shift rotate by a run-time count"),
    ArithEntry(
        "arith.int32.logic", "lop3.b32", 4, "int32.logic", "bit ops: lop3 xor3 rings (and/or/xor all map to LOP3)"
    ),
    ArithEntry("arith.int32.compare", "minmax.u32", 8, "int32.compare", "compare: min/max against run-time bounds"),
    ArithEntry("arith.int64.add", "add.u64", 4, None, "INT64 simple: add.u64 leapfrog (two SASS per add)"),
    ArithEntry("arith.fp32.add", "add.f32", 8, "fp32", "FP32 simple: add.rn.f32"),
    ArithEntry("arith.fp32.mul", "mul.f32", 8, "fp32", "FP32 simple: mul.rn.f32"),
    ArithEntry("arith.fp32.fma", "fma.f32", 8, "fp32", "FP32 simple: fma.rn.f32"),
    ArithEntry("arith.fp64.add", "add.f64", 8, "fp64", "FP64 simple: add.rn.f64", blocks_per_sm=8),
    ArithEntry("arith.fp64.fma", "fma.f64", 8, "fp64", "FP64 simple: fma.rn.f64", blocks_per_sm=8),
    ArithEntry("arith.fp16.fma", "fma.f16x2", 8, "fp16x2", "FP16: fma.rn.f16x2 (two results per instruction)"),
    ArithEntry("arith.bf16.fma", "fma.bf16x2", 8, "bf16x2", "BF16: fma.rn.bf16x2 (two results per instruction)"),
    ArithEntry("arith.sfu.sin", "sin.approx.f32", 8, "sfu", "FP32 special: sin.approx (MUFU.SIN after an FMUL.RZ)"),
    ArithEntry("arith.sfu.cos", "cos.approx.f32", 8, "sfu", "FP32 special: cos.approx (MUFU.COS after an FMUL.RZ)"),
    ArithEntry("arith.sfu.ex2", "ex2.approx.f32", 8, "sfu", "FP32 special: ex2.approx of -x"),
    ArithEntry("arith.sfu.lg2", "ex2lg2.approx.f32", 8, "sfu", "FP32 special: lg2.approx alternating with ex2"),
    ArithEntry("arith.sfu.rsqrt", "rsqrt.approx.f32", 8, "sfu", "FP32 special: rsqrt.approx"),
    ArithEntry("arith.sfu.rcp", "rcp.approx.f32", 8, "sfu", "FP32 special: rcp.approx of -x"),
    ArithEntry("arith.fp32.div.ieee.normal", "div.rn.f32", 4, None, "FP32 division, IEEE (div.rn), normal operands"),
    ArithEntry(
        "arith.fp32.div.ieee.denormal",
        "div.rn.f32.denormal",
        4,
        None,
        "FP32 division, IEEE (div.rn), every other divisor subnormal",
    ),
    ArithEntry(
        "arith.fp32.div.full.normal", "div.full.f32", 4, None, "FP32 division, fast (div.full), normal operands"
    ),
    ArithEntry(
        "arith.fp32.div.full.denormal",
        "div.full.f32.denormal",
        4,
        None,
        "FP32 division, fast (div.full), every other divisor subnormal",
    ),
    ArithEntry(
        "arith.fp32.div.approx.normal", "div.approx.f32", 4, None, "FP32 division, fast (div.approx), normal operands"
    ),
    ArithEntry(
        "arith.fp32.div.approx.denormal",
        "div.approx.f32.denormal",
        4,
        None,
        "FP32 division, fast (div.approx), every other divisor subnormal",
    ),
)

#: Threads per block for the occupancy sweep (one block per SM); blocks per SM at 256 threads.
BLOCK_SWEEP = (32, 64, 128, 256, 512, 1024)
BPS_SWEEP = (1, 2, 4, 8)


def _chain(key: str) -> ChainDef:
    return CHAINS[key]


def _build(
    entry: ArithEntry,
    launch: Launch,
    *,
    name: str | None = None,
    sweep: tuple[str, float] | None = None,
    tags: tuple[str, ...] = (),
) -> KernelSpec:
    defn = _chain(entry.chain)
    rounds = rounds_for(defn, entry.chains, BODY_SASS)
    return chain_kernel(
        defn,
        name=name or entry.name,
        group="arithmetic",
        chains=entry.chains,
        rounds=rounds,
        launch=launch,
        description=f"{entry.what}; {entry.chains} independent chains per thread",
        spec_key=entry.spec_key,
        sweep=sweep,
        tags=("throughput", *tags),
    )


def arithmetic_kernels() -> list[KernelSpec]:
    """One throughput kernel per arithmetic unit, filling every SM (256 threads x blocks_per_sm)."""
    return [_build(e, Launch(block=256, blocks_per_sm=e.blocks_per_sm)) for e in ARITH_TABLE]


def fp32_fma_occupancy() -> list[KernelSpec]:
    """FP32 FMA at 32…1024 threads per block (one block per SM), and at 1…8 blocks of 256 per SM."""
    fma = next(e for e in ARITH_TABLE if e.name == "arith.fp32.fma")
    out = [
        _build(
            fma,
            Launch(block=b, blocks_per_sm=1),
            name=f"arith.fp32.fma.block.{b}",
            sweep=("block", b),
            tags=("occupancy",),
        )
        for b in BLOCK_SWEEP
    ]
    out += [
        _build(
            fma,
            Launch(block=256, blocks_per_sm=k),
            name=f"arith.fp32.fma.bps.{k}",
            sweep=("blocks_per_sm", k),
            tags=("occupancy",),
        )
        for k in BPS_SWEEP
    ]
    return out

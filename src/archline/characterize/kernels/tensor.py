"""Tensor-core throughput kernels: warp-level ``mma.sync`` in every dense type, on chosen operand data.

Each warp keeps ``tiles`` independent accumulator tiles and, per trip, issues for every tile the
products of the operand sets ``s0, s1, −s0, −s1`` (:mod:`tensor_data`), tile ``c`` starting at set
``c``: consecutive instructions always read different data, and every product is undone, so the
accumulators stay bounded (exactly at their start for integer and ``ones`` data). After the loop a
*witness* MMA multiplies all-ones fragments: every element of its result must equal the depth K,
which proves on the host that the instruction computed a K-deep dot product.

Throughput is counted in dense flops (integer: ops) per thread, 2·M·N·K per warp-MMA over 32
threads; ``Work.ops`` holds the same count, so "ops per clock per SM" compares with the spec's
dense tensor flops per clock per SM (:data:`TENSOR_SPEC`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import PTX_TARGET, PTX_VERSION, RegClass, open_frame, retarget
from archline.characterize.kernels.tensor_data import DATA_MODES, FORMATS, data_sweep, mode_label, operand_words
from archline.characterize.kernels.verify import Reject, check_live, out_words, verifier
from archline.core.kernel import KernelSpec, Launch, SassCheck, VerifyFn, Work

__all__ = [
    "EMULATED",
    "MMA_TYPES",
    "TENSOR_SPEC",
    "MmaType",
    "mma_kernel",
    "tensor_data_kernels",
    "tensor_kernels",
]


@dataclass(frozen=True)
class MmaType:
    """One ``mma.sync`` flavour: its PTX shape and types, fragment sizes and what it needs."""

    key: str
    shape: tuple[int, int, int]
    ptx_types: str
    elem: str
    integer: bool
    sass: str
    min_cc: tuple[int, int]
    min_ptx: tuple[int, int]
    a_words: int = 4
    b_words: int = 2

    @property
    def flops_per_warp(self) -> int:
        m, n, k = self.shape
        return 2 * m * n * k


#: Dense ``mma.sync`` flavours (PTX ISA "Warp-level matrix multiply-accumulate instructions").
#: FP8 needs sm_89 and PTX ISA 8.4; BF16/TF32/INT8 m16n8k32 need sm_80.
#: FP8 ``mma.sync`` is native on sm_89 and sm_120 (QMMA). On sm_90 and sm_100 ptxas emulates it (F2FP unpack to
#: FP16, HMMA with a zero accumulator, FADD), so it measures no FP8 tensor path there: Hopper's FP8
#: tensor cores are reached through ``wgmma`` only (:mod:`tensor_wgmma`).
MMA_TYPES: tuple[MmaType, ...] = (
    MmaType("fp16", (16, 8, 16), "f32.f16.f16.f32", "f16", False, "HMMA", (8, 0), (7, 0)),
    MmaType("bf16", (16, 8, 16), "f32.bf16.bf16.f32", "bf16", False, "HMMA", (8, 0), (7, 0)),
    MmaType("tf32", (16, 8, 8), "f32.tf32.tf32.f32", "tf32", False, "HMMA", (8, 0), (7, 0)),
    MmaType("int8", (16, 8, 32), "s32.s8.s8.s32", "s8", True, "IMMA", (8, 0), (7, 0)),
    MmaType("fp8e4m3", (16, 8, 32), "f32.e4m3.e4m3.f32", "e4m3", False, "QMMA", (8, 9), (8, 4)),
    MmaType("fp8e5m2", (16, 8, 32), "f32.e5m2.e5m2.f32", "e5m2", False, "QMMA", (8, 9), (8, 4)),
)

#: Spec dense tensor-core throughput, flops (integer: ops) per clock per SM, by compute capability.
#: Sources: NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), table "A100 Tensor Core
#: throughput per SM": FP16/BF16 1024 dense FMA/clk/SM (2048 flops), TF32 512 FMA, INT8 2048 ops×…,
#: FP64 64 FMA; NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): "2× the MMA rate per SM
#: of A100" for every type, FP8 at twice FP16 (dense FP16 989.4 TFLOPS = 132 SMs × 1830 MHz × 4096).
TENSOR_SPEC: Mapping[tuple[int, int], Mapping[str, float]] = {
    (8, 0): {"tensor.fp16": 2048, "tensor.bf16": 2048, "tensor.tf32": 1024, "tensor.int8": 4096, "tensor.fp64": 128},
    (9, 0): {
        "tensor.fp16": 4096,
        "tensor.bf16": 4096,
        "tensor.tf32": 2048,
        "tensor.int8": 8192,
        "tensor.fp8e4m3": 8192,
        "tensor.fp8e5m2": 8192,
        "tensor.fp64": 256,
    },
}


#: Compute capabilities on which an ``mma.sync`` type is emulated rather than native.
EMULATED: Mapping[str, frozenset[tuple[int, int]]] = {
    "fp8e4m3": frozenset({(9, 0), (10, 0)}),
    "fp8e5m2": frozenset({(9, 0), (10, 0)}),
}


def _ptx_version(need: tuple[int, int]) -> tuple[int, int]:
    return max(need, (int(PTX_VERSION.split(".")[0]), int(PTX_VERSION.split(".")[1])))


def mma_kernel(
    t: MmaType, mode: str = "random", *, tiles: int = 4, block: int = 128, blocks_per_sm: int = 4
) -> KernelSpec:
    """``mma.sync`` throughput kernel for type ``t`` on operand data ``mode``."""
    name = f"tensor.mma.{t.key}" + ("" if mode == "random" else f".{mode}")
    frame = open_frame(f"k_{name.replace('.', '_').replace('-', '_')}")
    kb = frame.kb
    ops = operand_words(frame, t.elem, mode, t.a_words + t.b_words)
    acc: RegClass = "b32" if t.integer else "f32"
    d = [kb.regs(acc, 4) for _ in range(tiles)]
    for tile in d:
        for r in tile:
            kb.emit(f"mov.b32 {r}, 0;" if t.integer else f"mov.f32 {r}, 0f00000000;")
    m, n, k = t.shape
    op = f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{t.ptx_types}"

    def mma(dst: list[str], words: list[str], c_src: list[str] | None = None, b_words: list[str] | None = None) -> None:
        a, b = words[: t.a_words], (b_words if b_words is not None else words)[t.a_words :]
        c = ", ".join(c_src if c_src is not None else dst)
        kb.emit(f"{op} {{{', '.join(dst)}}}, {{{', '.join(a)}}}, {{{', '.join(b)}}}, {{{c}}};")

    frame.begin_loop()
    for s in range(4):
        for c in range(tiles):
            # A from s0, s1, −s0, −s1 (B from s0, s1) from tile c's start: the pairs cancel.
            i = (s + c) % 4
            mma(d[c], ops.sets[i], b_words=ops.sets[i % 2])
    frame.end_loop()
    # The witness: all-ones fragments, zero accumulator: every result element is K.
    one = FORMATS[t.elem].one
    ones = kb.regs("b32", t.a_words + t.b_words)
    for r in ones:
        kb.emit(f"mov.b32 {r}, {one:#x};")
    zero = kb.regs(acc, 4)
    for r in zero:
        kb.emit(f"mov.b32 {r}, 0;" if t.integer else f"mov.f32 {r}, 0f00000000;")
    wit = kb.regs(acc, 4)
    mma(wit, ones, zero)
    frame.finish([*((r, acc) for tile in d for r in tile), (wit[0], acc), (wit[3], acc)])
    per_thread_flops = 4 * tiles * t.flops_per_warp / 32
    ptx = retarget(frame.ptx(), version=_ptx_version(t.min_ptx), target=PTX_TARGET)
    return KernelSpec(
        name=name,
        group="tensor",
        description=(
            f"tensor cores: mma.sync m{m}n{n}k{k} {t.ptx_types}, {4 * tiles} per trip on {tiles} accumulator "
            f"tiles, operands {mode_label(mode)}; each product undone with the negated set"
        ),
        ptx=ptx,
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit=f"tensor_{t.key}", ops=per_thread_flops, flops=per_thread_flops),
        launch=Launch(block=block, blocks_per_sm=blocks_per_sm),
        sass=(SassCheck(t.sass, 4 * tiles),),
        verify=_verify_mma(t, mode, tiles),
        out_dtypes={"out": "uint32"},
        spec_key=f"tensor.{t.key}",
        sweep=data_sweep(mode),
        tags=("tensor", "mma.sync", f"data:{mode}", *(f"emulated-on:sm_{a}{b}" for a, b in EMULATED.get(t.key, ()))),
        min_cc=t.min_cc,
        min_ptx=t.min_ptx,
    )


def _verify_mma(t: MmaType, mode: str, tiles: int) -> VerifyFn:
    """Liveness; the witness equals K; accumulators exactly 0 (integer or ones) or bounded."""
    k = t.shape[2]
    nacc = 4 * tiles
    exact = t.integer or mode in ("zeros", "ones")

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = (int(scalars[x]) for x in ("threads", "iters", "seed"))
        out = out_words(outputs, threads, 1 + nacc + 2)
        check_live(out, seed, iters)
        for w in (1 + nacc, 2 + nacc):
            got = out[w].view(np.int32) if t.integer else np.ascontiguousarray(out[w]).view(np.float32)
            bad = np.flatnonzero(got != k)
            if bad.size:
                i = int(bad[0])
                raise Reject(f"witness MMA of thread {i} gave {got[i]!r}, expected the depth K = {k}")
        acc = np.stack([out[1 + j] for j in range(nacc)])
        vals = acc.view(np.int32).astype(np.float64) if t.integer else acc.view(np.float32).astype(np.float64)
        # Each undone product leaves at most rounding behind: |a·b| ≤ 4 per term, K terms.
        limit = 0.0 if exact else 4.0 * k * 2.0**-10 * 4 * max(iters, 1)
        where = np.argwhere(~np.isfinite(vals) | (np.abs(vals) > limit))
        if where.size:
            j, i = (int(x) for x in where[0])
            raise Reject(f"accumulator {j} of thread {i} is {vals[j, i]!r}, expected within ±{limit:g}")

    return verify


def tensor_kernels() -> list[KernelSpec]:
    """One ``mma.sync`` kernel per dense type on random data, FP64 (DMMA) included."""
    from archline.characterize.kernels.operands import operand_dmma

    dmma = operand_dmma()
    per_thread = dmma.work.flops
    fp64 = replace(
        dmma,
        name="tensor.mma.fp64",
        group="tensor",
        work=Work(unit="tensor_fp64", ops=per_thread, flops=per_thread),
        spec_key="tensor.fp64",
        tags=("tensor", "mma.sync", "data:random"),
        min_cc=(9, 0),
        min_ptx=(7, 8),
    )
    return [*(mma_kernel(t) for t in MMA_TYPES), fp64]


def tensor_data_kernels() -> list[KernelSpec]:
    """The operand-data sweeps: every data mode for ``wgmma`` BF16 and FP32 FFMA; zeros for
    ``mma.sync`` FP16 and FP8 ``wgmma``."""
    from archline.characterize.kernels.operands import ffma_data_kernel
    from archline.characterize.kernels.tensor_wgmma import WGMMA_TYPES, wgmma_kernel, wgmma_kernels

    by_key = {t.key: t for t in WGMMA_TYPES}
    fp16 = next(t for t in MMA_TYPES if t.key == "fp16")
    out = wgmma_kernels()
    out += [wgmma_kernel(by_key["bf16"], m) for m in DATA_MODES if m != "random"]
    out += [wgmma_kernel(by_key["fp8e4m3"], "zeros"), mma_kernel(fp16, "zeros")]
    out += [ffma_data_kernel(m) for m in DATA_MODES]
    return out

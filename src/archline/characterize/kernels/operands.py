"""Random-operand FMA and FP64 tensor-core (DMMA) kernels: the energy of a flop on data like real kernels'.

The roofline sweep's extra FMAs (``y = c − y``, multiplier operand −1) toggle almost no bits of
the multiplier, so its fitted ε_s is the energy of a *quiet* flop. Real kernels multiply random
data: on an H100 a cuBLAS SGEMM on random inputs draws 1.6× the energy of the same GEMM on
constant inputs at the same speed. These kernels measure the flop on random data:

* ``operand.fma.fp32`` / ``operand.fma.fp64``: 8 accumulators, each updated as
  ``y = fma(a_p, b_q, y)`` with the (a, b) pair rotating through 8 × 8 random registers, then
  undone with ``fma(−a_p, b_q, y)`` so the accumulators stay bounded (they wander only by
  rounding);
* ``operand.dmma.fp64``: ``mma.sync.m16n8k8.f64`` (SASS ``DMMA.16x8x8``, the shape cuBLAS uses
  on Hopper) on 4 accumulator tiles with random A/B fragments, each product undone with −A.

All operands are ±[1, 2) with random mantissas built from the per-thread seed words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import Frame, RegClass, open_frame
from archline.characterize.kernels.tensor_data import data_sweep, mode_label, operand_words
from archline.characterize.kernels.verify import Reject, check_live, out_words, verifier
from archline.core.kernel import KernelSpec, Launch, SassCheck, Work

__all__ = ["OPERAND_KERNELS", "ffma_data_kernel", "operand_dmma", "operand_fma", "operand_kernels"]

_HASH64 = 0x9E3779B97F4A7C15
_NVAL = 8  # random a's and b's per thread


def _random_value(frame: Frame, j: int, f64: bool) -> str:
    """A register holding ±[1, 2) with a random mantissa, from seed word ``j``."""
    kb = frame.kb
    s = frame.seed_word(j)
    if not f64:
        bits, r = kb.reg("b32"), kb.reg("f32")
        kb.emit(f"and.b32 {bits}, {s}, 0x807FFFFF;", f"or.b32 {bits}, {bits}, 0x3F800000;", f"mov.b32 {r}, {bits};")
        return r
    wide, bits, r = kb.reg("b64"), kb.reg("b64"), kb.reg("f64")
    kb.emit(f"cvt.u64.u32 {wide}, {s};", f"mul.lo.u64 {wide}, {wide}, {_HASH64};")
    t = kb.reg("b64")
    kb.emit(f"shr.b64 {t}, {wide}, 29;", f"xor.b64 {wide}, {wide}, {t};")
    kb.emit(f"and.b64 {bits}, {wide}, 0x800FFFFFFFFFFFFF;", f"or.b64 {bits}, {bits}, 0x3FF0000000000000;")
    kb.emit(f"mov.b64 {r}, {bits};")
    return r


def operand_fma(precision: Literal["fp32", "fp64"], *, block: int = 256, blocks_per_sm: int = 8) -> KernelSpec:
    """Random-operand FMA throughput kernel: 128 FMAs per thread per trip, on 8 independent accumulators."""
    f64 = precision == "fp64"
    ty = "f64" if f64 else "f32"
    reg: RegClass = "f64" if f64 else "f32"
    frame = open_frame(f"k_operand_fma_{precision}")
    kb = frame.kb
    a = [_random_value(frame, j, f64) for j in range(_NVAL)]
    b = [_random_value(frame, _NVAL + j, f64) for j in range(_NVAL)]
    y = [_random_value(frame, 2 * _NVAL + j, f64) for j in range(_NVAL)]
    na = kb.regs(reg, _NVAL)
    for j in range(_NVAL):
        kb.emit(f"neg.{ty} {na[j]}, {a[j]};")
    frame.begin_loop()
    for sign in (a, na):
        for k in range(_NVAL):
            for j in range(_NVAL):
                kb.emit(f"fma.rn.{ty} {y[j]}, {sign[(j + k) % _NVAL]}, {b[(3 * j + k) % _NVAL]}, {y[j]};")
    frame.end_loop()
    frame.finish([(v, reg) for v in y])
    fmas = 2 * _NVAL * _NVAL
    op = "DFMA" if f64 else "FFMA"
    return KernelSpec(
        name=f"operand.fma.{precision}",
        group="operand",
        description=(
            f"{precision} FMA on random operands: {fmas} FMAs per trip on 8 accumulators, (a, b) rotating "
            "through 8 × 8 random registers, each product undone with −a"
        ),
        ptx=frame.ptx(),
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit=precision, ops=float(fmas), flops=float(2 * fmas)),
        launch=Launch(block=block, blocks_per_sm=blocks_per_sm),
        sass=(SassCheck(op, fmas),),
        verify=_verify_bounded(f64, _NVAL, per_trip=2 * _NVAL, words_per_value=2 if f64 else 1, bound=4.0),
        out_dtypes={"out": "uint32"},
        spec_key=precision,
        tags=("operand", precision),
    )


def operand_dmma(*, block: int = 128, blocks_per_sm: int = 4, tiles: int = 4) -> KernelSpec:
    """FP64 tensor-core kernel: ``mma.sync.m16n8k8.f64`` on ``tiles`` accumulator tiles, random fragments."""
    frame = open_frame("k_operand_dmma_fp64")
    kb = frame.kb
    amat = [_random_value(frame, j, True) for j in range(4)]
    bmat = [[_random_value(frame, 4 + 2 * s + j, True) for j in range(2)] for s in range(2)]
    namat = kb.regs("f64", 4)
    for j in range(4):
        kb.emit(f"neg.f64 {namat[j]}, {amat[j]};")
    dmat = [[_random_value(frame, 8 + 4 * c + j, True) for j in range(4)] for c in range(tiles)]
    frame.begin_loop()
    # A·B then −A·B with the same B, then the other B: every product is undone (up to rounding).
    for rep in range(4):
        am = amat if rep % 2 == 0 else namat
        for c in range(tiles):
            bm = bmat[(c + rep // 2) % 2]
            d = ", ".join(dmat[c])
            kb.emit(
                f"mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {{{d}}}, {{{', '.join(am)}}}, "
                f"{{{', '.join(bm)}}}, {{{d}}};"
            )
    frame.end_loop()
    frame.finish([(v, "f64") for tile in dmat for v in tile])
    mmas = 4 * tiles
    # One m16n8k8 is 16·8·8 = 1024 FMAs per warp: 32 per thread, 64 flops.
    return KernelSpec(
        name="operand.dmma.fp64",
        group="operand",
        description=(
            f"FP64 tensor cores: mma.sync.m16n8k8.f64 on random fragments, {mmas} per trip on {tiles} "
            "accumulator tiles, each product undone with −A"
        ),
        ptx=frame.ptx(),
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit="tensor_fp64", ops=float(mmas), flops=float(mmas * 64)),
        launch=Launch(block=block, blocks_per_sm=blocks_per_sm),
        sass=(SassCheck("DMMA", mmas),),
        verify=_verify_bounded(True, 4 * tiles, per_trip=mmas * 8, words_per_value=2, bound=64.0),
        out_dtypes={"out": "uint32"},
        spec_key=None,
        tags=("operand", "tensor"),
    )


def ffma_data_kernel(mode: str, *, block: int = 256, blocks_per_sm: int = 8) -> KernelSpec:
    """FP32 FMA throughput on operand data ``mode`` (:mod:`tensor_data`): 32 FMAs per trip on 8 accumulators.

    Consecutive FMAs read the a-operands ``s0, s1, −s0, −s1`` in turn and b-operands ``b0, b1``, so the
    mode's toggle rate is the rate between consecutive instructions; accumulator ``k`` receives
    every set once per trip, so the products cancel.
    """
    frame = open_frame(f"k_operand_ffma_{mode.replace('-', '_')}")
    kb = frame.kb
    kb.maxnreg = 32  # 2048 resident threads per SM
    ops = operand_words(frame, "f32", mode, 2)
    y = kb.regs("f32", _NVAL)
    for r in y:
        kb.emit(f"mov.f32 {r}, 0f00000000;")
    frame.begin_loop()
    for rnd in range(_NVAL):
        for step in range(4):
            a, b = ops.sets[step][0], ops.sets[step % 2][1]
            acc = y[(rnd + step) % _NVAL]
            kb.emit(f"fma.rn.f32 {acc}, {a}, {b}, {acc};")
    frame.end_loop()
    frame.finish([(v, "f32") for v in y])
    fmas = 4 * _NVAL
    exact = mode in ("zeros", "ones")
    return KernelSpec(
        name=f"operand.ffma.{mode}",
        group="tensor",
        description=f"FP32 FMA, operands {mode_label(mode)}: {fmas} FMAs per trip on 8 accumulators, products cancel",
        ptx=frame.ptx(),
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit="fp32", ops=float(fmas), flops=float(2 * fmas)),
        launch=Launch(block=block, blocks_per_sm=blocks_per_sm),
        sass=(SassCheck("FFMA", fmas),),
        verify=_verify_bounded(False, _NVAL, per_trip=fmas, words_per_value=1, bound=0.0 if exact else 4.0),
        out_dtypes={"out": "uint32"},
        spec_key="fp32",
        sweep=data_sweep(mode),
        tags=("operand", "fp32", f"data:{mode}"),
    )


def _verify_bounded(f64: bool, nvalues: int, *, per_trip: int, words_per_value: int, bound: float):  # type: ignore[no-untyped-def]
    """Liveness, and every accumulator finite and within |y| ≤ bound + rounding drift."""
    eps = 2.0**-52 if f64 else 2.0**-23

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = (int(scalars[k]) for k in ("threads", "iters", "seed"))
        out = out_words(outputs, threads, 1 + nvalues * words_per_value)
        check_live(out, seed, iters)
        # Each undone product leaves at most one rounding of a value below ~2·bound behind.
        limit = 2.0 + bound + 4.0 * bound * eps * per_trip * iters
        for k in range(nvalues):
            w = 1 + k * words_per_value
            if f64:
                v = (out[w].astype(np.uint64) | (out[w + 1].astype(np.uint64) << np.uint64(32))).view(np.float64)
            else:
                v = np.ascontiguousarray(out[w]).view(np.float32).astype(np.float64)
            bad = np.flatnonzero(~np.isfinite(v) | (np.abs(v) > limit))
            if bad.size:
                i = int(bad[0])
                raise Reject(f"accumulator {k} of thread {i} is {v[i]!r}, expected finite and within ±{limit:g}")

    return verify


def operand_kernels() -> list[KernelSpec]:
    """The three random-operand kernels, in the order the roofline run measures them."""
    return [operand_fma("fp32"), operand_fma("fp64"), operand_dmma()]


#: Names of :func:`operand_kernels`.
OPERAND_KERNELS = ("operand.fma.fp32", "operand.fma.fp64", "operand.dmma.fp64")

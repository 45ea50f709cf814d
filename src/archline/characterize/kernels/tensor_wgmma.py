"""Hopper warpgroup tensor-core kernels: ``wgmma.mma_async`` m64n256 with shared-memory operands (sm_90a).

One warpgroup (128 threads) per block fills its shared memory with the operand sets of
:mod:`tensor_data` (A tiles ``s0, s1, −s0, −s1``; B tiles ``s0, s1``), then per trip issues eight
``wgmma`` into one 64×256 accumulator (two passes over the sets, so every product is undone),
commits them as a group and waits until at most one group is in flight, as a GEMM main loop does.
After the loop a witness ``wgmma`` multiplies all-ones tiles with a zero accumulator: every element
of its result must equal the depth K, whatever the hardware's tile layout.

Shared-memory descriptors use no swizzle with K-major core matrices (8 rows × 16 bytes); every
tile is 32 bytes deep (K × element size), so A is 64 × 32 B and B is 256 × 32 B. Data placement
inside a tile does not matter for the measurement: each tile holds the set's random words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import PTX_TARGET, KernelBuilder, RegClass, open_frame, retarget
from archline.characterize.kernels.tensor_data import FORMATS, data_sweep, mode_label, operand_words
from archline.characterize.kernels.verify import Reject, check_live, out_words, verifier
from archline.core.kernel import KernelSpec, Launch, SassCheck, VerifyFn, Work

__all__ = ["WGMMA_TYPES", "WgmmaType", "wgmma_kernel", "wgmma_kernels"]

_N = 256
_A_BYTES = 64 * 32
_B_BYTES = _N * 32
_THREADS = 128
_PER_TRIP = 8


@dataclass(frozen=True)
class WgmmaType:
    """One dense ``wgmma`` flavour: depth K, PTX types, element format, immediates it takes."""

    key: str
    k: int
    ptx_types: str
    elem: str
    integer: bool
    #: Immediate operands after scale-d: scale-a, scale-b and (16-bit types) transpose flags.
    imms: str
    sass: str

    @property
    def flops_per_warpgroup(self) -> int:
        return 2 * 64 * _N * self.k


#: PTX ISA 8.0 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate", dense, sm_90a only.
WGMMA_TYPES: tuple[WgmmaType, ...] = (
    WgmmaType("bf16", 16, "f32.bf16.bf16", "bf16", False, "1, 1, 0, 0", "HGMMA"),
    WgmmaType("fp16", 16, "f32.f16.f16", "f16", False, "1, 1, 0, 0", "HGMMA"),
    WgmmaType("tf32", 8, "f32.tf32.tf32", "tf32", False, "1, 1", "HGMMA"),
    WgmmaType("fp8e4m3", 32, "f32.e4m3.e4m3", "e4m3", False, "1, 1", "QGMMA"),
    WgmmaType("fp8e5m2", 32, "f32.e5m2.e5m2", "e5m2", False, "1, 1", "QGMMA"),
    WgmmaType("int8", 32, "s32.s8.s8", "s8", True, "", "IGMMA"),
)


def _desc(kb: KernelBuilder, addr: str) -> str:
    """A shared-memory matrix descriptor for the tile at shared address ``addr`` (no swizzle)."""
    lo, d = kb.reg("b32"), kb.reg("b64")
    # start address >> 4 (bits 0–13), leading byte offset 128 >> 4 (bits 16–29),
    # stride byte offset 256 >> 4 (bits 32–45), base offset 0, swizzle mode 0 (bits 62–63).
    kb.emit(f"shr.u32 {lo}, {addr}, 4;", f"and.b32 {lo}, {lo}, 0x3FFF;", f"or.b32 {lo}, {lo}, {(128 >> 4) << 16:#x};")
    kb.emit(f"mov.b64 {d}, {{{lo}, {256 >> 4}}};")
    return d


def wgmma_kernel(t: WgmmaType, mode: str = "random", *, blocks_per_sm: int = 2) -> KernelSpec:
    """``wgmma`` m64n256 throughput kernel for type ``t`` on operand data ``mode`` (sm_90a)."""
    name = f"tensor.wgmma.{t.key}" + ("" if mode == "random" else f".{mode}")
    frame = open_frame(f"k_{name.replace('.', '_').replace('-', '_')}")
    kb = frame.kb
    smem = kb.symbol("smem")
    a_words, b_words = _A_BYTES // 4 // _THREADS, _B_BYTES // 4 // _THREADS
    # A: s0, s1, −s0, −s1 at 0..4·2 KiB; B: s0, s1; then the all-ones A and B tiles.
    a_off = [j * _A_BYTES for j in range(4)]
    b_off = [4 * _A_BYTES + j * _B_BYTES for j in range(2)]
    ones_a, ones_b = 4 * _A_BYTES + 2 * _B_BYTES, 5 * _A_BYTES + 2 * _B_BYTES
    total = ones_b + _B_BYTES
    kb.module_decl(f".shared .align 1024 .b8 {smem}[{total}];")
    ops = operand_words(frame, t.elem, mode, a_words + b_words)
    base, mine = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"mov.u32 {base}, {smem};", f"shl.b32 {mine}, {frame.tid}, 2;", f"add.u32 {mine}, {mine}, {base};")

    def store(off: int, words: list[str]) -> None:
        for i, w in enumerate(words):
            kb.emit(f"st.shared.b32 [{mine}+{off + 4 * i * _THREADS}], {w};")

    for j in range(4):
        store(a_off[j], ops.sets[j][:a_words])
    for j in range(2):
        store(b_off[j], ops.sets[j][a_words:])
    one = kb.reg("b32")
    kb.emit(f"mov.b32 {one}, {FORMATS[t.elem].one:#x};")
    store(ones_a, [one] * a_words)
    store(ones_b, [one] * b_words)
    kb.emit("bar.sync 0;", "fence.proxy.async.shared::cta;")

    def desc_at(off: int) -> str:
        addr = kb.reg("b32")
        kb.emit(f"add.u32 {addr}, {base}, {off};")
        return _desc(kb, addr)

    da = [desc_at(o) for o in a_off]
    db = [desc_at(o) for o in b_off]
    d1a, d1b = desc_at(ones_a), desc_at(ones_b)
    acc_cls: RegClass = "b32" if t.integer else "f32"
    d = kb.regs(acc_cls, _N // 2)
    for r in d:
        kb.emit(f"mov.b32 {r}, 0;" if t.integer else f"mov.f32 {r}, 0f00000000;")
    ptrue, pfalse = kb.reg("pred"), kb.reg("pred")
    kb.emit(f"setp.eq.u32 {ptrue}, {frame.tid}, {frame.tid};", f"setp.ne.u32 {pfalse}, {frame.tid}, {frame.tid};")
    dlist = "{" + ", ".join(d) + "}"
    op = f"wgmma.mma_async.sync.aligned.m64n{_N}k{t.k}.{t.ptx_types}"
    tail = f", {t.imms}" if t.imms else ""

    def wgmma(a: str, b: str, scale_d: str) -> None:
        kb.emit(f"{op} {dlist}, {a}, {b}, {scale_d}{tail};")

    frame.begin_loop()
    kb.emit("wgmma.fence.sync.aligned;")
    for i in range(_PER_TRIP):
        s = i % 4
        wgmma(da[s], db[s % 2], ptrue)
    kb.emit("wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 1;")
    frame.end_loop()
    kb.emit("wgmma.wait_group.sync.aligned 0;")
    # The witness gets its own m64n8 accumulator (4 registers): rewriting the big one after the
    # loop would make ptxas serialise every wgmma of the loop.
    wit = kb.regs(acc_cls, 4)
    for r in wit:
        kb.emit(f"mov.b32 {r}, 0;" if t.integer else f"mov.f32 {r}, 0f00000000;")
    kb.emit("wgmma.fence.sync.aligned;")
    wop = f"wgmma.mma_async.sync.aligned.m64n8k{t.k}.{t.ptx_types}"
    kb.emit(f"{wop} {{{', '.join(wit)}}}, {d1a}, {d1b}, {pfalse}{tail};")
    kb.emit("wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;")
    frame.finish([*((r, acc_cls) for r in (d[0], d[1], d[62], d[127])), (wit[0], acc_cls), (wit[3], acc_cls)])
    per_thread = _PER_TRIP * t.flops_per_warpgroup / _THREADS
    return KernelSpec(
        name=name,
        group="tensor",
        description=(
            f"tensor cores: wgmma m64n{_N}k{t.k} {t.ptx_types} with shared-memory operands, {_PER_TRIP} per trip "
            f"into one accumulator, operands {mode_label(mode)}; each product undone with the negated A tile"
        ),
        ptx=retarget(frame.ptx(), version=(8, 0), target=f"{PTX_TARGET}a"),
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit=f"tensor_{t.key}", ops=per_thread, flops=per_thread),
        launch=Launch(block=_THREADS, blocks_per_sm=blocks_per_sm),
        # The loop's eight and the witness (the SASS parser keeps the opcode and its first modifier).
        sass=(SassCheck(t.sass, _PER_TRIP + 1, _PER_TRIP + 1),),
        verify=_verify(t, mode),
        out_dtypes={"out": "uint32"},
        spec_key=f"tensor.{t.key}",
        sweep=data_sweep(mode),
        tags=("tensor", "wgmma", f"data:{mode}"),
        min_cc=(9, 0),
        arch_specific="sm_90a",
        min_ptx=(8, 0),
    )


def _verify(t: WgmmaType, mode: str) -> VerifyFn:
    """Liveness; the witness equals K; saved accumulators exactly 0 (integer, zeros, ones) or bounded."""
    exact = t.integer or mode in ("zeros", "ones")

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = (int(scalars[x]) for x in ("threads", "iters", "seed"))
        out = out_words(outputs, threads, 7)
        check_live(out, seed, iters)
        view = np.int32 if t.integer else np.float32
        for w in (5, 6):
            got = np.ascontiguousarray(out[w]).view(view)
            bad = np.flatnonzero(got != t.k)
            if bad.size:
                i = int(bad[0])
                raise Reject(f"witness wgmma of thread {i} gave {got[i]!r}, expected the depth K = {t.k}")
        vals = np.stack([np.ascontiguousarray(out[w]).view(view).astype(np.float64) for w in range(1, 5)])
        limit = 0.0 if exact else 4.0 * t.k * 2.0**-10 * _PER_TRIP * max(iters, 1)
        where = np.argwhere(~np.isfinite(vals) | (np.abs(vals) > limit))
        if where.size:
            j, i = (int(x) for x in where[0])
            raise Reject(f"accumulator {j} of thread {i} is {vals[j, i]!r}, expected within ±{limit:g}")

    return verify


def wgmma_kernels() -> list[KernelSpec]:
    """One ``wgmma`` kernel per dense type on random data."""
    return [wgmma_kernel(t) for t in WGMMA_TYPES]

"""Global-memory kernels: DRAM streaming, copy, write, coalescing and access-size sweeps, L2 and L1 reads.

Every kernel walks a buffer with a grid-stride pattern: one trip of the outer loop (``iters``)
is one full pass, ``m`` (a run-time argument) accesses per thread. The buffer, grid and ``m``
are sized for the target device so that each thread does exactly the same work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import Frame, open_frame
from archline.characterize.kernels.target import Target
from archline.characterize.kernels.verify import MASK32, Reject, check_live, out_words, untouched, verifier
from archline.core.kernel import Arg, KernelSpec, Launch, SassCheck, Work

__all__ = [
    "ACCESS_SIZES",
    "COALESCING",
    "access_size_copy",
    "dram_copy",
    "dram_read_occupancy",
    "dram_read_v4",
    "dram_write",
    "l1_read",
    "l2_read",
    "line_read",
    "memory_kernels",
]

#: Loads per inner-loop trip; ``m`` is always a multiple of it.
UNROLL = 8
#: Threads per 128-byte line in MIPP's coalescing sweep (Fig. 6) and the label of each point.
COALESCING: tuple[tuple[int, str], ...] = ((1, "none"), (2, "1-16"), (4, "1-8"), (8, "1-4"), (16, "1-2"), (32, "full"))
ACCESS_SIZES = (1, 2, 4, 8, 16)

_LD = {1: "u8", 2: "u16", 4: "u32", 8: "v2.u32", 16: "v4.u32"}


def _launch(t: Target, block: int = 256, blocks_per_sm: int = 8) -> Launch:
    return Launch(block=block, blocks_per_sm=blocks_per_sm, grid=blocks_per_sm * t.sm_count)


def _per_thread(unit_b: int, target: Target) -> int:
    """Accesses per thread per pass (a multiple of UNROLL) so ``m x unit_b >= target.dram_buffer_b``."""
    return math.ceil(math.ceil(target.dram_buffer_b / unit_b) / UNROLL) * UNROLL


def _inner_loop(frame: Frame, m: str, body: list[str]) -> None:
    """``for j in 0..m step UNROLL: body`` (body already holds UNROLL accesses)."""
    kb = frame.kb
    j = kb.reg("b32")
    p = kb.reg("pred")
    top = kb.label("inner")
    kb.emit(f"mov.u32 {j}, 0;")
    kb.place(top)
    kb.emit(*body)
    kb.emit(f"add.u32 {j}, {j}, {UNROLL};", f"setp.lt.u32 {p}, {j}, {m};", f"@{p} bra.uni {top};")


def _iota_sum_check(label: str, got: NDArray[np.uint32], per_pass: NDArray[np.uint64], iters: int) -> None:
    want = ((per_pass & MASK32) * np.uint64(iters & 0xFFFFFFFF)) & MASK32
    bad = np.flatnonzero(got.astype(np.uint64) != want)
    if bad.size:
        t = int(bad[0])
        raise Reject(
            f"{label}: thread {t} summed {int(got[t]):#010x}, expected {int(want[t]):#010x} ({bad.size} differ)"
        )


def line_read(target: Target, group: int, *, name: str | None = None, label: str = "") -> KernelSpec:
    """4-byte reads where ``group`` threads of a warp share each 128-byte line (MIPP Fig. 6).

    ``group`` 1 is MIPP's DRAM benchmark: a 128-byte stride between threads, no coalescing.
    """
    launch = _launch(target)
    threads = launch.grid_for(target.sm_count) * launch.block
    warps = threads // 32
    lines_per_access = 32 // group
    stride_b = warps * lines_per_access * 128
    m = _per_thread(stride_b, target)
    size_b = m * stride_b
    args = [Arg("buf", "ptr", "in", fixed_bytes=size_b, init="iota_u32"), Arg("m", "u32", "scalar", value=m)]
    frame = open_frame(f"k_line_read_g{group}", args)
    kb = frame.kb
    lane, w, line0, off = kb.regs("b32", 4)
    base, stride, addr = kb.regs("b64", 3)
    acc, v = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"and.b32 {lane}, {frame.gtid}, 31;", f"shr.u32 {w}, {frame.gtid}, 5;")
    kb.emit(f"shr.u32 {off}, {lane}, {int(math.log2(group))};")
    kb.emit(f"mad.lo.u32 {line0}, {w}, {lines_per_access}, {off};")
    kb.emit(f"and.b32 {off}, {lane}, {group - 1};", f"shl.b32 {off}, {off}, 2;")
    kb.emit(f"mul.wide.u32 {base}, {line0}, 128;", f"add.u64 {base}, {base}, {frame.regs['buf']};")
    kb.emit(f"cvt.u64.u32 {addr}, {off};", f"add.u64 {base}, {base}, {addr};")
    kb.emit(f"shr.u32 {v}, {frame.threads}, 5;", f"mul.wide.u32 {stride}, {v}, {lines_per_access * 128};")
    kb.emit(f"mov.u32 {acc}, 0;")
    frame.begin_loop()
    kb.emit(f"mov.u64 {addr}, {base};")
    body = []
    for _ in range(UNROLL):
        body += [f"ld.global.u32 {v}, [{addr}];", f"add.u32 {acc}, {acc}, {v};", f"add.u64 {addr}, {addr}, {stride};"]
    _inner_loop(frame, frame.regs["m"], body)
    frame.end_loop()
    frame.finish([(acc, "b32")], guarded=[acc])
    moved = math.ceil(4 * group / 32) * 32 / group
    frac = f"1/{32 // group}" if group < 32 else "full"

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        t_total, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        mm = int(scalars["m"])
        out = out_words(outputs, t_total, 2)
        check_live(out, seed, iters)
        g = np.arange(t_total, dtype=np.uint64)
        ln0 = (g >> np.uint64(5)) * np.uint64(lines_per_access) + (
            (g & np.uint64(31)) >> np.uint64(int(math.log2(group)))
        )
        wtot = np.uint64((t_total // 32) * lines_per_access)
        per = np.uint64(32) * (wtot * np.uint64(mm * (mm - 1) // 2) + np.uint64(mm) * ln0)
        per = per + np.uint64(mm) * ((g & np.uint64(31)) & np.uint64(group - 1))
        _iota_sum_check("sum of loaded words", out[1], per, iters)

    return KernelSpec(
        name=name or f"mem.dram.coalesce.{label}",
        group="memory",
        description=(
            f"4-byte loads, {group} thread(s) per 128-byte line (coalescing {frac}); "
            f"{size_b / 2**30:.2f} GiB per pass; bytes count 32-byte DRAM sectors moved"
        ),
        ptx=frame.ptx(),
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit="dram", ops=float(m), bytes=float(m * moved)),
        launch=launch,
        sass=(SassCheck("LDG\\.E", UNROLL),),
        verify=verify,
        out_dtypes={"out": "uint32"},
        sweep=("coalescing", group / 32),
        tags=("dram", "coalescing"),
    )


def _vector_kernel(
    target: Target,
    kind: str,
    *,
    launch: Launch | None = None,
    size: int = 16,
    level: str = "dram",
    name: str,
    sweep: tuple[str, float] | None = None,
) -> KernelSpec:
    """Coalesced walks of ``size``-byte elements: ``read`` (sum), ``copy`` (src → dst) or ``write``."""
    # The L2 kernel runs 2 blocks per SM so that one unrolled pass fits in a quarter of the L2.
    launch = launch or _launch(target, 256, 2 if level in ("l2", "l1") else 8)
    threads = launch.grid_for(target.sm_count) * launch.block
    if level == "l2":
        m = UNROLL * max(1, (target.l2_bytes // 4) // (16 * threads * UNROLL))
    elif level == "l1":
        # Every block walks the same 32 KiB (one unrolled pass of 256 threads × 8 × 16 B): it
        # stays in each SM's L1 after the first pass, so the loads hit L1.
        m = UNROLL
    else:
        m = _per_thread(size * threads, target)
    size_b = m * (launch.block if level == "l1" else threads) * size
    args: list[Arg] = []
    if kind in ("read", "copy"):
        args.append(Arg("src", "ptr", "in", fixed_bytes=size_b, init="iota_u32"))
    if kind in ("copy", "write"):
        args.append(Arg("dst", "ptr", "out", fixed_bytes=size_b, init="zeros"))
    args.append(Arg("m", "u32", "scalar", value=m))
    frame = open_frame(f"k_{level}_{kind}_{size}", args)
    kb = frame.kb
    off, stride = kb.reg("b64"), kb.reg("b64")
    acc = kb.reg("b32")
    vals = kb.regs("b32", 4)
    if level == "l1":
        kb.emit(f"mul.wide.u32 {off}, {frame.tid}, {size};", f"mul.wide.u32 {stride}, {frame.ntid}, {size};")
    else:
        kb.emit(f"mul.wide.u32 {off}, {frame.gtid}, {size};", f"mul.wide.u32 {stride}, {frame.threads}, {size};")
    kb.emit(f"mov.u32 {acc}, 0;")
    frame.begin_loop()
    cur, a_src, a_dst = kb.regs("b64", 3)
    word = kb.reg("b32")
    kb.emit(f"mov.u64 {cur}, {off};")
    body: list[str] = []
    ld = _LD[size]
    cache = {"l2": ".cg", "l1": ".ca"}.get(level, "")
    for _ in range(UNROLL):
        if kind in ("read", "copy"):
            body.append(f"add.u64 {a_src}, {frame.regs['src']}, {cur};")
            if size == 16:
                body.append(f"ld.global{cache}.v4.u32 {{{', '.join(vals)}}}, [{a_src}];")
            elif size == 8:
                body.append(f"ld.global{cache}.v2.u32 {{{vals[0]}, {vals[1]}}}, [{a_src}];")
            else:
                body.append(f"ld.global{cache}.{ld} {vals[0]}, [{a_src}];")
        if kind == "read":
            body += [
                f"add.u32 {acc}, {acc}, {vals[0]};",
                f"add.u32 {vals[1]}, {vals[1]}, {vals[2]};",
                f"add.u32 {vals[1]}, {vals[1]}, {vals[3]};",
                f"add.u32 {acc}, {acc}, {vals[1]};",
            ]
        if kind in ("copy", "write"):
            body.append(f"add.u64 {a_dst}, {frame.regs['dst']}, {cur};")
            if kind == "write":
                # Each pass writes its own values (word index + trip), so no store is redundant.
                body.append(f"cvt.u32.u64 {word}, {cur};")
                body.append(f"shr.u32 {word}, {word}, 2;")
                body.append(f"add.u32 {vals[0]}, {word}, {frame.counter};")
                body += [f"add.u32 {vals[k]}, {vals[0]}, {k};" for k in (1, 2, 3)]
            if size == 16:
                body.append(f"st.global.v4.u32 [{a_dst}], {{{', '.join(vals)}}};")
            elif size == 8:
                body.append(f"st.global.v2.u32 [{a_dst}], {{{vals[0]}, {vals[1]}}};")
            else:
                body.append(f"st.global.{ld} [{a_dst}], {vals[0]};")
        body.append(f"add.u64 {cur}, {cur}, {stride};")
    _inner_loop(frame, frame.regs["m"], body)
    frame.end_loop()
    frame.finish([(acc, "b32")], guarded=[acc])
    verify = _vector_verify(kind, size, size_b, block=launch.block if level == "l1" else 0)
    moved = {"read": size, "copy": 2 * size, "write": size}[kind]
    sass = {"read": "LDG\\.E", "copy": "STG\\.E", "write": "STG\\.E"}[kind]
    return KernelSpec(
        name=name,
        group="memory",
        description=(
            f"{level.upper()} {kind}, {size}-byte elements, coalesced grid-stride walk of "
            f"{size_b / 2**20:.3g} MiB per pass"
            + {"l2": " with ld.global.cg (L1 bypassed)", "l1": " by every block, ld.global.ca (L1 hits)"}.get(level, "")
        ),
        ptx=frame.ptx(),
        entry=frame.kb.entry,
        args=tuple(frame.args),
        work=Work(unit=level, ops=float(m), bytes=float(m * moved)),
        launch=launch,
        sass=(SassCheck(sass, UNROLL),),
        verify=verify,
        out_dtypes={"out": "uint32", **({"dst": "uint32"} if kind != "read" else {})},
        sweep=sweep,
        tags=(level, kind),
    )


def _vector_verify(kind: str, size: int, size_b: int, block: int = 0):  # type: ignore[no-untyped-def]
    # ``block`` > 0: each thread walks its block's region (thread index within the block).
    nwords = size_b // 4

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed, m = (int(scalars[k]) for k in ("threads", "iters", "seed", "m"))
        out = out_words(outputs, threads, 2)
        check_live(out, seed, iters)
        if kind == "read":
            t = np.arange(threads, dtype=np.uint64)
            span = threads
            if block:
                t, span = t % np.uint64(block), block
            per = np.uint64(16) * (np.uint64(span * (m * (m - 1) // 2)) + np.uint64(m) * t) + np.uint64(6 * m)
            _iota_sum_check("sum of loaded words", out[1], per, iters)
            return
        raw = outputs["dst"]
        why = untouched(raw)
        if why:
            raise Reject(f"dst: {why}")
        dst = np.ascontiguousarray(raw).view(np.uint32).reshape(-1)
        if dst.size < nwords:
            raise Reject(f"dst: {dst.size} words copied back, expected {nwords}")
        idx = np.unique(np.concatenate([np.linspace(0, nwords - 1, 4096).astype(np.int64), np.arange(min(nwords, 64))]))
        if kind == "copy":
            want = idx.astype(np.uint64) & MASK32
        else:
            want = (idx.astype(np.uint64) + np.uint64(max(iters - 1, 0))) & MASK32
        bad = np.flatnonzero(dst[idx].astype(np.uint64) != want)
        if bad.size:
            i = int(idx[bad[0]])
            raise Reject(f"dst word {i} is {int(dst[i]):#010x}, expected {int(want[bad[0]]):#010x}")

    return verify


def dram_read_v4(
    target: Target, launch: Launch | None = None, *, name: str = "mem.dram.read", sweep: tuple[str, float] | None = None
) -> KernelSpec:
    return _vector_kernel(target, "read", launch=launch, name=name, sweep=sweep)


def dram_copy(target: Target) -> KernelSpec:
    return _vector_kernel(target, "copy", name="mem.dram.copy")


def dram_write(target: Target) -> KernelSpec:
    return _vector_kernel(target, "write", name="mem.dram.write")


def access_size_copy(target: Target, size: int) -> KernelSpec:
    """MIPP Fig. 7: copy one large array into another with ``size``-byte elements per thread."""
    return _vector_kernel(target, "copy", size=size, name=f"mem.dram.size.{size}B", sweep=("access_bytes", size))


def l2_read(target: Target) -> KernelSpec:
    """Repeated coalesced 16-byte ``ld.global.cg`` reads of a buffer a quarter the L2's size."""
    return _vector_kernel(target, "read", level="l2", name="mem.l2.read")


def l1_read(target: Target) -> KernelSpec:
    """Repeated coalesced 16-byte ``ld.global.ca`` reads of 32 KiB that every block shares (L1 hits)."""
    return _vector_kernel(target, "read", level="l1", name="mem.l1.read")


def dram_read_occupancy(target: Target) -> list[KernelSpec]:
    """The 16-byte DRAM read at 32…1024 threads per block (one block per SM) and 1…8 blocks of 256."""
    out = [
        dram_read_v4(target, _launch(target, b, 1), name=f"mem.dram.read.block.{b}", sweep=("block", b))
        for b in (32, 64, 128, 256, 512, 1024)
    ]
    out += [
        dram_read_v4(target, _launch(target, 256, k), name=f"mem.dram.read.bps.{k}", sweep=("blocks_per_sm", k))
        for k in (1, 2, 4, 8)
    ]
    return out


def memory_kernels(target: Target) -> list[KernelSpec]:
    """DRAM read/copy/write, the coalescing and access-size sweeps and the L2 and L1 reads."""
    out = [dram_read_v4(target), dram_copy(target), dram_write(target), l2_read(target), l1_read(target)]
    out += [line_read(target, g, label=lab) for g, lab in COALESCING]
    out += [access_size_copy(target, s) for s in ACCESS_SIZES]
    return out

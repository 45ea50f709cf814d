"""Synchronisation kernels: barrier throughput and atomics with and without contention."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import open_frame
from archline.characterize.kernels.verify import MASK32, Reject, check_equal, check_live, out_words, untouched, verifier
from archline.core.kernel import Arg, KernelSpec, Launch, SassCheck, Work

__all__ = ["Contention", "barrier", "global_atomic", "shared_atomic", "sync_kernels"]

Contention = Literal["private", "warp", "grid", "block"]

BARRIERS = 64
ATOMICS = 64
BLOCK = 256


def barrier() -> KernelSpec:
    """Back-to-back ``bar.sync 0`` of a 256-thread block."""
    frame = open_frame("k_bar_sync")
    kb = frame.kb
    frame.begin_loop()
    kb.emit(*(["bar.sync 0;"] * BARRIERS))
    frame.end_loop()
    frame.finish([])

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        check_live(out_words(outputs, threads, 1), seed, iters)

    return KernelSpec(
        name="sync.bar",
        group="sync",
        description=f"bar.sync 0, {BARRIERS} per loop trip, 256-thread blocks, 8 blocks per SM",
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="barrier", ops=float(BARRIERS)),
        launch=Launch(block=BLOCK, blocks_per_sm=8),
        sass=(SassCheck("BAR\\.SYNC", BARRIERS),),
        verify=verify,
        out_dtypes={"out": "uint32"},
        tags=("barrier",),
    )


def global_atomic(contention: Contention) -> KernelSpec:
    """``red.global.add.u32`` of a run-time 1: each thread its own word, a word per warp, or one word.

    Private and per-warp counters are cleared by the kernel itself (a lane, then ``bar.warp.sync``),
    so every launch leaves the same values. The grid-wide word cannot be cleared without a
    grid barrier: it ends as its initial fill plus a whole number of launches' worth, which is
    what verify accepts (fill 0x00000000 or 0xFFFFFFFF, any launch count up to 2^20).
    """
    args = [Arg("ctr", "ptr", "out", per_thread_bytes=4, init="zeros"), Arg("one", "u32", "scalar", value=1)]
    frame = open_frame(f"k_atom_global_{contention}", args)
    kb = frame.kb
    idx, addr, zero = kb.reg("b32"), kb.reg("b64"), kb.reg("b32")
    p = kb.reg("pred")
    if contention == "private":
        kb.emit(f"mov.u32 {idx}, {frame.gtid};")
    elif contention == "warp":
        kb.emit(f"shr.u32 {idx}, {frame.gtid}, 5;")
    else:
        kb.emit(f"mov.u32 {idx}, 0;")
    kb.emit(f"mul.wide.u32 {addr}, {idx}, 4;", f"add.u64 {addr}, {addr}, {frame.regs['ctr']};")
    kb.emit(f"mov.u32 {zero}, 0;")
    if contention == "private":
        kb.emit(f"st.global.u32 [{addr}], {zero};")
    elif contention == "warp":
        lane = frame.lane()
        kb.emit(f"setp.eq.u32 {p}, {lane}, 0;", f"@{p} st.global.u32 [{addr}], {zero};", "bar.warp.sync -1;")
    frame.begin_loop()
    kb.emit(*([f"red.global.add.u32 [{addr}], {frame.regs['one']};"] * ATOMICS))
    frame.end_loop()
    frame.finish([])

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        check_live(out_words(outputs, threads, 1), seed, iters)
        raw = outputs["ctr"]
        why = untouched(raw)
        if why:
            raise Reject(f"ctr: {why}")
        words = np.ascontiguousarray(raw).view(np.uint32).reshape(-1)
        per_launch = ATOMICS * iters * int(scalars["one"])
        if contention == "grid":
            inc = (threads * per_launch) & 0xFFFFFFFF
            launches = np.arange(1, 1 << 20, dtype=np.uint64)
            ok = any(
                bool(((np.uint64(base) + launches * np.uint64(inc)) & MASK32 == np.uint64(words[0])).any())
                for base in (0, 0xFFFFFFFF)
            )
            if not ok:
                raise Reject(f"grid counter {int(words[0]):#010x} is not its fill plus whole launches of {inc:#x}")
            return
        used = threads if contention == "private" else threads // 32
        share = 1 if contention == "private" else 32
        want = np.full(used, (share * per_launch) & 0xFFFFFFFF, dtype=np.uint32)
        check_equal("atomic counters", words[:used], want)

    return KernelSpec(
        name=f"sync.atomic.global.{contention}",
        group="sync",
        description=f"red.global.add.u32, {ATOMICS} per trip, "
        + {
            "private": "each thread its own word (no contention)",
            "warp": "the 32 threads of a warp on one word",
            "grid": "every thread of the grid on one word",
        }[contention],
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="atomic.global", ops=float(ATOMICS)),
        launch=Launch(block=BLOCK, blocks_per_sm=8),
        sass=(SassCheck("RED", ATOMICS),),
        verify=verify,
        out_dtypes={"out": "uint32", "ctr": "uint32"},
        sweep=("contention", {"private": 1, "warp": 32, "grid": 0}[contention]),
        tags=("atomic", "global", contention),
    )


def shared_atomic(contention: Contention) -> KernelSpec:
    """``red.shared.add.u32`` on per-thread, per-warp or per-block words, cleared by the kernel."""
    frame = open_frame(f"k_atom_shared_{contention}", [Arg("one", "u32", "scalar", value=1)])
    kb = frame.kb
    sctr = kb.symbol("counters")
    kb.module_decl(f".shared .align 4 .b32 {sctr}[{BLOCK}];")
    base, idx, a = kb.regs("b32", 3)
    zero = kb.reg("b32")
    kb.emit(f"mov.u32 {base}, {sctr};", f"mov.u32 {zero}, 0;")
    kb.emit(
        f"shl.b32 {a}, {frame.tid}, 2;", f"add.u32 {a}, {a}, {base};", f"st.shared.u32 [{a}], {zero};", "bar.sync 0;"
    )
    if contention == "private":
        kb.emit(f"mov.u32 {idx}, {frame.tid};")
    elif contention == "warp":
        kb.emit(f"shr.u32 {idx}, {frame.tid}, 5;")
    else:
        kb.emit(f"mov.u32 {idx}, 0;")
    kb.emit(f"shl.b32 {a}, {idx}, 2;", f"add.u32 {a}, {a}, {base};")
    frame.begin_loop()
    kb.emit(*([f"red.shared.add.u32 [{a}], {frame.regs['one']};"] * ATOMICS))
    frame.end_loop()
    v = kb.reg("b32")
    kb.emit("bar.sync 0;", f"ld.shared.u32 {v}, [{a}];")
    frame.finish([(v, "b32")], guarded=[v])
    sharers = {"private": 1, "warp": 32, "block": BLOCK}[contention]

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        out = out_words(outputs, threads, 2)
        check_live(out, seed, iters)
        total = (sharers * ATOMICS * iters * int(scalars["one"])) & 0xFFFFFFFF
        check_equal("shared counter", out[1], np.full(threads, total, dtype=np.uint32))

    return KernelSpec(
        name=f"sync.atomic.shared.{contention}",
        group="sync",
        description=f"red.shared.add.u32, {ATOMICS} per trip, "
        + {
            "private": "each thread its own word (no contention)",
            "warp": "the 32 threads of a warp on one word",
            "block": "all 256 threads of a block on one word",
        }[contention],
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="atomic.shared", ops=float(ATOMICS)),
        launch=Launch(block=BLOCK, blocks_per_sm=8),
        sass=(SassCheck("ATOMS", ATOMICS),),
        verify=verify,
        out_dtypes={"out": "uint32"},
        sweep=("contention", sharers),
        tags=("atomic", "shared", contention),
    )


def sync_kernels() -> list[KernelSpec]:
    return [
        barrier(),
        *(global_atomic(c) for c in ("private", "warp", "grid")),
        *(shared_atomic(c) for c in ("private", "warp", "block")),
    ]

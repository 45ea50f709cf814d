"""On-chip memory kernels: shared-memory loads (and the bank-conflict sweep), stores, constant loads."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import open_frame
from archline.characterize.kernels.verify import check_equal, check_live, out_words, verifier
from archline.core.kernel import KernelSpec, Launch, SassCheck, Work

__all__ = ["CONFLICT_WAYS", "constant_read", "lane_word", "onchip_kernels", "shared_read", "shared_write"]

#: Pointer-chasing chains per thread (enough loads in flight to cover the LDS latency).
CHAINS = 4
#: Words in each chain's region of shared memory (4 KiB: a lane can sit in any of 32 banks x 32 rows).
REGION_WORDS = 1024
#: n-way conflicts of the sweep: every count from 1 (none) to 32 (all lanes in one bank).
CONFLICT_WAYS = tuple(range(1, 33))
#: Rounds of loads per loop trip: 128 x 4 chains = 512 LDS (8 KiB of SASS), loop overhead < 1 %.
ROUNDS = 128
CONST_WORDS = 1024


def lane_word(lane: NDArray[np.int64] | int, ways: int) -> NDArray[np.int64] | int:
    """Word a lane reads for an exactly ``ways``-way bank conflict.

    Lanes ``ways*b … ways*b + ways-1`` share bank ``b``, each in its own row, so the busiest
    bank serves ``ways`` distinct addresses: ``ways`` wavefronts per warp instruction, and a
    single wavefront (all 32 banks) when ``ways`` is 1. (MIPP's ``lane x (conflicts+1)`` gives
    only ``gcd(conflicts+1, 32)``-way conflicts, e.g. none at all for odd strides.)
    """
    return lane // ways + 32 * (lane % ways)


def _launch() -> Launch:
    return Launch(block=256, blocks_per_sm=8)


def shared_read(ways: int = 1, *, name: str | None = None) -> KernelSpec:
    """``a = ld.shared [a]`` pointer chases over an identity table: each load returns its own
    address, so every load is a real bank access the compiler cannot remove or predict."""
    frame = open_frame(f"k_shared_read_w{ways}")
    kb = frame.kb
    smem = kb.symbol("smem")
    kb.module_decl(f".shared .align 16 .b32 {smem}[{CHAINS * REGION_WORDS}];")
    base, k, v, lane, word = kb.regs("b32", 5)
    p = kb.reg("pred")
    init, done = kb.label("init"), kb.label("init_done")
    kb.emit(f"mov.u32 {base}, {smem};", f"mov.u32 {k}, {frame.tid};")
    kb.place(init)
    kb.emit(f"setp.ge.u32 {p}, {k}, {CHAINS * REGION_WORDS};", f"@{p} bra.uni {done};")
    kb.emit(f"shl.b32 {v}, {k}, 2;", f"add.u32 {v}, {v}, {base};", f"st.shared.u32 [{v}], {v};")
    kb.emit(f"add.u32 {k}, {k}, {frame.ntid};", f"bra.uni {init};")
    kb.place(done)
    kb.emit("bar.sync 0;")
    kb.emit(f"and.b32 {lane}, {frame.tid}, 31;")
    q, r = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"div.u32 {q}, {lane}, {ways};", f"rem.u32 {r}, {lane}, {ways};", f"mad.lo.u32 {word}, {r}, 32, {q};")
    addrs = []
    for c in range(CHAINS):
        a = kb.reg("b32")
        kb.emit(f"add.u32 {a}, {word}, {c * REGION_WORDS};", f"shl.b32 {a}, {a}, 2;", f"add.u32 {a}, {a}, {base};")
        addrs.append(a)
    frame.begin_loop()
    for _ in range(ROUNDS):
        for a in addrs:
            kb.emit(f"ld.shared.u32 {a}, [{a}];")
    frame.end_loop()
    for a in addrs:
        kb.emit(f"sub.u32 {a}, {a}, {base};")
    frame.finish([(a, "b32") for a in addrs], guarded=addrs)
    loads = CHAINS * ROUNDS

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        out = out_words(outputs, threads, 1 + CHAINS)
        check_live(out, seed, iters)
        ln = np.arange(threads, dtype=np.int64) % int(scalars.get("block", 256)) % 32
        for c in range(CHAINS):
            want = (4 * (np.asarray(lane_word(ln, ways)) + c * REGION_WORDS)).astype(np.uint32)
            check_equal(f"shared chase chain {c}", out[1 + c], want)

    conflict = "conflict-free (one wavefront per warp load)" if ways == 1 else f"{ways}-way bank conflict"
    return KernelSpec(
        name=name or f"mem.shared.conflict.{ways:02d}",
        group="memory",
        description=f"ld.shared.u32 pointer chase, {CHAINS} chains per thread, {conflict}",
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="shared", ops=float(loads), bytes=float(4 * loads)),
        launch=_launch(),
        sass=(SassCheck("LDS", loads),),
        verify=verify,
        out_dtypes={"out": "uint32"},
        spec_key="shared" if ways == 1 else None,
        sweep=("conflict_ways", ways) if name is None else None,
        tags=("shared",),
    )


def shared_write() -> KernelSpec:
    """``st.volatile.shared.u32`` of the trip counter, conflict-free, as in MIPP Fig. 4."""
    frame = open_frame("k_shared_write")
    kb = frame.kb
    smem = kb.symbol("smem")
    kb.module_decl(f".shared .align 16 .b32 {smem}[{CHAINS * REGION_WORDS}];")
    base, lane = kb.regs("b32", 2)
    kb.emit(f"mov.u32 {base}, {smem};", f"and.b32 {lane}, {frame.tid}, 31;")
    addrs = []
    for c in range(CHAINS):
        a = kb.reg("b32")
        kb.emit(f"add.u32 {a}, {lane}, {c * REGION_WORDS};", f"shl.b32 {a}, {a}, 2;", f"add.u32 {a}, {a}, {base};")
        addrs.append(a)
    frame.begin_loop()
    for _ in range(ROUNDS):
        for a in addrs:
            kb.emit(f"st.volatile.shared.u32 [{a}], {frame.counter};")
    frame.end_loop()
    kb.emit("bar.sync 0;")
    vals = []
    for a in addrs:
        v = kb.reg("b32")
        kb.emit(f"ld.volatile.shared.u32 {v}, [{a}];")
        vals.append(v)
    frame.finish([(v, "b32") for v in vals], guarded=vals)
    stores = CHAINS * ROUNDS

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        out = out_words(outputs, threads, 1 + CHAINS)
        check_live(out, seed, iters)
        want = np.full(threads, max(iters - 1, 0), dtype=np.uint32)
        for c in range(CHAINS):
            check_equal(f"last stored value, region {c}", out[1 + c], want)

    return KernelSpec(
        name="mem.shared.write",
        group="memory",
        description=f"st.volatile.shared.u32, {CHAINS} conflict-free addresses per thread",
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="shared", ops=float(stores), bytes=float(4 * stores)),
        launch=_launch(),
        sass=(SassCheck("STS", stores),),
        verify=verify,
        out_dtypes={"out": "uint32"},
        spec_key="shared",
        tags=("shared",),
    )


def constant_read() -> KernelSpec:
    """``ld.const`` pointer chase through a 4 KiB table, warp-uniform addresses (broadcast)."""
    frame = open_frame("k_const_read")
    kb = frame.kb
    table = ", ".join(str(4 * ((i + 1) % CONST_WORDS)) for i in range(CONST_WORDS))
    ctab = kb.symbol("table")
    kb.module_decl(f".const .align 4 .b32 {ctab}[{CONST_WORDS}] = {{{table}}};")
    base = kb.reg("b64")
    kb.emit(f"mov.u64 {base}, {ctab};")
    chains = []
    for c in range(CHAINS):
        a = kb.reg("b32")
        kb.emit(f"mov.u32 {a}, {4 * c * (CONST_WORDS // CHAINS)};")
        chains.append(a)
    addr = kb.reg("b64")
    frame.begin_loop()
    for _ in range(ROUNDS):
        for a in chains:
            kb.emit(f"cvt.u64.u32 {addr}, {a};", f"add.u64 {addr}, {addr}, {base};", f"ld.const.u32 {a}, [{addr}];")
    frame.end_loop()
    frame.finish([(a, "b32") for a in chains], guarded=chains)
    loads = CHAINS * ROUNDS

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed = int(scalars["threads"]), int(scalars["iters"]), int(scalars["seed"])
        out = out_words(outputs, threads, 1 + CHAINS)
        check_live(out, seed, iters)
        for c in range(CHAINS):
            idx = (c * (CONST_WORDS // CHAINS) + ROUNDS * iters) % CONST_WORDS
            check_equal(f"constant chase chain {c}", out[1 + c], np.full(threads, 4 * idx, dtype=np.uint32))

    return KernelSpec(
        name="mem.const.read",
        group="memory",
        description=f"ld.const.u32 pointer chase over a {4 * CONST_WORDS} B table, {CHAINS} chains, warp-uniform",
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="constant", ops=float(loads), bytes=float(4 * loads)),
        launch=_launch(),
        sass=(SassCheck("LDC", loads),),
        verify=verify,
        out_dtypes={"out": "uint32"},
        tags=("constant",),
    )


def onchip_kernels(*, conflicts: bool = True) -> list[KernelSpec]:
    out = [shared_read(1, name="mem.shared.read"), shared_write(), constant_read()]
    if conflicts:
        out += [shared_read(w) for w in CONFLICT_WAYS]
    return out

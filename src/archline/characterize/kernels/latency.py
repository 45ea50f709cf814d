"""Pointer-chase latency kernels: cycles per dependent load from L1, shared memory, L2 and DRAM.

One thread chases a random cyclic permutation of cache lines and reads ``%clock64`` around
``steps`` dependent loads, so the figure is in SM clock cycles whatever the clock:

* ``lat.l1`` (16 KiB of 128-byte lines, ``ld.global.ca``) and ``lat.l2`` (8 MiB, ``ld.global.cg``,
  which bypasses L1): the thread first turns the chain's byte offsets into addresses in place
  (one pass, which also warms the level), then chases ``p = *p``: one load per step, unrolled 8×;
* ``lat.shared``: the chain (32 KiB of 4-byte slots) is copied to shared memory as shared
  addresses, then ``p = *p`` with ``ld.shared``;
* ``lat.dram``: 1 GiB, one line per 64 KiB, no warm pass; the chain holds offsets and each step
  adds the base (one 64-bit add on the dependent path, a few cycles on top of hundreds; TLB misses
  are part of the figure, as in a program's random accesses).

The result buffer holds the cycles, the steps and the final offset, which the host checks against
the chain it built (:func:`chain`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["LEVELS", "LatencyKernel", "chain", "expected_end", "latency_kernels"]

_UNROLL = 8


@dataclass(frozen=True)
class LatencyKernel:
    """One level's chase: its PTX, footprint, line stride, steps, and the published Hopper range."""

    name: str
    level: str
    ptx: str
    entry: str
    footprint_b: int
    stride_b: int
    steps: int
    published_cycles: tuple[float, float]
    source: str

    @property
    def entries(self) -> int:
        return self.footprint_b // self.stride_b

    @property
    def width(self) -> int:
        """Bytes per chain slot: 4 in shared memory (32-bit addresses), else 8."""
        return 4 if self.level == "shared" else 8


#: Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture" (IPDPS 2024,
#: arXiv 2402.13499), H800 pointer-chase latencies in cycles: L1 ≈ 34–41 (their range over
#: access patterns), shared ≈ 29, L2 ≈ 260 (near partition) to 414–475 (far), DRAM ≈ 480–650.
LEVELS: dict[str, tuple[tuple[float, float], str]] = {
    "l1": ((34.0, 41.0), "Luo et al. 2024, L1 hit"),
    "shared": ((29.0, 29.0), "Luo et al. 2024, shared memory"),
    "l2": ((260.0, 475.0), "Luo et al. 2024, L2 hit, near 260 to far 414–475"),
    "dram": ((480.0, 650.0), "Luo et al. 2024, global memory (DRAM)"),
}


def chain(entries: int, stride_b: int, width: int = 8, seed: int = 7) -> NDArray[np.uint8]:
    """The chase buffer: a random single cycle through ``entries`` slots ``stride_b`` apart, slot
    i holding the byte offset of its successor as a ``width``-byte integer (8 global, 4 shared)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(entries)
    dtype = np.uint64 if width == 8 else np.uint32
    nxt = np.empty(entries, dtype=dtype)
    nxt[order] = (np.roll(order, -1) * stride_b).astype(dtype)
    words = np.zeros(entries * stride_b // width, dtype=dtype)
    words[:: stride_b // width] = nxt
    return words.view(np.uint8)


def expected_end(entries: int, stride_b: int, steps: int, width: int = 8, seed: int = 7) -> int:
    """The byte offset the chase reaches after ``steps`` loads from offset 0."""
    words = chain(entries, stride_b, width, seed).view(np.uint64 if width == 8 else np.uint32)
    off = 0
    for _ in range(steps % entries):
        off = int(words[off // width])
    return off


def _head(entry: str, extra: str = "") -> list[str]:
    return [
        ".version 8.0",
        ".target sm_80",
        ".address_size 64",
        extra,
        f".visible .entry {entry}(.param .u64 buf, .param .u64 out, .param .u32 entries, .param .u32 steps)",
        "{",
        "    .reg .pred %p<4>;",
        "    .reg .b32 %r<12>;",
        "    .reg .b64 %rd<24>;",
        "    ld.param.u64 %rd1, [buf];",
        "    cvta.to.global.u64 %rd1, %rd1;",
        "    ld.param.u64 %rd2, [out];",
        "    cvta.to.global.u64 %rd2, %rd2;",
        "    ld.param.u32 %r1, [entries];",
        "    ld.param.u32 %r2, [steps];",
    ]


def _tail(start: str, end: str, last: str) -> list[str]:
    return [
        f"    sub.s64 %rd20, {end}, {start};",
        "    st.global.u64 [%rd2], %rd20;",
        "    cvt.u64.u32 %rd21, %r2;",
        "    st.global.u64 [%rd2+8], %rd21;",
        f"    st.global.u64 [%rd2+16], {last};",
        "    ret;",
        "}",
    ]


def _global_chase(level: str, cache: str, stride_b: int, *, absolute: bool) -> tuple[str, str]:
    entry = f"k_lat_{level}"
    lines = _head(entry)
    if absolute:
        # Offsets → addresses in place (warms the level), then a warm lap of the chain.
        lines += [
            "    mov.u32 %r3, 0;",
            "    mov.u64 %rd3, %rd1;",
            "CONV:",
            f"    ld.global.{cache}.u64 %rd4, [%rd3];",
            "    add.u64 %rd4, %rd4, %rd1;",
            "    st.global.u64 [%rd3], %rd4;",
            f"    add.u64 %rd3, %rd3, {stride_b};",
            "    add.u32 %r3, %r3, 1;",
            "    setp.lt.u32 %p1, %r3, %r1;",
            "    @%p1 bra CONV;",
            "    membar.cta;",
            "    mov.u64 %rd5, %rd1;",
            "    mov.u32 %r3, 0;",
            "WARM:",
            f"    ld.global.{cache}.u64 %rd5, [%rd5];",
            "    add.u32 %r3, %r3, 1;",
            "    setp.lt.u32 %p1, %r3, %r1;",
            "    @%p1 bra WARM;",
            "    mov.u64 %rd10, %clock64;",
            "    mov.u32 %r3, 0;",
            "LOOP:",
            *(f"    ld.global.{cache}.u64 %rd5, [%rd5];" for _ in range(_UNROLL)),
            f"    add.u32 %r3, %r3, {_UNROLL};",
            "    setp.lt.u32 %p1, %r3, %r2;",
            "    @%p1 bra LOOP;",
            "    mov.u64 %rd11, %clock64;",
            "    sub.u64 %rd12, %rd5, %rd1;",
        ]
    else:
        lines += [
            "    mov.u64 %rd5, 0;",
            "    mov.u64 %rd10, %clock64;",
            "    mov.u32 %r3, 0;",
            "LOOP:",
        ]
        for _ in range(_UNROLL):
            lines += ["    add.u64 %rd6, %rd1, %rd5;", f"    ld.global.{cache}.u64 %rd5, [%rd6];"]
        lines += [
            f"    add.u32 %r3, %r3, {_UNROLL};",
            "    setp.lt.u32 %p1, %r3, %r2;",
            "    @%p1 bra LOOP;",
            "    mov.u64 %rd11, %clock64;",
            "    mov.u64 %rd12, %rd5;",
        ]
    lines += _tail("%rd10", "%rd11", "%rd12")
    return "\n".join(lines) + "\n", entry


def _shared_chase(footprint_b: int) -> tuple[str, str]:
    entry = "k_lat_shared"
    lines = _head(entry, f".shared .align 16 .b8 lat_smem[{footprint_b}];")
    # Copy the chain (4-byte slots holding byte offsets) to shared memory as shared addresses.
    lines += [
        "    mov.u32 %r4, lat_smem;",
        "    mov.u32 %r3, 0;",
        "    mov.u64 %rd3, %rd1;",
        "COPY:",
        "    ld.global.u32 %r5, [%rd3];",
        "    add.u32 %r5, %r5, %r4;",
        "    shl.b32 %r6, %r3, 2;",
        "    add.u32 %r6, %r6, %r4;",
        "    st.shared.u32 [%r6], %r5;",
        "    add.u64 %rd3, %rd3, 4;",
        "    add.u32 %r3, %r3, 1;",
        "    setp.lt.u32 %p1, %r3, %r1;",
        "    @%p1 bra COPY;",
        "    bar.sync 0;",
        "    mov.u32 %r7, %r4;",
        "    mov.u64 %rd10, %clock64;",
        "    mov.u32 %r3, 0;",
        "LOOP:",
        *("    ld.shared.u32 %r7, [%r7];" for _ in range(_UNROLL)),
        f"    add.u32 %r3, %r3, {_UNROLL};",
        "    setp.lt.u32 %p1, %r3, %r2;",
        "    @%p1 bra LOOP;",
        "    mov.u64 %rd11, %clock64;",
        "    sub.u32 %r8, %r7, %r4;",
        "    cvt.u64.u32 %rd12, %r8;",
    ]
    lines += _tail("%rd10", "%rd11", "%rd12")
    return "\n".join(lines) + "\n", entry


def latency_kernels() -> list[LatencyKernel]:
    """The four chases, in the order of the memory hierarchy."""
    out = []
    for level, fp, stride, steps in (
        ("l1", 16 << 10, 128, 8200),
        ("shared", 32 << 10, 4, 8200),
        ("l2", 8 << 20, 128, 16384),
        ("dram", 1 << 30, 64 << 10, 8192),
    ):
        if level == "shared":
            ptx, entry = _shared_chase(fp)
        else:
            ptx, entry = _global_chase(level, "ca" if level == "l1" else "cg", stride, absolute=level != "dram")
        pub, src = LEVELS[level]
        out.append(LatencyKernel(f"lat.{level}", level, ptx, entry, fp, stride, steps, pub, src))
    return out

"""Choi et al. §IV intensity microbenchmark: independent FMAs mixed with streaming loads.

Each *unit* of work loads ``loads`` coalesced 16-byte vectors per thread, folds them into
accumulators with FMAs (``x = fma(v_a, v_b, x)``) and then runs the extra independent FMAs
(``y = fma(y, -1, c)``, an exact involution) that set the flop:byte intensity. Work counts
flops (FMA = 2) and DRAM bytes exactly; knobs (block size, blocks per SM, loads per thread,
unroll) let the runner tune each point towards the time roofline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import RegClass, f32_bits, f64_bits, open_frame
from archline.characterize.kernels.target import Target
from archline.characterize.kernels.verify import Reject, check_live, out_words, seed_words, verifier
from archline.core.kernel import Arg, ArgKind, KernelSpec, Launch, SassCheck, Work
from archline.errors import InputError

__all__ = ["INTENSITIES", "Precision", "min_intensity", "roofline_kernel", "roofline_kernels"]

Precision = Literal["fp32", "fp64"]

#: The sweep: 1/8 (fp64 only), 1/4 … 512 flop per byte, powers of two.
INTENSITIES: tuple[Fraction, ...] = tuple(Fraction(2) ** k for k in range(-3, 10))

_C = 1.75


def min_intensity(precision: Precision) -> Fraction:
    """Lowest intensity with every loaded value used by an FMA: fp32 1/4, fp64 1/8 flop/byte."""
    return Fraction(1, 4) if precision == "fp32" else Fraction(1, 8)


def _label(i: Fraction) -> str:
    return f"{i.numerator}" if i.denominator == 1 else f"{i.numerator}-{i.denominator}"


def roofline_kernel(
    precision: Precision,
    intensity: float | Fraction,
    *,
    target: Target | None = None,
    block: int = 256,
    blocks_per_sm: int = 8,
    loads: int = 2,
    unroll: int = 256,
    chains: int | None = None,
    name: str | None = None,
) -> KernelSpec:
    """One point of the intensity sweep. Raises :class:`InputError` for impossible knobs."""
    t = target or Target()
    inten = Fraction(intensity).limit_denominator(1 << 16)
    if inten < min_intensity(precision):
        raise InputError(
            f"intensity {float(inten):g} below the {precision} minimum {float(min_intensity(precision)):g}"
        )
    if loads < 1 or unroll < 2 or block % 32 or not 32 <= block <= 1024 or blocks_per_sm < 1:
        raise InputError(
            f"bad roofline knobs: loads={loads}, unroll={unroll}, block={block}, blocks/SM={blocks_per_sm}"
        )
    f64 = precision == "fp64"
    c = chains or ((4 if f64 else 8) if loads <= 4 else (2 if f64 else 4))
    unroll = max(c, unroll // c * c)
    consume = loads if f64 else 2 * loads
    extra_exact = inten * 16 * loads / 2 - consume
    if extra_exact.denominator != 1:
        raise InputError(f"intensity {inten} needs a fractional FMA count with loads={loads}; use more loads")
    extra = int(extra_exact)
    trips, rest = divmod(extra, unroll)
    launch = Launch(block=block, blocks_per_sm=blocks_per_sm, grid=blocks_per_sm * t.sm_count)
    threads = launch.grid_for(t.sm_count) * block
    m = math.ceil(t.dram_buffer_b / (16 * loads * threads))
    size_b = m * 16 * loads * threads
    ty: ArgKind = "f64" if f64 else "f32"
    reg: RegClass = "f64" if f64 else "f32"
    imm = f64_bits if f64 else f32_bits
    args = [
        Arg("src", "ptr", "in", fixed_bytes=size_b, init="random_f32"),
        Arg("m", "u32", "scalar", value=m),
        Arg("r", "u32", "scalar", value=trips),
        Arg("c", ty, "scalar", value=_C),
        Arg("neg1", ty, "scalar", value=-1.0),
    ]
    frame = open_frame(f"k_roof_{precision}_{_label(inten).replace('-', '_')}", args)
    kb = frame.kb
    # Cap registers so the intended residency fits (at most 2048 threads per SM on Hopper).
    kb.maxnreg = max(32, 65536 // min(block * blocks_per_sm, 2048)) if block * blocks_per_sm >= 256 else None
    cc, mm = frame.regs["c"], frame.regs["neg1"]
    off, step, vstride, addr = kb.regs("b64", 4)
    kb.emit(f"mul.wide.u32 {off}, {frame.gtid}, 16;", f"mul.wide.u32 {vstride}, {frame.threads}, 16;")
    kb.emit(f"mul.wide.u32 {step}, {frame.threads}, {16 * loads};")
    s = frame.seed_word(0)
    # Few accumulators, reused round-robin, so more loads per thread do not cost registers.
    n_acc = min(consume, 2 if f64 else 4)
    acc = []
    for k in range(n_acc):
        x, tw = kb.reg(reg), kb.reg("b32")
        kb.emit(f"add.u32 {tw}, {s}, {k};", f"and.b32 {tw}, {tw}, 255;", f"cvt.rn.{ty}.u32 {x}, {tw};")
        acc.append(x)
    ys = []
    for j in range(c):
        y, tw = kb.reg(reg), kb.reg("b32")
        kb.emit(f"xor.b32 {tw}, {s}, {j * 0x9E37};", f"and.b32 {tw}, {tw}, 65535;")
        kb.emit(f"cvt.rn.{ty}.u32 {y}, {tw};", f"fma.rn.{ty} {y}, {y}, {imm(2.0**-16)}, {imm(1.0)};")
        ys.append(y)
    vals = kb.regs(reg, 4 if not f64 else 2)
    frame.begin_loop()
    u, inner = kb.reg("b32"), kb.reg("b32")
    p = kb.reg("pred")
    cur = kb.reg("b64")
    top, itop, iskip = kb.label("unit"), kb.label("extra"), kb.label("extra_done")
    kb.emit(f"mov.u64 {cur}, {off};", f"mov.u32 {u}, 0;")
    kb.place(top)
    lane_fma = 0
    counts = [0] * c
    for ld in range(loads):
        kb.emit(f"add.u64 {addr}, {frame.regs['src']}, {cur};")
        if ld:
            kb.emit(f"mad.lo.u64 {addr}, {vstride}, {ld}, {addr};")
        vec = ", ".join(vals)
        kb.emit(f"ld.global.v{len(vals)}.{ty} {{{vec}}}, [{addr}];")
        pairs = [(vals[0], vals[1]), (vals[2], vals[3])] if not f64 else [(vals[0], vals[1])]
        for a, b in pairs:
            x = acc[lane_fma % n_acc]
            kb.emit(f"fma.rn.{ty} {x}, {a}, {b}, {x};")
            lane_fma += 1
    if trips:
        kb.emit(f"mov.u32 {inner}, 0;", f"setp.eq.u32 {p}, {frame.regs['r']}, 0;", f"@{p} bra.uni {iskip};")
        kb.place(itop)
        for i in range(unroll):
            kb.emit(f"fma.rn.{ty} {ys[i % c]}, {ys[i % c]}, {mm}, {cc};")
            counts[i % c] += trips
        kb.emit(
            f"add.u32 {inner}, {inner}, 1;", f"setp.lt.u32 {p}, {inner}, {frame.regs['r']};", f"@{p} bra.uni {itop};"
        )
        kb.place(iskip)
    for i in range(rest):
        kb.emit(f"fma.rn.{ty} {ys[i % c]}, {ys[i % c]}, {mm}, {cc};")
        counts[i % c] += 1
    kb.emit(f"add.u64 {cur}, {cur}, {step};", f"add.u32 {u}, {u}, 1;", f"setp.lt.u32 {p}, {u}, {frame.regs['m']};")
    kb.emit(f"@{p} bra.uni {top};")
    frame.end_loop()
    frame.finish([(x, reg) for x in acc] + [(y, reg) for y in ys])
    fmas = consume + extra
    per_acc = [sum(1 for i in range(consume) if i % n_acc == k) for k in range(n_acc)]
    verify = _verify(f64, per_acc, counts, frame.words)
    sass_op = "DFMA" if f64 else "FFMA"
    return KernelSpec(
        name=name or f"roofline.{precision}.i{_label(inten)}",
        group="roofline",
        description=(
            f"{precision} FMAs mixed with 16-byte loads at {float(inten):g} flop/byte: {loads} loads and {fmas} FMAs "
            f"per unit, {m} units per thread per pass over {size_b / 2**30:.2f} GiB"
        ),
        ptx=frame.ptx(),
        entry=kb.entry,
        args=tuple(frame.args),
        work=Work(unit="dram", ops=float(fmas * m), flops=float(2 * fmas * m), bytes=float(16 * loads * m)),
        launch=launch,
        sass=(SassCheck("LDG\\.E", loads), SassCheck(sass_op, min(fmas, consume + unroll * bool(trips) + rest))),
        verify=verify,
        out_dtypes={"out": "uint32"},
        spec_key=precision,
        sweep=("intensity", float(inten)),
        tags=("roofline", precision, f"loads={loads}", f"unroll={unroll}"),
    )


def _verify(f64: bool, per_acc: list[int], counts: list[int], words: int):  # type: ignore[no-untyped-def]
    per = 2 if f64 else 1
    # fp64 values are pairs of [1, 2) f32 words read as doubles: in [2^-7, 2), products in [2^-14, 4).
    lo_inc, hi_inc = (2.0**-14, 4.0) if f64 else (1.0, 4.0)
    dt = np.float64 if f64 else np.float32

    def value(out: NDArray[np.uint32], k: int) -> NDArray[np.floating]:
        w = 1 + k * per
        if f64:
            return np.asarray(
                (out[w].astype(np.uint64) | (out[w + 1].astype(np.uint64) << np.uint64(32))).view(np.float64)
            )
        return np.ascontiguousarray(out[w]).view(np.float32).astype(np.float64)

    @verifier
    def verify(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> None:
        threads, iters, seed, m = (int(scalars[k]) for k in ("threads", "iters", "seed", "m"))
        out = out_words(outputs, threads, words)
        check_live(out, seed, iters)
        s = seed_words(threads, seed, 0)
        n = iters * m
        for k, fmas in enumerate(per_acc):
            x0 = ((s + np.uint64(k)) & np.uint64(255)).astype(np.float64)
            x = value(out, k)
            nk = n * fmas
            lo = x0 + 0.5 * nk * lo_inc if 4 * nk < 2**22 or f64 else x0
            hi = x0 + 1.01 * nk * hi_inc + 1.0
            bad = np.flatnonzero(~np.isfinite(x) | (x < lo) | (x > hi))
            if bad.size:
                i = int(bad[0])
                raise Reject(f"accumulator {k} of thread {i} is {x[i]!r}, expected in [{lo[i]:g}, {hi[i]:g}]")
        for j, cnt in enumerate(counts):
            tw = (s ^ np.uint64(j * 0x9E37)) & np.uint64(65535)
            y0 = (tw.astype(dt) * dt(2.0**-16) + dt(1.0)).astype(dt)
            want = y0 if (cnt * n) % 2 == 0 else (dt(_C) - y0).astype(dt)
            got = value(out, len(per_acc) + j).astype(dt)
            bad = np.flatnonzero(got != want)
            if bad.size:
                i = int(bad[0])
                raise Reject(f"FMA chain {j} of thread {i} is {got[i]!r}, expected {want[i]!r}")

    return verify


def roofline_kernels(
    target: Target | None = None, precisions: tuple[Precision, ...] = ("fp32", "fp64")
) -> list[KernelSpec]:
    """The default sweep: every intensity in :data:`INTENSITIES` at or above each precision's minimum."""
    return [roofline_kernel(p, i, target=target) for p in precisions for i in INTENSITIES if i >= min_intensity(p)]

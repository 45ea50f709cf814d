"""Floating-point arithmetic chains: add, sub, mul, fma, min, max in f32, f64, f16, bf16 and x2 forms.

Operands are chosen so that every IEEE-rounded chain is exact (Sterbenz: ``c - x`` is exact for
x, c in [1, 2)), which lets numpy reproduce the GPU bit for bit.

Over 400 lines on purpose: one table of chains per floating-point type, each next to its exact
host reference; split by type, the shared seeding and exactness argument would be repeated.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.chains import ChainDef, Operand, Seed, periodic_ref
from archline.characterize.kernels.fpemu import bf16_from_f32, bf16_to_f32, f16_from_f32, f16_to_f32, join_x2, split_x2
from archline.characterize.kernels.ptx import RegClass

__all__ = ["FP_CHAINS", "FP_CLASS", "Fmt", "fp_operand"]

Fmt = str


def _bits16(value: float, fmt: Fmt) -> int:
    if fmt == "f16":
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    return int(struct.unpack(">I", struct.pack(">f", value))[0] >> 16)


def fp_operand(name: str, value: float, fmt: Fmt) -> Operand:
    if fmt == "f32":
        return Operand(name, "f32", value, "f32")
    if fmt == "f64":
        return Operand(name, "f64", value, "f64")
    bits = _bits16(value, fmt.removesuffix("x2"))
    if fmt.endswith("x2"):
        return Operand(name, "u32", bits | (bits << 16), "b32")
    return Operand(name, "u32", bits, "b16")


FP_CLASS: dict[Fmt, RegClass] = {
    "f32": "f32",
    "f64": "f64",
    "f16": "b16",
    "bf16": "b16",
    "f16x2": "b32",
    "bf16x2": "b32",
}


def _lift(fmt: Fmt, f: Callable[..., NDArray[np.floating]]) -> Callable[..., NDArray[np.generic]]:
    """Apply an elementwise f32/f64 function ``f`` to values stored in format ``fmt``."""

    def to_f(v: NDArray[np.generic]) -> NDArray[np.floating]:
        if fmt in ("f32", "f64"):
            return np.asarray(v)
        return f16_to_f32(v) if fmt == "f16" else bf16_to_f32(v)

    def from_f(v: NDArray[np.floating]) -> NDArray[np.generic]:
        if fmt in ("f32", "f64"):
            return v
        return f16_from_f32(v.astype(np.float32)) if fmt == "f16" else bf16_from_f32(v.astype(np.float32))

    def scalar(v: float | int) -> Any:
        if fmt == "f32":
            return np.float32(v)
        if fmt == "f64":
            return np.float64(v)
        return to_f(np.array([int(v) & 0xFFFF], dtype=np.uint16))[0]

    def apply(x: NDArray[np.generic], *ops: float | int) -> NDArray[np.generic]:
        if fmt.endswith("x2"):
            base = fmt.removesuffix("x2")
            lo, hi = split_x2(x)
            return join_x2(_lift(base, f)(lo, *ops), _lift(base, f)(hi, *ops))
        return from_f(f(to_f(x), *[scalar(o) for o in ops]))

    return apply


def _fma(x: NDArray[np.floating], m: np.floating, c: np.floating) -> NDArray[np.floating]:
    # Exact here: the product is exact in double and c - x is exact (Sterbenz), so one rounding.
    return np.asarray((x.astype(np.float64) * np.float64(m) + np.float64(c)).astype(x.dtype))


#: (compute capability, PTX ISA) the bf16 instructions need (PTX ISA v9.0, "PTX ISA Notes" and
#: "Target ISA Notes" of ``fma`` and ``add`` for ``.bf16``/``.bf16x2``; the ptxas test checks them).
BF16 = ((8, 0), (7, 0))
BF16_ADD = ((9, 0), (7, 8))


def _arith(
    key: str,
    title: str,
    fmt: Fmt,
    instr: str,
    kind: str,
    *,
    unit: str,
    flops: float,
    sass: str,
    spec: str | None,
    seed_bits: int,
    sass_per: float = 1.0,
    needs: tuple[tuple[int, int], tuple[int, int]] = ((7, 5), (6, 3)),
) -> ChainDef:
    """Pure FP chains with period 2: ``alt`` x+c, x+(-c) (or x*(-2), x*(-0.5)); ``inv`` x = c - x;
    ``fma`` x = fma(x, -1, c); ``lf`` min/max leapfrog over two registers."""
    cls = FP_CLASS[fmt]
    seed = Seed("unit", bits=seed_bits, fmt=fmt)  # type: ignore[arg-type]
    if kind == "alt":
        mul = instr.startswith("mul")
        v1, v2 = (-2.0, -0.5) if mul else (1.375, -1.375)
        ops: tuple[Operand, ...] = (fp_operand("c1", v1, fmt), fp_operand("c2", v2, fmt))
        body = ((f"{instr} {{x}}, {{x}}, {{c1}};", True), (f"{instr} {{x}}, {{x}}, {{c2}};", True))
        f = _lift(fmt, (lambda x, a: x * a) if mul else (lambda x, a: x + a))
        ref = periodic_ref(lambda st, o: [f(f(st[0], o["c1"]), o["c2"])])
        state: tuple[tuple[str, RegClass, Seed], ...] = (("x", cls, seed),)
    elif kind == "inv":
        ops = (fp_operand("c", 1.75, fmt),)
        body = ((f"{instr} {{x}}, {{c}}, {{x}};", True),) * 2
        g = _lift(fmt, lambda x, c: c - x)
        ref = periodic_ref(lambda st, o: [g(g(st[0], o["c"]), o["c"])])
        state = (("x", cls, seed),)
    elif kind == "fma":
        ops = (fp_operand("m", -1.0, fmt), fp_operand("c", 1.75, fmt))
        body = ((f"{instr} {{x}}, {{x}}, {{m}}, {{c}};", True),) * 2
        h = _lift(fmt, _fma)
        ref = periodic_ref(lambda st, o: [h(h(st[0], o["m"], o["c"]), o["m"], o["c"])])
        state = (("x", cls, seed),)
    else:
        ops = ()
        body = ((f"{instr} {{a}}, {{a}}, {{b}};", True), (f"{instr} {{b}}, {{b}}, {{a}};", True))
        fn = np.minimum if instr.startswith("min") else np.maximum
        ref = periodic_ref(lambda st, o: [fn(st[0], st[1]), fn(st[1], fn(st[0], st[1]))])
        state = (("a", cls, seed), ("b", cls, Seed("unit", salt=0, bits=seed_bits - 1, fmt=fmt)))  # type: ignore[arg-type]
    return ChainDef(
        key,
        title,
        unit,
        state,
        body,
        ((sass, 1.0),),
        ref,
        operands=ops,
        flops_per_target=flops,
        spec_key=spec,
        sass_per_target=sass_per,
        min_cc=needs[0],
        min_ptx=needs[1],
    )


def _defs() -> list[ChainDef]:
    d = [
        _arith(
            "add.f32",
            "add.rn.f32 x+c, x-c",
            "f32",
            "add.rn.f32",
            "alt",
            unit="fp32",
            flops=1,
            sass="FADD",
            spec="fp32",
            seed_bits=16,
        ),
        _arith(
            "sub.f32",
            "sub.rn.f32 x = c - x",
            "f32",
            "sub.rn.f32",
            "inv",
            unit="fp32",
            flops=1,
            sass="FADD",
            spec="fp32",
            seed_bits=16,
        ),
        _arith(
            "mul.f32",
            "mul.rn.f32 x*(-2), x*(-0.5)",
            "f32",
            "mul.rn.f32",
            "alt",
            unit="fp32",
            flops=1,
            sass="FMUL",
            spec="fp32",
            seed_bits=16,
        ),
        _arith(
            "fma.f32",
            "fma.rn.f32 x = fma(x, -1, c)",
            "f32",
            "fma.rn.f32",
            "fma",
            unit="fp32",
            flops=2,
            sass="FFMA",
            spec="fp32",
            seed_bits=16,
        ),
        _arith(
            "mad.f32",
            "mad.rn.f32 x = x*(-1) + c",
            "f32",
            "mad.rn.f32",
            "fma",
            unit="fp32",
            flops=2,
            sass="FFMA",
            spec="fp32",
            seed_bits=16,
        ),
        _arith(
            "min.f32",
            "min.f32 leapfrog",
            "f32",
            "min.f32",
            "lf",
            unit="fp32",
            flops=0,
            sass="FMNMX",
            spec="fp32.minmax",
            seed_bits=16,
        ),
        _arith(
            "max.f32",
            "max.f32 leapfrog",
            "f32",
            "max.f32",
            "lf",
            unit="fp32",
            flops=0,
            sass="FMNMX",
            spec="fp32.minmax",
            seed_bits=16,
        ),
        _arith(
            "add.f64",
            "add.rn.f64 x+c, x-c",
            "f64",
            "add.rn.f64",
            "alt",
            unit="fp64",
            flops=1,
            sass="DADD",
            spec="fp64",
            seed_bits=16,
        ),
        _arith(
            "sub.f64",
            "sub.rn.f64 x = c - x",
            "f64",
            "sub.rn.f64",
            "inv",
            unit="fp64",
            flops=1,
            sass="DADD",
            spec="fp64",
            seed_bits=16,
        ),
        _arith(
            "mul.f64",
            "mul.rn.f64 x*(-2), x*(-0.5)",
            "f64",
            "mul.rn.f64",
            "alt",
            unit="fp64",
            flops=1,
            sass="DMUL",
            spec="fp64",
            seed_bits=16,
        ),
        _arith(
            "fma.f64",
            "fma.rn.f64 x = fma(x, -1, c)",
            "f64",
            "fma.rn.f64",
            "fma",
            unit="fp64",
            flops=2,
            sass="DFMA",
            spec="fp64",
            seed_bits=16,
        ),
        _arith(
            "min.f64",
            "min.f64 leapfrog (DSETP + selects)",
            "f64",
            "min.f64",
            "lf",
            unit="fp64",
            flops=0,
            sass="DSETP",
            spec=None,
            seed_bits=16,
            sass_per=8.0,
        ),
        _arith(
            "max.f64",
            "max.f64 leapfrog (DSETP + selects)",
            "f64",
            "max.f64",
            "lf",
            unit="fp64",
            flops=0,
            sass="DSETP",
            spec=None,
            seed_bits=16,
            sass_per=8.0,
        ),
        _arith(
            "add.f16",
            "add.rn.f16 x+c, x-c",
            "f16",
            "add.rn.f16",
            "alt",
            unit="fp16",
            flops=1,
            sass="HADD2",
            spec=None,
            seed_bits=8,
        ),
        _arith(
            "sub.f16",
            "sub.rn.f16 x = c - x",
            "f16",
            "sub.rn.f16",
            "inv",
            unit="fp16",
            flops=1,
            sass="HADD2",
            spec=None,
            seed_bits=10,
        ),
        _arith(
            "mul.f16",
            "mul.rn.f16 x*(-2), x*(-0.5)",
            "f16",
            "mul.rn.f16",
            "alt",
            unit="fp16",
            flops=1,
            sass="HMUL2",
            spec=None,
            seed_bits=10,
        ),
        _arith(
            "fma.f16",
            "fma.rn.f16 x = fma(x, -1, c)",
            "f16",
            "fma.rn.f16",
            "fma",
            unit="fp16",
            flops=2,
            sass="HFMA2",
            spec=None,
            seed_bits=10,
        ),
        _arith(
            "fma.f16x2",
            "fma.rn.f16x2 x = fma(x, -1, c) on both halves",
            "f16x2",
            "fma.rn.f16x2",
            "fma",
            unit="fp16",
            flops=4,
            sass="HFMA2",
            spec="fp16x2",
            seed_bits=10,
        ),
        _arith(
            "add.bf16",
            "add.rn.bf16 x+c, x-c",
            "bf16",
            "add.rn.bf16",
            "alt",
            unit="bf16",
            flops=1,
            sass="HADD2",
            spec=None,
            seed_bits=5,
            needs=BF16_ADD,
        ),
        _arith(
            "fma.bf16",
            "fma.rn.bf16 x = fma(x, -1, c)",
            "bf16",
            "fma.rn.bf16",
            "fma",
            unit="bf16",
            flops=2,
            sass="HFMA2",
            spec=None,
            seed_bits=7,
            needs=BF16,
        ),
        _arith(
            "fma.bf16x2",
            "fma.rn.bf16x2 x = fma(x, -1, c) on both halves",
            "bf16x2",
            "fma.rn.bf16x2",
            "fma",
            unit="bf16",
            flops=4,
            sass="HFMA2",
            spec="bf16x2",
            seed_bits=7,
            needs=BF16,
        ),
    ]
    return d


FP_CHAINS: dict[str, ChainDef] = {c.key: c for c in _defs()}

"""Floating-point, special-function and conversion chains (PTX templates plus host references).

Operands are chosen so that every IEEE-rounded chain is exact (Sterbenz: ``c - x`` is exact for
x, c in [1, 2)), which lets numpy reproduce the GPU bit for bit. Approximate (MUFU) chains
cannot be reproduced on the host; their references check finiteness and a stated range.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from archline.kernels.chains import ChainDef, Operand, Ops, Seed, domain_ref, identity_ref, periodic_ref
from archline.kernels.fpemu import bf16_from_f32, bf16_to_f32, f16_from_f32, f16_to_f32, join_x2, split_x2
from archline.kernels.ptx import RegClass
from archline.kernels.verify import State

__all__ = ["FP_CHAINS"]

Fmt = str


def _bits16(value: float, fmt: Fmt) -> int:
    if fmt == "f16":
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    return int(struct.unpack(">I", struct.pack(">f", value))[0] >> 16)


def _operand(name: str, value: float, fmt: Fmt) -> Operand:
    if fmt == "f32":
        return Operand(name, "f32", value, "f32")
    if fmt == "f64":
        return Operand(name, "f64", value, "f64")
    bits = _bits16(value, fmt.removesuffix("x2"))
    if fmt.endswith("x2"):
        return Operand(name, "u32", bits | (bits << 16), "b32")
    return Operand(name, "u32", bits, "b16")


_CLS: dict[Fmt, RegClass] = {"f32": "f32", "f64": "f64", "f16": "b16", "bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}


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
) -> ChainDef:
    """Pure FP chains with period 2: ``alt`` x+c, x+(-c) (or x*(-2), x*(-0.5)); ``inv`` x = c - x;
    ``fma`` x = fma(x, -1, c); ``lf`` min/max leapfrog over two registers."""
    cls = _CLS[fmt]
    seed = Seed("unit", bits=seed_bits, fmt=fmt)  # type: ignore[arg-type]
    if kind == "alt":
        mul = instr.startswith("mul")
        v1, v2 = (-2.0, -0.5) if mul else (1.375, -1.375)
        ops: tuple[Operand, ...] = (_operand("c1", v1, fmt), _operand("c2", v2, fmt))
        body = ((f"{instr} {{x}}, {{x}}, {{c1}};", True), (f"{instr} {{x}}, {{x}}, {{c2}};", True))
        f = _lift(fmt, (lambda x, a: x * a) if mul else (lambda x, a: x + a))
        ref = periodic_ref(lambda st, o: [f(f(st[0], o["c1"]), o["c2"])])
        state: tuple[tuple[str, RegClass, Seed], ...] = (("x", cls, seed),)
    elif kind == "inv":
        ops = (_operand("c", 1.75, fmt),)
        body = ((f"{instr} {{x}}, {{c}}, {{x}};", True),) * 2
        g = _lift(fmt, lambda x, c: c - x)
        ref = periodic_ref(lambda st, o: [g(g(st[0], o["c"]), o["c"])])
        state = (("x", cls, seed),)
    elif kind == "fma":
        ops = (_operand("m", -1.0, fmt), _operand("c", 1.75, fmt))
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
    )


def _between(lo: float, hi: float, *, absolute: bool = False) -> Callable[[State, Ops], str | None]:
    def check(st: State, ops: Ops) -> str | None:
        x = np.asarray(st[0]).astype(np.float64)
        v = np.abs(x) if absolute else x
        bad = np.flatnonzero(~np.isfinite(x) | (v < lo) | (v > hi))
        if bad.size:
            return f"value {x[bad[0]]!r} of thread {int(bad[0])} outside [{lo:g}, {hi:g}] or not finite"
        return None

    return check


def _sfu(
    key: str,
    instr: str,
    mufu: str,
    lo: float,
    hi: float,
    *,
    neg: bool = False,
    absolute: bool = False,
    extra: tuple[tuple[str, float], ...] = (),
) -> ChainDef:
    body: tuple[tuple[str, bool], ...] = ((f"{instr} {{x}}, {{x}};", True),)
    overhead = identity_ref()
    if neg:
        # The negation folds into the MUFU operand (SASS ``MUFU.EX2 R, -R``): no extra instruction.
        body = (("neg.f32 {x}, {x};", False), *body)
        overhead = periodic_ref(lambda st, o: [np.negative(np.asarray(st[0], dtype=np.float32))])
    title = f"{instr} x = {'-' if neg else ''}x chained"
    return ChainDef(
        key,
        title,
        "sfu",
        (("x", "f32", Seed("unit")),),
        body,
        ((mufu, 1.0), *extra),
        domain_ref(_between(lo, hi, absolute=absolute)),
        overhead_ref=overhead,
        spec_key="sfu",
        sass_per_target=1.0 + len(extra),
    )


def _div(key: str, instr: str, denorm: bool, exact: bool, fmt: Fmt = "f32", sass_per: float = 1.0) -> ChainDef:
    k = 2.0**-100 if denorm else 2.0
    cls = _CLS[fmt]
    seed = Seed("denorm") if denorm else Seed("unit", fmt=fmt)  # type: ignore[arg-type]
    mufu = "MUFU\\.RCP64H" if fmt == "f64" else "MUFU\\.RCP$"
    if exact:
        dt = np.float64 if fmt == "f64" else np.float32
        ref = periodic_ref(lambda st, o: [dt(o["k"]) / np.asarray(st[0])])
    elif denorm:
        ref = domain_ref(_between(2.0**-149, 2.0**127, absolute=True))
    else:
        ref = domain_ref(_between(2.0**-8, 2.0**8))
    kind = "denormal" if denorm else "normal"
    return ChainDef(
        key,
        f"{instr} x = k / x on {kind} operands",
        "fp64" if fmt == "f64" else "fp32",
        (("x", cls, seed),),
        ((f"{instr} {{x}}, {{k}}, {{x}};", True),),
        ((mufu, 1.0),),
        ref,
        operands=(_operand("k", k, fmt),),
        flops_per_target=1.0,
        sass_per_target=sass_per,
    )


def _cvt(key: str, cls: RegClass, tcls: RegClass, seed: Seed, there: str, back: str, sass: str) -> ChainDef:
    return ChainDef(
        key,
        f"{there} then {back} (exact round trip)",
        "cvt",
        (("x", cls, seed),),
        ((f"{there} {{t}}, {{x}};", True), (f"{back} {{x}}, {{t}};", True)),
        ((sass, 1.0),),
        periodic_ref(lambda st, o: st),
        temps=(("t", tcls),),
        spec_key="cvt64" if "64" in there + back else "cvt",
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
        ),
        _sfu("sin.approx.f32", "sin.approx.ftz.f32", "MUFU\\.SIN", 1e-30, 1.0, extra=(("FMUL\\.RZ", 1.0),)),
        _sfu(
            "cos.approx.f32", "cos.approx.ftz.f32", "MUFU\\.COS", 0.0, 1.0, absolute=True, extra=(("FMUL\\.RZ", 1.0),)
        ),
        _sfu("ex2.approx.f32", "ex2.approx.ftz.f32", "MUFU\\.EX2", 1e-30, 1.0, neg=True),
        _sfu("rsqrt.approx.f32", "rsqrt.approx.ftz.f32", "MUFU\\.RSQ", 0.5, 1.5),
        _sfu("sqrt.approx.f32", "sqrt.approx.ftz.f32", "MUFU\\.SQRT", 0.99, 2.0),
        _sfu("rcp.approx.f32", "rcp.approx.ftz.f32", "MUFU\\.RCP$", 2.0**-8, 2.0**8, neg=True, absolute=True),
        _sfu("tanh.approx.f32", "tanh.approx.f32", "MUFU\\.TANH", 0.0, 1.0),
        ChainDef(
            "lg2.approx.f32",
            "lg2.approx.ftz.f32 of ex2(-x) (the ex2 is the carrier)",
            "sfu",
            (("x", "f32", Seed("unit")),),
            (
                ("neg.f32 {x}, {x};", False),
                ("ex2.approx.ftz.f32 {x}, {x};", False),
                ("lg2.approx.ftz.f32 {x}, {x};", True),
            ),
            (("MUFU\\.LG2", 1.0), ("MUFU\\.EX2", 1.0)),
            domain_ref(_between(0.0, 64.0, absolute=True)),
            overhead_ref=domain_ref(_between(1e-30, 1.0)),
            spec_key="sfu",
            template="carrier",
            sass_per_target=2.0,
        ),
        ChainDef(
            "ex2lg2.approx.f32",
            "ex2.approx(-x) then lg2.approx: both MUFU, both counted",
            "sfu",
            (("x", "f32", Seed("unit")),),
            (
                ("neg.f32 {x}, {x};", False),
                ("ex2.approx.ftz.f32 {x}, {x};", True),
                ("lg2.approx.ftz.f32 {x}, {x};", True),
            ),
            (("MUFU\\.(LG2|EX2)", 1.0),),
            domain_ref(_between(0.0, 64.0, absolute=True)),
            spec_key="sfu",
        ),
        _div("div.rn.f32", "div.rn.f32", False, True, sass_per=22.0),
        _div("div.rn.f32.denormal", "div.rn.f32", True, True, sass_per=22.0),
        _div("div.full.f32", "div.full.f32", False, False, sass_per=6.0),
        _div("div.full.f32.denormal", "div.full.f32", True, False, sass_per=6.0),
        _div("div.approx.f32", "div.approx.f32", False, False, sass_per=4.0),
        _div("div.approx.f32.denormal", "div.approx.f32", True, False, sass_per=4.0),
        _div("div.rn.f64", "div.rn.f64", False, True, fmt="f64", sass_per=28.0),
        ChainDef(
            "rcp.rn.f32",
            "rcp.rn.f32 x = 1/x (IEEE, subroutine)",
            "fp32",
            (("x", "f32", Seed("unit")),),
            (("rcp.rn.f32 {x}, {x};", True),),
            (("MUFU\\.RCP$", 1.0),),
            periodic_ref(lambda st, o: [np.float32(1.0) / np.asarray(st[0])]),
            flops_per_target=1.0,
            sass_per_target=18.0,
        ),
        ChainDef(
            "sqrt.rn.f32",
            "sqrt.rn.f32 x = sqrt(x) (IEEE, subroutine; settles at 1)",
            "fp32",
            (("x", "f32", Seed("unit")),),
            (("sqrt.rn.f32 {x}, {x};", True),),
            (("MUFU\\.RSQ", 1.0),),
            periodic_ref(lambda st, o: [np.sqrt(np.asarray(st[0]))]),
            flops_per_target=1.0,
            sass_per_target=16.0,
        ),
        _cvt("cvt.f32.f64", "f32", "f64", Seed("unit"), "cvt.f64.f32", "cvt.rn.f32.f64", "F2F"),
        _cvt("cvt.f32.s32", "f32", "b32", Seed("intf", bits=20), "cvt.rzi.s32.f32", "cvt.rn.f32.s32", "(F2I|I2F)"),
        _cvt("cvt.f32.f16", "f32", "b16", Seed("unit", bits=10), "cvt.rn.f16.f32", "cvt.f32.f16", "(F2FP|HADD2\\.F32)"),
        _cvt("cvt.f64.u64", "f64", "b64", Seed("intf", bits=30), "cvt.rzi.u64.f64", "cvt.rn.f64.u64", "(F2I|I2F)"),
        _cvt("cvt.f64.s32", "f64", "b32", Seed("intf", bits=20), "cvt.rzi.s32.f64", "cvt.rn.f64.s32", "(F2I|I2F)"),
        _cvt("cvt.f32.u64", "f32", "b64", Seed("intf", bits=20), "cvt.rzi.u64.f32", "cvt.rn.f32.u64", "(F2I|I2F)"),
    ]
    return d


FP_CHAINS: dict[str, ChainDef] = {c.key: c for c in _defs()}

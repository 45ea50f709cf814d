"""Integer and multi-precision chains that feed themselves (PTX templates plus exact host references)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.chains import (
    ChainDef,
    Operand,
    Ops,
    Reference,
    Seed,
    affine_ref,
    periodic_ref,
)
from archline.characterize.kernels.ptx import RegClass
from archline.characterize.kernels.verify import State, affine_power, apply_affine

__all__ = ["INT_CHAINS", "K_MUL", "bit_length", "brev32", "popcount", "to_i32", "to_u32"]

M32 = np.uint64(0xFFFFFFFF)
#: Odd run-time multiplier of the IMAD carrier and of the multiply chains.
K_MUL = 0x2C1B3C6D
C_ADD = 0x6A09E667
U = np.uint64


def to_u32(x: NDArray[np.generic]) -> NDArray[np.uint32]:
    return np.asarray((np.asarray(x).astype(np.uint64) & M32).astype(np.uint32))


def to_i32(x: NDArray[np.generic]) -> NDArray[np.int64]:
    return np.asarray(x).astype(np.uint32).view(np.int32).astype(np.int64)


def popcount(x: NDArray[np.generic]) -> NDArray[np.uint32]:
    v = np.asarray(x).astype(np.uint64) & M32
    v = v - ((v >> U(1)) & U(0x55555555))
    v = (v & U(0x33333333)) + ((v >> U(2)) & U(0x33333333))
    v = (v + (v >> U(4))) & U(0x0F0F0F0F)
    return np.asarray((((v * U(0x01010101)) & M32) >> U(24)).astype(np.uint32))


def bit_length(x: NDArray[np.generic]) -> NDArray[np.int64]:
    v = np.asarray(x).astype(np.float64)
    _, e = np.frexp(v)
    return np.where(v == 0, 0, e).astype(np.int64)


def brev32(x: NDArray[np.generic]) -> NDArray[np.uint32]:
    v = np.asarray(x).astype(np.uint32)
    out = np.zeros_like(v)
    for i in range(32):
        out |= ((v >> np.uint32(i)) & np.uint32(1)) << np.uint32(31 - i)
    return out


def _mp_ref(sub: bool) -> Reference:
    """64-bit Fibonacci leapfrog kept as four 32-bit words (add.cc/addc or sub.cc/subc)."""
    a = [[1, -1], [-1, 2]] if sub else [[1, 1], [1, 2]]

    def advance(st: State, n: int, ops: Ops, threads: int) -> State:
        al, ah, bl, bh = (np.asarray(v).astype(np.uint64) for v in st)
        an, bn = affine_power(a, [0, 0], n, 64)
        ra, rb = apply_affine(an, bn, [al | (ah << U(32)), bl | (bh << U(32))], 64)
        return [to_u32(ra), to_u32(ra >> U(32)), to_u32(rb), to_u32(rb >> U(32))]

    return Reference(advance=advance)


def _mad_cc_ref() -> Reference:
    def advance(st: State, n: int, ops: Ops, threads: int) -> State:
        lo, hi, x = (np.asarray(v).astype(np.uint64) for v in st)
        with np.errstate(over="ignore"):
            acc = (lo | (hi << U(32))) + U(n % (1 << 64)) * (x * U(int(ops["k"])))
        return [to_u32(acc), to_u32(acc >> U(32)), to_u32(x)]

    return Reference(advance=advance)


def _mad24_ref() -> Reference:
    def advance(st: State, n: int, ops: Ops, threads: int) -> State:
        if n == 0:
            return st
        k24, c = int(ops["k"]) & 0xFFFFFF, int(ops["c"])
        y = np.asarray(st[0]).astype(np.uint64) & U(0xFFFFFF)
        an, bn = affine_power([[k24]], [c], n - 1, 24)
        (y,) = apply_affine(an, bn, [y], 24)
        return [to_u32(y * U(k24) + U(c))]

    return Reference(advance=advance)


def _rot_ref() -> Reference:
    def advance(st: State, n: int, ops: Ops, threads: int) -> State:
        r = (n * int(ops["k"])) % 32
        x = np.asarray(st[0]).astype(np.uint64)
        return [to_u32((x << U(r)) | (x >> U(32 - r))) if r else to_u32(x)]

    return Reference(advance=advance)


def _minmax(signed: bool, op: str) -> Callable[[State, Ops], State]:
    f = np.minimum if op == "min" else np.maximum

    def step(st: State, ops: Ops) -> State:
        conv = to_i32 if signed else (lambda v: np.asarray(v).astype(np.int64))
        a = f(conv(st[0]), conv(st[1]))
        b = f(conv(st[1]), a)
        return [to_u32(a), to_u32(b)]

    return step


def _div_step(signed: bool) -> Callable[[State, Ops], State]:
    def step(st: State, ops: Ops) -> State:
        x = np.asarray(st[0]).astype(np.int64)
        return [to_u32(np.int64(int(ops["d"])) // x)]

    return step


def _sad_step(st: State, ops: Ops) -> State:
    x = np.asarray(st[0]).astype(np.int64)
    return [to_u32(np.abs(x - int(ops["sa"])) + int(ops["sb"]))]


def _bfind_step(st: State, ops: Ops) -> State:
    x = np.asarray(st[0]).astype(np.uint32)
    return [np.where(x == 0, np.uint32(0xFFFFFFFF), (bit_length(x) - 1).astype(np.uint32))]


def _defs() -> list[ChainDef]:
    i_add = ("(IADD3|IMAD\\.IADD|VIADD)$", 1.0)
    k = Operand("k", "u32", K_MUL, "b32")
    two: tuple[tuple[str, RegClass, Seed], ...] = (("a", "b32", Seed("int", 0)), ("b", "b32", Seed("int", 0x5A5A5A5A)))
    logic = ("LOP3\\.LUT", 1.0)
    d: list[ChainDef] = [
        ChainDef(
            "add.u32",
            "add.u32 leapfrog a+=b, b+=a",
            "int32",
            two,
            (("add.u32 {a}, {a}, {b};", True), ("add.u32 {b}, {b}, {a};", True)),
            (i_add,),
            affine_ref(lambda ops: ([[1, 1], [1, 2]], [0, 0], 32)),
            spec_key="int32.add",
        ),
        ChainDef(
            "sub.u32",
            "sub.u32 leapfrog a-=b, b-=a",
            "int32",
            two,
            (("sub.u32 {a}, {a}, {b};", True), ("sub.u32 {b}, {b}, {a};", True)),
            (i_add,),
            affine_ref(lambda ops: ([[1, -1], [-1, 2]], [0, 0], 32)),
            spec_key="int32.add",
        ),
        ChainDef(
            "mul.lo.u32",
            "mul.lo.u32 x*=k (k odd, run time)",
            "int32",
            (("x", "b32", Seed("odd", 0)),),
            (("mul.lo.u32 {x}, {x}, {k};", True),),
            (("IMAD$", 1.0),),
            affine_ref(lambda ops: ([[int(ops["k"])]], [0], 32)),
            operands=(k,),
            spec_key="int32.mul",
        ),
        ChainDef(
            "mad.lo.u32",
            "mad.lo.u32 x = x*k + c",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("mad.lo.u32 {x}, {x}, {k}, {c};", True),),
            (("IMAD$", 1.0),),
            affine_ref(lambda ops: ([[int(ops["k"])]], [int(ops["c"])], 32)),
            operands=(k, Operand("c", "u32", C_ADD, "b32")),
            spec_key="int32.mul",
        ),
        ChainDef(
            "minmax.u32",
            "min(x, hi) then max(x, lo): compare/min/max",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("min.u32 {x}, {x}, {hi};", True), ("max.u32 {x}, {x}, {lo};", True)),
            (("VIMNMX", 1.0),),
            periodic_ref(lambda st, ops: st),
            spec_key="int32.compare",
            operands=(Operand("hi", "u32", 0xFFFFFFFF, "b32"), Operand("lo", "u32", 0, "b32")),
        ),
        ChainDef(
            "min.u32",
            "min.u32 leapfrog",
            "int32",
            two,
            (("min.u32 {a}, {a}, {b};", True), ("min.u32 {b}, {b}, {a};", True)),
            (("VIMNMX", 1.0),),
            periodic_ref(_minmax(False, "min")),
            spec_key="int32.compare",
        ),
        ChainDef(
            "max.s32",
            "max.s32 leapfrog",
            "int32",
            two,
            (("max.s32 {a}, {a}, {b};", True), ("max.s32 {b}, {b}, {a};", True)),
            (("VIMNMX", 1.0),),
            periodic_ref(_minmax(True, "max")),
            spec_key="int32.compare",
        ),
        ChainDef(
            "div.u32",
            "div.u32 x = D / x (divisor changes every step)",
            "int32",
            (("x", "b32", Seed("range", bits=16)),),
            (("div.u32 {x}, {d}, {x};", True),),
            (("MUFU\\.RCP$", 1.0), ("I2F", 1.0)),
            periodic_ref(_div_step(False)),
            operands=(Operand("d", "u32", 0xFFFFFFFF, "b32"),),
            sass_per_target=18.0,
        ),
        ChainDef(
            "div.s32",
            "div.s32 x = D / x (divisor changes every step)",
            "int32",
            (("x", "b32", Seed("range", bits=15)),),
            (("div.s32 {x}, {d}, {x};", True),),
            (("MUFU\\.RCP$", 1.0),),
            periodic_ref(_div_step(True)),
            operands=(Operand("d", "s32", 0x7FFFFFFF, "b32"),),
            sass_per_target=24.0,
        ),
        ChainDef(
            "rot.b32",
            "shf.l.wrap rotate x by k (the funnel shifter)",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("shf.l.wrap.b32 {x}, {x}, {x}, {k};", True),),
            (("SHF\\.L\\.W", 1.0),),
            _rot_ref(),
            operands=(Operand("k", "u32", 7, "b32"),),
            spec_key="int32.shift",
        ),
        ChainDef(
            "lop3.b32",
            "lop3 xor3 ring over three registers",
            "int32",
            (
                ("a", "b32", Seed("int", 0)),
                ("b", "b32", Seed("int", 0x5A5A5A5A)),
                ("c", "b32", Seed("int", 0x0F0F0F0F)),
            ),
            (
                ("lop3.b32 {a}, {c}, {b}, {a}, 0x96;", True),
                ("lop3.b32 {b}, {a}, {c}, {b}, 0x96;", True),
                ("lop3.b32 {c}, {b}, {a}, {c}, 0x96;", True),
            ),
            (logic,),
            periodic_ref(lambda st, ops: _lop3_round(st)),
            spec_key="int32.logic",
        ),
        ChainDef(
            "bfind.u32",
            "bfind.u32 x = bfind(x) (cycles through 0xffffffff, 31, 4, 2, 1, 0)",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("bfind.u32 {x}, {x};", True),),
            (("FLO", 1.0),),
            periodic_ref(_bfind_step),
            spec_key="clz",
        ),
        ChainDef(
            "brev.b32",
            "brev.b32 x = brev(x) (an involution)",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("brev.b32 {x}, {x};", True),),
            (("BREV", 1.0),),
            periodic_ref(lambda st, ops: [brev32(st[0])]),
            spec_key="brev",
        ),
        ChainDef(
            "sad.u32",
            "sad.u32 x = |x - 2^31| + 1 (period 2)",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("sad.u32 {x}, {x}, {sa}, {sb};", True),),
            (("VABSDIFF", 1.0),),
            periodic_ref(_sad_step),
            operands=(Operand("sa", "u32", 0x80000000, "b32"), Operand("sb", "u32", 1, "b32")),
            spec_key="sad",
        ),
        ChainDef(
            "mul24.lo.u32",
            "mul24.lo x = x[23:0] * k[23:0]",
            "int32",
            (("x", "b32", Seed("odd", 0)),),
            (("mul24.lo.u32 {x}, {x}, {k};", True),),
            (("IMAD$", 1.0), ("PRMT", 1.0)),
            _mad24_ref(),
            operands=(k, Operand("c", "u32", 0, "b32")),
            sass_per_target=2.0,
        ),
        ChainDef(
            "mad24.lo.u32",
            "mad24.lo x = x[23:0] * k[23:0] + c",
            "int32",
            (("x", "b32", Seed("int", 0)),),
            (("mad24.lo.u32 {x}, {x}, {k}, {c};", True),),
            (("IMAD$", 1.0), ("PRMT", 1.0)),
            _mad24_ref(),
            operands=(k, Operand("c", "u32", C_ADD, "b32")),
            sass_per_target=2.0,
        ),
        ChainDef(
            "add.u64",
            "add.u64 leapfrog a+=b, b+=a",
            "int64",
            (("a", "b64", Seed("int", 0)), ("b", "b64", Seed("int", 0x5A5A5A5A))),
            (("add.u64 {a}, {a}, {b};", True), ("add.u64 {b}, {b}, {a};", True)),
            (("IADD3$", 1.0), ("(IMAD\\.X|IADD3\\.X)", 1.0)),
            affine_ref(lambda ops: ([[1, 1], [1, 2]], [0, 0], 64)),
            sass_per_target=2.0,
        ),
        ChainDef(
            "addc.u32",
            "add.cc + addc: 64-bit leapfrog in 32-bit words",
            "int32",
            tuple((n, "b32", Seed("int", s)) for n, s in (("al", 0), ("ah", 1), ("bl", 2), ("bh", 3))),
            (
                ("add.cc.u32 {al}, {al}, {bl};", True),
                ("addc.u32 {ah}, {ah}, {bh};", True),
                ("add.cc.u32 {bl}, {bl}, {al};", True),
                ("addc.u32 {bh}, {bh}, {ah};", True),
            ),
            (("IADD3$", 0.5), ("(IMAD\\.X|IADD3\\.X)", 0.5)),
            _mp_ref(sub=False),
            spec_key="int32.add",
        ),
        ChainDef(
            "subc.u32",
            "sub.cc + subc: 64-bit leapfrog in 32-bit words",
            "int32",
            tuple((n, "b32", Seed("int", s)) for n, s in (("al", 0), ("ah", 1), ("bl", 2), ("bh", 3))),
            (
                ("sub.cc.u32 {al}, {al}, {bl};", True),
                ("subc.u32 {ah}, {ah}, {bh};", True),
                ("sub.cc.u32 {bl}, {bl}, {al};", True),
                ("subc.u32 {bh}, {bh}, {ah};", True),
            ),
            (("IADD3$", 0.5), ("(IMAD\\.X|IADD3\\.X)", 0.5)),
            _mp_ref(sub=True),
            spec_key="int32.add",
        ),
        ChainDef(
            "madc.u32",
            "mad.lo.cc + madc.hi: 64-bit acc += x*k",
            "int32",
            (("lo", "b32", Seed("int", 0)), ("hi", "b32", Seed("int", 1)), ("x", "b32", Seed("int", 2))),
            (("mad.lo.cc.u32 {lo}, {x}, {k}, {lo};", True), ("madc.hi.u32 {hi}, {x}, {k}, {hi};", True)),
            (("IMAD\\.WIDE\\.U32", 0.5),),
            _mad_cc_ref(),
            operands=(k,),
            spec_key="int32.mul",
        ),
    ]
    return d


def _lop3_round(st: State) -> State:
    a, b, c = (np.asarray(v).astype(np.uint32) for v in st)
    a = c ^ b ^ a
    b = a ^ c ^ b
    c = b ^ a ^ c
    return [a, b, c]


INT_CHAINS: dict[str, ChainDef] = {c.key: c for c in _defs()}

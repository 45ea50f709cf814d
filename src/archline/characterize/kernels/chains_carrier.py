"""Integer and logic chains with an IMAD carrier: targets ptxas would fuse, absorb or collapse alone."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.chains import ChainDef, Operand, Ops, Seed, affine_ref, simulate_ref
from archline.characterize.kernels.chains_int import K_MUL, U, bit_length, popcount, to_i32, to_u32
from archline.characterize.kernels.verify import State

__all__ = ["CARRIER_CHAINS"]


def _carrier(
    key: str,
    title: str,
    target: str,
    fx: Callable[[NDArray[np.uint32], NDArray[np.uint32], Ops], NDArray[np.generic]],
    *,
    sass: tuple[tuple[str, float], ...],
    domain: Callable[[State, Ops], str | None] | None = None,
    operands: tuple[Operand, ...] = (),
    unit: str = "int32",
    sass_per_target: float = 1.0,
    spec_key: str | None = None,
    note: str = "",
) -> ChainDef:
    """``x = target(x, y); y = y * kc + x``: the IMAD carrier keeps ptxas from folding a target it
    could otherwise fuse or collapse (logic ops into one LOP3, idempotent ops), and keeps the
    operands changing."""

    def step(st: State, ops: Ops) -> State:
        x, y = st
        x2 = to_u32(fx(np.asarray(x), np.asarray(y), ops))
        y2 = to_u32(np.asarray(y).astype(np.uint64) * U(int(ops["kc"])) + x2.astype(np.uint64))
        return [x2, y2]

    def no_domain(st: State, ops: Ops) -> str | None:
        return None

    return ChainDef(
        key=key,
        title=title,
        unit=unit,
        state=(("x", "b32", Seed("int", 0x3C6EF372)), ("y", "b32", Seed("int", 0xA54FF53A))),
        body=((target, True), ("mad.lo.u32 {y}, {y}, {kc}, {x};", False)),
        sass=(*sass, ("IMAD$", 1.0)),
        ref=simulate_ref(step, domain or no_domain),
        overhead_ref=affine_ref(lambda ops: ([[1, 0], [1, int(ops["kc"])]], [0, 0], 32)),
        operands=(Operand("kc", "u32", K_MUL, "b32"), *operands),
        sass_per_target=sass_per_target + 1.0,
        spec_key=spec_key,
        template="carrier",
        note=note,
    )


def _bound(limit: int, what: str) -> Callable[[State, Ops], str | None]:
    def check(st: State, ops: Ops) -> str | None:
        bad = np.flatnonzero(np.asarray(st[0]).astype(np.uint64) > U(limit))
        return f"{what} result {int(st[0][bad[0]])} > {limit} in thread {int(bad[0])}" if bad.size else None

    return check


def _rem(signed: bool) -> Callable[[NDArray[np.uint32], NDArray[np.uint32], Ops], NDArray[np.generic]]:
    def f(x: NDArray[np.uint32], y: NDArray[np.uint32], ops: Ops) -> NDArray[np.generic]:
        d = int(ops["d"])
        if signed:
            return np.asarray(np.fmod(to_i32(y), np.int64(d)))
        return np.asarray(y.astype(np.uint64) % U(d))

    return f


def _defs() -> list[ChainDef]:
    logic = ("LOP3\\.LUT", 1.0)
    return [
        _carrier(
            "and.b32",
            "and.b32 x &= y",
            "and.b32 {x}, {x}, {y};",
            lambda x, y, o: x & y,
            sass=(logic,),
            spec_key="int32.logic",
        ),
        _carrier(
            "or.b32",
            "or.b32 x |= y",
            "or.b32 {x}, {x}, {y};",
            lambda x, y, o: x | y,
            sass=(logic,),
            spec_key="int32.logic",
        ),
        _carrier(
            "xor.b32",
            "xor.b32 x ^= y",
            "xor.b32 {x}, {x}, {y};",
            lambda x, y, o: x ^ y,
            sass=(logic,),
            spec_key="int32.logic",
        ),
        _carrier(
            "not.b32", "not.b32 x = ~y", "not.b32 {x}, {y};", lambda x, y, o: ~y, sass=(logic,), spec_key="int32.logic"
        ),
        _carrier(
            "cnot.b32",
            "cnot.b32 x = (y == 0)",
            "cnot.b32 {x}, {y};",
            lambda x, y, o: (y == 0).astype(np.uint32),
            sass=(("ISETP", 1.0), ("SEL", 1.0)),
            domain=_bound(1, "cnot"),
            sass_per_target=3.0,
        ),
        _carrier(
            "abs.s32", "abs.s32 x = |y|", "abs.s32 {x}, {y};", lambda x, y, o: np.abs(to_i32(y)), sass=(("IABS", 1.0),)
        ),
        _carrier(
            "shl.b32",
            "shl.b32 x = y << 5",
            "shl.b32 {x}, {y}, {sh};",
            lambda x, y, o: y.astype(np.uint64) << U(int(o["sh"])),
            sass=(("SHF\\.L|IMAD\\.SHL", 1.0),),
            operands=(Operand("sh", "u32", 5, "b32"),),
            spec_key="int32.shift",
        ),
        _carrier(
            "shr.u32",
            "shr.u32 x = y >> 5",
            "shr.u32 {x}, {y}, {sh};",
            lambda x, y, o: y >> np.uint32(int(o["sh"])),
            sass=(("SHF\\.R", 1.0),),
            domain=_bound((1 << 27) - 1, "shr"),
            operands=(Operand("sh", "u32", 5, "b32"),),
            spec_key="int32.shift",
        ),
        _carrier(
            "popc.b32",
            "popc.b32 x = popc(y)",
            "popc.b32 {x}, {y};",
            lambda x, y, o: popcount(y),
            sass=(("POPC", 1.0),),
            domain=_bound(32, "popc"),
            spec_key="popc",
        ),
        _carrier(
            "clz.b32",
            "clz.b32 x = clz(y) (FLO then 31 - r)",
            "clz.b32 {x}, {y};",
            lambda x, y, o: 32 - bit_length(y),
            sass=(("FLO", 1.0),),
            domain=_bound(32, "clz"),
            sass_per_target=2.0,
            spec_key="clz",
        ),
        _carrier(
            "rem.u32",
            "rem.u32 x = y % d (d loop-invariant: ptxas hoists its reciprocal)",
            "rem.u32 {x}, {y}, {d};",
            _rem(False),
            sass=(("IMAD\\.HI\\.U32", 1.0),),
            operands=(Operand("d", "u32", 0x7FFFFFF1, "b32"),),
            domain=_bound(0x7FFFFFF0, "rem"),
            sass_per_target=9.0,
        ),
        _carrier(
            "rem.s32",
            "rem.s32 x = y % d (d loop-invariant: ptxas hoists its reciprocal)",
            "rem.s32 {x}, {y}, {d};",
            _rem(True),
            sass=(("IMAD\\.HI\\.U32", 1.0),),
            operands=(Operand("d", "s32", 0x3FFFFFF1, "b32"),),
            sass_per_target=12.0,
        ),
        _carrier(
            "copysign.f32",
            "copysign.f32 x = copysign(-1, y) on the bits of y",
            "copysign.f32 {x}, {sg}, {y};",
            lambda x, y, o: (y & np.uint32(0x7FFFFFFF)) | np.uint32(int(o["sg"]) & 0x80000000),
            sass=(logic,),
            operands=(Operand("sg", "u32", 0xBF800000, "b32"),),
            unit="fp32",
        ),
    ]


CARRIER_CHAINS: dict[str, ChainDef] = {c.key: c for c in _defs()}

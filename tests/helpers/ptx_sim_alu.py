"""Semantics of the PTX arithmetic, logic and conversion instructions ptx_sim interprets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

A = NDArray[Any]
#: Reads an operand (register, immediate or special register) as the given numpy type.
Val = Callable[[str, Any], A]


class SimError(Exception):
    """The interpreter met something outside the PTX subset it knows."""


_TYPES: dict[str, Any] = {
    "u8": np.uint8,
    "s8": np.int8,
    "u16": np.uint16,
    "s16": np.int16,
    "b16": np.uint16,
    "f16": np.uint16,
    "bf16": np.uint16,
    "u32": np.uint32,
    "s32": np.int32,
    "b32": np.uint32,
    "f16x2": np.uint32,
    "bf16x2": np.uint32,
    "u64": np.uint64,
    "s64": np.int64,
    "b64": np.uint64,
    "f32": np.float32,
    "f64": np.float64,
}


def _f16(bits: A) -> A:
    return np.asarray(bits).astype(np.uint16).view(np.float16).astype(np.float32)


def _to_f16(x: A) -> A:
    return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def _bf16(bits: A) -> A:
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _to_bf16(x: A) -> A:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + ((u >> np.uint64(16)) & np.uint64(1)) + np.uint64(0x7FFF)) >> np.uint64(16)).astype(np.uint16)


def _half_op(kind: str, f: Callable[..., A], *xs: A) -> A:
    """Apply float32 function ``f`` to f16/bf16 (or packed x2) operands, rounding once."""
    dec, enc = (_f16, _to_f16) if kind.startswith("f16") else (_bf16, _to_bf16)
    if kind.endswith("x2"):
        lo = [np.asarray(x).astype(np.uint32) & np.uint32(0xFFFF) for x in xs]
        hi = [np.asarray(x).astype(np.uint32) >> np.uint32(16) for x in xs]
        rlo = enc(f(*[dec(v) for v in lo])).astype(np.uint32)
        rhi = enc(f(*[dec(v) for v in hi])).astype(np.uint32)
        return rlo | (rhi << np.uint32(16))
    return enc(f(*[dec(x) for x in xs]))


def _popc(x: A) -> A:
    v = np.asarray(x).astype(np.uint64)
    return np.array([bin(int(a)).count("1") for a in v], dtype=np.uint32)


def _bitlen(x: A) -> A:
    return np.array([int(a).bit_length() for a in np.asarray(x).astype(np.uint64)], dtype=np.int64)


def alu(val: Val, st: Any, parts: list[str], ops: list[str]) -> A:
    """Result of one arithmetic, logic or conversion instruction for every thread."""
    base, ty = parts[0], parts[-1]
    dt = _TYPES.get(ty, np.uint32)
    v = lambda i, t=dt: val(ops[i], t)  # noqa: E731
    wide = np.uint64 if np.dtype(dt).kind == "u" else np.int64
    u64 = lambda i: val(ops[i], dt).astype(wide)  # noqa: E731
    m32 = np.uint64(0xFFFFFFFF)
    fp = ty in ("f32", "f64")
    half = ty in ("f16", "bf16", "f16x2", "bf16x2")
    if base == "cvta":
        return v(1)
    if base == "cvt":
        return cvt(val, parts, ops)
    if base == "setp":
        cmp = parts[1]
        a, b = v(1), v(2)
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp]
    if half:
        kind = ty
        f = {
            "add": lambda a, b: a + b,
            "sub": lambda a, b: a - b,
            "mul": lambda a, b: a * b,
            "fma": lambda a, b, c: (a.astype(np.float64) * b + c).astype(np.float32),
        }[base]
        return _half_op(kind, f, *[v(i) for i in range(1, len(ops))])
    if fp:
        if base in ("add", "sub", "mul", "min", "max", "div"):
            a, b = v(1), v(2)
            with np.errstate(all="ignore"):
                return {
                    "add": lambda: a + b,
                    "sub": lambda: a - b,
                    "mul": lambda: a * b,
                    "min": lambda: np.minimum(a, b),
                    "max": lambda: np.maximum(a, b),
                    "div": lambda: a / b,
                }[base]()
        if base in ("fma", "mad"):
            with np.errstate(all="ignore"):
                return (v(1).astype(np.float64) * v(2) + v(3)).astype(dt)
        with np.errstate(all="ignore"):
            x = v(1)
            fn = {
                "neg": lambda: -x,
                "abs": lambda: np.abs(x),
                "sqrt": lambda: np.sqrt(x),
                "rcp": lambda: dt(1) / x,
                "rsqrt": lambda: dt(1) / np.sqrt(x),
                "sin": lambda: np.sin(x),
                "cos": lambda: np.cos(x),
                "ex2": lambda: np.exp2(x),
                "lg2": lambda: np.log2(x),
                "tanh": lambda: np.tanh(x),
            }
            if base == "copysign":
                a, b = v(1, np.uint32), v(2, np.uint32)
                return (b & np.uint32(0x7FFFFFFF)) | (a & np.uint32(0x80000000))
            return np.asarray(fn[base](), dtype=dt)
    if base == "copysign":
        a, b = v(1, np.uint32), v(2, np.uint32)
        return (b & np.uint32(0x7FFFFFFF)) | (a & np.uint32(0x80000000))
    bits = np.dtype(dt).itemsize * 8
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        if base in ("add", "sub") and "cc" not in parts and base + "c" not in parts:
            a, b = u64(1), u64(2)
            r = a + b if base == "add" else a - b
            return r.astype(np.uint64) & mask
        if base in ("add", "sub", "addc", "subc"):
            a, b = v(1, np.uint32).astype(np.uint64), v(2, np.uint32).astype(np.uint64)
            cin = st.carry if base in ("addc", "subc") else np.uint64(0)
            if base in ("add", "addc"):
                r = a + b + cin
                carry = r >> np.uint64(32)
            else:
                r = a - b - cin
                carry = (a < b + cin).astype(np.uint64)
            if "cc" in parts:
                st.carry = carry
            return r & m32
        if base == "mul" and parts[1] == "wide":
            return v(1, np.uint32).astype(np.uint64) * v(2, np.uint32).astype(np.uint64)
        if base in ("mul", "mad") and parts[1] == "lo" and "cc" not in parts:
            r = u64(1) * u64(2)
            if base == "mad":
                r = r + u64(3)
            return r.astype(np.uint64) & mask
        if base == "mad" and "cc" in parts:
            p = v(1, np.uint32).astype(np.uint64) * v(2, np.uint32).astype(np.uint64)
            r = (p & m32) + v(3, np.uint32).astype(np.uint64)
            st.carry = r >> np.uint64(32)
            return r & m32
        if base == "madc":
            p = v(1, np.uint32).astype(np.uint64) * v(2, np.uint32).astype(np.uint64)
            r = (p >> np.uint64(32)) + v(3, np.uint32).astype(np.uint64) + st.carry
            return r & m32
        if base in ("mul24", "mad24"):
            k = np.uint64(0xFFFFFF)
            r = (v(1, np.uint32).astype(np.uint64) & k) * (v(2, np.uint32).astype(np.uint64) & k)
            if base == "mad24":
                r = r + v(3, np.uint32).astype(np.uint64)
            return r & m32
    if base in ("min", "max"):
        f = np.minimum if base == "min" else np.maximum
        return f(v(1), v(2))
    if base in ("div", "rem"):
        a, b = v(1).astype(np.int64), v(2).astype(np.int64)
        if base == "div":
            q = np.where(b == 0, -1, np.abs(a) // np.where(b == 0, 1, np.abs(b)) * np.sign(a) * np.sign(b))
            return q.astype(np.int64).astype(np.uint64) & mask
        r = np.fmod(a, np.where(b == 0, 1, b))
        return r.astype(np.int64).astype(np.uint64) & mask
    if base in ("and", "or", "xor"):
        a, b = v(1, np.uint32), v(2, np.uint32)
        return {"and": a & b, "or": a | b, "xor": a ^ b}[base]
    if base == "not":
        return ~v(1, np.uint32)
    if base == "cnot":
        return (v(1, np.uint32) == 0).astype(np.uint32)
    if base == "abs":
        return np.abs(v(1, np.int32).astype(np.int64)).astype(np.uint64) & m32
    if base in ("shl", "shr"):
        a, s = v(1).astype(np.int64 if ty.startswith("s") else np.uint64), v(2, np.uint32).astype(np.uint64)
        if base == "shl":
            return np.where(s >= 32, 0, (a.astype(np.uint64) << np.minimum(s, 63)) & m32).astype(np.uint64)
        return np.where(s >= 32, 0, a.astype(np.uint64) >> np.minimum(s, 63))
    if base == "shf":
        a, b, s = (
            v(1, np.uint32).astype(np.uint64),
            v(2, np.uint32).astype(np.uint64),
            v(3, np.uint32).astype(np.uint64),
        )
        s = s & np.uint64(31)
        both = (b << np.uint64(32)) | a
        return ((both << s) >> np.uint64(32)) & m32
    if base == "lop3":
        a, b, c = v(1, np.uint32), v(2, np.uint32), v(3, np.uint32)
        lut = int(ops[4], 0)
        out = np.zeros(st.n, np.uint32)
        for i in range(8):
            if lut >> i & 1:
                ta = a if i & 4 else ~a
                tb = b if i & 2 else ~b
                tc = c if i & 1 else ~c
                out |= ta & tb & tc
        return out
    if base == "popc":
        return _popc(v(1))
    if base == "clz":
        return (32 - _bitlen(v(1, np.uint32))).astype(np.uint32)
    if base == "bfind":
        x = v(1, np.uint32)
        return np.where(x == 0, np.uint32(0xFFFFFFFF), (_bitlen(x) - 1).astype(np.uint32))
    if base == "brev":
        x = v(1, np.uint32)
        return np.array([int(f"{int(a):032b}"[::-1], 2) for a in x], dtype=np.uint32)
    if base == "sad":
        a, b, c = (v(i, np.uint32).astype(np.int64) for i in (1, 2, 3))
        return (np.abs(a - b) + c).astype(np.uint64) & m32
    raise SimError(f"unsupported instruction {'.'.join(parts)}")


def cvt(val: Val, parts: list[str], ops: list[str]) -> A:
    rnd = [p for p in parts[1:] if p in ("rn", "rzi", "rz")]
    dst, src = parts[-2], parts[-1]
    x = val(ops[1], _TYPES[src])
    if src in ("f16", "bf16"):
        x = _f16(x) if src == "f16" else _bf16(x)
    if dst in ("f16", "bf16"):
        return _to_f16(x) if dst == "f16" else _to_bf16(x)
    if dst in ("f32", "f64"):
        return np.asarray(x).astype(_TYPES[dst])
    if np.asarray(x).dtype.kind == "f":
        y = np.trunc(x) if "rzi" in rnd else np.rint(x)
        return y.astype(np.int64).astype(_TYPES[dst])
    return np.asarray(x).astype(np.uint64).astype(_TYPES[dst])

"""Which MIPP table column (arithmetic class, memory level) a results row belongs to, from its name and unit."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archline.records.csvload import CsvRow

__all__ = [
    "ARITH_CLASSES",
    "MEMORY_ORDER",
    "ArithClass",
    "arith_class",
    "memory_label",
    "pick_representative",
    "tokens",
]


@dataclass(frozen=True)
class ArithClass:
    """One column of the arithmetic table; ``preferred`` name tokens pick its representative benchmark."""

    key: str
    label: str
    preferred: tuple[str, ...] = ()


#: The columns of MIPP Table I, plus Hopper's FP16/BF16 and the four FP32 divisions, in print order.
ARITH_CLASSES: tuple[ArithClass, ...] = (
    ArithClass("int32_simple", "INT32 simple", ("add", "sub")),
    ArithClass("int32_complex", "INT32 complex", ("mad", "mul")),
    ArithClass("int32_popc", "INT32 popc", ("popc",)),
    ArithClass("int32_shift", "INT32 shift", ("shl", "shr", "shift")),
    ArithClass("int32_bitop", "INT32 bit ops", ("and", "xor", "or", "lop3")),
    ArithClass("int32_compare", "INT32 compare", ("setp", "min", "max")),
    ArithClass("int64_simple", "INT64 simple", ("add",)),
    ArithClass("fp32_simple", "FP32 simple", ("fma", "mad", "mul", "add")),
    ArithClass("fp32_special", "FP32 special", ("rsqrt", "sin", "ex2")),
    ArithClass("fp64_simple", "FP64 simple", ("fma", "add")),
    ArithClass("fp16_bf16", "FP16/BF16", ("fp16", "half2", "f16", "bf16")),
    ArithClass("div_ieee_normal", "FP32 div IEEE, normal"),
    ArithClass("div_ieee_denormal", "FP32 div IEEE, denormal"),
    ArithClass("div_approx_normal", "FP32 div approx, normal"),
    ArithClass("div_approx_denormal", "FP32 div approx, denormal"),
)
_KEYS = {c.key for c in ARITH_CLASSES}

_SFU = {"sin", "cos", "ex2", "lg2", "rsqrt", "rcp", "sqrt", "tanh", "sfu", "special", "exp", "log"}
_FP64 = {"fp64", "f64", "double", "dp"}
_FP16 = {"fp16", "f16", "half", "half2", "f16x2", "bf16", "bf16x2", "hfma2"}
_FP32 = {"fp32", "f32", "float", "sp"}
_INT64 = {"int64", "i64", "u64", "s64"}


def tokens(name: str) -> set[str]:
    """The lower-case parts of a catalogue name split at '.', '_', '-' and '/'."""
    return {t for t in re.split(r"[._\-/]+", name.lower()) if t}


def arith_class(name: str, unit: str = "", override: str = "") -> str | None:
    """The :data:`ARITH_CLASSES` key of an arithmetic benchmark, or None if no column fits it.

    ``override`` (the optional ``mipp_class`` column of results.csv) wins when it names a class.
    Otherwise the catalogue name's parts decide (``arith.fp32.fma`` → FP32 simple,
    ``arith.fp32.div.approx.denormal`` → FP32 div approx, denormal); ``unit`` ``sfu`` marks FP32 special.
    """
    if override in _KEYS:
        return override
    t = tokens(name)
    u = unit.lower()
    if "div" in t or any(x.startswith("div") for x in t):
        if t & _FP64 or t & _FP16 or t & _INT64 or t & {"int32", "u32", "s32", "i32"}:
            return None
        kind = "approx" if t & {"approx", "full", "fast", "fastmath"} else "ieee"
        den = "denormal" if any(x.startswith(("denorm", "subnorm")) for x in t) else "normal"
        return f"div_{kind}_{den}"
    if t & _FP16 or u in {"fp16", "bf16", "half"}:
        return "fp16_bf16"
    if t & _FP64 or u == "fp64":
        return "fp64_simple"
    if t & _SFU or u == "sfu":
        return "fp32_special"
    if t & _FP32 or u == "fp32":
        return "fp32_simple"
    if t & _INT64 or u == "int64":
        return "int64_simple"
    if "popc" in t or u == "popc":
        return "int32_popc"
    if t & {"shl", "shr", "shf", "shift"}:
        return "int32_shift"
    if t & {"and", "or", "xor", "not", "lop", "lop3", "bitop", "bit", "logic"}:
        return "int32_bitop"
    if t & {"setp", "cmp", "compare", "min", "max", "isetp"}:
        return "int32_compare"
    if t & {"mul", "mad", "imad", "complex", "mul24", "mad24"}:
        return "int32_complex"
    if t & {"add", "sub", "iadd", "iadd3", "simple"}:
        return "int32_simple"
    return None


def pick_representative(rows: Sequence[CsvRow], preferred: Iterable[str]) -> CsvRow:
    """The row a MIPP column shows: a successful one, the first preferred operation, then by name."""

    def rank(r: CsvRow) -> tuple[int, int, str]:
        ok = 0 if (r.text("status") or "ok") == "ok" else 1
        t = tokens(r.text("name"))
        pref = next((i for i, p in enumerate(preferred) if p in t), len(list(preferred)))
        return ok, pref, r.text("name")

    return min(rows, key=rank)


#: Memory levels in print order (MIPP Table III: DRAM, L2, shared, constant), then anything else.
MEMORY_ORDER = ("dram", "l2", "l1", "shared", "constant", "local", "global")
_LEVEL_ALIASES = {"const": "constant", "smem": "shared", "hbm": "dram", "gmem": "dram"}


def memory_label(name: str, unit: str) -> tuple[int, str]:
    """Sort key and column label of a memory benchmark: its level, and the DRAM variant if any."""
    t = {_LEVEL_ALIASES.get(x, x) for x in tokens(name)}
    level = _LEVEL_ALIASES.get(unit.lower(), unit.lower()) or next((m for m in MEMORY_ORDER if m in t), "other")
    order = MEMORY_ORDER.index(level) if level in MEMORY_ORDER else len(MEMORY_ORDER)
    names = {"dram": "DRAM", "l2": "L2", "l1": "L1", "shared": "Shared", "constant": "Constant"}
    label = names.get(level, level.upper() if len(level) <= 3 else level.capitalize())
    variant = next((v for v in ("stride", "stream", "copy", "read", "write", "chase", "atomic") if v in t), "")
    return order, f"{label} {variant}".strip()

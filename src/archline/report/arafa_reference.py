"""Reference constants: Arafa et al.'s per-PTX-instruction energies (Table I) and technique errors (§VI-A).

Source: Y. Arafa, A. ElWazir, A. ElKanishy, Y. Aly, A. Elsayed, A.-H. Badawy, G. Chennupati,
S. Eidenbenz, N. Santhi, "Verified Instruction-Level Energy Consumption Measurement for NVIDIA
GPUs", Proc. 17th ACM International Conference on Computing Frontiers (CF '20), 2020 —
Table I ("Energy Consumption of GPU Instructions") and §VI-A ("Verification with the Hardware
Measurement"). Transcribed from `papers/arafa-instruction-energy.txt`.

These are the paper's published numbers, not measurements by archline. Table I prints, per
instruction and GPU, two numbers: PAPI (end-instant) first, MTSM second, "all the numbers are in
(µJ)", for kernels of one thread in one block compiled at -O3 ("Optimized") and -O0
("Non-Optimized"), with CUDA 10.1. GPUs: Maxwell = GTX TITAN X, Pascal = GTX 1080 Ti,
Volta = TITAN V, Turing = TITAN RTX. "NA" (Maxwell has no FP16) is None here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ARCHS",
    "ARCH_GPUS",
    "CITATION",
    "TABLE_I",
    "VERIFICATION",
    "Arch",
    "ReferenceRow",
    "match_reference",
]

CITATION = "Arafa et al., CF '20, Table I"

Arch = Literal["Maxwell", "Pascal", "Volta", "Turing"]
ARCHS: tuple[Arch, ...] = ("Maxwell", "Pascal", "Volta", "Turing")
ARCH_GPUS: dict[Arch, str] = {
    "Maxwell": "GTX TITAN X",
    "Pascal": "GTX 1080 Ti",
    "Volta": "TITAN V",
    "Turing": "TITAN RTX",
}

#: (PAPI µJ, MTSM µJ) as printed, or None for "NA".
Pair = tuple[float, float] | None


@dataclass(frozen=True)
class ReferenceRow:
    """One row of Table I: its category, printed label, and (PAPI, MTSM) µJ per GPU at -O3 and -O0."""

    category: str
    label: str
    optimized: tuple[Pair, Pair, Pair, Pair]
    non_optimized: tuple[Pair, Pair, Pair, Pair]

    def mtsm_uj(self, arch: Arch, opt_level: int) -> float | None:
        """The MTSM figure (µJ per instruction) for ``arch`` at ``opt_level`` 3 (optimized) or 0."""
        pairs = self.optimized if opt_level >= 1 else self.non_optimized
        p = pairs[ARCHS.index(arch)]
        return None if p is None else p[1]

    def papi_uj(self, arch: Arch, opt_level: int) -> float | None:
        pairs = self.optimized if opt_level >= 1 else self.non_optimized
        p = pairs[ARCHS.index(arch)]
        return None if p is None else p[0]


#: Table I as printed, one line per row: category | label | 16 numbers, -O3 Maxwell, Pascal, Volta,
#: Turing (PAPI then MTSM for each), then -O0 in the same order. The paper prints identical
#: values for the simple integer, logic, shift and FP32 add rows; they are kept as printed.
_TABLE_I_TEXT = """
integer | add / sub / min / max | 0.0942 0.0461 0.0277 0.0200 0.0064 0.0012 0.0293 0.0281 \
    1.2453 1.0264 0.6509 0.6203 0.2531 0.2384 0.8340 0.7905
integer | mul / mad | 3.0239 2.7309 0.2853 0.1727 0.0092 0.0014 0.0434 0.0233 \
    4.5826 4.2959 3.6194 3.5986 0.5228 0.4912 0.9969 0.9675
integer | {s} div | 10.5921 6.7819 5.0270 4.9889 4.2489 4.0660 7.2119 6.5499 \
    64.7649 64.6306 44.5100 44.5609 27.4008 27.0584 48.7700 48.4940
integer | {s} rem | 7.8512 6.6833 5.0539 4.9687 4.2100 4.0138 7.3197 6.7982 \
    61.1036 61.3000 42.4800 42.0521 25.4413 25.1175 48.3881 47.9075
integer | abs | 0.800 0.747 0.2927 0.2349 0.0647 0.0621 0.3000 0.2710 \
    2.1611 1.8841 1.2170 1.2448 1.4263 1.4013 2.3084 2.3880
integer | {u} div | 7.44783 6.2899 4.7398 4.5889 3.9254 3.8706 6.6068 6.038 \
    52.5558 52.3220 36.2400 36.0963 20.4411 20.2517 35.8200 35.6736
integer | {u} rem | 7.5357 6.4006 4.8380 4.7603 3.9587 3.9471 6.8026 6.3093 \
    50.6491 50.4818 35.0700 34.8370 19.6811 19.2906 35.1347 35.0062
logic | and / or / not / xor | 0.0942 0.0461 0.0277 0.0200 0.0064 0.0012 0.0293 0.0281 \
    1.2453 1.0264 0.6509 0.6203 0.2531 0.2384 0.8340 0.7905
logic | cnot | 0.3362 0.0343 0.3227 0.2423 0.0071 0.0077 0.2840 0.1011 \
    2.0562 1.7680 1.8762 1.8498 2.3421 2.3174 3.9990 3.9181
logic | shl / shr | 0.0942 0.0461 0.0277 0.0200 0.0064 0.0012 0.0293 0.0281 \
    1.2453 1.0264 0.6509 0.6203 0.2531 0.2384 0.8340 0.7905
fp32 | add / sub / min / max | 0.0942 0.0461 0.0277 0.0200 0.0064 0.0012 0.0293 0.0281 \
    1.2453 1.0264 0.6509 0.6203 0.2531 0.2384 0.8340 0.7905
fp32 | mul / mad / fma | 3.0239 2.7309 0.2778 0.2008 0.0021 0.0014 0.2933 0.2811 \
    4.5826 4.2959 0.6509 0.6203 0.4874 0.4797 0.8340 0.7905
fp32 | div | 10.6203 9.4351 6.9934 6.8707 5.1096 5.0355 8.6425 7.9232 \
    57.2252 56.6529 50.4741 49.9350 34.1050 33.3816 58.8700 58.6767
fp64 | add / sub / min / max | 2.3058 2.0061 1.8610 1.8606 0.3608 0.3567 2.6810 2.6176 \
    3.3017 2.5143 2.0070 2.0586 0.5158 0.5114 4.6315 4.1623
fp64 | div | 30.0634 28.8160 19.6393 19.2843 3.7249 3.6828 25.7757 23.6016 \
    101.3056 100.7807 50.3810 50.0800 31.0212 30.4121 67.4127 67.4025
fp16 | add / sub / mul | NA NA 2.9601 2.8788 0.0924 0.0624 0.3740 0.1220 \
    NA NA 3.5727 3.4259 0.5027 0.4656 0.9972 0.9631
multiprecision | add.cc / addc / sub.cc | 0.3922 0.0791 0.3152 0.1492 0.0669 0.0535 0.1293 0.1065 \
    1.2502 1.0270 0.6685 0.6317 0.5187 0.4938 0.9979 0.9680
multiprecision | subc | 0.6934 0.3593 0.3655 0.3499 0.1006 0.089 0.4339 0.1677 \
    2.1672 1.8927 1.2646 0.9002 0.9889 0.952467 1.9107 1.8704
multiprecision | mad.cc / madc | 1.1575 0.7697 0.7981 0.6768 0.0730 0.0631 0.1621 0.1357 \
    4.7049 4.4307 3.7018 3.6865 0.5165 0.5043 0.9979 0.9657
special | rcp | 6.4492 5.3416 4.1609 4.0320 2.4265 2.4270 4.3064 3.9514 \
    18.6762 18.2830 13.1662 13.1460 10.2930 10.0538 19.3208 19.2601
special | sqrt | 6.3630 5.3923 4.1114 4.0068 2.4349 2.4219 4.3816 4.0533 \
    19.0402 18.6694 13.4900 13.4185 10.5023 10.2700 19.7800 19.6984
special | approx.sqrt | 0.8527 0.4961 0.3598 0.2345 1.2311 1.2076 2.1648 2.0121 \
    15.9024 15.5452 10.7200 10.6812 8.3867 8.2517 15.4991 15.4438
special | rsqrt | 0.5174 0.303 0.2573 0.1163 1.2488 1.2432 2.2491 2.0898 \
    15.0459 14.6802 10.6800 10.6920 8.3784 8.2320 15.8300 15.7700
special | sin / cos | 0.3410 0.1507 0.1345 0.2742 0.5887 0.5867 1.0070 0.9065 \
    1.2927 0.8940 1.1390 0.8650 1.0046 0.9788 1.9340 1.8835
special | lg2 | 0.5075 0.3098 0.3618 0.2371 1.2357 1.2287 2.1451 2.1634 \
    14.6789 15.0598 10.7646 10.6786 8.4058 8.2500 15.6505 15.6127
special | ex2 | 0.5147 0.3094 0.2383 0.3372 0.4798 0.4709 1.0188 0.6971 \
    14.0001 13.6377 9.9840 9.9685 7.3144 7.2030 13.5252 13.4070
special | copysign | 0.2099 0.1700 0.2989 0.2339 0.0910 0.0880 0.1627 0.1379 \
    3.8932 3.5953 3.1134 3.1020 2.3692 2.3490 4.0546 3.9487
intrinsic | mul24() / mad24() | 0.3915 0.2939 0.2853 0.2727 0.2263 0.2119 0.3713 0.3415 \
    6.7332 6.4263 4.8636 4.8636 2.3732 2.3249 4.6364 4.5942
intrinsic | sad() | 0.0316 0.015 0.2523 0.1243 0.0075 0.0038 0.2428 0.0422 \
    1.2495 1.0277 0.6371 0.6646 0.5158 0.5029 1.0100 0.9757
intrinsic | popc() | 0.074 0.057 0.1347 0.2674 0.3968 0.3990 0.0815 0.0603 \
    2.0281 1.7728 1.89123 1.9133 1.4984 1.4601 2.8428 2.7949
intrinsic | clz() | 0.0729 0.0479 0.2644 0.3339 0.5683 0.5657 0.3124 0.2817 \
    2.0755 1.7944 1.1670 1.2034 0.9145 0.8961 1.1554 1.4956
intrinsic | bfind() | 0.0488 0.0374 0.2326 0.3081 0.2915 0.2902 0.0304 0.0052 \
    1.1997 0.9821 0.5912 0.6185 0.4688 0.4582 0.8010 0.7546
"""


def _parse_table(text: str) -> tuple[ReferenceRow, ...]:
    rows = []
    for line in text.replace("\\\n", " ").strip().splitlines():
        category, label, numbers = (p.strip() for p in line.split("|"))
        v = [None if n == "NA" else float(n) for n in numbers.split()]
        assert len(v) == 16, label
        pairs: list[Pair] = []
        for i in range(0, 16, 2):
            a, b = v[i], v[i + 1]
            pairs.append(None if a is None or b is None else (a, b))
        rows.append(
            ReferenceRow(
                category, label, (pairs[0], pairs[1], pairs[2], pairs[3]), (pairs[4], pairs[5], pairs[6], pairs[7])
            )
        )
    return tuple(rows)


#: Table I, row by row, in the paper's order (categories (1)–(8)).
TABLE_I: tuple[ReferenceRow, ...] = _parse_table(_TABLE_I_TEXT)


@dataclass(frozen=True)
class TechniqueError:
    """The paper's error of one software technique against its hardware measurement (TITAN V)."""

    technique: str
    mape_pct: float
    rmse: float


#: §VI-A: "the average MAPE of MTSM Energy is 6.39 and the mean RMSE is 3.97. In contrast, PAPI
#: average MAPE is 10.24 and the average RMSE is 5.04" (TITAN V, all instructions; the RMSE's unit
#: is not stated in the paper).
VERIFICATION: dict[str, TechniqueError] = {
    "mtsm": TechniqueError("mtsm", 6.39, 3.97),
    "end_instant": TechniqueError("end_instant (PAPI)", 10.24, 5.04),
}

_INT32 = {"s32", "u32", "b32"}


def _label_for(op: str, mods: list[str], types: set[str]) -> tuple[str, str] | None:
    if op in ("addc", "subc", "madc") or "cc" in mods:
        if op in ("add", "addc") or (op == "sub" and "cc" in mods):
            return "multiprecision", "add.cc / addc / sub.cc"
        if op == "subc":
            return "multiprecision", "subc"
        if op in ("mad", "madc"):
            return "multiprecision", "mad.cc / madc"
        return None
    if types & {"f16", "f16x2"}:
        return ("fp16", "add / sub / mul") if op in ("add", "sub", "mul") else None
    if "f64" in types:
        if op in ("add", "sub", "min", "max"):
            return "fp64", "add / sub / min / max"
        return ("fp64", "div") if op == "div" else None
    if "f32" in types:
        simple = {"add": "add / sub / min / max", "sub": "add / sub / min / max", "min": "add / sub / min / max"}
        simple |= {"max": "add / sub / min / max", "mul": "mul / mad / fma", "mad": "mul / mad / fma"}
        simple |= {"fma": "mul / mad / fma"}
        if op in simple:
            return "fp32", simple[op]
        if op == "div":
            return None if ("approx" in mods or "full" in mods) else ("fp32", "div")
        special = {"rcp": "rcp", "rsqrt": "rsqrt", "sin": "sin / cos", "cos": "sin / cos", "lg2": "lg2"}
        special |= {"ex2": "ex2", "copysign": "copysign"}
        if op == "sqrt":
            return "special", "approx.sqrt" if "approx" in mods else "sqrt"
        return ("special", special[op]) if op in special else None
    if not types & _INT32:
        return None
    signed = "s32" in types
    table = {
        "add": ("integer", "add / sub / min / max"),
        "sub": ("integer", "add / sub / min / max"),
        "min": ("integer", "add / sub / min / max"),
        "max": ("integer", "add / sub / min / max"),
        "mul": ("integer", "mul / mad"),
        "mad": ("integer", "mul / mad"),
        "div": ("integer", "{s} div" if signed else "{u} div"),
        "rem": ("integer", "{s} rem" if signed else "{u} rem"),
        "abs": ("integer", "abs"),
        "and": ("logic", "and / or / not / xor"),
        "or": ("logic", "and / or / not / xor"),
        "not": ("logic", "and / or / not / xor"),
        "xor": ("logic", "and / or / not / xor"),
        "cnot": ("logic", "cnot"),
        "shl": ("logic", "shl / shr"),
        "shr": ("logic", "shl / shr"),
        "mul24": ("intrinsic", "mul24() / mad24()"),
        "mad24": ("intrinsic", "mul24() / mad24()"),
        "sad": ("intrinsic", "sad()"),
        "popc": ("intrinsic", "popc()"),
        "clz": ("intrinsic", "clz()"),
        "bfind": ("intrinsic", "bfind()"),
    }
    return table.get(op)


def match_reference(instruction: str) -> ReferenceRow | None:
    """The Table I row for a PTX instruction with its type (``div.u32``, ``fma.rn.f32``, ``addc.cc.u32``).

    Only like-for-like matches: 32-bit integer, f32, f64 and f16 forms; None otherwise (BF16,
    conversions, 64-bit integers and approximate division have no row in the paper).
    """
    parts = [p for p in instruction.lower().strip().split(".") if p]
    if not parts:
        return None
    op, mods = parts[0], parts[1:]
    types = {m for m in mods if m[:1] in "subf" and m[1:].replace("x2", "").isdigit()}
    found = _label_for(op, mods, types)
    if found is None:
        return None
    category, label = found
    return next((r for r in TABLE_I if r.category == category and r.label == label), None)

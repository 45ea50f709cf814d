"""Spec throughput per SM per clock, by compute capability (reference constants, not measurements).

Source: NVIDIA, *CUDA C++ Programming Guide*, section "Arithmetic Instructions", table
"Throughput of Native Arithmetic Instructions (Number of Results per Clock Cycle per
Multiprocessor)", CUDA 12.x editions, columns 8.0, 8.9 and 9.0. Shared memory: 32 banks of
4 bytes per clock per SM (same guide, "Shared Memory" section of the 5.x-9.x appendices).

Units: thread-level *instructions* per clock per SM, matching ``Work.ops`` (a warp instruction
is 32 of them). The guide counts *results*; for the packed ``f16x2``/``bf16x2`` rows one
instruction yields two results, so those entries are half the guide's figure.

Only cells we could attribute are listed. A key or compute capability not in the table yields
None and the report leaves the spec column empty; nothing is extrapolated. The 9.0 cells agree
with DESIGN.md and, for the rows it marks "(verify)" (integer multiply 64, popc/clz 16, 64-bit
conversions 16), with the 7.x column of the guide, which Hopper's integer pipes inherit. The
8.0 and 8.9 columns were transcribed without a fresh copy of the guide at hand: see
:data:`UNCONFIRMED`.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "ROWS",
    "SHARED_BYTES_PER_CLK_PER_SM",
    "SPEC_TABLE",
    "UNCONFIRMED",
    "spec_bytes_per_clk_per_sm",
    "spec_ops_per_clk_per_sm",
]

#: Guide rows these keys stand for (the report may print them next to the number).
ROWS: Mapping[str, str] = {
    "fp32": "32-bit floating-point add, multiply, multiply-add",
    "fp32.minmax": "32-bit floating-point add, multiply, multiply-add (FMNMX shares the FMA pipe; not a guide row)",
    "fp64": "64-bit floating-point add, multiply, multiply-add",
    "fp16x2": "16-bit floating-point add, multiply, multiply-add (half2: results / 2)",
    "sfu": "32-bit floating-point reciprocal, reciprocal square root, base-2 log, base-2 exp, sine, cosine",
    "int32.add": "32-bit integer add, extended-precision add, subtract, extended-precision subtract",
    "int32.mul": "32-bit integer multiply, multiply-add, extended-precision multiply-add",
    "int32.shift": "32-bit integer shift",
    "int32.compare": "compare, minimum, maximum",
    "int32.logic": "32-bit bitwise AND, OR, XOR",
    "clz": "count of leading zeros, most significant non-sign bit",
    "popc": "population count",
    "brev": "32-bit integer bit reverse",
    "sad": "sum of absolute difference",
    "cvt64": "type conversions from and to 64-bit types",
    "cvt": "all other type conversions",
}

# Reference constants transcribed from the guide table named in the module docstring.
# "fp32.minmax" is deliberately absent: the guide has no row for it.
SPEC_TABLE: Mapping[tuple[int, int], Mapping[str, float]] = {
    (9, 0): {
        "fp32": 128,
        "fp64": 64,
        "fp16x2": 128,  # 256 results per clock
        "sfu": 16,
        "int32.add": 64,
        "int32.mul": 64,
        "int32.shift": 64,
        "int32.compare": 64,
        "int32.logic": 64,
        "clz": 16,
        "popc": 16,
        "cvt64": 16,
    },
    (8, 0): {
        "fp32": 64,
        "fp64": 32,
        "fp16x2": 128,  # 256 results per clock
        "sfu": 16,
        "int32.add": 64,
        "int32.mul": 64,
        "int32.shift": 64,
        "int32.compare": 64,
        "int32.logic": 64,
        "clz": 16,
        "popc": 16,
        "cvt64": 16,
    },
    (8, 9): {
        "fp32": 128,
        "fp64": 2,
        "sfu": 16,
        "int32.add": 64,
        "int32.mul": 64,
        "int32.shift": 64,
        "int32.compare": 64,
        "int32.logic": 64,
        "clz": 16,
        "popc": 16,
        "cvt64": 16,
    },
}

#: Compute capabilities whose cells still need checking against the current guide.
UNCONFIRMED: frozenset[tuple[int, int]] = frozenset({(8, 0), (8, 9)})

#: Shared memory delivers 32 banks x 4 bytes per clock per SM on every listed architecture.
SHARED_BYTES_PER_CLK_PER_SM = 128.0


def spec_ops_per_clk_per_sm(compute_capability: tuple[int, int], key: str | None) -> float | None:
    """Spec thread-instructions per clock per SM for ``key`` (a KernelSpec ``spec_key``), else None."""
    if key is None:
        return None
    cc = (compute_capability[0], compute_capability[1])
    if key.startswith("tensor."):
        from archline.characterize.kernels.tensor import TENSOR_SPEC

        value = TENSOR_SPEC.get(cc, {}).get(key)
        return float(value) if value is not None else None
    row = SPEC_TABLE.get(cc)
    if row is None:
        return None
    value = row.get(key)
    return float(value) if value is not None else None


def spec_bytes_per_clk_per_sm(compute_capability: tuple[int, int], key: str | None) -> float | None:
    """Spec bytes per clock per SM for memory keys (``shared``); None where unknown."""
    if key == "shared" and (compute_capability[0], compute_capability[1]) in SPEC_TABLE:
        return SHARED_BYTES_PER_CLK_PER_SM
    return None

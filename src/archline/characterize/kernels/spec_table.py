"""Spec throughput per SM per clock, by compute capability (reference constants, not measurements).

Sources, per compute capability (the targets of :mod:`archline.core.arch`):

- NVIDIA, *CUDA C++ Programming Guide*, section "Arithmetic Instructions", table "Throughput of
  Native Arithmetic Instructions (Number of Results per Clock Cycle per Multiprocessor)", CUDA
  12.x editions, columns 7.x (with its footnote: FP64 2 on 7.5), 8.0, 8.6, 8.9 and 9.0.
  Shared memory: 32 banks of 4 bytes per clock per SM (same guide, "Shared Memory" sections).
- Architecture whitepapers, for the SM's unit counts where the table has no column or to
  cross-check one: *NVIDIA Turing GPU Architecture* (TU102: 64 FP32, 64 INT32, 2 FP64, 16 SFU
  lanes per SM; FP16 at twice FP32), *NVIDIA A100 Tensor Core GPU Architecture* (GA100: 64 FP32,
  64 INT32, 32 FP64), *NVIDIA Ampere GA102 GPU Architecture* (128 FP32 lanes, half shared with
  INT32; 2 FP64; non-tensor FP16 at the FP32 rate), *NVIDIA Ada GPU Architecture* (the same SM
  layout as GA102), *NVIDIA H100 Tensor Core GPU Architecture* (128 FP32, 64 FP64, 64 INT32),
  *NVIDIA Blackwell Architecture Technical Brief* and *NVIDIA RTX Blackwell GPU Architecture*
  (128 FP32 lanes per SM; FP64 at half the FP32 rate on B200, 1/64 on GB202).

Units: thread-level *instructions* per clock per SM, matching ``Work.ops`` (a warp instruction
is 32 of them). The guide counts *results*; for the packed ``f16x2``/``bf16x2`` rows one
instruction yields two results, so those entries are half the guide's figure.

Only cells we could attribute are listed; a key or compute capability not in the table yields
None and the report leaves the spec column empty; nothing is extrapolated. The 9.0 cells agree
with DESIGN.md. Every other column was transcribed without a copy of the guide or whitepaper
at hand to check it against (the search corpus had neither table): those compute capabilities
are in :data:`UNCONFIRMED` and must be checked against the documents before a report relies on
them. Left out on purpose for want of a source: BF16 (the guide's 16-bit row names half
precision), INT32 rows on 12.0 (RTX Blackwell unifies INT32 with the FP32 lanes; the rate was
not confirmed), and everything but FP32/FP64 on 10.0.
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
_TURING_AMPERE_INT: Mapping[str, float] = {
    "sfu": 16,
    "int32.add": 64,
    "int32.mul": 64,
    "int32.shift": 64,
    "int32.compare": 64,
    "int32.logic": 64,
    "clz": 16,
    "popc": 16,
    "cvt64": 16,
}

SPEC_TABLE: Mapping[tuple[int, int], Mapping[str, float]] = {
    (7, 5): {"fp32": 64, "fp64": 2, "fp16x2": 64, **_TURING_AMPERE_INT},  # 128 fp16 results per clock
    (8, 6): {"fp32": 128, "fp64": 2, "fp16x2": 64, **_TURING_AMPERE_INT},  # 128 fp16 results per clock
    (10, 0): {"fp32": 128, "fp64": 64},
    (12, 0): {"fp32": 128, "fp64": 2, "fp16x2": 64},  # non-tensor FP16 at the FP32 rate
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
        "fp16x2": 64,  # 128 fp16 results per clock (Ada whitepaper: non-tensor FP16 at the FP32 rate)
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
UNCONFIRMED: frozenset[tuple[int, int]] = frozenset({(7, 5), (8, 0), (8, 6), (8, 9), (10, 0), (12, 0)})

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

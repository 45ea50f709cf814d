"""Work counts equal the target instructions in the emitted PTX and those the interpreter executes."""

from __future__ import annotations

import re

import pytest

from tests.helpers.kernel_meta import chain_of, target_opcodes
from tests.helpers.kernel_suite import simulated, tiny_specs

#: The CPU interpreter has no tensor cores (MMA kernels' Work is tested in test_tensor_kernels.py).
NAMES = sorted(n for n, s in tiny_specs().items() if not {"mma.sync", "wgmma"} & set(s.tags))


def _loop_body(ptx: str) -> list[str]:
    lines = [ln.strip() for ln in ptx.splitlines()]
    start = next(i for i, ln in enumerate(lines) if re.fullmatch(r"LOOP_\d+:", ln))
    end = next(i for i, ln in enumerate(lines) if i > start and re.match(r"@%p\d+ bra\.uni LOOP_", ln))
    # The last three lines are the frame's own per-trip work: liveness xor, counter add, compare.
    return lines[start + 1 : end - 3]


@pytest.mark.parametrize("name", [n for n in NAMES if chain_of(tiny_specs()[n]) is not None])
def test_chain_work_matches_the_ptx_text(name: str) -> None:
    spec = tiny_specs()[name]
    ops = target_opcodes(spec)
    body = _loop_body(spec.ptx)
    counted = sum(1 for ln in body if ln.split()[0] in ops) if chain_of(spec)[1] else 0  # type: ignore[index]
    assert spec.work.ops == counted


@pytest.mark.parametrize("name", NAMES)
def test_work_matches_the_executed_instructions(name: str) -> None:
    spec = tiny_specs()[name]
    a, b = simulated(name, 2), simulated(name, 3)
    threads = int(a.scalars["threads"])
    ops = target_opcodes(spec)
    # The frame spends one add.u32 (trip counter) and one xor.b32 (liveness word) per trip.
    frame = sum(1 for o in ops if o in ("add.u32", "xor.b32"))
    executed = sum(b.counts[o] - a.counts[o] for o in ops) / threads - frame
    chain = chain_of(spec)
    if chain is not None and not chain[1]:
        assert spec.work.ops == 0
        return
    assert spec.work.ops == pytest.approx(executed)
    if spec.group == "roofline":
        assert spec.work.flops == pytest.approx(2 * executed)
        assert spec.work.bytes == pytest.approx((b.global_bytes - a.global_bytes) / threads)
    elif spec.work.unit == "dram":
        # Bytes count 32-byte DRAM sectors moved, which for partly coalesced loads exceeds the request.
        assert spec.work.bytes == pytest.approx((b.sectors - a.sectors) * 32 / threads)
    elif spec.work.unit in ("shared", "constant"):
        assert spec.work.bytes == pytest.approx(4 * executed)


def test_fma_work_counts_two_flops_per_fma() -> None:
    for name in ("arith.fp32.fma", "arith.fp64.fma", "inst.fma.f32.full"):
        spec = tiny_specs()[name]
        assert spec.work.flops == 2 * spec.work.ops > 0
    half2 = tiny_specs()["arith.fp16.fma"]
    assert half2.work.flops == 4 * half2.work.ops

"""Every generated kernel assembles with ptxas and its target instructions survive into SASS."""

from __future__ import annotations

from fractions import Fraction

import pytest

from archline.characterize.kernels.roofline import min_intensity, roofline_kernel
from archline.core.kernel import KernelSpec, SassCheck, Work
from archline.errors import BenchmarkError
from archline.hw import sass
from tests.helpers.kernel_suite import TOOLS_PRESENT, full_specs, inspected

pytestmark = pytest.mark.skipif(not TOOLS_PRESENT, reason="ptxas or nvdisasm is not installed")

REGISTERS_PER_SM = 65536


def test_every_kernel_keeps_its_target_instructions_at_O3() -> None:
    rep = inspected(3)
    failures = [f for name, spec in full_specs().items() for f in sass.check_sass(spec, rep[name].instructions)]
    assert not failures, "\n".join(failures[:20])


def test_every_kernel_declares_sass_checks() -> None:
    assert all(spec.sass for spec in full_specs().values())


def test_no_kernel_spills_registers() -> None:
    rep = inspected(3)
    spilled = [f"{n}: {r.spill_stores_b} B stored" for n, r in rep.items() if r.spills]
    assert not spilled, spilled


def test_registers_allow_the_intended_occupancy() -> None:
    rep = inspected(3)
    short = []
    for name, spec in full_specs().items():
        per_sm = spec.launch.block * (spec.launch.blocks_per_sm if spec.launch.grid != 1 else 1)
        # Registers are allocated per warp in units of 256.
        per_warp = -(-rep[name].registers * 32 // 256) * 256
        resident_warps = REGISTERS_PER_SM // per_warp
        if resident_warps * 32 < min(per_sm, 2048):
            short.append(f"{name}: {rep[name].registers} registers allow {resident_warps * 32} of {per_sm} threads/SM")
    assert not short, short


def test_loop_bodies_fit_in_the_instruction_cache() -> None:
    rep = inspected(3)
    big = [f"{n}: {len(r.instructions)} instructions" for n, r in rep.items() if len(r.instructions) > 1024]
    assert not big, big


def test_instruction_suite_assembles_at_O0() -> None:
    rep = inspected(0, "instruction")
    empty = [n for n, r in rep.items() if not r.instructions]
    assert len(rep) > 200
    assert not empty


def test_a_missing_instruction_fails_the_check_with_one_line() -> None:
    spec = full_specs()["arith.fp32.fma"]
    instrs = inspected(3)["arith.fp32.fma"].instructions
    fake = KernelSpec(
        name="fake",
        group="arithmetic",
        description="",
        ptx=spec.ptx,
        entry=spec.entry,
        args=spec.args,
        work=Work(unit="fp32"),
        sass=(SassCheck("DFMA", 1), SassCheck("FFMA", 1, max_count=3)),
    )
    failures = sass.check_sass(fake, instrs)
    assert len(failures) == 2
    assert all("\n" not in f and "fake" in f for f in failures)


def test_ptxas_errors_are_one_line() -> None:
    with pytest.raises(BenchmarkError) as info:
        sass.compile_ptx(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n")
    assert "\n" not in str(info.value)
    assert "ptxas" in str(info.value)


def test_compile_reports_registers_and_caches() -> None:
    ptx = full_specs()["arith.fp32.fma"].ptx
    first = sass.compile_ptx(ptx)
    assert first.registers > 0
    assert sass.compile_ptx(ptx) is first


def test_roofline_knob_grid_assembles_without_spills() -> None:
    specs = [
        roofline_kernel(p, i, block=b, blocks_per_sm=bps, loads=loads)
        for p in ("fp32", "fp64")
        for i in (min_intensity(p), Fraction(8), Fraction(512))
        for b in (256, 512)
        for bps in (4, 8)
        for loads in (1, 2, 4)
    ]
    rep = sass.inspect_many([s.ptx for s in specs])
    bad = [f"{s.name} {s.tags}: spills {r.spill_stores_b} B" for s, r in zip(specs, rep, strict=True) if r.spills]
    bad += [f for s, r in zip(specs, rep, strict=True) for f in sass.check_sass(s, r.instructions)]
    assert not bad, bad[:5]

"""Catalogue selection, the quick subset, device sizing and the instruction-pair API."""

from __future__ import annotations

from fractions import Fraction

import pytest

from archline.characterize.kernels import catalogue as cat
from archline.characterize.kernels.instructions import SHAPES, instruction_pairs
from archline.characterize.kernels.roofline import roofline_kernel
from archline.characterize.kernels.target import DRAM_BUFFER_MIN_B, Target
from archline.core.executor import DeviceInfo
from archline.errors import InputError, UnknownNameError
from tests.helpers.kernel_suite import full_specs

H200 = DeviceInfo(
    index=0,
    name="NVIDIA H200",
    compute_capability=(9, 0),
    sm_count=132,
    l2_bytes=60 * 2**20,
    max_shared_per_block_optin_b=227 * 1024,
)


#: Arafa et al. Table I instructions plus the Hopper additions the suite must cover.
_ARAFA_AND_HOPPER = """
add.u32 sub.u32 min.u32 max.s32 mul.lo.u32 mad.lo.u32 div.u32 div.s32 rem.u32 rem.s32 abs.s32 and.b32
or.b32 xor.b32 not.b32 cnot.b32 shl.b32 shr.u32 add.f32 sub.f32 min.f32 max.f32 mul.f32 mad.f32 fma.f32
div.rn.f32 add.f64 sub.f64 min.f64 max.f64 div.rn.f64 add.f16 sub.f16 mul.f16 addc.u32 subc.u32 madc.u32
rcp.rn.f32 sqrt.rn.f32 sqrt.approx.f32 rsqrt.approx.f32 sin.approx.f32 cos.approx.f32 lg2.approx.f32
ex2.approx.f32 copysign.f32 mul24.lo.u32 mad24.lo.u32 sad.u32 popc.b32 clz.b32 bfind.u32 fma.bf16
fma.bf16x2 fma.f64 cvt.f32.f64 cvt.f32.f16 cvt.f64.u64"""


def test_names_are_unique_and_grouped() -> None:
    specs = list(full_specs().values())
    assert len({s.name for s in specs}) == len(specs)
    assert {s.group for s in specs} == set(cat.GROUPS)


def test_every_kernel_has_the_runner_contract() -> None:
    for s in full_specs().values():
        assert s.iters_arg is not None and s.iters_arg.kind == "u32", s.name
        assert s.verify is not None, s.name
        assert s.args[0].name == "out" and s.args[0].role == "out" and s.args[0].per_thread_bytes > 0, s.name
        assert all(a.name in s.out_dtypes for a in s.args if a.role in ("out", "inout")), s.name
        assert f".entry {s.entry}(" in s.ptx, s.name


def test_select_by_glob_name_and_prefix() -> None:
    fp32 = cat.select(["arith.fp32.*"])
    assert fp32 and all(s.name.startswith("arith.fp32.") for s in fp32)
    assert cat.select(["mem.dram.read"])[0].name == "mem.dram.read"
    assert {s.name for s in cat.select(["sync"])} == {s.name for s in full_specs().values() if s.group == "sync"}


def test_select_unknown_pattern_is_one_line_with_suggestions() -> None:
    with pytest.raises(UnknownNameError) as info:
        cat.select(["arith.fp33.fma"])
    msg = str(info.value)
    assert "\n" not in msg
    assert "arith.fp33.fma" in msg and "did you mean" in msg and "arith.fp32.fma" in msg
    assert info.value.exit_code == 2


def test_quick_suite_is_small_and_resolves() -> None:
    quick = cat.quick()
    assert 15 <= len(quick) <= 30
    assert [s.name for s in quick] == list(cat.QUICK)
    assert {"arithmetic", "memory", "sync", "roofline"} <= {s.group for s in quick}


def test_dram_buffers_dwarf_the_l2_and_follow_the_device() -> None:
    h200 = {s.name: s for s in cat.catalogue(H200)}
    for name in ("mem.dram.read", "mem.dram.copy", "mem.dram.coalesce.none", "roofline.fp32.i1-4"):
        buf = next(a for a in h200[name].args if a.role == "in")
        assert buf.fixed_bytes >= DRAM_BUFFER_MIN_B >= 10 * H200.l2_bytes
        assert h200[name].launch.grid == 8 * 132
    l2 = next(a for a in h200["mem.l2.read"].args if a.role == "in")
    assert l2.fixed_bytes <= H200.l2_bytes // 4
    small = {s.name: s for s in cat.catalogue(Target(sm_count=10))}
    assert small["mem.dram.read"].launch.grid == 80


def test_dram_work_is_one_full_pass_per_trip() -> None:
    spec = {s.name: s for s in cat.catalogue(H200)}["mem.dram.read"]
    threads = spec.launch.grid_for(132) * spec.launch.block
    buf = next(a for a in spec.args if a.name == "src")
    assert spec.work.bytes * threads == buf.fixed_bytes


def test_sweeps_carry_their_variable() -> None:
    specs = full_specs()
    ways = sorted(s.sweep[1] for s in specs.values() if s.sweep and s.sweep[0] == "conflict_ways")
    assert ways == list(range(1, 33))
    sizes = sorted(s.sweep[1] for s in specs.values() if s.sweep and s.sweep[0] == "access_bytes")
    assert sizes == [1, 2, 4, 8, 16]
    coal = sorted(s.sweep[1] for s in specs.values() if s.sweep and s.sweep[0] == "coalescing")
    assert coal == [1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1]
    blocks = sorted(s.sweep[1] for s in specs.values() if s.name.startswith("arith.fp32.fma.block."))
    assert blocks == [32, 64, 128, 256, 512, 1024]
    intens = sorted(s.sweep[1] for s in specs.values() if s.name.startswith("roofline.fp32."))
    assert intens[0] == 0.25 and intens[-1] >= 512


def test_instruction_pairs_match_and_share_shape() -> None:
    pairs = instruction_pairs(["add.*", "inst.div.rn.f32"], shapes=["single", "full"])
    keys = {p.key for p in pairs}
    assert {"add.u32", "add.f32", "add.u64", "div.rn.f32"} <= keys
    for p in pairs:
        assert p.per_thread_per_iter == p.instruction.work.ops > 0
        assert p.overhead.work.ops == 0
        assert p.instruction.launch == p.overhead.launch == SHAPES[p.shape]
        assert [a.name for a in p.instruction.args] == [a.name for a in p.overhead.args]
    single = next(p for p in pairs if p.shape == "single")
    assert single.instruction.launch.grid == 1 and single.instruction.launch.block == 1


def test_instruction_pairs_unknown_is_one_line() -> None:
    with pytest.raises(UnknownNameError) as info:
        instruction_pairs(["popcnt.b32"])
    assert "\n" not in str(info.value) and "popcnt" in str(info.value)


def test_instruction_suite_covers_the_paper_and_hopper_extras() -> None:
    keys = {p.key for p in instruction_pairs(["*"], shapes=["single"])}
    wanted = set(_ARAFA_AND_HOPPER.split())
    assert wanted <= keys, wanted - keys


def test_roofline_knobs_and_limits() -> None:
    low = roofline_kernel("fp32", Fraction(1, 4), loads=4, unroll=128, block=128, blocks_per_sm=4)
    assert low.work.flops / low.work.bytes == pytest.approx(0.25)
    high = roofline_kernel("fp64", 512, loads=1)
    assert high.work.flops / high.work.bytes == pytest.approx(512)
    with pytest.raises(InputError):
        roofline_kernel("fp32", Fraction(1, 8))
    with pytest.raises(InputError):
        roofline_kernel("fp32", 1, block=100)

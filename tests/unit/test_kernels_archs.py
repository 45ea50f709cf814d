"""Every target from sm_75 to sm_120: the PTX ISA each needs, kernels that assemble with ptxas and keep
their SASS, and kernels a target cannot run skipped with a reason that ptxas confirms."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import replace

import pytest

from archline.characterize.kernels.archs import (
    NOT_MEASURABLE,
    SASS_VARIANTS,
    kernel_rows,
    needs_text,
    sass_for,
    skip_reason,
)
from archline.core.arch import ARCHS, Arch, parse_arch, ptx_for, retarget_ptx
from archline.core.kernel import KernelSpec
from archline.errors import BenchmarkError
from archline.hw import sass
from tests.helpers.kernel_suite import TOOLS_PRESENT, full_specs

pytestmark = pytest.mark.skipif(not TOOLS_PRESENT, reason="ptxas or nvdisasm is not installed")

TARGETS = tuple(ARCHS)
EMPTY = ".visible .entry k() { ret; }\n"


def _needs_more(spec: KernelSpec) -> bool:
    return spec.min_cc > (7, 5) or spec.min_ptx > (6, 3) or spec.arch_specific is not None


def _touched(spec: KernelSpec, arch: Arch) -> bool:
    """A kernel whose SASS checks or runnability differ on ``arch`` by a listed exception."""
    return sass_for(spec, arch) != spec.sass or any(
        nm.cc_from <= arch.cc <= nm.cc_to and spec.name == nm.names.strip("*") for nm in NOT_MEASURABLE
    )


@functools.cache
def _distinct() -> tuple[KernelSpec, ...]:
    """One kernel per distinct PTX body (the sweeps repeat a body under other names and launches)."""
    seen: dict[str, KernelSpec] = {}
    for s in full_specs().values():
        seen.setdefault(s.ptx.replace(s.entry, "K"), s)
    return tuple(seen.values())


def _sample(arch: Arch) -> list[KernelSpec]:
    """The default test's share for ``arch``: every eighth distinct body (so the eight targets
    together assemble every body once), and every kernel with needs or exceptions on any target."""
    i = TARGETS.index(arch.name)
    picked = {s.name: s for k, s in enumerate(_distinct()) if k % len(TARGETS) == i}
    for s in full_specs().values():
        if _needs_more(s) or any(_touched(s, a) for a in ARCHS.values()):
            picked[s.name] = s
    return list(picked.values())


def _check(arch: Arch, specs: Sequence[KernelSpec]) -> list[str]:
    run = [s for s in specs if skip_reason(s, arch) is None]
    rep = sass.inspect_many([ptx_for(s, arch) for s in run], arch=arch.name)
    failures: list[str] = []
    for s, r in zip(run, rep, strict=True):
        checked = replace(s, sass=sass_for(s, arch))
        failures += [f"{arch.name} {f}" for f in sass.check_sass(checked, r.instructions)]
        if not r.instructions:
            failures.append(f"{arch.name} {s.name}: no SASS")
    return failures


@pytest.mark.parametrize("name", TARGETS)
def test_each_target_assembles_its_share_and_keeps_the_sass(name: str) -> None:
    arch = ARCHS[name]
    failures = _check(arch, _sample(arch))
    assert not failures, "\n".join(failures[:20])


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("ARCHLINE_SLOW_TESTS"), reason="exhaustive: set ARCHLINE_SLOW_TESTS=1")
@pytest.mark.parametrize("name", TARGETS)
def test_every_kernel_on_every_target(name: str) -> None:
    failures = _check(ARCHS[name], list(full_specs().values()))
    assert not failures, "\n".join(failures[:20])


#: The PTX ISA release before each target's oldest (PTX ISA "Release Notes", release history).
PREVIOUS_ISA = {(6, 3): "6.2", (7, 0): "6.5", (7, 1): "7.0", (7, 8): "7.7", (8, 0): "7.8", (8, 6): "8.5", (8, 7): "8.6"}


def _empty_module(version: str, target: str) -> str:
    return f".version {version}\n.target {target}\n.address_size 64\n{EMPTY}"


@pytest.mark.parametrize("name", TARGETS)
def test_each_target_needs_exactly_its_listed_ptx_isa(name: str) -> None:
    arch = ARCHS[name]
    sass.compile_ptx(_empty_module(f"{arch.min_ptx[0]}.{arch.min_ptx[1]}", name), arch=name)
    with pytest.raises(BenchmarkError, match="does not support"):
        sass.compile_ptx(_empty_module(PREVIOUS_ISA[arch.min_ptx], name), arch=name)


def test_requirement_skips_are_what_ptxas_refuses() -> None:
    """A kernel skipped for its needs fails to assemble there even at the kernel's own PTX ISA."""
    checked = 0
    for arch in ARCHS.values():
        for s in full_specs().values():
            if not _needs_more(s) or skip_reason(s, arch) is None or s.name.endswith(".overhead"):
                continue
            isa = max(arch.min_ptx, s.min_ptx)
            with pytest.raises(BenchmarkError, match="requires|not supported|does not support"):
                sass.compile_ptx(retarget_ptx(s.ptx, arch.name, isa), arch=arch.name)
            checked += 1
    assert checked >= 8  # the bf16 kernels on sm_75, add.bf16 on sm_80..sm_89


def test_the_isa_a_kernel_needs_is_really_needed() -> None:
    """tanh.approx at the ISA below its min_ptx is refused: min_ptx is not set too high by guess."""
    s = full_specs()["inst.tanh.approx.f32.single"]
    assert s.min_ptx == (7, 0)
    with pytest.raises(BenchmarkError, match="requires PTX ISA"):
        sass.compile_ptx(retarget_ptx(s.ptx, "sm_75", (6, 5)), arch="sm_75")


def test_folded_multiply_is_still_folded_where_it_is_skipped() -> None:
    """The skip of x*=k before Hopper rests on ptxas folding the chain: if a ptxas stops, this fails."""
    s = full_specs()["inst.mul.lo.u32.single"]
    for name in ("sm_75", "sm_89"):
        arch = ARCHS[name]
        assert skip_reason(s, arch) is not None
        (rep,) = sass.inspect_many([retarget_ptx(s.ptx, name, arch.min_ptx)], arch=name)
        assert sass.check_sass(s, rep.instructions), f"{name}: IMAD chain no longer folded; drop the skip"
    assert skip_reason(s, ARCHS["sm_90"]) is None


def test_variants_name_real_differences() -> None:
    """Each SASS variant changes at least one kernel's check on a target it covers."""
    for v in SASS_VARIANTS:
        hit = any(
            _touched(s, a) and v.cc_from <= a.cc <= v.cc_to and any(v.old in c.opcode for c in s.sass)
            for s in full_specs().values()
            for a in ARCHS.values()
        )
        assert hit, v


def test_skipped_kernels_carry_a_reason_and_generic_ones_run_everywhere() -> None:
    specs = list(full_specs().values())
    for arch in ARCHS.values():
        rows = kernel_rows(specs, arch)
        for r in rows:
            assert r.runnable or (r.skip_reason and "\n" not in r.skip_reason)
            assert (r.target != "") == r.runnable
    bf16 = full_specs()["arith.bf16.fma"]
    assert needs_text(bf16) == "sm_80+, PTX 7.0"
    assert skip_reason(bf16, ARCHS["sm_75"]) == "needs compute capability 8.0 (sm_80, Ampere) or later; sm_75 is 7.5"
    assert skip_reason(bf16, ARCHS["sm_120"]) is None
    fma = full_specs()["arith.fp32.fma"]
    assert all(skip_reason(fma, a) is None for a in ARCHS.values())
    assert parse_arch("8.6").name == "sm_86"

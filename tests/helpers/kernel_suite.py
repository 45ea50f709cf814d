"""Shared builders for the kernel tests: a tiny target, cached simulations and SASS inspections."""

from __future__ import annotations

import functools

from archline.characterize.kernels.catalogue import catalogue, skip_reason
from archline.characterize.kernels.target import Target
from archline.core.kernel import KernelSpec
from archline.hw import sass
from tests.helpers.ptx_sim import SimResult, simulate

#: One SM, a 1 MiB L2 and 64 KiB DRAM passes: every kernel simulates on a CPU in milliseconds.
TINY = Target(sm_count=1, l2_bytes=1 << 20, dram_buffer_b=1 << 16, name="tiny test target")

#: Groups whose kernels are shape-agnostic chains (any grid and block give valid output).
CHAIN_GROUPS = ("arithmetic", "instruction")

TOOLS_PRESENT = sass.find_ptxas() is not None and sass.find_nvdisasm() is not None


@functools.cache
def tiny_specs() -> dict[str, KernelSpec]:
    return {s.name: s for s in catalogue(TINY)}


@functools.cache
def full_specs() -> dict[str, KernelSpec]:
    """Every catalogue kernel that runs natively on sm_90 (the SASS tests' target)."""
    return {s.name: s for s in catalogue() if skip_reason(s, (9, 0)) is None}


@functools.cache
def simulated(name: str, iters: int) -> SimResult:
    """The tiny-target kernel ``name`` run on the CPU (chain kernels on 2 blocks of 64 threads)."""
    spec = tiny_specs()[name]
    if spec.group in CHAIN_GROUPS and spec.launch.grid is None:
        return simulate(spec, iters=iters, grid=2, block=64)
    return simulate(spec, iters=iters, sm_count=TINY.sm_count)


@functools.cache
def inspected(opt_level: int, group: str | None = None) -> dict[str, sass.KernelSass]:
    """SASS of every catalogue kernel (or one group), compiled in bundles."""
    specs = [s for s in full_specs().values() if group is None or s.group == group]
    return dict(
        zip((s.name for s in specs), sass.inspect_many([s.ptx for s in specs], opt_level=opt_level), strict=True)
    )

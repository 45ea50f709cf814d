"""The benchmark catalogue: every kernel for a device, selection by glob, and the quick subset."""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Sequence

from archline.characterize.kernels.arithmetic import arithmetic_kernels, fp32_fma_occupancy
from archline.characterize.kernels.instructions import instruction_kernels
from archline.characterize.kernels.memory import dram_read_occupancy, memory_kernels
from archline.characterize.kernels.onchip import onchip_kernels
from archline.characterize.kernels.roofline import roofline_kernels
from archline.characterize.kernels.sync import sync_kernels
from archline.characterize.kernels.target import Target
from archline.characterize.kernels.tensor import tensor_data_kernels, tensor_kernels
from archline.core.executor import DeviceInfo
from archline.core.kernel import KernelSpec
from archline.errors import UnknownNameError, suggest

__all__ = ["GROUPS", "QUICK", "catalogue", "names", "quick", "select", "skip_reason"]

GROUPS = ("arithmetic", "memory", "sync", "tensor", "instruction", "roofline")

#: The ``--quick`` suite: one kernel per unit that matters most for the energy model, with the
#: sweeps thinned to their end points (about 20 kernels, under 2 minutes at 1 s each plus
#: calibration on an H100).
QUICK: tuple[str, ...] = (
    "arith.int32.add",
    "arith.int32.mul",
    "arith.fp32.fma",
    "arith.fp64.fma",
    "arith.fp16.fma",
    "arith.sfu.sin",
    "arith.fp32.div.ieee.normal",
    "mem.dram.read",
    "mem.dram.copy",
    "mem.dram.coalesce.none",
    "mem.l2.read",
    "mem.shared.read",
    "mem.shared.conflict.02",
    "mem.shared.conflict.32",
    "mem.const.read",
    "sync.bar",
    "sync.atomic.global.private",
    "roofline.fp32.i1-4",
    "roofline.fp32.i8",
    "roofline.fp32.i512",
    "inst.fma.f32.full",
    "inst.fma.f32.full.overhead",
    "tensor.mma.fp16",
    "tensor.wgmma.bf16",
    "tensor.wgmma.bf16.zeros",
    "tensor.wgmma.fp8e4m3",
    "operand.ffma.zeros",
    "operand.ffma.random",
)


@functools.lru_cache(maxsize=8)
def _build(target: Target) -> tuple[KernelSpec, ...]:
    specs: list[KernelSpec] = []
    specs += arithmetic_kernels()
    specs += fp32_fma_occupancy()
    specs += memory_kernels(target)
    specs += dram_read_occupancy(target)
    specs += onchip_kernels()
    specs += sync_kernels()
    specs += tensor_kernels()
    specs += tensor_data_kernels()
    specs += instruction_kernels()
    specs += roofline_kernels(target)
    return tuple(specs)


def catalogue(device: DeviceInfo | Target | None = None) -> list[KernelSpec]:
    """Every benchmark kernel, sized for ``device`` (defaults: H100 SXM sizes)."""
    return list(_build(Target.of(device)))


def names(device: DeviceInfo | Target | None = None) -> list[str]:
    return [s.name for s in catalogue(device)]


def _matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern) or name.startswith(pattern.rstrip(".") + ".") or name == pattern


def select(
    patterns: Sequence[str], device: DeviceInfo | Target | None = None, *, specs: Sequence[KernelSpec] | None = None
) -> list[KernelSpec]:
    """Kernels whose name matches any pattern (a glob, an exact name or a dotted prefix), in
    catalogue order. Raises :class:`UnknownNameError` naming the first pattern that matches nothing."""
    pool = list(specs) if specs is not None else catalogue(device)
    for p in patterns:
        if not any(_matches(s.name, p) for s in pool):
            raise UnknownNameError(f"no benchmark matches {p!r}{suggest([p], (s.name for s in pool))}")
    return [s for s in pool if any(_matches(s.name, p) for p in patterns)]


def skip_reason(spec: KernelSpec, cc: tuple[int, int]) -> str | None:
    """Why ``spec`` cannot run (natively) on a GPU of compute capability ``cc``, or None if it can
    (:func:`archline.characterize.kernels.archs.skip_reason` for the PTX target that GPU runs)."""
    from archline.characterize.kernels.archs import device_arch
    from archline.characterize.kernels.archs import skip_reason as arch_reason

    arch = device_arch(cc)
    if arch is None:
        return f"compute capability {cc[0]}.{cc[1]} is older than every target archline builds for (sm_75)"
    return arch_reason(spec, arch)


def quick(device: DeviceInfo | Target | None = None) -> list[KernelSpec]:
    """The quick subset (:data:`QUICK`), in that order."""
    by_name = {s.name: s for s in catalogue(device)}
    return [by_name[n] for n in QUICK]

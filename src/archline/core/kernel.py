"""The contract between generated kernels and the runner: what a benchmark kernel is, takes and does."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Arg",
    "ArgKind",
    "BufferInit",
    "KernelSpec",
    "Launch",
    "SassCheck",
    "VerifyFn",
    "Work",
]

ArgKind = Literal["ptr", "u32", "u64", "s32", "f32", "f64"]

#: How the runner fills a buffer before the launch.
#: ``zeros``; ``iota_u32`` (element i = i); ``random_u32``/``random_f32`` (seeded, uniform in
#: [0, 2^32) and [1, 2)); ``ones_f32``; ``chase_u32`` (a pointer-chase permutation of indices,
#: stride given by the spec's ``chase_stride_elems``).
BufferInit = Literal["zeros", "iota_u32", "random_u32", "random_f32", "ones_f32", "ones_f64", "chase_u32"]


@dataclass(frozen=True)
class Arg:
    """One kernel parameter, in the order of the PTX ``.entry`` signature.

    Roles:
      - ``iters``: the outer-loop trip count, a ``u32`` the runner calibrates so the kernel
        lasts long enough for the power sensor;
      - ``scalar``: a fixed value (``value``), passed at run time so the compiler cannot
        fold it;
      - ``out``/``in``/``inout``: a device buffer (kind ``ptr``) of
        ``fixed_bytes + per_thread_bytes × total threads`` bytes, filled per ``init``.
        ``out`` buffers are copied back for :attr:`KernelSpec.verify`.
    """

    name: str
    kind: ArgKind
    role: Literal["iters", "scalar", "out", "in", "inout"]
    value: float | int | None = None
    per_thread_bytes: int = 0
    fixed_bytes: int = 0
    init: BufferInit = "zeros"
    chase_stride_elems: int = 1

    def nbytes(self, threads: int) -> int:
        """Size in bytes of the buffer for a launch of ``threads`` threads in all."""
        return self.fixed_bytes + self.per_thread_bytes * threads


@dataclass(frozen=True)
class Launch:
    """Launch shape. ``grid`` None means ``blocks_per_sm × number of SMs`` (fills every SM)."""

    block: int = 256
    blocks_per_sm: int = 8
    grid: int | None = None
    shared_bytes: int = 0

    def grid_for(self, sm_count: int) -> int:
        return self.grid if self.grid is not None else self.blocks_per_sm * sm_count


@dataclass(frozen=True)
class Work:
    """What one launch does, counted from the generated code (not measured).

    Per thread and per iteration of the outer loop:
      - ``ops``: target instructions (thread-level; one warp instruction = 32 of them);
      - ``flops``: floating-point operations (an FMA counts 2);
      - ``bytes``: bytes the thread moves at the target memory level.
    ``unit`` names the functional unit or memory level measured (``fp32``, ``sfu``,
    ``dram``, ``shared`` …). ``fixed_*`` count work outside the loop, per thread.
    """

    unit: str
    ops: float = 0.0
    flops: float = 0.0
    bytes: float = 0.0
    fixed_ops: float = 0.0

    def ops_total(self, threads: int, iters: int) -> float:
        return (self.ops * iters + self.fixed_ops) * threads

    def flops_total(self, threads: int, iters: int) -> float:
        return self.flops * iters * threads

    def bytes_total(self, threads: int, iters: int) -> float:
        return self.bytes * iters * threads


@dataclass(frozen=True)
class SassCheck:
    """An expectation on the SASS ``ptxas -arch=sm_90`` makes of the kernel.

    ``opcode`` is matched against each instruction's full mnemonic with modifiers
    (``FFMA``, ``MUFU.SIN``, ``LDG.E.128`` …) as a regular expression anchored at the start
    (``re.match``). At least ``min_count`` must be present (and at most ``max_count`` if set).
    """

    opcode: str
    min_count: int = 1
    max_count: int | None = None


#: verify(outputs, scalars) → None if the kernel's output is right, else a one-line reason.
#: ``outputs`` maps each ``out``/``inout`` argument name to its host copy (raw bytes viewed as
#: the dtype the spec chose), ``scalars`` maps every scalar and ``iters`` argument name to the
#: value passed, plus ``grid``, ``block`` and ``threads``.
VerifyFn = Callable[[Mapping[str, NDArray[np.generic]], Mapping[str, float | int]], "str | None"]


@dataclass(frozen=True)
class KernelSpec:
    """One generated benchmark kernel.

    ``name`` is the catalogue key (``arith.fp32.fma``, ``mem.dram.stream``,
    ``inst.add.u32`` …); ``group`` is the report section (``arithmetic``, ``memory``,
    ``sync``, ``instruction``, ``roofline``); ``spec_key`` indexes the spec throughput table
    (see :mod:`archline.characterize.kernels.spec_table`), None where no spec applies.
    ``sweep`` is ``(variable, value)`` for a point of a sweep (e.g. ``("conflict_ways", 4)``).
    ``out_dtypes`` gives the numpy dtype to view each ``out`` buffer as for ``verify``.
    """

    name: str
    group: str
    description: str
    ptx: str
    entry: str
    args: tuple[Arg, ...]
    work: Work
    launch: Launch = field(default_factory=Launch)
    sass: tuple[SassCheck, ...] = ()
    verify: VerifyFn | None = None
    out_dtypes: Mapping[str, str] = field(default_factory=dict)
    spec_key: str | None = None
    sweep: tuple[str, float] | None = None
    tags: tuple[str, ...] = ()
    #: Oldest compute capability whose instruction set has every instruction the kernel uses.
    min_cc: tuple[int, int] = (7, 5)
    #: An architecture-specific target the kernel needs (``"sm_90a"`` for ``wgmma``): it runs
    #: there only, never on a later architecture. None: any compute capability from ``min_cc``.
    arch_specific: str | None = None
    #: Oldest PTX ISA version, (major, minor), that has every instruction the kernel uses.
    min_ptx: tuple[int, int] = (6, 3)

    @property
    def iters_arg(self) -> Arg | None:
        for a in self.args:
            if a.role == "iters":
                return a
        return None

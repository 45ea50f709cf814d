"""The catalogue on every target from Turing to Blackwell: what runs where, the SASS to expect, the PTX."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from archline.core.arch import ARCHS, Arch, arch_for_cc, kernel_arch, ptx_for, ptx_isa
from archline.core.arch import skip_reason as requirement_reason
from archline.core.kernel import KernelSpec, SassCheck
from archline.records.rundir import atomic_write_text

__all__ = ["KernelRow", "device_arch", "emit_ptx", "kernel_rows", "needs_text", "sass_for", "skip_reason"]


@dataclass(frozen=True)
class SassVariant:
    """Where ``ptxas`` for some architectures emits other SASS for the same PTX: checks of kernels
    matching ``names`` on compute capabilities in ``[cc_from, cc_to]`` have ``old`` replaced by
    ``new`` in their opcode pattern (found by assembling every kernel for every target)."""

    names: str
    cc_from: tuple[int, int]
    cc_to: tuple[int, int]
    old: str
    new: str
    why: str


SASS_VARIANTS: tuple[SassVariant, ...] = (
    SassVariant("*", (7, 5), (8, 9), "VIMNMX", "IMNMX", "integer min/max is IMNMX before Hopper's VIMNMX"),
    SassVariant("*", (7, 5), (7, 5), "F2FP", "(F2FP|F2F\\.F16\\.F32)", "Turing converts f32 to f16 with F2F"),
    SassVariant("*", (12, 0), (12, 9), "IADD3$", "(IADD3|IADD\\.64)$", "sm_120 adds 64-bit integers in one IADD.64"),
    SassVariant(
        "*",
        (12, 0),
        (12, 9),
        "(IMAD\\.X|IADD3\\.X)",
        "(IMAD\\.X|IADD3\\.X|IADD\\.64)",
        "IADD.64 does the carry half too",
    ),
    SassVariant(
        "*sad*",
        (12, 0),
        (12, 9),
        "VABSDIFF",
        "VIMNMX",
        "sm_120 has no VABSDIFF: sad.u32 runs as two VIMNMX and an IADD3 (it measures that emulation)",
    ),
)


@dataclass(frozen=True)
class NotMeasurable:
    """A kernel that assembles on an architecture but whose SASS does not measure what it claims."""

    names: str
    cc_from: tuple[int, int]
    cc_to: tuple[int, int]
    reason: str


NOT_MEASURABLE: tuple[NotMeasurable, ...] = (
    NotMeasurable(
        "*mul.lo.u32*",
        (7, 5),
        (8, 9),
        "ptxas for sm_75-sm_89 folds the chain x*=k into powers of k on the uniform datapath "
        "(about 1 IMAD in 5 survives), so it would not measure IMAD; arith.int32.mad does",
    ),
    NotMeasurable("arith.int32.mul", (7, 5), (8, 9), "see inst.mul.lo.u32: ptxas folds x*=k before Hopper"),
)


def _applies(name: str, pattern: str, cc: tuple[int, int], lo: tuple[int, int], hi: tuple[int, int]) -> bool:
    return lo <= cc <= hi and fnmatch.fnmatchcase(name, pattern)


def skip_reason(spec: KernelSpec, arch: Arch) -> str | None:
    """Why ``spec`` is skipped on ``arch`` (one line), or None when it runs there."""
    reason = requirement_reason(spec, arch)
    if reason is not None:
        return reason
    if f"emulated-on:sm_{arch.cc[0]}{arch.cc[1]}" in spec.tags:
        return f"ptxas emulates this instruction on sm_{arch.cc[0]}{arch.cc[1]}: it would not measure the unit it names"
    for nm in NOT_MEASURABLE:
        if _applies(spec.name, nm.names, arch.cc, nm.cc_from, nm.cc_to):
            return nm.reason
    return None


def sass_for(spec: KernelSpec, arch: Arch) -> tuple[SassCheck, ...]:
    """``spec``'s SASS checks as they apply to ``arch`` (see :data:`SASS_VARIANTS`)."""
    out = []
    for chk in spec.sass:
        opcode = chk.opcode
        for v in SASS_VARIANTS:
            if _applies(spec.name, v.names, arch.cc, v.cc_from, v.cc_to):
                opcode = opcode.replace(v.old, v.new)
        out.append(replace(chk, opcode=opcode))
    return tuple(out)


def device_arch(compute_capability: tuple[int, int]) -> Arch | None:
    """The target whose PTX a GPU of ``compute_capability`` runs (None below 7.5)."""
    return arch_for_cc(compute_capability)


def needs_text(spec: KernelSpec) -> str:
    """What ``spec`` needs of an architecture, e.g. ``sm_80+, PTX 7.0`` or ``sm_90a``."""
    if spec.arch_specific:
        return spec.arch_specific
    first = min((a for a in ARCHS.values() if a.cc >= spec.min_cc), key=lambda a: a.cc, default=None)
    cc = first.name if first else f"cc {spec.min_cc[0]}.{spec.min_cc[1]}"
    ptx = f", PTX {spec.min_ptx[0]}.{spec.min_ptx[1]}" if spec.min_ptx > (6, 3) else ""
    return f"{cc}+{ptx}"


@dataclass(frozen=True)
class KernelRow:
    """One line of ``archline kernels``: a benchmark and whether it runs on the architecture."""

    name: str
    group: str
    unit: str
    needs: str
    target: str
    ptx_isa: str
    skip_reason: str | None

    @property
    def runnable(self) -> bool:
        return self.skip_reason is None


def kernel_rows(specs: Iterable[KernelSpec], arch: Arch) -> list[KernelRow]:
    """The listing of ``specs`` for ``arch``."""
    rows = []
    for s in specs:
        why = skip_reason(s, arch)
        isa = ptx_isa(s, arch)
        rows.append(
            KernelRow(
                name=s.name,
                group=s.group,
                unit=s.work.unit,
                needs=needs_text(s),
                target=kernel_arch(s, arch).name if why is None else "",
                ptx_isa=f"{isa[0]}.{isa[1]}" if why is None else "",
                skip_reason=why,
            )
        )
    return rows


def emit_ptx(specs: Sequence[KernelSpec], arch: Arch, out_dir: Path) -> list[Path]:
    """Write ``<name>.ptx`` for every kernel of ``specs`` that runs on ``arch`` into ``out_dir``
    (each file written atomically). Returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for s in specs:
        if skip_reason(s, arch) is not None:
            continue
        path = out_dir / f"{s.name}.ptx"
        atomic_write_text(path, ptx_for(s, arch))
        written.append(path)
    return written

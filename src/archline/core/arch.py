"""The GPU architectures archline's kernels target (Turing to Blackwell) and the PTX header each one needs.

PTX ISA versions: NVIDIA, *Parallel Thread Execution ISA* (v9.0, CUDA 13.0), section
"Release Notes", table "PTX Release History" (PTX ISA version per CUDA release), and the
"Target ISA Notes" of the ``.target`` directive (the ISA version that introduced each
target). The oldest ISA version that accepts each target:

========  ======  ========  =================================
target    ISA     CUDA      introduced with
========  ======  ========  =================================
sm_75     6.3     10.0      Turing
sm_80     7.0     11.0      Ampere GA100
sm_86     7.1     11.1      Ampere GA10x
sm_89     7.8     11.8      Ada
sm_90     7.8     11.8      Hopper
sm_90a    8.0     12.0      Hopper architecture-specific (wgmma, setmaxnreg)
sm_100    8.6     12.8      Blackwell datacenter (B200)
sm_120    8.7     12.8      Blackwell (RTX 50, RTX PRO)
========  ======  ========  =================================

``tests/unit/test_arch_targets.py`` checks each row against the local ptxas: the listed
version assembles, the ISA version before it is refused. A kernel's PTX uses
``max(target ISA, KernelSpec.min_ptx)``.

PTX for ``.target sm_XY`` runs on every GPU of compute capability X.Y or later (the driver
compiles it); PTX for ``sm_XYa`` runs on X.Y only. CUDA 13's ptxas has dropped sm_70/sm_72
(Volta): :func:`parse_arch` refuses them with what Volta users need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from archline.core.kernel import KernelSpec
from archline.errors import InputError, UnknownNameError, suggest

__all__ = [
    "ARCHS",
    "VOLTA_NOTE",
    "Arch",
    "arch_for_cc",
    "kernel_arch",
    "parse_arch",
    "ptx_for",
    "ptx_isa",
    "retarget_ptx",
    "skip_reason",
]


@dataclass(frozen=True)
class Arch:
    """One PTX target: ``name`` (``sm_90a``), its compute capability, family and oldest PTX ISA."""

    name: str
    cc: tuple[int, int]
    family: str
    min_ptx: tuple[int, int]
    examples: str

    @property
    def specific(self) -> bool:
        """Architecture-specific (``sm_90a``): its PTX runs on this compute capability only."""
        return self.name.endswith("a")

    @property
    def cc_text(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"


ARCHS: dict[str, Arch] = {
    a.name: a
    for a in (
        Arch("sm_75", (7, 5), "Turing", (6, 3), "T4, RTX 20"),
        Arch("sm_80", (8, 0), "Ampere", (7, 0), "A100, A30"),
        Arch("sm_86", (8, 6), "Ampere", (7, 1), "A10, A40, RTX 30"),
        Arch("sm_89", (8, 9), "Ada", (7, 8), "L4, L40S, RTX 40"),
        Arch("sm_90", (9, 0), "Hopper", (7, 8), "H100, H200, GH200"),
        Arch("sm_90a", (9, 0), "Hopper", (8, 0), "H100, H200, GH200 (wgmma)"),
        Arch("sm_100", (10, 0), "Blackwell", (8, 6), "B200, GB200"),
        Arch("sm_120", (12, 0), "Blackwell", (8, 7), "RTX 50, RTX PRO 6000"),
    )
}

#: What a Volta (compute capability 7.0/7.2) user needs: one line, for errors and skip reasons.
VOLTA_NOTE = (
    "Volta (sm_70, sm_72) is not a target: CUDA 13's ptxas no longer accepts it, and archline's kernels "
    "start at sm_75 (Turing); on Volta, assemble with an older CUDA toolkit's ptxas (CUDA 12.x still "
    "accepts sm_70) and a driver that supports Volta"
)

_RE_ARCH = re.compile(r"^(?:sm_|compute_)?(\d+)(\d)(a?)$")


def parse_arch(text: str) -> Arch:
    """The target named ``text`` (``sm_80``, ``80``, ``8.0``, ``sm_90a``); :class:`InputError` if none."""
    raw = text.strip().lower()
    dotted = re.fullmatch(r"(\d+)\.(\d)(a?)", raw)
    name = f"sm_{dotted.group(1)}{dotted.group(2)}{dotted.group(3)}" if dotted else raw
    m = _RE_ARCH.match(name)
    if m:
        name = f"sm_{m.group(1)}{m.group(2)}{m.group(3)}"
        if name in ARCHS:
            return ARCHS[name]
        cc = (int(m.group(1)), int(m.group(2)))
        if cc < (7, 0):
            raise InputError(f"{text}: older than sm_75 (Turing), the oldest target of CUDA 13's ptxas and archline")
        if cc < (7, 5):
            raise InputError(f"{text}: {VOLTA_NOTE}")
        below = arch_for_cc(cc)
        if below is not None and not m.group(3):
            raise UnknownNameError(
                f"{text} is not one of archline's targets ({', '.join(ARCHS)}); a GPU of compute capability "
                f"{cc[0]}.{cc[1]} runs the PTX of {below.name}: use --arch {below.name}"
            )
    raise UnknownNameError(f"unknown architecture {text!r}; known: {', '.join(ARCHS)}{suggest([text], ARCHS)}")


def arch_for_cc(cc: tuple[int, int]) -> Arch | None:
    """The generic target a GPU of compute capability ``cc`` runs: the newest listed one at or below
    ``cc`` (PTX is forward compatible, so sm_86 PTX serves an 8.7 Orin and sm_120 a 12.1 GB10).
    None below 7.5."""
    fits = [a for a in ARCHS.values() if not a.specific and a.cc <= cc]
    return max(fits, key=lambda a: a.cc) if fits else None


def kernel_arch(spec: KernelSpec, arch: Arch) -> Arch:
    """The target ``spec`` is built for on ``arch``: its architecture-specific target where it names
    one of the same compute capability (wgmma: sm_90 → sm_90a), else ``arch`` itself."""
    if spec.arch_specific and spec.arch_specific in ARCHS and ARCHS[spec.arch_specific].cc == arch.cc:
        return ARCHS[spec.arch_specific]
    return arch


def _ptx_text(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def skip_reason(spec: KernelSpec, arch: Arch) -> str | None:
    """Why ``spec`` cannot run on ``arch`` (one line), or None if it can."""
    if spec.arch_specific is not None:
        own = ARCHS.get(spec.arch_specific)
        if own is None:
            return f"needs {spec.arch_specific}, which archline does not target"
        if own.cc != arch.cc:
            return (
                f"needs {spec.arch_specific} (architecture-specific PTX runs on compute capability "
                f"{own.cc_text} only), not {arch.name}"
            )
        return None
    if arch.cc < spec.min_cc:
        need = f"{spec.min_cc[0]}.{spec.min_cc[1]}"
        first = min((a for a in ARCHS.values() if a.cc >= spec.min_cc), key=lambda a: a.cc, default=None)
        hint = f" ({first.name}, {first.family})" if first else ""
        return f"needs compute capability {need}{hint} or later; {arch.name} is {arch.cc_text}"
    return None


def ptx_isa(spec: KernelSpec, arch: Arch) -> tuple[int, int]:
    """The PTX ISA version of ``spec``'s module for ``arch``: the target's oldest, raised to the kernel's."""
    return max(kernel_arch(spec, arch).min_ptx, spec.min_ptx)


_RE_VERSION = re.compile(r"^\s*\.version\s+\S+\s*$", re.MULTILINE)
_RE_TARGET = re.compile(r"^\s*\.target\s+[^\n]*$", re.MULTILINE)


def retarget_ptx(ptx: str, target: str, isa: tuple[int, int]) -> str:
    """``ptx`` with its ``.version`` and ``.target`` directives set to ``isa`` and ``target`` (a text
    without them, which no loader accepts, comes back unchanged)."""
    out = _RE_VERSION.sub(f".version {_ptx_text(isa)}", ptx, count=1)
    return _RE_TARGET.sub(f".target {target}", out, count=1)


def ptx_for(spec: KernelSpec, arch: Arch) -> str:
    """``spec``'s PTX for ``arch`` (raises :class:`InputError` with :func:`skip_reason` if it cannot run)."""
    reason = skip_reason(spec, arch)
    if reason is not None:
        raise InputError(f"{spec.name}: {reason}")
    return retarget_ptx(spec.ptx, kernel_arch(spec, arch).name, ptx_isa(spec, arch))

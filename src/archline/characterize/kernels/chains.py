"""Dependent instruction chains: how each is seeded, emitted as PTX and reproduced on the host."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import Frame, KernelBuilder, RegClass
from archline.characterize.kernels.verify import (
    Reject,
    State,
    advance_periodic,
    affine_power,
    apply_affine,
    seed_words,
    words_of,
)
from archline.core.kernel import Arg, ArgKind

__all__ = [
    "ChainDef",
    "Operand",
    "Ops",
    "Reference",
    "Seed",
    "affine_ref",
    "chain_args",
    "check_chain",
    "decode_state",
    "domain_ref",
    "emit_round",
    "identity_ref",
    "load_operands",
    "periodic_ref",
    "seed_chain",
    "seed_state_np",
    "simulate_ref",
    "state_words",
]

Ops = Mapping[str, float | int]
SeedKind = Literal["int", "odd", "range", "unit", "denorm", "intf"]
FpFormat = Literal["f32", "f64", "f16", "bf16", "f16x2", "bf16x2"]

#: Largest number of (thread x round) steps a host simulation may take before verify falls back
#: to its domain check; keeps verify well under a second.
SIM_BUDGET = 40_000_000
#: Largest number of sequential rounds simulated: each is one vectorised numpy step over the
#: threads, so a long single-thread chain (the paper's one-thread shape) must not loop for minutes.
STEP_BUDGET = 50_000


@dataclass(frozen=True)
class Operand:
    """A run-time operand of the chain, passed as a scalar argument so ptxas cannot fold it.

    ``cls`` is the register class it is used in; a ``b16`` operand travels as the low 16 bits
    of a ``u32`` argument.
    """

    name: str
    kind: ArgKind
    value: float | int
    cls: RegClass


@dataclass(frozen=True)
class Seed:
    """How one state register starts, from the chain's per-thread seed word ``s``.

    ``int``: ``s ^ salt``; ``odd``: ``(s ^ salt) | 1``; ``range``: ``2^bits + (s mod 2^bits)``;
    ``unit``: a float in [1, 2) with ``bits`` fraction bits taken from ``s``; ``denorm``: an f32
    subnormal in [2^-127, 2^-126); ``intf``: a float holding the integer ``2^bits + (s mod 2^bits)``.
    """

    kind: SeedKind
    salt: int = 0
    bits: int = 16
    fmt: FpFormat = "f32"


@dataclass(frozen=True)
class Reference:
    """The host's model of a chain: ``advance(state, rounds, ops)`` gives the state after that many
    rounds exactly, or None when that is too costly for this launch; ``domain(state, ops)`` is
    the weaker check used then (a one-line reason or None)."""

    advance: Callable[[State, int, Ops, int], State | None]
    domain: Callable[[State, Ops], str | None] | None = None
    exact: bool = True


def identity_ref() -> Reference:
    return Reference(advance=lambda st, n, ops, threads: st)


def affine_ref(fn: Callable[[Ops], tuple[list[list[int]], list[int], int]]) -> Reference:
    """A chain whose round is ``v -> A v + b (mod 2^bits)`` on its integer state."""

    def advance(st: State, n: int, ops: Ops, threads: int) -> State:
        a, b, bits = fn(ops)
        an, bn = affine_power(a, b, n, bits)
        res = apply_affine(an, bn, st, bits)
        return [r.astype(s.dtype) for r, s in zip(res, st, strict=True)]

    return Reference(advance=advance)


def periodic_ref(
    step: Callable[[State, Ops], State], domain: Callable[[State, Ops], str | None] | None = None
) -> Reference:
    """A chain whose orbit settles into a short cycle; ``step`` reproduces one round bit-exactly."""

    def advance(st: State, n: int, ops: Ops, threads: int) -> State:
        return advance_periodic(lambda s: step(s, ops), st, n)

    return Reference(advance=advance, domain=domain)


def simulate_ref(step: Callable[[State, Ops], State], domain: Callable[[State, Ops], str | None]) -> Reference:
    """A chain with no closed form: simulated exactly when small, else checked by ``domain``."""

    def advance(st: State, n: int, ops: Ops, threads: int) -> State | None:
        if n * max(threads, 1) > SIM_BUDGET or n > STEP_BUDGET:
            return None
        for _ in range(n):
            st = step(st, ops)
        return st

    return Reference(advance=advance, domain=domain)


def domain_ref(domain: Callable[[State, Ops], str | None]) -> Reference:
    """A chain of approximate instructions the host cannot reproduce: only ``domain`` is checked."""
    return Reference(advance=lambda st, n, ops, threads: None, domain=domain, exact=False)


@dataclass(frozen=True)
class ChainDef:
    """One dependent chain of a target instruction.

    ``body`` is one *round*: PTX templates with ``{name}`` placeholders for state registers,
    temporaries and operands, each flagged True if it is a target instruction (the overhead
    kernel of the instruction suite drops those). ``sass`` lists (regex, SASS matches expected
    per target PTX instruction) — the minimum counts the SASS check demands.
    """

    key: str
    title: str
    unit: str
    state: tuple[tuple[str, RegClass, Seed], ...]
    body: tuple[tuple[str, bool], ...]
    sass: tuple[tuple[str, float], ...]
    ref: Reference
    overhead_ref: Reference = field(default_factory=identity_ref)
    operands: tuple[Operand, ...] = ()
    temps: tuple[tuple[str, RegClass], ...] = ()
    flops_per_target: float = 0.0
    sass_per_target: float = 1.0
    spec_key: str | None = None
    template: str = "pure"
    note: str = ""
    #: Oldest compute capability and PTX ISA version with the target instruction (see KernelSpec).
    min_cc: tuple[int, int] = (7, 5)
    min_ptx: tuple[int, int] = (6, 3)

    @property
    def targets_per_round(self) -> int:
        return sum(1 for _, t in self.body if t)

    def ops(self) -> dict[str, float | int]:
        return {o.name: o.value for o in self.operands}


def chain_args(defn: ChainDef, prefix: str = "") -> list[Arg]:
    """Scalar arguments carrying the chain's operands."""
    return [Arg(prefix + o.name, o.kind, "scalar", value=o.value) for o in defn.operands]


def load_operands(frame: Frame, defn: ChainDef, prefix: str = "") -> dict[str, str]:
    """Registers holding each operand in the class the chain uses it in."""
    out: dict[str, str] = {}
    for o in defn.operands:
        r = frame.regs[prefix + o.name]
        if o.cls == "b16":
            h = frame.kb.reg("b16")
            frame.kb.emit(f"cvt.u16.u32 {h}, {r};")
            r = h
        out[o.name] = r
    return out


def _emit_seed(kb: KernelBuilder, s: str, reg: str, cls: RegClass, seed: Seed) -> None:
    t = kb.reg("b32")
    mask = (1 << seed.bits) - 1
    if seed.kind in ("int", "odd"):
        kb.emit(f"xor.b32 {t}, {s}, {seed.salt & 0xFFFFFFFF};")
        if seed.kind == "odd":
            kb.emit(f"or.b32 {t}, {t}, 1;")
        if cls == "b64":
            hi = kb.reg("b32")
            kb.emit(f"xor.b32 {hi}, {s}, {(~seed.salt) & 0xFFFFFFFF};", f"mov.b64 {reg}, {{{t}, {hi}}};")
        elif cls == "b16":
            kb.emit(f"cvt.u16.u32 {reg}, {t};")
        else:
            kb.emit(f"mov.b32 {reg}, {t};")
        return
    if seed.kind == "range":
        kb.emit(f"and.b32 {t}, {s}, {mask};", f"or.b32 {t}, {t}, {1 << seed.bits};", f"mov.b32 {reg}, {t};")
        return
    if seed.kind == "denorm":
        kb.emit(f"and.b32 {t}, {s}, 65535;", f"shl.b32 {t}, {t}, 6;", f"or.b32 {t}, {t}, 0x00400000;")
        kb.emit(f"mov.b32 {reg}, {t};")
        return
    if seed.kind == "intf":
        kb.emit(f"and.b32 {t}, {s}, {mask};", f"or.b32 {t}, {t}, {1 << seed.bits};")
        kb.emit(f"cvt.rn.{'f64' if cls == 'f64' else 'f32'}.u32 {reg}, {t};")
        return
    # unit: [1, 2) with `bits` fraction bits, built from IEEE bits so it is exact.
    fmt = seed.fmt
    if fmt == "f32":
        kb.emit(f"and.b32 {t}, {s}, {mask};", f"shl.b32 {t}, {t}, {23 - seed.bits};")
        kb.emit(f"or.b32 {t}, {t}, 0x3F800000;", f"mov.b32 {reg}, {t};")
    elif fmt == "f64":
        z = kb.reg("b32")
        kb.emit(f"and.b32 {t}, {s}, {mask};", f"shl.b32 {t}, {t}, {20 - seed.bits};")
        kb.emit(f"or.b32 {t}, {t}, 0x3FF00000;", f"mov.u32 {z}, 0;", f"mov.b64 {reg}, {{{z}, {t}}};")
    else:
        one, man = (0x3C00, 10) if fmt.startswith("f16") else (0x3F80, 7)
        kb.emit(f"and.b32 {t}, {s}, {mask};", f"shl.b32 {t}, {t}, {man - seed.bits};", f"or.b32 {t}, {t}, {one};")
        if fmt in ("f16", "bf16"):
            kb.emit(f"cvt.u16.u32 {reg}, {t};")
        else:
            h = kb.reg("b32")
            kb.emit(f"shr.u32 {h}, {s}, 16;", f"and.b32 {h}, {h}, {mask};", f"shl.b32 {h}, {h}, {man - seed.bits};")
            kb.emit(f"or.b32 {h}, {h}, {one};", f"shl.b32 {h}, {h}, 16;", f"or.b32 {reg}, {t}, {h};")


def seed_chain(frame: Frame, defn: ChainDef, j: int) -> dict[str, str]:
    """Declare and seed chain ``j``'s state and temporaries; returns name → register."""
    kb = frame.kb
    s = frame.seed_word(j)
    regs: dict[str, str] = {}
    for name, cls, seed in defn.state:
        r = kb.reg(cls)
        _emit_seed(kb, s, r, cls, seed)
        regs[name] = r
    for name, cls in defn.temps:
        regs[name] = kb.reg(cls)
    return regs


def emit_round(kb: KernelBuilder, defn: ChainDef, regs: Mapping[str, str], *, targets: bool = True) -> int:
    """Emit one round of the chain; with ``targets`` False the target instructions are left out.

    Returns the number of target instructions emitted.
    """
    n = 0
    for tmpl, is_target in defn.body:
        if is_target and not targets:
            continue
        kb.emit(tmpl.format(**regs))
        n += int(is_target)
    return n


# --------------------------------------------------------------------------- host mirror


def _seed_np(s: NDArray[np.uint64], cls: RegClass, seed: Seed) -> NDArray[np.generic]:
    mask = np.uint64((1 << seed.bits) - 1)
    if seed.kind in ("int", "odd"):
        lo = s ^ np.uint64(seed.salt & 0xFFFFFFFF)
        if seed.kind == "odd":
            lo = lo | np.uint64(1)
        if cls == "b64":
            hi = s ^ np.uint64((~seed.salt) & 0xFFFFFFFF)
            return np.asarray((hi << np.uint64(32)) | lo)
        if cls == "b16":
            return np.asarray((lo & np.uint64(0xFFFF)).astype(np.uint16))
        return np.asarray(lo.astype(np.uint32))
    if seed.kind == "range":
        return np.asarray(((s & mask) | np.uint64(1 << seed.bits)).astype(np.uint32))
    if seed.kind == "denorm":
        return np.asarray(
            (((s & np.uint64(0xFFFF)) << np.uint64(6)) | np.uint64(0x00400000)).astype(np.uint32).view(np.float32)
        )
    if seed.kind == "intf":
        v = ((s & mask) | np.uint64(1 << seed.bits)).astype(np.float64)
        return np.asarray(v if cls == "f64" else v.astype(np.float32))
    fmt = seed.fmt
    if fmt == "f32":
        return np.asarray(
            (((s & mask) << np.uint64(23 - seed.bits)) | np.uint64(0x3F800000)).astype(np.uint32).view(np.float32)
        )
    if fmt == "f64":
        hi = ((s & mask) << np.uint64(20 - seed.bits)) | np.uint64(0x3FF00000)
        return np.asarray((hi << np.uint64(32)).view(np.float64))
    one, man = (0x3C00, 10) if fmt.startswith("f16") else (0x3F80, 7)
    lo = ((s & mask) << np.uint64(man - seed.bits)) | np.uint64(one)
    if fmt in ("f16", "bf16"):
        return np.asarray(lo.astype(np.uint16))
    hi = (((s >> np.uint64(16)) & mask) << np.uint64(man - seed.bits)) | np.uint64(one)
    return np.asarray((lo | (hi << np.uint64(16))).astype(np.uint32))


def seed_state_np(defn: ChainDef, threads: int | NDArray[np.integer], seed: int, j: int) -> State:
    """Host mirror of :func:`seed_chain` for every thread (or the given thread indices)."""
    s = seed_words(threads, seed, j)
    return [_seed_np(s, cls, sd) for _, cls, sd in defn.state]


def decode_state(words: Sequence[NDArray[np.uint32]], classes: Sequence[RegClass]) -> State:
    """Inverse of ``words_of``: rebuild state arrays from stored output words."""
    out: State = []
    i = 0
    for cls in classes:
        if cls in ("b64", "f64"):
            v = words[i].astype(np.uint64) | (words[i + 1].astype(np.uint64) << np.uint64(32))
            out.append(v.view(np.float64) if cls == "f64" else v)
            i += 2
        elif cls == "b16":
            out.append(words[i].astype(np.uint16))
            i += 1
        else:
            w = np.ascontiguousarray(words[i])
            out.append(w.view(np.float32) if cls == "f32" else w)
            i += 1
    return out


def state_words(state: State, classes: Sequence[RegClass]) -> list[NDArray[np.uint32]]:
    out: list[NDArray[np.uint32]] = []
    for v, cls in zip(state, classes, strict=True):
        out.extend(words_of(np.asarray(v), cls))
    return out


def check_chain(
    label: str,
    got_words: Sequence[NDArray[np.uint32]],
    start: State,
    rounds: int,
    classes: Sequence[RegClass],
    ref: Reference,
    ops: Ops,
) -> None:
    """Compare a chain's stored state with the host reference (exact, or its domain check)."""
    threads = start[0].shape[0]
    want = ref.advance([np.array(s, copy=True) for s in start], rounds, ops, threads)
    got_state = decode_state(got_words, classes)
    if want is None:
        if ref.domain is not None:
            why = ref.domain(got_state, ops)
            if why:
                raise Reject(f"{label}: {why}")
        return
    for k, (g, w) in enumerate(zip(got_words, state_words(want, classes), strict=True)):
        bad = np.flatnonzero(g != w)
        if bad.size:
            t = int(bad[0])
            raise Reject(
                f"{label} word {k}: thread {t} has {int(g[t]):#010x}, expected {int(w[t]):#010x}"
                f" after {rounds} rounds ({bad.size} threads differ)"
            )
    if ref.domain is not None:
        why = ref.domain(got_state, ops)
        if why:
            raise Reject(f"{label}: {why}")

"""The per-instruction energy suite (Arafa et al. §III): instruction kernels and their overhead twins."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from archline.characterize.kernels.chain_kernel import chain_kernel, rounds_for
from archline.characterize.kernels.chain_table import CHAINS
from archline.characterize.kernels.chains import ChainDef
from archline.core.kernel import KernelSpec, Launch
from archline.errors import UnknownNameError, suggest

__all__ = [
    "INSTRUCTION_KEYS",
    "SHAPES",
    "InstructionPair",
    "Shape",
    "instruction_chain",
    "instruction_kernels",
    "instruction_pairs",
]

Shape = Literal["single", "full"]

#: The paper's shape (one thread in one block) and a full-GPU shape (every SM, 64 warps each).
SHAPES: dict[Shape, Launch] = {
    "single": Launch(block=1, blocks_per_sm=1, grid=1),
    "full": Launch(block=256, blocks_per_sm=8),
}

#: SASS instructions per loop body of one dependent chain: 256 x 16 B = 4 KB, loop overhead < 2 %.
BODY_SASS = 256

#: Chains that only serve the throughput class (mixtures, not single instructions).
_THROUGHPUT_ONLY = {"minmax.u32", "ex2lg2.approx.f32"}

INSTRUCTION_KEYS: tuple[str, ...] = tuple(k for k in CHAINS if k not in _THROUGHPUT_ONLY)


@dataclass(frozen=True)
class InstructionPair:
    """An instruction kernel, its overhead twin and the target instructions each thread runs per trip.

    The runner computes ``E_instruction = (E_total - E_overhead) / (per_thread_per_iter x
    threads x iters)``, with both kernels launched with the same shape and ``iters``.
    """

    key: str
    shape: Shape
    instruction: KernelSpec
    overhead: KernelSpec
    per_thread_per_iter: int
    template: str
    note: str


def instruction_chain(key: str) -> ChainDef:
    """The chain definition behind instruction ``key`` (``add.u32``, ``div.rn.f32`` …)."""
    if key in CHAINS:
        return CHAINS[key]
    raise UnknownNameError(f"unknown instruction {key!r}")


def _pair(key: str, shape: Shape) -> InstructionPair:
    defn = instruction_chain(key)
    rounds = rounds_for(defn, 1, BODY_SASS)
    base = f"inst.{key}.{shape}"
    launch = SHAPES[shape]
    what = "one thread in one block" if shape == "single" else "every SM, 8 blocks of 256 threads"
    inst = chain_kernel(
        defn,
        name=base,
        group="instruction",
        chains=1,
        rounds=rounds,
        launch=launch,
        description=f"{defn.title}: {rounds * defn.targets_per_round} dependent per trip, {what}",
        spec_key=defn.spec_key,
        tags=("instruction", shape, defn.template),
    )
    over = chain_kernel(
        defn,
        name=f"{base}.overhead",
        group="instruction",
        chains=1,
        rounds=rounds,
        launch=launch,
        targets=False,
        description=f"overhead twin of {base}: same seeds, loop and stores, target instructions removed",
        tags=("overhead", shape, defn.template),
    )
    return InstructionPair(key, shape, inst, over, int(inst.work.ops), defn.template, defn.note)


def _match(keys: Iterable[str], patterns: Sequence[str]) -> list[str]:
    out = []
    for k in keys:
        full = f"inst.{k}"
        if any(
            fnmatch.fnmatchcase(k, p) or fnmatch.fnmatchcase(full, p) or full.startswith(p + ".") or k == p
            for p in patterns
        ):
            out.append(k)
    return out


def instruction_pairs(
    patterns: Sequence[str] = ("*",), *, shapes: Sequence[Shape] = ("single", "full")
) -> list[InstructionPair]:
    """Instruction/overhead pairs whose key (``add.u32``) or name (``inst.add.u32``) matches a glob.

    Raises :class:`UnknownNameError` (with close names) when nothing matches.
    """
    keys = _match(INSTRUCTION_KEYS, patterns)
    if not keys:
        raise UnknownNameError(
            f"no instruction matches {', '.join(repr(p) for p in patterns)}{suggest(patterns, INSTRUCTION_KEYS)}"
        )
    for s in shapes:
        if s not in SHAPES:
            raise UnknownNameError(f"unknown launch shape {s!r}; use one of {', '.join(SHAPES)}")
    return [_pair(k, s) for k in keys for s in shapes]


def instruction_kernels(shapes: Sequence[Shape] = ("single", "full")) -> list[KernelSpec]:
    """Every instruction and overhead kernel, flattened (for the catalogue)."""
    out: list[KernelSpec] = []
    for p in instruction_pairs(("*",), shapes=shapes):
        out += [p.instruction, p.overhead]
    return out

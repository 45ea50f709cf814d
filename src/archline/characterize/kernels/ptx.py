"""PTX-emitting helpers: module header, registers, the standard benchmark frame (seeds, loop, stores)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from archline.core.kernel import Arg, ArgKind

__all__ = [
    "LIVE_SEED",
    "NEVER",
    "PTX_TARGET",
    "PTX_VERSION",
    "SEED",
    "SEED_MUL",
    "SEED_STEP",
    "Frame",
    "KernelBuilder",
    "RegClass",
    "f32_bits",
    "f64_bits",
    "open_frame",
    "retarget",
    "slot_count",
]

PTX_VERSION = "8.0"
PTX_TARGET = "sm_90"

RegClass = Literal["pred", "b16", "b32", "b64", "f32", "f64"]

_PREFIX: dict[RegClass, str] = {"pred": "%p", "b16": "%h", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}
_PARAM_TYPE: dict[ArgKind, str] = {"ptr": "u64", "u32": "u32", "u64": "u64", "s32": "s32", "f32": "f32", "f64": "f64"}
_REG_FOR_KIND: dict[ArgKind, RegClass] = {
    "ptr": "b64",
    "u32": "b32",
    "u64": "b64",
    "s32": "b32",
    "f32": "f32",
    "f64": "f64",
}

#: Run-time value that no thread index equals: the guarded store compares against it.
NEVER = 0xFFFFFFFF
#: Default run-time seed (any value works; the host mirrors the arithmetic).
SEED = 0x2545F491
#: Per-thread seed word of chain j: ``gtid * SEED_MUL + seed + j * SEED_STEP`` (mod 2^32).
SEED_MUL = 0x9E3779B1
SEED_STEP = 0x7F4A7C15
#: The loop-liveness word starts at ``seed ^ LIVE_SEED`` and is XORed with each trip's counter.
LIVE_SEED = 0x5BD1E995


def f32_bits(value: float) -> str:
    """A PTX f32 immediate written exactly as its IEEE bits (``0fXXXXXXXX``)."""
    import struct

    return "0f" + struct.pack(">f", value).hex().upper()


def f64_bits(value: float) -> str:
    """A PTX f64 immediate written exactly as its IEEE bits (``0dXXXXXXXXXXXXXXXX``)."""
    import struct

    return "0d" + struct.pack(">d", value).hex().upper()


class KernelBuilder:
    """Accumulates one ``.entry`` kernel: parameters, typed registers and body lines."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self._params: list[tuple[str, ArgKind]] = []
        self._counts: dict[RegClass, int] = dict.fromkeys(_PREFIX, 0)
        self._lines: list[str] = []
        self._module: list[str] = []
        self._labels = 0
        self.maxnreg: int | None = None

    def reg(self, cls: RegClass) -> str:
        """A fresh register of class ``cls``."""
        self._counts[cls] += 1
        return f"{_PREFIX[cls]}{self._counts[cls]}"

    def regs(self, cls: RegClass, n: int) -> list[str]:
        return [self.reg(cls) for _ in range(n)]

    def emit(self, *lines: str) -> None:
        self._lines.extend(lines)

    def label(self, stem: str) -> str:
        """A unique label name (not yet placed; place it with :meth:`place`)."""
        self._labels += 1
        return f"{stem.upper()}_{self._labels}"

    def place(self, label: str) -> None:
        self._lines.append(f"{label}:")

    def symbol(self, stem: str) -> str:
        """A module-scope name unique to this kernel, so several kernels can share one module."""
        return f"{self.entry}_{stem}"

    def module_decl(self, text: str) -> None:
        """A module-scope declaration (``.const``/``.shared`` arrays)."""
        self._module.append(text)

    def load_param(self, name: str, kind: ArgKind) -> str:
        """Declare parameter ``name`` and load it into a register (pointers converted to global space)."""
        self._params.append((name, kind))
        r = self.reg(_REG_FOR_KIND[kind])
        self.emit(f"ld.param.{_PARAM_TYPE[kind]} {r}, [{self.entry}_{name}];")
        if kind == "ptr":
            self.emit(f"cvta.to.global.u64 {r}, {r};")
        return r

    def render(self) -> str:
        params = ",\n".join(f"    .param .{_PARAM_TYPE[k]} {self.entry}_{n}" for n, k in self._params)
        decls = [f"    .reg .{cls} {_PREFIX[cls]}<{n + 1}>;" for cls, n in self._counts.items() if n]
        body = [ln if ln.endswith(":") else f"    {ln}" for ln in self._lines]
        head = [f".version {PTX_VERSION}", f".target {PTX_TARGET}", ".address_size 64", ""]
        # A register cap lets ptxas plan for the intended occupancy (e.g. 32 for 2048 threads/SM).
        tune = [f".maxnreg {self.maxnreg}"] if self.maxnreg else []
        return "\n".join(
            [
                *head,
                *self._module,
                "",
                f".visible .entry {self.entry}(",
                params,
                ")",
                *tune,
                "{",
                *decls,
                "",
                *body,
                "}",
                "",
            ]
        )


def slot_count(cls: RegClass) -> int:
    """32-bit output words one value of class ``cls`` occupies."""
    return 2 if cls in ("b64", "f64") else 1


@dataclass
class Frame:
    """The standard benchmark skeleton every kernel shares.

    Parameters come first in this order: ``out`` (per-thread result words), ``iters`` (outer
    trip count), ``never`` (a run-time value no thread index equals), ``seed``; then the
    kernel's own arguments. Output word ``k`` of thread ``t`` is ``out[k * threads + t]``; word 0
    is the loop-liveness word (``seed ^ LIVE_SEED`` XORed with every trip's counter), which
    proves on the host that the loop ran exactly ``iters`` times.
    """

    kb: KernelBuilder
    args: list[Arg]
    regs: dict[str, str]
    out: str
    iters: str
    never: str
    seed: str
    gtid: str
    threads: str
    tid: str
    ntid: str
    counter: str = ""
    live: str = ""
    _done: str = ""
    _top: str = ""
    stored: list[RegClass] = field(default_factory=list)

    def seed_word(self, j: int) -> str:
        """Register holding chain ``j``'s seed word ``gtid * SEED_MUL + seed + j * SEED_STEP``."""
        kb = self.kb
        base = kb.reg("b32")
        s = kb.reg("b32")
        kb.emit(f"add.u32 {base}, {self.seed}, {(j * SEED_STEP) & 0xFFFFFFFF};")
        kb.emit(f"mad.lo.u32 {s}, {self.gtid}, {SEED_MUL}, {base};")
        return s

    def lane(self) -> str:
        r = self.kb.reg("b32")
        self.kb.emit(f"and.b32 {r}, {self.tid}, 31;")
        return r

    def begin_loop(self) -> None:
        """Open the outer loop of ``iters`` trips (skipped entirely when ``iters`` is 0)."""
        kb = self.kb
        self.counter = kb.reg("b32")
        self.live = kb.reg("b32")
        p = kb.reg("pred")
        self._top = kb.label("loop")
        self._done = kb.label("done")
        kb.emit(f"mov.u32 {self.counter}, 0;", f"xor.b32 {self.live}, {self.seed}, {LIVE_SEED};")
        kb.emit(f"setp.eq.u32 {p}, {self.iters}, 0;", f"@{p} bra.uni {self._done};")
        kb.place(self._top)

    def end_loop(self) -> None:
        kb = self.kb
        p = kb.reg("pred")
        kb.emit(f"xor.b32 {self.live}, {self.live}, {self.counter};")
        kb.emit(f"add.u32 {self.counter}, {self.counter}, 1;")
        kb.emit(f"setp.lt.u32 {p}, {self.counter}, {self.iters};", f"@{p} bra.uni {self._top};")
        kb.place(self._done)

    def finish(self, values: Sequence[tuple[str, RegClass]], *, guarded: Sequence[str] = ()) -> None:
        """Store the liveness word and ``values`` per thread, plus the never-taken guarded store."""
        kb = self.kb
        words: list[str] = [self.live]
        for reg, cls in values:
            self.stored.append(cls)
            if cls in ("b64", "f64"):
                lo, hi = kb.reg("b32"), kb.reg("b32")
                kb.emit(f"mov.b64 {{{lo}, {hi}}}, {reg};")
                words += [lo, hi]
            elif cls == "b16":
                w = kb.reg("b32")
                kb.emit(f"cvt.u32.u16 {w}, {reg};")
                words.append(w)
            elif cls == "f32":
                w = kb.reg("b32")
                kb.emit(f"mov.b32 {w}, {reg};")
                words.append(w)
            else:
                words.append(reg)
        addr = kb.reg("b64")
        stride = kb.reg("b64")
        kb.emit(f"mul.wide.u32 {addr}, {self.gtid}, 4;", f"add.u64 {addr}, {self.out}, {addr};")
        kb.emit(f"mul.wide.u32 {stride}, {self.threads}, 4;")
        for i, w in enumerate(words):
            if i:
                kb.emit(f"add.u64 {addr}, {addr}, {stride};")
            kb.emit(f"st.global.b32 [{addr}], {w};")
        # A store the compiler must keep but no thread takes: it anchors values that are
        # otherwise only visible through memory the host never reads.
        p = kb.reg("pred")
        kb.emit(f"setp.eq.u32 {p}, {self.gtid}, {self.never};")
        for i, g in enumerate(guarded or [self.live]):
            kb.emit(f"@{p} st.global.b32 [{self.out}+{4 * i}], {g};")
        kb.emit("ret;")
        nwords = len(words)
        self.args[0] = replace(self.args[0], per_thread_bytes=4 * nwords)

    @property
    def words(self) -> int:
        """Output words per thread (after :meth:`finish`)."""
        return self.args[0].per_thread_bytes // 4

    def ptx(self) -> str:
        return self.kb.render()


def open_frame(entry: str, extra: Sequence[Arg] = (), *, seed: int = SEED) -> Frame:
    """Start a kernel with the standard parameters, thread index and thread count."""
    kb = KernelBuilder(entry)
    args = [
        Arg("out", "ptr", "out", init="zeros"),
        Arg("iters", "u32", "iters"),
        Arg("never", "u32", "scalar", value=NEVER),
        Arg("seed", "u32", "scalar", value=seed),
        *extra,
    ]
    regs = {a.name: kb.load_param(a.name, a.kind) for a in args}
    tid, ctaid, ntid, nctaid = kb.regs("b32", 4)
    gtid, threads = kb.regs("b32", 2)
    kb.emit(f"mov.u32 {tid}, %tid.x;", f"mov.u32 {ctaid}, %ctaid.x;", f"mov.u32 {ntid}, %ntid.x;")
    kb.emit(f"mov.u32 {nctaid}, %nctaid.x;")
    kb.emit(f"mad.lo.u32 {gtid}, {ctaid}, {ntid}, {tid};", f"mul.lo.u32 {threads}, {nctaid}, {ntid};")
    return Frame(
        kb=kb,
        args=args,
        regs=regs,
        out=regs["out"],
        iters=regs["iters"],
        never=regs["never"],
        seed=regs["seed"],
        gtid=gtid,
        threads=threads,
        tid=tid,
        ntid=ntid,
    )


_HEADER = re.compile(r"\A\.version \d+\.\d+\n\.target \w+\n")


def retarget(ptx: str, *, version: tuple[int, int], target: str) -> str:
    """``ptx`` with its ``.version``/``.target`` header (the module's first two lines) replaced."""
    if not _HEADER.match(ptx):
        raise ValueError("PTX does not start with a .version and a .target line")
    return _HEADER.sub(f".version {version[0]}.{version[1]}\n.target {target}\n", ptx, count=1)

"""Operand data for tensor-core and FMA kernels: zeros, ones, random, a set toggle rate, a set sparsity.

An operand *set* is the packed words one MMA reads (A and B fragments, or a shared-memory tile).
Kernels cycle through sets ``s0, s1, −s0, −s1`` so every product is undone and the accumulators
stay bounded, while consecutive instructions read different data:

* ``zeros``: every element 0 (no bit moves);
* ``ones``: every element 1 (only the sign bit moves, between ``s`` and ``−s``);
* ``random``: sign and mantissa bits random, exponent held at 2⁰ (values ±[1, 2));
* ``toggle-P``: ``s0`` one random value in every element of every thread, ``s1 = s0 XOR m`` where
  each sign-and-mantissa bit of ``m`` is set with probability P % (0, 25, 50, 75 or 100): the
  Hamming distance between consecutive operands, over the bits that can move without changing the
  exponent, is P % (plus the sign flips of the ``s → −s`` steps, the same in every mode but
  ``zeros``), with no variation inside a set (so a tile-wide MMA sees the same rate);
* ``sparse-P``: ``random`` with each element zero with probability P % (25, 50 or 75).

The exponent field is held so products stay finite and comparable: P % is the toggle rate of the
sign and mantissa bits, not of the whole word. This is stated in every kernel's description.
"""

from __future__ import annotations

from dataclasses import dataclass

from archline.characterize.kernels.ptx import Frame

__all__ = ["DATA_MODES", "FORMATS", "ElemFormat", "OperandWords", "data_sweep", "mode_label", "operand_words"]

#: Every data mode, in sweep order.
DATA_MODES: tuple[str, ...] = (
    "zeros",
    "ones",
    "random",
    "toggle-0",
    "toggle-25",
    "toggle-50",
    "toggle-75",
    "toggle-100",
    "sparse-25",
    "sparse-50",
    "sparse-75",
)


@dataclass(frozen=True)
class ElemFormat:
    """How elements pack into a 32-bit word: width, the bits that may move, the exponent of 1.0."""

    name: str
    bits: int
    #: Sign and mantissa bits of every element in the word (the bits random data and toggles use).
    free: int
    #: Bits of 1.0 (or integer 1) in every element of the word.
    one: int
    #: Sign bits of every element (integers: None, they negate arithmetically).
    sign: int | None

    @property
    def per_word(self) -> int:
        return 32 // self.bits

    def element_lsb(self) -> int:
        """A word with bit 0 of every element set."""
        return sum(1 << (k * self.bits) for k in range(self.per_word))


FORMATS: dict[str, ElemFormat] = {
    "f16": ElemFormat("f16", 16, 0x83FF83FF, 0x3C003C00, 0x80008000),
    "bf16": ElemFormat("bf16", 16, 0x807F807F, 0x3F803F80, 0x80008000),
    "tf32": ElemFormat("tf32", 32, 0x807FE000, 0x3F800000, 0x80000000),
    "f32": ElemFormat("f32", 32, 0x807FFFFF, 0x3F800000, 0x80000000),
    "e4m3": ElemFormat("e4m3", 8, 0x87878787, 0x38383838, 0x80808080),
    "e5m2": ElemFormat("e5m2", 8, 0x83838383, 0x3C3C3C3C, 0x80808080),
    # INT8 elements in [1, 63], odd: negation per byte (~x + 1) never carries into the next byte.
    "s8": ElemFormat("s8", 8, 0x3E3E3E3E, 0x01010101, None),
}


def mode_label(mode: str) -> str:
    """The sweep axis value of a mode: ``toggle-25`` → ``("toggle_pct", 25)`` style label text."""
    if mode.startswith("toggle-"):
        return f"{mode[7:]} % of sign and mantissa bits toggle between consecutive operands"
    if mode.startswith("sparse-"):
        return f"random, {mode[7:]} % of elements zero"
    return {"zeros": "all elements 0", "ones": "all elements 1", "random": "random sign and mantissa"}[mode]


def data_sweep(mode: str) -> tuple[str, float] | None:
    """The sweep point of a mode: ``("toggle_pct", 25.0)``, ``("sparsity_pct", 50.0)``, else None."""
    if mode.startswith("toggle-"):
        return ("toggle_pct", float(mode[7:]))
    if mode.startswith("sparse-"):
        return ("sparsity_pct", float(mode[7:]))
    return None


def _check_mode(mode: str) -> None:
    if mode not in DATA_MODES:
        raise ValueError(f"unknown operand data mode {mode!r}; choose from {', '.join(DATA_MODES)}")


@dataclass
class OperandWords:
    """Registers for the four operand sets ``s0, s1, −s0, −s1`` (each a list of packed words)."""

    sets: list[list[str]]


class _Rng:
    """Well-mixed random words from the frame's seed words (lowbias32 finaliser).

    ``uniform`` words are the same in every thread (mixed from the seed parameter alone). Every
    value passes through ``zero`` (a run-time 0 the compiler cannot see), so ptxas cannot fold
    constant operands into immediates or equal sets into one register: every mode runs the same code.
    """

    def __init__(self, frame: Frame, base: int, zero: str, *, uniform: bool = False) -> None:
        self.frame = frame
        self.j = base
        self.zero = zero
        self.uniform = uniform

    def word(self) -> str:
        kb = self.frame.kb
        if self.uniform:
            x = kb.reg("b32")
            kb.emit(f"add.u32 {x}, {self.frame.seed}, {(self.j * 0x7F4A7C15) & 0xFFFFFFFF};")
        else:
            x = self.frame.seed_word(self.j)
        self.j += 1
        t = kb.reg("b32")
        for shift, mul in ((16, 0x7FEB352D), (15, 0x846CA68B)):
            kb.emit(f"shr.b32 {t}, {x}, {shift};", f"xor.b32 {x}, {x}, {t};", f"mul.lo.u32 {x}, {x}, {mul};")
        kb.emit(f"shr.b32 {t}, {x}, 16;", f"xor.b32 {x}, {x}, {t};")
        return x

    def bits(self, pct: int) -> str:
        """A word whose bits are set with probability ``pct`` % (0, 25, 50, 75, 100)."""
        kb = self.frame.kb
        r = kb.reg("b32")
        if pct == 0:
            kb.emit(f"mov.b32 {r}, {self.zero};")
        elif pct == 100:
            kb.emit(f"not.b32 {r}, {self.zero};")
        elif pct == 50:
            kb.emit(f"mov.b32 {r}, {self.word()};")
        elif pct in (25, 75):
            op = "and" if pct == 25 else "or"
            kb.emit(f"{op}.b32 {r}, {self.word()}, {self.word()};")
        else:
            raise ValueError(f"toggle or sparsity percentage {pct} is not one of 0, 25, 50, 75, 100")
        return r


def _negate(frame: Frame, fmt: ElemFormat, w: str) -> str:
    kb = frame.kb
    r = kb.reg("b32")
    if fmt.sign is not None:
        kb.emit(f"xor.b32 {r}, {w}, {fmt.sign:#x};")
    else:  # INT8 bytes in [1, 63] (or 0 words): per-byte two's complement without carries
        z = kb.reg("pred")
        kb.emit(f"not.b32 {r}, {w};", f"add.u32 {r}, {r}, {fmt.element_lsb():#x};")
        # Zeros data (the only INT8 data with zero bytes) stays zero.
        kb.emit(f"setp.eq.u32 {z}, {w}, 0;", f"@{z} mov.b32 {r}, 0;")
    return r


def _sparsify(frame: Frame, pick_pool: list[str], fmt: ElemFormat, w: str, i: int) -> None:
    """Zero each element of ``w`` (the ``i``-th word) where its bit of the pool's random words is set.

    One pool word serves 8 operand words (shifted by ``i mod 8``), so the set-up stays short.
    """
    kb = frame.kb
    pick, mask = kb.reg("b32"), kb.reg("b32")
    kb.emit(f"shr.b32 {pick}, {pick_pool[i // 8]}, {i % 8};")
    kb.emit(f"and.b32 {pick}, {pick}, {fmt.element_lsb():#x};")
    kb.emit(f"mul.lo.u32 {mask}, {pick}, {(1 << fmt.bits) - 1:#x};", f"not.b32 {mask}, {mask};")
    kb.emit(f"and.b32 {w}, {w}, {mask};")


def operand_words(frame: Frame, fmt_name: str, mode: str, words: int, *, seed_base: int = 64) -> OperandWords:
    """Emit the four operand sets of ``words`` packed words each, for data ``mode``."""
    _check_mode(mode)
    fmt = FORMATS[fmt_name]
    if fmt.sign is None and mode.startswith("sparse-"):
        # A zero byte's negation would carry into its neighbour; INT8 sparsity is not offered.
        raise ValueError(f"sparse operand data is offered for floating-point formats, not {fmt_name}")
    kb = frame.kb
    zero = kb.reg("b32")
    kb.emit(f"not.b32 {zero}, {frame.never};")  # never is all ones at run time
    rng = _Rng(frame, seed_base, zero)
    pool: list[str] = []
    if mode.startswith("sparse-"):
        pool = [rng.bits(int(mode[7:])) for _ in range(-(-2 * words // 8))]
    base = fmt.one if fmt.sign is not None else fmt.element_lsb()
    toggle0 = toggle = ""
    if mode.startswith("toggle-"):
        # One value for every word of every thread, and one mask: the toggle rate between
        # consecutive operands is exactly the mode's, with no variation inside a set.
        uni = _Rng(frame, seed_base, zero, uniform=True)
        toggle0, toggle = kb.reg("b32"), kb.reg("b32")
        kb.emit(f"and.b32 {toggle0}, {uni.word()}, {fmt.free:#x};", f"or.b32 {toggle0}, {toggle0}, {base:#x};")
        kb.emit(f"and.b32 {toggle}, {uni.bits(int(mode[7:]))}, {fmt.free:#x};")
    s0: list[str] = []
    s1: list[str] = []
    for i in range(words):
        w0, w1 = kb.reg("b32"), kb.reg("b32")
        if mode == "zeros":
            kb.emit(f"mov.b32 {w0}, {zero};", f"mov.b32 {w1}, {zero};")
        elif mode == "ones":
            kb.emit(f"xor.b32 {w0}, {zero}, {fmt.one:#x};", f"xor.b32 {w1}, {zero}, {fmt.one:#x};")
        elif toggle:
            kb.emit(f"mov.b32 {w0}, {toggle0};", f"xor.b32 {w1}, {toggle0}, {toggle};")
        else:
            kb.emit(f"and.b32 {w0}, {rng.word()}, {fmt.free:#x};", f"or.b32 {w0}, {w0}, {base:#x};")
            kb.emit(f"and.b32 {w1}, {rng.word()}, {fmt.free:#x};", f"or.b32 {w1}, {w1}, {base:#x};")
            if mode.startswith("sparse-"):
                _sparsify(frame, pool, fmt, w0, 2 * i)
                _sparsify(frame, pool, fmt, w1, 2 * i + 1)
        s0.append(w0)
        s1.append(w1)
    n0 = [_negate(frame, fmt, w) for w in s0]
    n1 = [_negate(frame, fmt, w) for w in s1]
    return OperandWords([s0, s1, n0, n1])

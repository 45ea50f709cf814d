"""Host-side checks of kernel outputs: poison detection, the liveness word, exact and periodic references."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from archline.characterize.kernels.ptx import LIVE_SEED, SEED_MUL, SEED_STEP, RegClass
from archline.core.kernel import VerifyFn

__all__ = [
    "MASK32",
    "Reject",
    "State",
    "advance_periodic",
    "affine_power",
    "apply_affine",
    "check_equal",
    "check_live",
    "expected_live",
    "out_words",
    "seed_words",
    "untouched",
    "verifier",
    "words_of",
    "xor_upto",
]

MASK32 = np.uint64(0xFFFFFFFF)

#: One chain's state: one array per state register, in the simulation dtype of its class
#: (uint32/uint64 for integers, float32/float64 for f32/f64, uint16 bit patterns for b16).
State = list[NDArray[np.generic]]


class Reject(Exception):
    """Raised inside a verifier with the one-line reason the output is wrong."""


def verifier(fn: Callable[[Mapping[str, NDArray[np.generic]], Mapping[str, float | int]], None]) -> VerifyFn:
    """Wrap a checker that raises :class:`Reject` into the ``VerifyFn`` contract (reason or None)."""

    @functools.wraps(fn)
    def wrapped(outputs: Mapping[str, NDArray[np.generic]], scalars: Mapping[str, float | int]) -> str | None:
        try:
            fn(outputs, scalars)
        except Reject as exc:
            return str(exc)
        except (KeyError, ValueError, IndexError, TypeError) as exc:
            return f"output or scalars malformed: {type(exc).__name__}: {exc}"
        return None

    return wrapped


def xor_upto(n: int) -> int:
    """XOR of 0, 1, …, n−1 (the liveness word's contribution after n trips)."""
    m = n - 1
    if m < 0:
        return 0
    return (m, 1, m + 1, 0)[m % 4] & 0xFFFFFFFF


def expected_live(seed: int, iters: int) -> int:
    """Liveness word after ``iters`` trips (see :class:`archline.characterize.kernels.ptx.Frame`)."""
    return (seed ^ LIVE_SEED ^ xor_upto(iters)) & 0xFFFFFFFF


def seed_words(threads: int | NDArray[np.integer], seed: int, j: int) -> NDArray[np.uint64]:
    """Host mirror of ``Frame.seed_word(j)`` for every thread (or for the given thread indices)."""
    g = np.arange(threads, dtype=np.uint64) if isinstance(threads, int) else np.asarray(threads).astype(np.uint64)
    return np.asarray((g * np.uint64(SEED_MUL) + np.uint64((seed + j * SEED_STEP) & 0xFFFFFFFF)) & MASK32)


def untouched(raw: NDArray[np.generic]) -> str | None:
    """A reason if ``raw`` still holds a uniform fill (all 0x00 or all 0xFF bytes)."""
    b = np.ascontiguousarray(raw).view(np.uint8)
    if b.size == 0:
        return "output buffer is empty"
    if not b.any():
        return "output untouched (all bytes 0x00)"
    if bool((b == 0xFF).all()):
        return "output untouched (all bytes 0xFF)"
    return None


def out_words(
    outputs: Mapping[str, NDArray[np.generic]], threads: int, words: int, name: str = "out"
) -> NDArray[np.uint32]:
    """The ``out`` buffer as a (words, threads) uint32 array, after the poison check."""
    raw = outputs[name]
    why = untouched(raw)
    if why:
        raise Reject(f"{name}: {why}")
    flat = np.ascontiguousarray(raw).view(np.uint32).reshape(-1)
    need = words * threads
    if flat.size < need:
        raise Reject(f"{name}: {flat.size} words copied back, expected {need}")
    return flat[:need].reshape(words, threads)


def check_live(out: NDArray[np.uint32], seed: int, iters: int) -> None:
    want = expected_live(seed, iters)
    bad = np.flatnonzero(out[0] != np.uint32(want))
    if bad.size:
        t = int(bad[0])
        raise Reject(
            f"loop ran the wrong number of trips: liveness word of thread {t} is {int(out[0, t]):#010x},"
            f" expected {want:#010x} for iters={iters} ({bad.size} threads differ)"
        )


def words_of(value: NDArray[np.generic], cls: RegClass) -> list[NDArray[np.uint32]]:
    """The 32-bit output words a value of class ``cls`` is stored as (see ``Frame.finish``)."""
    if cls in ("b64", "f64"):
        u = np.ascontiguousarray(value).view(np.uint64) if value.dtype.itemsize == 8 else value.astype(np.uint64)
        return [(u & MASK32).astype(np.uint32), (u >> np.uint64(32)).astype(np.uint32)]
    if cls == "b16":
        return [np.ascontiguousarray(value).view(np.uint16).astype(np.uint32)]
    if value.dtype == np.float32:
        return [np.ascontiguousarray(value).view(np.uint32)]
    return [np.asarray(value, dtype=np.uint64).astype(np.uint32)]


def check_equal(label: str, got: NDArray[np.uint32], want: NDArray[np.uint32]) -> None:
    """Exact word-for-word comparison with a one-line reason naming the first differing thread."""
    bad = np.flatnonzero(got != want)
    if bad.size:
        t = int(bad[0])
        raise Reject(f"{label}: thread {t} has {int(got[t]):#010x}, expected {int(want[t]):#010x} ({bad.size} differ)")


# --------------------------------------------------------------------------- exact references


def affine_power(a: Sequence[Sequence[int]], b: Sequence[int], n: int, bits: int) -> tuple[list[list[int]], list[int]]:
    """The map ``v -> A v + b (mod 2^bits)`` applied ``n`` times, as (A^n, b_n)."""
    mod = 1 << bits
    d = len(b)
    # Augmented (d+1)x(d+1) matrix [[A, b], [0, 1]], raised by repeated squaring.
    m = [[a[i][j] % mod for j in range(d)] + [b[i] % mod] for i in range(d)] + [[0] * d + [1]]
    r = [[int(i == j) for j in range(d + 1)] for i in range(d + 1)]

    def mul(x: list[list[int]], y: list[list[int]]) -> list[list[int]]:
        return [[sum(x[i][k] * y[k][j] for k in range(d + 1)) % mod for j in range(d + 1)] for i in range(d + 1)]

    while n:
        if n & 1:
            r = mul(r, m)
        m = mul(m, m)
        n >>= 1
    return [row[:d] for row in r[:d]], [row[d] for row in r[:d]]


def apply_affine(
    a: Sequence[Sequence[int]], b: Sequence[int], state: Sequence[NDArray[np.generic]], bits: int
) -> list[NDArray[np.uint64]]:
    """``A v + b (mod 2^bits)`` elementwise over threads (uint64 wrap-around is exact mod 2^bits)."""
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    vs = [np.asarray(v).astype(np.uint64) for v in state]
    out: list[NDArray[np.uint64]] = []
    with np.errstate(over="ignore"):
        for i in range(len(b)):
            acc = np.full_like(vs[0], np.uint64(b[i] & int(mask)))
            for j, v in enumerate(vs):
                acc = acc + np.uint64(a[i][j] & int(mask)) * v
            out.append(acc & mask)
    return out


StepFn = Callable[[State], State]


def advance_periodic(step: StepFn, state: State, n: int, *, transient: int = 8, max_period: int = 16) -> State:
    """``step`` applied ``n`` times, for maps whose orbits settle into short cycles.

    Simulates up to ``transient + max_period`` steps; past that, each thread's cycle length is
    found by comparing states bit for bit and ``n`` is reduced modulo it. Raises
    :class:`Reject` if some thread has not entered a cycle of at most ``max_period`` steps.
    """
    if n <= transient + max_period:
        for _ in range(n):
            state = step(state)
        return state
    cur = state
    for _ in range(transient):
        cur = step(cur)
    ref = [np.ascontiguousarray(s).copy() for s in cur]
    history: list[State] = [ref]
    period = np.zeros(ref[0].shape, dtype=np.int64)
    for p in range(1, max_period + 1):
        cur = step(cur)
        history.append(cur)
        same = np.ones(ref[0].shape, dtype=bool)
        for x, y in zip(cur, ref, strict=True):
            same &= _bits(x) == _bits(y)
        period[(period == 0) & same] = p
    if (period == 0).any():
        if transient < 128:
            return advance_periodic(step, state, n, transient=transient * 8, max_period=max_period * 4)
        raise Reject(f"host reference: the chain did not settle into a cycle of <= {max_period} steps")
    k = (n - transient) % period
    out: State = []
    for comp in range(len(ref)):
        stacked = np.stack([h[comp] for h in history])
        out.append(np.take_along_axis(stacked, k[None, :], axis=0)[0])
    return out


def _bits(x: NDArray[np.generic]) -> NDArray[np.generic]:
    if x.dtype.kind == "f":
        return np.ascontiguousarray(x).view(np.dtype(f"u{x.dtype.itemsize}"))
    return x

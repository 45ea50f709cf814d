"""Bit-exact host emulation of the few GPU number formats and operations the chains use."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "bf16_from_f32",
    "bf16_to_f32",
    "f16_from_f32",
    "f16_to_f32",
    "f32",
    "f64",
    "join_x2",
    "split_x2",
]


def f32(x: NDArray[np.generic]) -> NDArray[np.float32]:
    return np.asarray(x).astype(np.float32)


def f64(x: NDArray[np.generic]) -> NDArray[np.float64]:
    return np.asarray(x).astype(np.float64)


def f16_to_f32(bits: NDArray[np.generic]) -> NDArray[np.float32]:
    return np.asarray(bits).astype(np.uint16).view(np.float16).astype(np.float32)


def f16_from_f32(x: NDArray[np.float32]) -> NDArray[np.uint16]:
    """Round an f32 to f16 (IEEE round-to-nearest-even, as numpy's cast does)."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def bf16_to_f32(bits: NDArray[np.generic]) -> NDArray[np.float32]:
    return np.asarray((np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32))


def bf16_from_f32(x: NDArray[np.float32]) -> NDArray[np.uint16]:
    """Round an f32 to bf16 with round-to-nearest-even (NaNs are not produced by the chains)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bias = ((u >> np.uint64(16)) & np.uint64(1)) + np.uint64(0x7FFF)
    return np.asarray(((u + bias) >> np.uint64(16)).astype(np.uint16))


def split_x2(word: NDArray[np.generic]) -> tuple[NDArray[np.uint16], NDArray[np.uint16]]:
    """The low and high 16-bit halves of packed ``.f16x2``/``.bf16x2`` words."""
    w = np.asarray(word).astype(np.uint32)
    return (w & np.uint32(0xFFFF)).astype(np.uint16), (w >> np.uint32(16)).astype(np.uint16)


def join_x2(lo: NDArray[np.generic], hi: NDArray[np.generic]) -> NDArray[np.uint32]:
    return np.asarray(np.asarray(lo).astype(np.uint32) | (np.asarray(hi).astype(np.uint32) << np.uint32(16)))

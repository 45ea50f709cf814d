"""The host-side arithmetic behind verify: closed forms, cycle detection, seeds and the poison check."""

from __future__ import annotations

import numpy as np
import pytest

from archline.characterize.kernels.verify import (
    Reject,
    advance_periodic,
    affine_power,
    apply_affine,
    expected_live,
    untouched,
    xor_upto,
)


def test_xor_upto_matches_a_loop() -> None:
    acc = 0
    for n in range(40):
        assert xor_upto(n) == acc
        acc ^= n


def test_liveness_word_changes_with_every_trip() -> None:
    assert len({expected_live(0x1234, n) for n in range(1, 200)}) > 100


def test_affine_power_matches_repeated_steps() -> None:
    rng = np.random.default_rng(3)
    a, b = [[3, 1], [7, 2]], [5, 11]
    v = [rng.integers(0, 2**32, 64, dtype=np.uint64), rng.integers(0, 2**32, 64, dtype=np.uint64)]
    slow = [x.copy() for x in v]
    for _ in range(37):
        slow = apply_affine(a, b, slow, 32)
    an, bn = affine_power(a, b, 37, 32)
    fast = apply_affine(an, bn, v, 32)
    for x, y in zip(slow, fast, strict=True):
        assert np.array_equal(x, y)


def test_affine_power_wraps_at_64_bits() -> None:
    an, bn = affine_power([[1, 1], [1, 2]], [0, 0], 500, 64)
    v = [np.array([1], np.uint64), np.array([2], np.uint64)]
    a, b = 1, 2
    for _ in range(500):
        a = (a + b) % 2**64
        b = (b + a) % 2**64
    got = apply_affine(an, bn, v, 64)
    assert int(got[0][0]) == a and int(got[1][0]) == b


def test_periodic_advance_matches_direct_simulation() -> None:
    def step(st: list[np.ndarray]) -> list[np.ndarray]:
        x = st[0]
        return [np.where(x == 0, np.uint32(0xFFFFFFFF), np.floor(np.log2(np.maximum(x, 1))).astype(np.uint32))]

    start = [np.array([0, 1, 5, 1000, 2**31], np.uint32)]
    direct = [start[0].copy()]
    for _ in range(1234):
        direct = step(direct)
    assert np.array_equal(advance_periodic(step, start, 1234)[0], direct[0])


def test_periodic_advance_rejects_long_orbits() -> None:
    def step(st: list[np.ndarray]) -> list[np.ndarray]:
        return [st[0] + np.uint64(1)]

    with pytest.raises(Reject):
        advance_periodic(step, [np.zeros(3, np.uint64)], 10_000)


def test_untouched_detects_both_fills() -> None:
    assert untouched(np.zeros(8, np.uint32)) is not None
    assert untouched(np.full(8, 0xFFFFFFFF, np.uint32)) is not None
    assert untouched(np.arange(8, dtype=np.uint32)) is None

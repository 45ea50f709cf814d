"""Chain references stay consistent over runner-sized trip counts, where the CPU cannot simulate."""

from __future__ import annotations

import numpy as np
import pytest

from archline.characterize.kernels.chains import Reference, seed_state_np, state_words
from archline.characterize.kernels.instructions import INSTRUCTION_KEYS, instruction_chain
from archline.characterize.kernels.ptx import SEED

LONG = 10**7 + 3


def _advance(ref: Reference, key: str, n: int) -> list[np.ndarray] | None:
    defn = instruction_chain(key)
    start = seed_state_np(defn, 256, SEED, 0)
    return ref.advance(start, n, defn.ops(), 256)


@pytest.mark.parametrize("key", INSTRUCTION_KEYS)
def test_long_runs_compose(key: str) -> None:
    defn = instruction_chain(key)
    classes = [cls for _, cls, _ in defn.state]
    for ref in (defn.ref, defn.overhead_ref):
        whole = _advance(ref, key, LONG)
        if whole is None:
            continue
        head = _advance(ref, key, LONG - 5)
        assert head is not None
        tail = ref.advance(head, 5, defn.ops(), 256)
        assert tail is not None
        for a, b in zip(state_words(whole, classes), state_words(tail, classes), strict=True):
            assert np.array_equal(a, b), key


WITH_DOMAIN = [
    k for k in INSTRUCTION_KEYS if instruction_chain(k).ref.domain is not None and instruction_chain(k).ref.exact
]


@pytest.mark.parametrize("key", WITH_DOMAIN)
def test_domain_checks_accept_a_true_state(key: str) -> None:
    defn = instruction_chain(key)
    assert defn.ref.domain is not None
    state = _advance(defn.ref, key, 50)
    assert state is not None
    assert defn.ref.domain(state, defn.ops()) is None

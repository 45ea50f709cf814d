"""verify accepts what the emitted PTX computes (run in a CPU interpreter) and rejects bad output."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.kernel_meta import exact_result
from tests.helpers.kernel_suite import simulated, tiny_specs
from tests.helpers.ptx_sim import poisoned

#: The CPU interpreter has no tensor cores: the MMA kernels' verifiers are tested on synthetic
#: outputs in test_tensor_kernels.py, and run for real on every GPU measurement.
NAMES = sorted(n for n, s in tiny_specs().items() if not {"mma.sync", "wgmma"} & set(s.tags))


@pytest.mark.parametrize("name", NAMES)
def test_verify_accepts_the_simulated_output(name: str) -> None:
    spec = tiny_specs()[name]
    assert spec.verify is not None
    run = simulated(name, 2)
    assert spec.verify(run.outputs, run.scalars) is None


@pytest.mark.parametrize("name", NAMES)
def test_verify_rejects_untouched_and_miscounted_output(name: str) -> None:
    spec = tiny_specs()[name]
    assert spec.verify is not None
    run = simulated(name, 2)
    for fill in (0x00, 0xFF):
        reason = spec.verify(poisoned(run.outputs, fill), run.scalars)
        assert reason is not None
        assert "\n" not in reason
    longer = simulated(name, 3)
    assert spec.verify(longer.outputs, run.scalars) is not None


@pytest.mark.parametrize("name", [n for n in NAMES if exact_result(tiny_specs()[n])])
def test_verify_rejects_a_corrupted_result_word(name: str) -> None:
    spec = tiny_specs()[name]
    assert spec.verify is not None
    run = simulated(name, 2)
    bad = {k: np.array(v, copy=True) for k, v in run.outputs.items()}
    threads = int(run.scalars["threads"])
    if "dst" in bad:
        bad["dst"].view(np.uint32)[1] ^= np.uint32(1)
    elif "ctr" in bad:
        bad["ctr"].view(np.uint32)[0] ^= np.uint32(1)
    else:
        words = bad["out"].view(np.uint32)
        words[words.size // threads * threads - threads] ^= np.uint32(1)
    assert spec.verify(bad, run.scalars) is not None

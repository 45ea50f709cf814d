"""Held-out workloads: counted W and Q by hand, and their output checks on a numpy stand-in for CuPy."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from archline.characterize.workloads import Gemm, Reduction, Stencil5, Triad, Workload, default_workloads
from archline.errors import BenchmarkError, GPUUnavailableError
from tests.helpers.fake_cupy import make_fake_cupy


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", make_fake_cupy())


def test_counts_by_hand() -> None:
    t = Triad(n=1000, precision="double")
    assert (t.flops, t.dram_bytes) == (2000.0, 3 * 8 * 1000.0)
    g = Gemm(n=4096, precision="single")
    assert g.flops == 2 * 4096**3
    assert g.dram_bytes == 3 * 4 * 4096**2
    assert g.cache_bytes == 2 * 4096**3 / 128 * 4
    assert "lower bound" in g.note
    s = Stencil5(n=10)
    assert s.flops == 5 * 8 * 8 and s.dram_bytes == 2 * 4 * 100
    r = Reduction(n=1 << 10)
    assert r.flops == 1023 and r.dram_bytes == 1025 * 4


def test_default_set_covers_every_kind() -> None:
    names = [w.name for w in default_workloads((1024, 2048))]
    assert len(set(names)) == len(names)
    for stem in ("triad.fp32", "triad.fp64", "reduce.sum", "stencil5", "sgemm.n1024", "sgemm.n2048", "dgemm.n2048"):
        assert any(n.startswith(stem) for n in names), stem


def test_heldout_row_carries_the_counts() -> None:
    g = Gemm(n=1024, precision="double")
    row = g.heldout_row(0.01, 5.0, 0.05)
    assert (row.name, row.precision, row.flops, row.bytes) == (g.name, "double", g.flops, g.dram_bytes)
    assert row.cache_bytes == g.cache_bytes and row.energy_uncertainty_j == 0.05


@pytest.mark.parametrize(
    ("w", "inputs"),
    [
        (Triad(n=4096), ("b", "c")),
        (Triad(n=4096, precision="double"), ("b", "c")),
        (Reduction(n=1 << 14), ("x",)),
        (Gemm(n=96), ("a", "b")),
        (Gemm(n=64, precision="double"), ("a", "b")),
        (Stencil5(n=66), ("x",)),
    ],
    ids=lambda x: getattr(x, "name", ""),
)
def test_run_then_check_passes_and_inputs_are_random(fake_cupy: None, w: Workload, inputs: tuple[str, ...]) -> None:
    w.setup()
    for name in inputs:
        x = np.asarray(getattr(w, name))
        assert np.count_nonzero(x) == x.size  # never zeros
        assert np.unique(x).size > x.size // 2  # random, not a constant fill
    w.run()
    w.check()
    w.teardown()
    assert not any(hasattr(v, "__cuda_array_interface__") for v in vars(w).values())


@pytest.mark.parametrize(
    ("w", "output"),
    [(Triad(n=4096), "a"), (Reduction(n=1 << 14), "out"), (Gemm(n=96), "c"), (Stencil5(n=66), "y")],
    ids=lambda x: getattr(x, "name", x),
)
def test_check_catches_a_wrong_output(fake_cupy: None, w: Workload, output: str) -> None:
    w.setup()
    w.run()
    out = getattr(w, output)
    out[...] = 0  # what an output left untouched (or zeroed) looks like
    with pytest.raises(BenchmarkError, match=f"{w.name}: output check failed"):
        w.check()


def test_missing_cupy_is_a_one_line_gpu_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(GPUUnavailableError, match="CuPy is not installed"):
        Triad(n=10).setup()

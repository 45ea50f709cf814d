"""The benchmark runner on a fake GPU: calibration, figures, verification and failure rows."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from archline.characterize.runner import POISON_BYTE, Runner, RunnerOptions
from archline.core.kernel import Arg, KernelSpec, Launch, Work
from tests.helpers.fake_gpu import FakeClock, FakeExecutor, FakeSampler


def _spec(verify: Any = None) -> KernelSpec:
    return KernelSpec(
        name="arith.fake.fma",
        group="arithmetic",
        description="fake FMA kernel",
        ptx="// fake",
        entry="fake",
        args=(
            Arg("out", "ptr", "out", per_thread_bytes=4),
            Arg("iters", "u32", "iters"),
            Arg("seed", "u32", "scalar", value=7),
        ),
        work=Work(unit="fp32", ops=1024.0, flops=2048.0),
        launch=Launch(block=256, blocks_per_sm=8),
        verify=verify,
        spec_key="fp32_fma",
    )


def _runner(ex: FakeExecutor, **opts: Any) -> Runner:
    sampler = FakeSampler(ex)
    return Runner(ex, sampler, RunnerOptions(**opts), clock=ex.clock)  # type: ignore[arg-type]


def test_calibrates_iterations_to_target_duration() -> None:
    ex = FakeExecutor(FakeClock(), s_per_iter=3e-6, iters_index=0)
    run = _runner(ex, target_s=0.5, verify=False).run(_spec())
    row = run.row
    assert row["status"] == "ok"
    assert row["launches"] * row["time_s"] == pytest.approx(0.5, rel=0.05)
    assert row["iters"] * 3e-6 == pytest.approx(row["time_s"], rel=1e-9)


def test_figures_follow_from_counts_clock_and_power() -> None:
    ex = FakeExecutor(FakeClock(), s_per_iter=1e-5, iters_index=0, busy_power_w=300.0, idle_power_w=100.0)
    row = _runner(ex, target_s=1.0, verify=False).run(_spec()).row
    threads = 132 * 8 * 256
    ops = 1024.0 * row["iters"] * threads
    assert row["ops"] == pytest.approx(ops)
    expected_rate = ops / (row["time_s"] * 1980e6 * 132)
    assert row["ops_per_clk_per_sm"] == pytest.approx(expected_rate, rel=1e-9)
    # Ideal averaging sensor: board energy = 300 W × time, idle 100 W before it.
    assert row["avg_power_w"] == pytest.approx(300.0, rel=0.02)
    assert row["energy_j"] == pytest.approx(300.0 * row["time_s"], rel=0.02)
    assert row["idle_power_w"] == pytest.approx(100.0, rel=1e-6)
    assert row["dynamic_energy_j"] == pytest.approx(200.0 * row["time_s"], rel=0.03)
    assert row["nj_per_op"] == pytest.approx(row["energy_j"] / ops * 1e9)
    assert row["resolvable"] is True


def test_out_buffers_are_poisoned_so_an_unwritten_output_fails() -> None:
    seen: dict[str, Any] = {}

    def verify(outs: Mapping[str, np.ndarray], scalars: Mapping[str, float]) -> str | None:
        seen["out"] = outs["out"].copy()
        seen["scalars"] = dict(scalars)
        return None if np.all(outs["out"] == 7) else "not all 7"

    ex = FakeExecutor(FakeClock(), iters_index=0)
    row = _runner(ex, target_s=0.1).run(_spec(verify)).row
    assert row["verified"] is False and row["status"] == "failed"
    assert "output check failed: not all 7" in row["note"]
    assert np.all(seen["out"].view(np.uint8) == POISON_BYTE)
    assert seen["scalars"]["seed"] == 7 and seen["scalars"]["threads"] == 132 * 8 * 256


def test_a_correct_output_verifies() -> None:
    def writer(args: Any) -> dict[int, np.ndarray]:
        buf = args[0][1]
        return {buf: np.full(132 * 8 * 256, 7, dtype=np.uint32)}

    def verify(outs: Mapping[str, np.ndarray], scalars: Mapping[str, float]) -> str | None:
        return None if np.all(outs["out"] == 7) else "wrong"

    ex = FakeExecutor(FakeClock(), iters_index=0, writer=writer)
    row = _runner(ex, target_s=0.1).run(_spec(verify)).row
    assert row["verified"] is True and row["status"] == "ok"


def test_build_failure_becomes_a_failed_row() -> None:
    from archline.errors import BenchmarkError

    class Broken(FakeExecutor):
        def load(self, ptx: str, entry: str, *, opt_level: int = 3) -> Any:
            raise BenchmarkError("building kernel 'fake' at -O3 for sm_90 failed: syntax error")

    ex = Broken(FakeClock())
    row = _runner(ex).run(_spec()).row
    assert row["status"] == "failed"
    assert "syntax error" in row["note"]
    assert row["name"] == "arith.fake.fma"


def test_short_kernel_is_flagged_unresolvable() -> None:
    ex = FakeExecutor(FakeClock(), s_per_iter=1e-6, iters_index=0)
    run = _runner(ex, target_s=0.01, calib_min_s=0.001, verify=False).run(_spec())
    assert run.row["resolvable"] is False
    assert run.row["note"]  # the row says why
    assert math.isfinite(run.row["energy_j"])

"""The Python API on a real-time simulated GPU: measure() regions and measure_callable()."""

from __future__ import annotations

import pytest

import archline
from tests.helpers.live_sensor import AveragingLiveSensor, LiveGPU


def test_measure_regions_match_the_true_energy() -> None:
    gpu = LiveGPU()
    clock = gpu.clock
    with archline.measure(sources=[AveragingLiveSensor(gpu)], sync=lambda: None, settle_s=0.3, clock=clock) as m:
        clock.sleep(0.3)
        with m.region("work"), gpu.busy():
            clock.sleep(0.6)
        clock.sleep(0.3)
    work = m.regions["work"]
    truth = gpu.energy_j(work.start_s, work.end_s)
    assert work.energy_j == pytest.approx(truth, rel=0.03)
    assert work.resolvable
    assert abs(work.energy_j - truth) <= 3 * work.energy_uncertainty_j + 0.01 * truth
    assert m.duration_s > 1.1
    assert m.energy_j == pytest.approx(gpu.energy_j(m._total.start_s, m._total.end_s), rel=0.03)  # type: ignore[union-attr]


def test_repeated_region_names_are_kept_apart() -> None:
    gpu = LiveGPU()
    with archline.measure(sources=[AveragingLiveSensor(gpu)], sync=lambda: None, settle_s=0.1, clock=gpu.clock) as m:
        for _ in range(2):
            with m.region("step"):
                gpu.clock.sleep(0.05)
    assert set(m.regions) == {"step", "step#2"}


def test_results_before_the_end_are_refused() -> None:
    m = archline.measure(sources=[], sync=lambda: None)
    with pytest.raises(RuntimeError):
        _ = m.energy_j


def test_measure_callable_gives_one_calls_energy() -> None:
    gpu = LiveGPU()

    def call() -> None:
        with gpu.busy():
            gpu.clock.sleep(0.004)

    res = archline.measure_callable(
        call,
        sources=[AveragingLiveSensor(gpu)],
        sync=lambda: None,
        target_rel_error=0.05,
        max_total_s=6,
        clock=gpu.clock,
    )
    assert res.calls >= res.repetitions >= 3
    assert res.calls_per_repetition * res.time_s >= 10 * 0.02 * 0.9  # spans ~10 sensor updates
    rec = res.trace
    assert rec is not None
    reps = [r for r in rec.regions if r.name.startswith("rep")]
    truth = sum(gpu.energy_j(r.start_s, r.end_s) for r in reps) / res.calls
    assert res.energy_j == pytest.approx(truth, rel=0.05)
    assert res.time_s == pytest.approx(sum(r.duration_s for r in reps) / res.calls)

"""measure(gpu=[0, 1]): one sampler per GPU over the same span, energies per GPU and in total."""

from __future__ import annotations

import pytest

from archline.measurement.api import Measurement
from archline.measurement.multi import MultiMeasurement
from tests.helpers.fake_gpu import FakeClock
from tests.helpers.live_sensor import AveragingLiveSensor, LiveGPU


def test_two_gpus_measured_at_once() -> None:
    clock = FakeClock()  # one host clock for both GPUs, moving only when slept
    gpus = {0: LiveGPU(clock=clock), 1: LiveGPU(clock=clock)}

    def make(g: int) -> Measurement:
        return Measurement(
            gpu=g, sources=[AveragingLiveSensor(gpus[g])], sync=lambda: None, settle_s=0.3, clock=clock, pre_s=0.0
        )

    with MultiMeasurement([0, 1], make) as mm:
        clock.sleep(0.3)
        with mm.region("work"), gpus[1].busy():
            clock.sleep(0.6)
        clock.sleep(0.3)
    e = {g: m.energy_j for g, m in mm.per_gpu.items()}
    for g, m in mm.per_gpu.items():
        t = m._total  # type: ignore[attr-defined]
        assert e[g] == pytest.approx(gpus[g].energy_j(t.start_s, t.end_s), rel=0.03)
    assert e[1] is not None and e[0] is not None and e[1] > e[0] * 1.2  # only GPU 1 worked
    assert mm.energy_j == pytest.approx(e[0] + e[1])
    u = [m.energy_uncertainty_j for m in mm.per_gpu.values()]
    assert mm.energy_uncertainty_j == pytest.approx((u[0] ** 2 + u[1] ** 2) ** 0.5)  # type: ignore[operator]
    assert set(mm.per_gpu[0].regions) == {"work"} == set(mm.per_gpu[1].regions)


def test_measure_with_a_list_gives_several_gpus() -> None:
    import archline

    m = archline.measure(gpu=[0, 1], sync=lambda: None)  # each GPU reads its own sensors (opened on entry)
    assert isinstance(m, MultiMeasurement) and sorted(m.per_gpu) == [0, 1]
    with pytest.raises(ValueError, match="at least one GPU"):
        MultiMeasurement([], lambda g: Measurement(gpu=g))

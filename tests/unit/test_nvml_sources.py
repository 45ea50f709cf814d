"""NVML sources against a fake pynvml: units, draining, and the mapping of every NVML error."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from archline.errors import GPUUnavailableError, NVMLUnavailableError, PermissionDeniedError, UnknownNameError
from archline.hw import nvml
from tests.helpers.fake_gpu import FakeClock
from tests.helpers.fake_nvml import make_fake_nvml


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def install(**kw):  # type: ignore[no-untyped-def]
        m = make_fake_nvml(**kw)
        monkeypatch.setitem(sys.modules, "pynvml", m)
        return m

    return install


def test_no_driver_is_one_clear_error(fake) -> None:  # type: ignore[no-untyped-def]
    fake(init_error=9)
    with pytest.raises(NVMLUnavailableError, match="no NVIDIA driver"):
        nvml.NVMLSession(0)


def test_bad_gpu_index_names_the_range(fake) -> None:  # type: ignore[no-untyped-def]
    fake(count=2)
    with pytest.raises(GPUUnavailableError, match=r"no GPU with index 5 \(this machine has 2: 0..1\)"):
        nvml.NVMLSession(5)


def test_no_gpu(fake) -> None:  # type: ignore[no-untyped-def]
    fake(count=0)
    with pytest.raises(GPUUnavailableError, match="no NVIDIA GPU"):
        nvml.NVMLSession(0)


def test_buffer_drains_new_samples_in_watts_and_seconds(fake) -> None:  # type: ignore[no-untyped-def]
    m = fake()
    m.state["samples"] = [(999_990, 50_000), (1_000_010, 100_000), (1_000_030, 250_000)]
    session = nvml.NVMLSession(0, clock=FakeClock(1.0))  # "now" = 1e6 µs
    (src,) = nvml.open_sources(session, ["nvml.buffer"])
    r = src.read()
    np.testing.assert_allclose(r.t_s, [1.00001, 1.00003])
    np.testing.assert_allclose(r.value, [100.0, 250.0])
    assert len(src.read()) == 0  # NVML_ERROR_NOT_FOUND: nothing new
    m.state["samples"].append((1_000_050, 300_000))
    assert src.read().value.tolist() == [300.0]
    src.close()
    session.close()
    assert m.state["init"] == 0


def test_buffer_catches_a_sample_filed_after_a_newer_one(fake) -> None:  # type: ignore[no-untyped-def]
    from archline.core.readings import Readings

    m = fake()
    m.state["samples"] = [(1_000_010, 100_000), (1_000_050, 300_000)]
    (src,) = nvml.open_sources(nvml.NVMLSession(0, clock=FakeClock(1.0)), ["nvml.buffer"])
    first = src.read()
    assert first.value.tolist() == [100.0, 300.0]
    # The driver files the sample stamped 1_000_030 only now, after 1_000_050 was read.
    m.state["samples"].insert(1, (1_000_030, 200_000))
    late = src.read()
    assert late.value.tolist() == [200.0]
    assert len(src.read()) == 0  # nothing is returned twice
    joined = Readings.concat([first, late])
    np.testing.assert_allclose(joined.t_s, [1.00001, 1.00003, 1.00005])
    assert joined.value.tolist() == [100.0, 200.0, 300.0]
    src.close()


def test_energy_counter_is_cumulative_joules_and_blocking(fake) -> None:  # type: ignore[no-untyped-def]
    fake(energy_mj=2_500)
    (src,) = nvml.open_sources(0, ["nvml.energy"])
    assert src.blocking and src.quantity == "energy"
    assert src.read().value.tolist() == [2.5]


def test_permission_denied_is_translated(fake) -> None:  # type: ignore[no-untyped-def]
    fake(deny={"nvmlDeviceGetPowerUsage"})
    (src,) = nvml.open_sources(0, ["nvml.usage"])
    with pytest.raises(PermissionDeniedError, match="nvml.usage on GPU 0: permission denied"):
        src.read()


def test_shared_session_is_released_by_the_last_source(fake) -> None:  # type: ignore[no-untyped-def]
    m = fake()
    srcs = nvml.open_sources(0, ["nvml.instant", "nvml.average", "nvml.sm_clock"])
    assert m.state["init"] == 1
    for s in srcs[:-1]:
        s.close()
    assert m.state["init"] == 1
    srcs[-1].close()
    assert m.state["init"] == 0


def test_unknown_source(fake) -> None:  # type: ignore[no-untyped-def]
    m = fake()
    with pytest.raises(UnknownNameError, match="unknown NVML source 'nvml.volts'"):
        nvml.open_sources(0, ["nvml.volts"])
    assert m.state["init"] == 0


def test_throttle_decoding() -> None:
    names, slowed = nvml.decode_throttle(0x1 | 0x4)
    assert names == ["gpu_idle", "sw_power_cap"] and slowed
    assert nvml.decode_throttle(0x1) == (["gpu_idle"], False)


def test_polled_power_keeps_only_changes(fake) -> None:  # type: ignore[no-untyped-def]
    m = fake(power_mw=100_000)
    (src,) = nvml.open_sources(0, ["nvml.instant"])
    first = src.read()
    assert first.value.tolist() == [100.0]
    assert len(src.read()) == 0  # the same value polled again is not a new reading
    m.nvmlDeviceGetFieldValues = lambda h, ids: [
        type("F", (), {"nvmlReturn": 0, "value": type("V", (), {"uiVal": 150_000})})()
    ]
    again = src.read()
    assert again.value.tolist() == [150.0] and again.meta["polls"] == 3


def test_every_named_source_can_be_opened_and_no_other() -> None:
    from archline.core.recording import SOURCE_NAMES

    assert set(nvml.SOURCES) == set(SOURCE_NAMES)
    assert set(nvml.DEFAULT_SOURCES) <= set(SOURCE_NAMES)

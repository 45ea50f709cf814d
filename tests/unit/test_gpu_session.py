"""GPUSession on a fake NVML and a fake executor: the run directory is closed consistently whatever fails."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from archline.characterize.session import GPUSession
from archline.errors import UnknownNameError
from archline.hw import cuda, nvml
from archline.records import RunDir
from tests.helpers.fake_gpu import FakeClock, FakeExecutor
from tests.helpers.fake_nvml import make_fake_nvml


class _Executor(FakeExecutor):
    closed = 0

    def __init__(self, gpu: int) -> None:
        super().__init__(FakeClock())

    def close(self) -> None:
        type(self).closed += 1


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Any:
    m = make_fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", m)
    monkeypatch.setattr(nvml, "device_static", lambda s: {"name": "Fake H100", "uuid": "GPU-fake"})
    monkeypatch.setattr(nvml, "device_state", lambda s: {"sm_clock_mhz": 1980})
    _Executor.closed = 0
    monkeypatch.setattr(cuda, "CudaExecutor", _Executor)
    return m


def test_a_failure_after_the_run_directory_exists_marks_it_failed(fake_nvml: Any, tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError), GPUSession(0, tmp_path / "r", "characterize", sources=("nvml.bogus",)):
        pass
    m = RunDir.open(tmp_path / "r").manifest
    assert m.status == "failed" and m.finished_utc is not None
    assert any("could not start" in n and "nvml.bogus" in n for n in m.notes)
    assert _Executor.closed == 1
    assert fake_nvml.state["init"] == 0


def test_a_session_closes_complete_with_its_traces(fake_nvml: Any, tmp_path: Path) -> None:
    with GPUSession(0, tmp_path / "r", "characterize", sources=("nvml.sm_clock",)):
        pass
    rd = RunDir.open(tmp_path / "r")
    assert rd.manifest.status == "complete" and rd.manifest.state_after == {"sm_clock_mhz": 1980}
    assert (tmp_path / "r" / "traces.npz").is_file()
    assert _Executor.closed == 1
    assert fake_nvml.state["init"] == 0

"""GPUSession on a fake NVML and a fake executor: the run directory is closed consistently whatever fails."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from archline.characterize.session import GPUSession
from archline.errors import UnknownNameError
from archline.hw.nvml import NVMLSession
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
    _Executor.closed = 0
    return m


def _session(opened: list[NVMLSession]) -> Callable[[int], NVMLSession]:
    """The command's NVML session (on the fake clock), as the CLI hands it down; the test closes it."""

    def open_gpu(gpu: int) -> NVMLSession:
        opened.append(NVMLSession(gpu, clock=FakeClock()))
        return opened[-1]

    return open_gpu


def test_a_failure_after_the_run_directory_exists_marks_it_failed(fake_nvml: Any, tmp_path: Path) -> None:
    with (
        pytest.raises(UnknownNameError),
        GPUSession(0, tmp_path / "r", "characterize", sources=("nvml.bogus",), executor=_Executor),
    ):
        pass
    m = RunDir.open(tmp_path / "r").manifest
    assert m.status == "failed" and m.finished_utc is not None
    assert any("could not start" in n and "nvml.bogus" in n for n in m.notes)
    assert _Executor.closed == 1
    assert fake_nvml.state["init"] == 0  # its own NVML session was closed


def test_a_session_closes_complete_with_its_traces(fake_nvml: Any, tmp_path: Path) -> None:
    opened: list[NVMLSession] = []
    with GPUSession(
        0, tmp_path / "r", "characterize", sources=("nvml.sm_clock",), nvml=_session(opened), executor=_Executor
    ):
        pass
    rd = RunDir.open(tmp_path / "r")
    assert rd.manifest.status == "complete"
    assert rd.manifest.state_after["time_utc_s"] == opened[0].clock.now_s()  # read through the given session
    # On the fake clock the only time that passed is the sampler's settle time at the end.
    assert rd.manifest.gpu["name"] and rd.manifest.extra["wall_s"] == pytest.approx(0.1)
    assert (tmp_path / "r" / "traces.npz").is_file()
    assert _Executor.closed == 1
    assert len(opened) == 1 and fake_nvml.state["init"] == 1  # the caller's session stays open for the caller
    opened[0].close()
    assert fake_nvml.state["init"] == 0

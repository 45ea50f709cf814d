"""A replay that never ends (hw/sync_watchdog.py, replay.replay_hung): noticed once, one line, a failed run, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archline.hw.sync_watchdog import SyncWatchdog
from archline.measurement.attribute.replay import hang_message, replay_hung


def test_a_wait_longer_than_the_limit_is_a_hang_once_and_a_returned_one_is_not() -> None:
    t = [0.0]
    hung: list[float] = []
    w = SyncWatchdog(60.0, hung.append, now=lambda: t[0])
    assert not w.check()  # no wait under way
    w.begin()
    t[0] = 59.0
    assert not w.check()
    w.end()
    t[0] = 200.0
    assert not w.check() and hung == []  # the wait returned in time: nothing, however late it is now
    w.begin()
    t[0] = 261.5
    assert w.check() and hung == [61.5]
    t[0] = 400.0
    assert not w.check() and hung == [61.5]  # once
    with pytest.raises(ValueError):
        SyncWatchdog(0.0, hung.append)


def test_the_watchdog_thread_stops_when_asked() -> None:
    w = SyncWatchdog(60.0, lambda _s: None, poll_s=0.001).start()
    w.stop()
    assert w._thread is not None
    w._thread.join(timeout=30.0)  # returns as soon as the thread sees the stop; the timeout only guards a defect
    assert not w._thread.is_alive() and not w.fired


def test_a_hung_replay_finishes_its_run_as_failed_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from archline.records import Manifest, RunDir

    rd = RunDir.create(tmp_path / "r", Manifest.new("replay", gpu={"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-x"}))
    codes: list[int] = []
    group = "_ZN7cutlass6KernelI27cutlass_80_wmma_tensorop_s161gemmEEvNT_6ParamsE"
    replay_hung(rd, group, "timing", 61.4, exit_now=codes.append)
    assert codes == [2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("archline: error: a replay with nodes switched off did not finish")
    assert "within 61 s (timing each group: " in err[0] and "cutlass" in err[0]
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert any("did not finish within 61 s" in n for n in manifest["notes"])


def test_the_line_names_the_phase_alone_for_the_design_and_the_capture() -> None:
    assert "(the design's configurations)" in hang_message("[design]", "design", 75.0)
    assert "within 75 s" in hang_message("[design]", "design", 75.0)
    assert "(capturing the step as a CUDA graph)" in hang_message("[capture]", "capture", 61.0)

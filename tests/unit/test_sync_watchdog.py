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


def test_the_line_names_a_group_in_full() -> None:
    # a cut name hid which variant of a cuDNN weight-gradient kernel hung (session 29); replay's exclude needs it whole
    name = "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_split_k_kernel"
    msg = hang_message(name, "timing", 60.0)
    assert f": {name})" in msg and "\n" not in msg


def test_the_watchdog_thread_calls_on_hang_once_it_sees_a_long_wait() -> None:
    """The thread's own loop, without the wall clock: its stop event's wait returns False (time to look) twice."""
    t = [0.0]
    hung: list[float] = []
    w = SyncWatchdog(60.0, hung.append, now=lambda: t[0])

    class Looks:
        def __init__(self) -> None:
            self.n = 0

        def wait(self, _s: float) -> bool:
            self.n += 1
            t[0] += 40.0  # each look comes 40 s after the last
            return self.n > 5

        def set(self) -> None:
            pass

    w._stop = Looks()  # type: ignore[assignment]
    w.begin()
    w.start()
    assert w._thread is not None
    w._thread.join(timeout=30.0)  # the loop returns after its second look; the timeout only guards a defect
    assert hung == [80.0] and w.fired


def test_a_long_step_gets_a_longer_limit() -> None:
    from archline.measurement.attribute.replay import HANG_FACTOR, hang_limit_s

    assert hang_limit_s(60.0, 0.005, 12, 3.0) == 60.0  # a 5 ms step: the floor
    assert hang_limit_s(60.0, 6.0, 12, 3.0) == HANG_FACTOR * 72.0  # a 6 s step queued 12 times
    assert hang_limit_s(60.0, 0.0, 12, 5.0) == HANG_FACTOR * 5.0  # one long measurement


class _Graph:
    """A fake captured step standing in for capture_torch's, recording the watchdog's marks."""

    def __init__(self) -> None:
        from tests.helpers.fake_graph import FakeGraphGPU, FakeNode

        self.fake = FakeGraphGPU(
            [FakeNode("gemm", 0.004, 600.0), FakeNode("relu", 0.0005, 300.0), FakeNode("norm", 0.0015, 350.0)],
            fixed_s=0.002,
            fixed_w=120.0,
        )
        self.nodes, self.clock, self.switch_modes = self.fake.nodes, self.fake.clock, self.fake.switch_modes
        self.watchdog = None
        self.notes: list[str] = []
        self.kept_buffers, self.state, self.closed, self.marks = False, None, False, 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.fake, name)

    def replay(self) -> None:
        if self.watchdog is not None:
            self.marks += 1
        self.fake.replay()

    def synchronize(self) -> None:
        self.fake.synchronize()

    def restore_state(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def _run(monkeypatch: pytest.MonkeyPatch, graph: _Graph, **kw: object) -> object:
    import archline.core.readings as readings
    import archline.hw.graph as hw_graph
    import archline.hw.nvml as nvml
    import archline.measurement.api as api
    from archline.measurement.attribute.replay import run_replay
    from tests.helpers.fake_graph import NoisyMeasure

    measure = NoisyMeasure(graph.fake, rel=0.005, seed=2)
    monkeypatch.setattr(hw_graph, "capture_torch", lambda *a, **k: graph)
    monkeypatch.setattr(nvml, "device_static", lambda gpu: {"name": "fake", "uuid": "GPU-fake"})
    monkeypatch.setattr(nvml, "device_state", lambda gpu: {})
    monkeypatch.setattr(api, "measure_callable", lambda fn, **k: measure(fn))
    # the fake board's clock: priming's settle and the whole step's timing wait on no wall clock
    monkeypatch.setattr(readings, "SystemClock", lambda: graph.fake.clock)
    return run_replay(lambda: None, top=1, marginal=False, **kw)  # type: ignore[arg-type]


def test_run_replay_watches_every_replay_and_stops_its_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _Graph()
    seen: list[tuple[str, str]] = []
    res = _run(monkeypatch, graph, on_trial=lambda g, w: seen.append((g, w)))
    assert getattr(res, "rows", None)
    assert graph.marks > 0 and graph.closed
    w = graph.watchdog
    assert w is not None and w._stop.is_set() and not w.fired  # stopped once the replay is done
    assert seen[:2] == [("[capture]", "capture"), ("[whole step]", "step")]  # the whole step timed before any trial


def test_run_replay_without_a_watchdog_and_with_a_bad_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from archline.errors import InputError

    graph = _Graph()
    _run(monkeypatch, graph, hang_s=None)
    assert graph.watchdog is None and graph.marks == 0 and graph.closed
    with pytest.raises(InputError, match="hang_s must be a number of seconds > 0"):
        _run(monkeypatch, _Graph(), hang_s=0.0)

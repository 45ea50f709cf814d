"""archline monitor --prometheus: the exporter serves per-GPU power, energy, clocks and throttle reasons."""

from __future__ import annotations

import sys
import threading
import urllib.request

import pytest
from typer.testing import CliRunner

from archline.cli._common import Deps
from archline.cli.app import app
from archline.hw import nvml
from archline.measurement.exporter import GpuSources, serve
from tests.helpers.fake_gpu import FakeClock
from tests.helpers.fake_nvml import make_fake_nvml

pytest.importorskip("prometheus_client")


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_nvml(count=2, samples=[(1_000_000, 250_000)]))


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def test_exporter_serves_every_gpus_telemetry(fake_nvml: None) -> None:
    # The sample buffer keeps samples stamped after the source opened: the fake clock opens it at 0.5 s.
    sessions = [nvml.NVMLSession(g, clock=FakeClock(0.5)) for g in (0, 1)]
    gpus = [GpuSources(g, f"GPU-{g}", nvml.open_sources(sessions[g])) for g in (0, 1)]
    server, port, _ = serve(gpus, nvml.decode_throttle, 0)
    try:
        text = _scrape(port)
    finally:
        server.shutdown()
        for g in gpus:
            for s in g.sources:
                s.close()
        for session in sessions:
            session.close()
    lines = {ln.split(" ")[0]: float(ln.split(" ")[1]) for ln in text.splitlines() if ln.startswith("archline_")}
    # The fake board: 250 W in the sample buffer, 123.456 W from the power fields, 1000 J on the counter.
    assert lines['archline_gpu_power_watts{gpu="0",source="buffer",uuid="GPU-0"}'] == 250.0
    assert lines['archline_gpu_power_watts{gpu="1",source="usage",uuid="GPU-1"}'] == pytest.approx(123.456)
    assert lines['archline_gpu_energy_joules_total{gpu="1",uuid="GPU-1"}'] == pytest.approx(1000.0)
    assert lines['archline_gpu_sm_clock_hertz{gpu="0",uuid="GPU-0"}'] > 1e6
    # 0x4: the software power cap is active.
    assert lines['archline_gpu_clock_event_reason{gpu="0",reason="sw_power_cap",uuid="GPU-0"}'] == 1.0
    assert lines['archline_gpu_clock_event_reasons_mask{gpu="0",uuid="GPU-0"}'] == 4.0


def test_monitor_prometheus_command_serves_then_stops(fake_nvml: None) -> None:
    out: dict[str, object] = {}

    def run() -> None:
        out["result"] = CliRunner().invoke(
            app, ["monitor", "--gpu", "all", "--prometheus", "0", "--duration", "0.3"], obj=Deps(clock=FakeClock())
        )

    th = threading.Thread(target=run)
    th.start()
    th.join(timeout=10)
    assert not th.is_alive()
    res = out["result"]
    assert res.exit_code == 0, res.output  # type: ignore[attr-defined]
    assert "serving Prometheus metrics of GPU 0, 1 at http://127.0.0.1:" in res.output  # type: ignore[attr-defined]


def test_monitor_prometheus_rejects_a_bad_port(fake_nvml: None) -> None:
    res = CliRunner().invoke(app, ["monitor", "--prometheus", "70000", "--duration", "0.1"])
    assert res.exit_code == 2
    assert "not a TCP port" in res.output

"""A Prometheus exporter of GPU telemetry (power, energy, clocks, temperature, throttle reasons), as dcgm-exporter.

Each scrape reads every source once (no background sampling, nothing kept but the last value of each source), so
an exporter that runs for weeks holds constant memory. Metric names follow Prometheus' conventions: base units
(watts, joules, hertz), ``_total`` for the counter, labels ``gpu`` (NVML index) and ``uuid``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from archline.core.readings import PowerSource
from archline.errors import ArchlineError

__all__ = ["GpuSources", "TelemetryCollector", "serve"]

#: Source name → (metric, help, scale to the base unit).
_POWER = {
    "nvml.buffer": "buffer",
    "nvml.instant": "instant",
    "nvml.average": "average",
    "nvml.usage": "usage",
}
_GAUGES: dict[str, tuple[str, str, float]] = {
    "nvml.sm_clock": ("archline_gpu_sm_clock_hertz", "SM clock (NVML clock info, SM)", 1e6),
    "nvml.mem_clock": ("archline_gpu_memory_clock_hertz", "Memory clock (NVML clock info, MEM)", 1e6),
    "nvml.temperature": ("archline_gpu_temperature_celsius", "GPU temperature", 1.0),
    "nvml.memory_used": ("archline_gpu_memory_used_bytes", "Device memory in use", 1.0),
}


@dataclass
class GpuSources:
    """One GPU's open sources, with its NVML index and UUID for the labels."""

    gpu: int
    uuid: str
    sources: Sequence[PowerSource]
    last: dict[str, float] = field(default_factory=dict)


class TelemetryCollector:
    """A prometheus_client collector: on each scrape, the latest reading of every source of every GPU."""

    def __init__(self, gpus: Sequence[GpuSources], decode_throttle: Callable[[int], tuple[list[str], bool]]) -> None:
        self._gpus = list(gpus)
        self._decode = decode_throttle
        self._lock = threading.Lock()
        #: Every throttle reason ever reported, so a reason that clears reads 0 instead of disappearing.
        self._reasons: set[str] = set()
        self.errors: dict[str, str] = {}

    def _refresh(self, g: GpuSources) -> None:
        for s in g.sources:
            try:
                r = s.read()
            except ArchlineError as exc:  # a source this GPU does not support: left out, said once
                self.errors[f"{g.gpu}:{s.name}"] = str(exc)
                continue
            if len(r):
                g.last[s.name] = float(r.value[-1])

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            for g in self._gpus:
                self._refresh(g)
            power = GaugeMetricFamily(
                "archline_gpu_power_watts", "Board power by NVML source (buffer: 20 ms samples)", labels=_LABELS
            )
            energy = CounterMetricFamily(
                "archline_gpu_energy_joules", "NVML total energy counter since the driver loaded", labels=_LABELS[:2]
            )
            gauges = {n: GaugeMetricFamily(m, h, labels=_LABELS[:2]) for n, (m, h, _) in _GAUGES.items()}
            throttle = GaugeMetricFamily(
                "archline_gpu_clock_event_reason",
                "1 when the clock-event (throttle) reason is active",
                labels=["gpu", "uuid", "reason"],
            )
            mask = GaugeMetricFamily(
                "archline_gpu_clock_event_reasons_mask", "NVML clock-event reasons bit mask", labels=_LABELS[:2]
            )
            for g in self._gpus:
                self._families(g, power, energy, gauges, throttle, mask)
            yield power
            yield energy
            yield from gauges.values()
            yield mask
            yield throttle

    def _families(
        self, g: GpuSources, power: Any, energy: Any, gauges: Mapping[str, Any], throttle: Any, mask: Any
    ) -> None:
        ids = [str(g.gpu), g.uuid]
        for name, label in _POWER.items():
            if name in g.last:
                power.add_metric([*ids, label], g.last[name])
        if "nvml.energy" in g.last:
            energy.add_metric(ids, g.last["nvml.energy"])
        for name, fam in gauges.items():
            if name in g.last:
                fam.add_metric(ids, g.last[name] * _GAUGES[name][2])
        if "nvml.throttle" in g.last:
            bits = int(g.last["nvml.throttle"])
            mask.add_metric(ids, float(bits))
            active = set(self._decode(bits)[0])
            self._reasons |= active
            for reason in sorted(self._reasons):
                throttle.add_metric([*ids, reason], 1.0 if reason in active else 0.0)


_LABELS = ["gpu", "uuid", "source"]


def serve(gpus: Sequence[GpuSources], decode_throttle: Callable[[int], tuple[list[str], bool]], port: int,
          addr: str = "127.0.0.1") -> tuple[Any, int, TelemetryCollector]:  # fmt: skip
    """Serve ``/metrics`` on ``addr:port`` (port 0: any free one) from a registry of its own.

    Returns the server (``shutdown()`` stops it), the port it listens on and the collector.
    """
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    collector = TelemetryCollector(gpus, decode_throttle)
    registry.register(collector)  # type: ignore[arg-type,unused-ignore]
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server, int(server.server_port), collector

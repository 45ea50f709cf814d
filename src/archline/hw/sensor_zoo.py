"""The simulated sensor zoo: every NVIDIA power-sensor generation as published, for validation."""

from __future__ import annotations

from dataclasses import dataclass

from archline.core.readings import Readings
from archline.hw.simulated import PiecewisePower, SimulatedSensor, simulate_polled, simulate_power

__all__ = ["SENSOR_ZOO", "ZooSensor"]


@dataclass(frozen=True)
class ZooSensor:
    """One NVIDIA sensor generation as published (DESIGN.md's table: Burtscher et al. ICPE'14 for
    Kepler, Yang et al. SC'24 for Volta to Ada, measurements here for Hopper).

    ``poll_interval_s`` set: a program polls the latest value that often (repeats included, as
    on the K20); None: every update arrives with its own stamp (a sample buffer).
    ``full_coverage``: whether the readings together respond to every instant of the timeline.
    """

    name: str
    sensor: SimulatedSensor
    full_coverage: bool
    poll_interval_s: float | None = None

    def readings(self, signal: PiecewisePower, *, seed: int = 0) -> Readings:
        """What this sensor reports over the whole signal."""
        if self.poll_interval_s is not None:
            return simulate_polled(signal, self.sensor, self.poll_interval_s, seed=seed)
        return simulate_power(signal, self.sensor, seed=seed)


def _zoo() -> dict[str, ZooSensor]:
    z = [
        # Kepler K20: C = 0.84 s, a fresh value every ~15 ms, polled every 0.3 ms, 10 mW steps.
        ZooSensor("kepler", SimulatedSensor.k20(noise_w=0.05, period_jitter_s=0.0005), True, 0.0003),
        # Volta / Pascal: a value every 20 ms, the mean of the last 10 ms.
        ZooSensor("volta", SimulatedSensor.part_time(0.02, 0.01, noise_w=0.3, quantum_w=0.001), False),
        # A100: every 100 ms, the mean of the last 25 ms.
        ZooSensor("a100", SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3, quantum_w=0.001), False),
        # Ampere GA10x / Ada instant: every 100 ms, the mean of the whole 100 ms.
        ZooSensor("ga10x", SimulatedSensor.averaging(0.1, noise_w=0.3, quantum_w=0.001), True),
        # Hopper sample buffer: instantaneous samples every 20 ms of a 13 ms lag, 3 ms late,
        # stamps jittered by 0.3 ms.
        ZooSensor(
            "hopper-buffer",
            SimulatedSensor(
                "lagged", 0.02, 0.0, lag_s=0.013, delay_s=0.003, noise_w=0.5, quantum_w=0.001, jitter_s=0.0003
            ),
            True,
        ),
        # Hopper instant field: a 20 ms window (15–28 ms measured) of every ~101 ms, after a 15 ms lag.
        ZooSensor(
            "hopper-instant",
            SimulatedSensor("part-time", 0.101, 0.02, lag_s=0.015, noise_w=0.5, quantum_w=0.001),
            False,
        ),
        # The 1 s average (power.draw, field 185): every 100 ms, the mean of the last second.
        ZooSensor("one-second", SimulatedSensor("averaging", 0.1, 1.0, noise_w=0.3, quantum_w=0.001), True),
    ]
    return {x.name: x for x in z}


#: The simulated sensor zoo, by generation name.
SENSOR_ZOO: dict[str, ZooSensor] = _zoo()

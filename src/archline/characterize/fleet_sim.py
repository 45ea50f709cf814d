"""Simulated GPUs for a fleet without hardware (CI, demos): each board writes a small characterization run.

A board's figures follow from a simulated H100-like part (132 SMs, 1.98 GHz, spec throughputs of compute
capability 9.0) scaled by board-to-board factors drawn from its seed, with an optional slow board; the
run directory says it is simulated (GPU name "Simulated …", UUID "SIM-…").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from archline.records import Manifest, RunDir, write_csv
from archline.records.characterize import RESULT_COLUMNS

__all__ = ["SimulatedBoard", "SimulatedRunner"]

_SM = 132
_CLOCK_HZ = 1.98e9
#: name → (group, unit, ops or bytes per clock per SM of the simulated part, power above idle W)
_PART: dict[str, tuple[str, str, float, float]] = {
    "arith.fp32.fma": ("arithmetic", "fp32", 128.0, 310.0),
    "arith.mma.bf16": ("arithmetic", "tensor", 2048.0, 520.0),
    "mem.dram.stream": ("memory", "dram", 11.2, 500.0),
    "mem.l2.read": ("memory", "l2", 40.0, 370.0),
}


class SimulatedBoard:
    """One simulated GPU: ``seed`` draws its speed and power factors; ``slow`` divides its speed."""

    def __init__(self, seed: int, *, slow: float = 1.0, name: str = "Simulated H100", driver: str = "sim-1") -> None:
        rng = np.random.default_rng(seed)
        self.seed, self.name, self.driver = seed, name, driver
        self.speed = float(rng.normal(1.0, 0.01)) / slow
        self.power = float(rng.normal(1.0, 0.015))
        self.idle_w = float(rng.normal(110.0, 3.0))
        self.lag_s = float(rng.normal(0.100, 0.002))
        self.delay_s = float(rng.normal(0.008, 0.0005))

    def rows(self, launch_s: float = 0.05) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for name, (group, unit, per_clk, dyn_w) in _PART.items():
            rate = per_clk * _SM * _CLOCK_HZ * self.speed
            amount = rate * launch_s
            power_w = self.idle_w + dyn_w * self.power
            energy_j = power_w * launch_s
            is_mem = group == "memory"
            out.append({
                "name": name, "group": group, "unit": unit, "sweep_var": "", "time_s": launch_s, "status": "ok",
                "ops": None if is_mem else amount, "flops": None if is_mem else 2 * amount,
                "bytes": amount if is_mem else None, "bytes_per_s": rate if is_mem else None,
                "avg_power_w": power_w, "idle_power_w": self.idle_w, "energy_j": energy_j,
                "nj_per_op": None if is_mem else energy_j / amount * 1e9, "verified": True, "resolvable": True,
            })  # fmt: skip
        return out

    def write(self, out: Path, kind: str) -> RunDir:
        gpu = {"name": self.name, "uuid": f"SIM-{self.seed:08x}", "driver_version": self.driver, "sm_count": _SM}
        model = {"model": {"model": {"kind": "lagged", "lag_s": self.lag_s, "delay_s": self.delay_s}}}
        rd = RunDir.create(
            out,
            Manifest.new("characterize", gpu=gpu, extra={"simulated": True, "fleet_kind": kind, "sensor_model": model}),
            overwrite=True,
        )
        write_csv(out / "results.csv", self.rows(), list(RESULT_COLUMNS))
        rd.finish("complete")
        return rd


@dataclass(frozen=True)
class SimulatedRunner:
    """A fleet task runner that writes simulated boards: ``slow`` maps a GPU to its slowdown, ``models`` to its name."""

    slow: dict[int, float] = field(default_factory=dict)
    models: dict[int, str] = field(default_factory=dict)

    def __call__(self, gpu: int, kind: str, out: Path) -> None:
        SimulatedBoard(gpu, slow=self.slow.get(gpu, 1.0), name=self.models.get(gpu, "Simulated H100")).write(out, kind)

"""Print the figures of docs/measurement.md: Burtscher's anomalies on a simulated K20, accuracy per
window length on the three simulated sensor kinds, and the calibration fit of the H200 probe data.

Usage: python benchmarks/validate_measurement.py   (from the repository root; about 15 s)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers import h200_probe
from tests.helpers.signals import calibration_loads, isolated_pulses, kernels

from archline.hw.simulated import SimulatedSensor, simulate_power
from archline.measurement.calibrate.fit import fit_sensor
from archline.measurement.sensor_model import SensorModel
from archline.measurement.windows import window_energies

K20 = SimulatedSensor.k20(noise_w=0.05)
SENSORS = {
    "lagged (K20: C 0.84 s, 15 ms, 10 mW)": K20,
    "averaging (20 ms, 0.2 ms jitter)": SimulatedSensor.averaging(0.02, noise_w=0.3, period_jitter_s=0.0002),
    "part-time (25 of 100 ms)": SimulatedSensor.part_time(0.1, 0.025, noise_w=0.3),
}


def calibrated(sensor: SimulatedSensor, busy_w: float = 300.0, idle_w: float = 100.0) -> SensorModel:
    cal = calibration_loads(busy_w=busy_w, idle_w=idle_w)
    return fit_sensor(simulate_power(cal.signal, sensor, seed=11), cal.windows).model


def anomalies() -> None:
    print("== Burtscher's anomalies on a simulated K20 (kernel 150 W over 50 W idle)")
    m = calibrated(K20, 150.0, 50.0)
    print(f"calibration: C = {m.lag_s:.4f} s (true 0.84)")
    sc = kernels([(0.0, 0.3)], busy_w=150.0, idle_w=50.0, trail_s=6.0)
    (w,) = window_energies(simulate_power(sc.signal, K20), m, sc.windows)
    t = sc.true_energy_j[0]
    print(f"0.3 s kernel: raw/true {w.raw_energy_j / t:.3f}, corrected/true {w.energy_j / t:.4f}")
    sc = kernels([(0.0, 1.0), (8.0, 2.0)], busy_w=150.0, idle_w=50.0, trail_s=8.0)
    a, b = window_energies(simulate_power(sc.signal, K20), m, sc.windows)
    print(
        f"doubling 1 s -> 2 s: raw ratio {b.raw_energy_j / a.raw_energy_j:.3f}, corrected {b.energy_j / a.energy_j:.4f}"
    )
    sc = kernels([(0.0, 1.0), (1.5, 1.0)], busy_w=150.0, idle_w=50.0, trail_s=8.0)
    a, b = window_energies(simulate_power(sc.signal, K20), m, sc.windows)
    print(
        f"second of two 1 s kernels 0.5 s apart: raw ratio {b.raw_energy_j / a.raw_energy_j:.3f}, "
        f"corrected {b.energy_j / a.energy_j:.4f}"
    )


def accuracy() -> None:
    print("\n== |error| per window length, calibrated model (median / max over 8 windows, % ; resolvable)")
    durs = [0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 2.0]
    for label, sensor in SENSORS.items():
        m = calibrated(sensor)
        sc = isolated_pulses(durs, repeat=8, spacing_s=1.5, seed=5)
        res = window_energies(simulate_power(sc.signal, sensor, seed=6), m, sc.windows)
        e = np.array([w.energy_j for w in res]) / sc.true_energy_j - 1
        z = (np.array([w.energy_j for w in res]) - sc.true_energy_j) / np.array([w.energy_uncertainty_j for w in res])
        ok = np.array([w.resolvable for w in res])
        names = np.array([w.name for w in res])
        cells = []
        for x in durs:
            k = names == f"pulse{1e3 * x:g}ms"
            cells.append(
                f"{1e3 * x:g} ms {100 * np.median(np.abs(e[k])):.2f}/{100 * np.max(np.abs(e[k])):.2f} ({ok[k].sum()}/8)"
            )
        print(f"{label}: " + "; ".join(cells) + f"; rms z {np.sqrt(np.mean(z**2)):.2f}")


def h200() -> None:
    print("\n== H200 probe data (driver 580.159.04): calibration fit per NVML source")
    loads = h200_probe.loads()
    for name, r, ld in (
        ("sample buffer", h200_probe.buffer(), loads),
        ("field 186 (instant)", h200_probe.field(186), loads),
        ("field 185 (average)", h200_probe.field(185), [w for w in loads if w.duration_s >= 0.1]),
    ):
        fit = fit_sensor(r, ld)
        print(f"-- {name}")
        for f in fit.findings:
            print(f"   {f}")
        print(f"   idle {fit.idle.idle_w} W, active idle {fit.idle.active_idle_w} W")
        if name == "sample buffer":
            print(
                "   per load group: median error and ±(half 5-95 % range), fitted model vs readings as interval means"
            )
            for c in fit.checks:
                print(
                    f"   {c.name:10s} {1e3 * c.duration_s:7.1f} ms x{c.count:<3d} "
                    f"model {100 * c.model_median_error:+6.2f} ±{100 * c.model_spread:5.2f} %   "
                    f"naive {100 * c.naive_median_error:+6.2f} ±{100 * c.naive_spread:5.2f} %   "
                    f"resolvable {c.resolvable}/{c.count}"
                )


if __name__ == "__main__":
    anomalies()
    accuracy()
    h200()

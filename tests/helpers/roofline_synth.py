"""Synthetic GPUs of known energy-roofline parameters, for testing the fit, the cap model and predictions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from archline.model.energy_roofline import RooflineParams
from archline.model.sweep import HeldOutRow, Peaks, Precision, SweepRow
from archline.records import Manifest, RunDir, to_jsonable

__all__ = ["H100_LIKE", "HELDOUT_KERNELS", "SyntheticGPU", "sweep_intensities", "write_run_dir"]


def sweep_intensities(lo: float = 0.25, hi: float = 512.0, per_octave: int = 1) -> list[float]:
    """Intensities from ``lo`` to ``hi`` flop/B, ``per_octave`` points per doubling."""
    n = round(math.log2(hi / lo) * per_octave)
    return [lo * 2.0 ** (k / per_octave) for k in range(n + 1)]


@dataclass(frozen=True)
class SyntheticGPU:
    """A GPU that obeys E = W·ε_flop + Q·ε_mem + π0·T exactly, with a power cap and noise.

    Time is the roofline's smooth maximum ``(T_f^k + T_m^k)^(1/k)`` (imperfect overlap near
    B_τ; k = inf is the perfect max), stretched to ``E_dyn/(cap − π0)`` where power would
    exceed the cap. The run-to-run time varies by ``time_cv`` (a real variation: the energy
    follows it); the energy sensor adds Gaussian noise of ``energy_rel_sigma``·E, which is
    what ``energy_uncertainty_j`` states.
    """

    tau_flop_s: dict[str, float] = field(default_factory=lambda: {"single": 1 / 60e12, "double": 1 / 30e12})
    tau_mem_s_per_b: float = 1 / 3.0e12
    eps_flop_j: dict[str, float] = field(default_factory=lambda: {"single": 8e-12, "double": 16e-12})
    eps_mem_j_per_b: float = 150e-12
    pi0_w: float = 150.0
    power_limit_w: float = 700.0
    idle_power_w: float = 120.0
    overlap_k: float = 8.0
    time_cv: float = 0.01
    energy_rel_sigma: float = 0.01
    bytes_per_point: float = 4e9

    def params(self, precision: str) -> RooflineParams:
        return RooflineParams(
            tau_flop_s=self.tau_flop_s[precision],
            tau_mem_s_per_b=self.tau_mem_s_per_b,
            eps_flop_j=self.eps_flop_j[precision],
            eps_mem_j_per_b=self.eps_mem_j_per_b,
            pi0_w=self.pi0_w,
        )

    def true_time_s(self, flops: float, nbytes: float, precision: str) -> float:
        t_f = flops * self.tau_flop_s[precision]
        t_m = nbytes * self.tau_mem_s_per_b
        k = self.overlap_k
        t = max(t_f, t_m) if math.isinf(k) else (t_f**k + t_m**k) ** (1.0 / k)
        e_dyn = flops * self.eps_flop_j[precision] + nbytes * self.eps_mem_j_per_b
        return max(t, e_dyn / (self.power_limit_w - self.pi0_w))

    def measure(
        self, flops: float, nbytes: float, precision: str, rng: np.random.Generator
    ) -> tuple[float, float, float]:
        """(time_s, energy_j, energy_uncertainty_j) of one noisy measurement."""
        t = self.true_time_s(flops, nbytes, precision) * (1.0 + self.time_cv * rng.standard_normal())
        e = flops * self.eps_flop_j[precision] + nbytes * self.eps_mem_j_per_b + self.pi0_w * t
        sigma = self.energy_rel_sigma * e
        return t, e + sigma * rng.standard_normal(), sigma

    def sweep(
        self,
        rng: np.random.Generator,
        intensities: Sequence[float] | None = None,
        precisions: Sequence[Precision] = ("single", "double"),
    ) -> list[SweepRow]:
        rows = []
        for prec in precisions:
            for i in intensities if intensities is not None else sweep_intensities():
                q = self.bytes_per_point
                w = i * q
                t, e, u = self.measure(w, q, prec, rng)
                rows.append(
                    SweepRow(
                        precision=prec,
                        intensity=i,
                        flops=w,
                        bytes=q,
                        time_s=t,
                        energy_j=e,
                        energy_uncertainty_j=u,
                        avg_power_w=e / t,
                        idle_power_w=self.idle_power_w,
                        sm_clock_mhz=1980.0,
                        power_limit_w=self.power_limit_w,
                    )
                )
        return rows

    def peaks(self, device: str = "Synthetic H100") -> Peaks:
        return Peaks(
            copy_bytes_per_s=1.0 / self.tau_mem_s_per_b,
            peak_flops_per_s={p: 1.0 / t for p, t in self.tau_flop_s.items()},
            power_limit_w=self.power_limit_w,
            device=device,
        )

    def heldout(
        self, rng: np.random.Generator, kernels: Sequence[tuple[str, Precision, float, float]]
    ) -> list[HeldOutRow]:
        """Measured rows for (name, precision, W, Q) kernels."""
        out = []
        for name, prec, w, q in kernels:
            t, e, u = self.measure(w, q, prec, rng)
            out.append(HeldOutRow(name, prec, w, q, t, e, u))
        return out


#: Roughly an H100 SXM: 60/30 TFLOP/s, 3 TB/s, 8/16 pJ per flop, 150 pJ/B, π0 150 W, 700 W cap.
H100_LIKE = SyntheticGPU()


#: Held-out kernels of an H100-sized problem: (name, precision, W, Q).
HELDOUT_KERNELS: tuple[tuple[str, Precision, float, float], ...] = (
    ("triad.fp32", "single", 2.0 * 2**27, 3.0 * 4 * 2**27),
    ("reduce.fp32", "single", 2.0**28, 4.0 * 2**28),
    ("stencil5.fp32", "single", 5.0 * 8190**2, 2.0 * 4 * 8192**2),
    ("sgemm.n4096", "single", 2.0 * 4096**3, 3.0 * 4 * 4096**2),
    ("sgemm.n8192", "single", 2.0 * 8192**3, 3.0 * 4 * 8192**2),
    ("dgemm.n4096", "double", 2.0 * 4096**3, 3.0 * 8 * 4096**2),
)


def write_run_dir(
    path: Path,
    gpu: SyntheticGPU,
    rng: np.random.Generator,
    *,
    heldout: bool = True,
    intensities: Sequence[float] | None = None,
) -> Path:
    """A run directory with ``roofline_sweep.csv``, ``roofline_peaks.json`` and (optionally) held-out rows."""
    manifest = Manifest.new("roofline", gpu={"name": "Synthetic H100"})
    rd = RunDir.create(path, manifest)
    rows = gpu.sweep(rng, intensities)
    # Knob columns the model must ignore, as the real sweep table carries them.
    tidy = [{**to_jsonable(r), "block": 256, "loads_per_thread": 4} for r in rows]
    rd.write_csv("roofline_sweep.csv", tidy)
    peaks = to_jsonable(gpu.peaks())
    rd.write_json("roofline_peaks.json", peaks)
    if heldout:
        rd.write_csv("roofline_heldout.csv", [to_jsonable(r) for r in gpu.heldout(rng, HELDOUT_KERNELS)])
    return rd.path

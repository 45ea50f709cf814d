"""Reference constants quoted from Choi, Bedard, Fowler and Vuduc, "A roofline model of energy" (IPDPS 2013).

Every number here is transcribed from the paper, with its table or section; nothing here is
measured by archline. Derived quantities (B_τ, B_ε, η_flop, …) are computed from these
constants by :mod:`archline.model.balance`, exactly as for the measured GPU. As in the paper's
§IV-B, τ_flop and τ_mem are the inverses of the peaks in Table III.
"""

from __future__ import annotations

from dataclasses import dataclass

from archline.model.energy_roofline import RooflineParams

__all__ = ["CITATION", "FERMI_TABLE_II", "GTX_580", "I7_950", "REFERENCE_PLATFORMS", "ReferencePlatform"]

CITATION = "J. W. Choi, D. Bedard, R. Fowler, R. Vuduc, 'A roofline model of energy', IEEE IPDPS 2013"


@dataclass(frozen=True)
class ReferencePlatform:
    """One platform of the paper: peaks (Table III), fitted energy coefficients (Table IV), power limit.

    ``power_limit_w`` and ``idle_power_w`` are NaN where the paper gives none; ``source``
    names the table or section each group of values comes from.
    """

    name: str
    peak_flops_per_s: dict[str, float]
    bandwidth_bytes_per_s: float
    eps_flop_j: dict[str, float]
    eps_mem_j_per_b: float
    pi0_w: float
    power_limit_w: float
    idle_power_w: float
    source: str

    def params(self, precision: str) -> RooflineParams:
        """The paper's machine for ``precision``: τ from the Table III peaks, ε and π0 from Table IV."""
        return RooflineParams(
            tau_flop_s=1.0 / self.peak_flops_per_s[precision],
            tau_mem_s_per_b=1.0 / self.bandwidth_bytes_per_s,
            eps_flop_j=self.eps_flop_j[precision],
            eps_mem_j_per_b=self.eps_mem_j_per_b,
            pi0_w=self.pi0_w,
        )


#: NVIDIA GeForce GTX 580 (Fermi). Peaks and bandwidth: Table III (1581.06 / 197.63 GFLOP/s,
#: 192.4 GB/s). ε_s, ε_d, ε_mem, π0: Table IV (99.7 pJ/flop, 212 pJ/flop, 513 pJ/B, 122 W).
#: Power limit 244 W: §V-B and the caption of Fig. 5 ("NVIDIA reports a limit of 244 Watts").
#: Idle power 39.6 W: §V-A.
GTX_580 = ReferencePlatform(
    name="NVIDIA GTX 580 (Choi et al. 2013)",
    peak_flops_per_s={"single": 1581.06e9, "double": 197.63e9},
    bandwidth_bytes_per_s=192.4e9,
    eps_flop_j={"single": 99.7e-12, "double": 212e-12},
    eps_mem_j_per_b=513e-12,
    pi0_w=122.0,
    power_limit_w=244.0,
    idle_power_w=39.6,
    source="Choi et al. 2013, Tables III and IV; §V-A (idle), §V-B and Fig. 5 (244 W limit)",
)

#: Intel Core i7-950 (Nehalem, 4 cores). Peaks and bandwidth: Table III (106.56 / 53.28
#: GFLOP/s, 25.6 GB/s; TDP 130 W). ε_s, ε_d, ε_mem, π0: Table IV (371 pJ/flop, 670 pJ/flop,
#: 795 pJ/B, 122 W). The TDP is a thermal rating, not an enforced cap.
I7_950 = ReferencePlatform(
    name="Intel Core i7-950 (Choi et al. 2013)",
    peak_flops_per_s={"single": 106.56e9, "double": 53.28e9},
    bandwidth_bytes_per_s=25.6e9,
    eps_flop_j={"single": 371e-12, "double": 670e-12},
    eps_mem_j_per_b=795e-12,
    pi0_w=122.0,
    power_limit_w=float("nan"),
    idle_power_w=float("nan"),
    source="Choi et al. 2013, Tables III and IV",
)

#: The paper's Table II: representative Fermi values from Keckler et al. with π0 = 0, used for
#: its Fig. 2 (τ_flop = 1/515 GFLOP/s, τ_mem = 1/144 GB/s, ε_flop = 25 pJ, ε_mem = 360 pJ/B).
FERMI_TABLE_II = RooflineParams(
    tau_flop_s=1.0 / 515e9,
    tau_mem_s_per_b=1.0 / 144e9,
    eps_flop_j=25e-12,
    eps_mem_j_per_b=360e-12,
    pi0_w=0.0,
)

REFERENCE_PLATFORMS: tuple[ReferencePlatform, ...] = (GTX_580, I7_950)

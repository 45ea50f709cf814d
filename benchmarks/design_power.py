"""Would another replay design reach issue 13's ±15 %? A power analysis of shipped attribution runs under the fold.

    python benchmarks/design_power.py RUN_SET [RUN_SET ...]

A RUN_SET is what ``benchmarks/validate_attribution_real.py --out`` wrote (``summary.json``, ``<workload>-replay/``
and ``<workload>-run/``). For each workload whose replay ran a halves design at p = ½ and whose attribution calibrated
its replay priors without refuting their spread, every kernel row that leaned on a prior from the design is taken
apart as the attribution built it: the group's in-step σ is the regression's se, which narrows as 1/√(N p (1 − p))
with the configurations N and the share p of them each group is on in, and the fold of pairwise interactions,
√(r² ((1 − p)² e² + p² ⟨e²⟩)) with r² = 8 ρ_f², what the design's ρ_f stands for at p = ½ (``replay_context.py``);
the prior's σ adds, in quadrature, the kernel's call time here against replay's (|ln ratio|) and the priors' scale;
the row's 95 % half-width is k × 1.96 × that σ, k the row's own ratio in the run (what the windows took off).
Columns: the design's configurations and ρ_f; the run's share of kernel energy in identifiable rows within ±15 %
(its summary) and this model's at the run's own design (only prior-led rows count, so it can be lower); the share
predicted for designs of N configurations at p (N/p); at 1280 configurations and p = ½ without the time part
(no-time); and the largest ρ_f that reaches 80 % at 1280 configurations, with the time part (rho80) and without
(rho80nt), 'none' where not even ρ_f = 0 does.

Planning, not a score: the interactions are taken as pairwise and as large as ρ_f says at p = ½, se as measured, k
as in the run, and every row as prior-led as it was.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_sets import table_main

#: The designs the table predicts: (configurations, share each group is on in).
DESIGNS = ((80, 0.5), (320, 0.5), (1280, 0.5), (320, 0.3), (320, 0.7))
#: ρ_f's grid for the largest that reaches the target (fractions).
RHO_GRID = np.round(np.arange(0.0, 0.0801, 0.001), 4)
#: The design the last three columns take: long enough that its regression part is small.
LONG = 1280
TARGET = 0.80
HALF_WIDTH = 0.15
Z95 = 1.959963984540054
#: The rows whose energy is the issue's "kernel energy" (benchmarks/validate_attribution_real.py).
KERNEL_KINDS = ("kernel", "memcpy", "memset")

HEAD = (
    f"{'gpu  set board        workload':34s} {'cfgs':>4s} {'rho_f':>5s} {'run%':>5s} {'model%':>6s}  "
    + " ".join(f"{f'{n}/{p:g}':>8s}" for n, p in DESIGNS)
    + f"  {'no-time':>7s}  {'rho80':>5s} {'rho80nt':>7s}"
)


@dataclass(frozen=True)
class Row:
    """One kernel row with a replay prior of the design: its energy (J), the group's in-step energy e (J), se (J),
    the relative time and scale parts of its prior, and k: its 95 % half-width over 1.96 × its prior σ in the run."""

    energy_j: float
    e: float
    se: float
    time: float
    scale: float
    k: float


def _rows(run: Path, name: str) -> tuple[list[Row], dict[str, Any], float, float] | str:
    """The rows, the design, ⟨e²⟩ and the kernel energy (J); or why the workload is skipped."""
    from archline.core.activity import demangle
    from archline.measurement.attribute.prior import priors_from_replay

    rep = json.loads((run / f"{name}-replay" / "replay.json").read_text())
    d = rep.get("design") or {}
    if d.get("kind", "halves") != "halves" or not d.get("configurations"):
        return "no halves design"
    if float(d.get("p_on", 0.5)) != 0.5:
        return "a design at p ≠ ½"
    with (run / f"{name}-replay" / "replay.csv").open(newline="") as fh:
        groups = list(csv.DictReader(fh))
    att = json.loads((run / f"{name}-run" / "attribution.json").read_text())
    fit = ((att.get("extra") or {}).get("prior_fit") or {}).get("replay") or {}
    if fit.get("refuted") or not fit.get("calibrated"):
        return "the windows refuted the priors' spread" if fit.get("refuted") else "priors not calibrated"
    rho = float(d.get("rho_fold", d.get("rho_up", math.nan)))
    e_all = [float(g["context_j"]) for g in groups if g.get("context_j")]
    m2 = float(np.mean(np.square(e_all)))
    # the time part as the run took it: since session 20 against the CUPTI busy time beyond the calls' common shift
    # (its "prior_time_common"), before it against the design's wall-time share of the replays
    common = (att.get("extra") or {}).get("prior_time_common", math.nan)
    new_rule = "prior_time_common" in (att.get("extra") or {})
    if not new_rule:
        groups = [{k: v for k, v in g.items() if k != "busy_time_s"} for g in groups]
    priors = priors_from_replay(groups, design=d if new_rule else {k: v for k, v in d.items() if k != "factor_busy_s"})
    shift = float(common) if common is not None else math.nan
    # priors are keyed by the groups' demangled names, as the attribution's rows are (prior.py)
    names = demangle([str(g.get("group", "")) for g in groups])
    by_name = {names.get(g["group"], g["group"]): g for g in groups if g.get("context_j")}
    scale = float(fit["scale_se"]) / float(fit["scale"])
    rows: list[Row] = []
    # the denominator as validate_attribution_real.py's: kernels, copies and sets
    total = sum(float(r["energy_j"]) for r in att["rows"] if r.get("kind") in KERNEL_KINDS)
    for r in att["rows"]:
        if r.get("kind") != "kernel" or not float(r["energy_j"]) > 0:
            continue
        hw = (float(r["energy_hi_j"]) - float(r["energy_lo_j"])) / 2 / float(r["energy_j"])
        pr = priors.get(r["name"])
        g = by_name.get(r["name"])
        if pr is None or g is None or not pr.time_per_call_s > 0 or r.get("dominated_by") != "prior":
            continue
        e, sig = float(g["context_j"]), float(g["context_sigma_j"])
        fold = rho * math.sqrt(2.0 * (e * e + m2))
        ln_ratio = math.log(float(r["mean_time_s"]) / pr.time_per_call_s)
        t = abs(ln_ratio - shift) if pr.time_source == "busy" and math.isfinite(shift) else abs(ln_ratio)
        k = hw / (Z95 * math.sqrt((sig / e) ** 2 + t * t + scale * scale))
        rows.append(Row(float(r["energy_j"]), e, math.sqrt(max(sig * sig - fold * fold, 0.0)), t, scale, k))
    if not rows:
        return "no prior-led row with a replay prior"
    return rows, d, m2, total


def in_step_rel(r: Row, m2: float, n0: int, n: int, p: float, rho: float) -> float:
    """A row's in-step σ relative to e for a design of ``n`` configurations at ``p``: its se measured at ``n0`` (p = ½)
    scaled as 1/√(n p (1 − p)), and the fold of pairwise interactions r² = 8 ρ² (``rho``: ρ_f at p = ½), which is
    ``replay_context.fold_sigma`` with the ρ such interactions leave at ``p``, √(p (1 − p)²) r."""
    se = r.se * math.sqrt(0.25 / (p * (1.0 - p)) * n0 / n)
    return math.sqrt(se * se + 8.0 * rho * rho * ((1.0 - p) ** 2 * r.e * r.e + p * p * m2)) / r.e


def share(
    rows: list[Row], total_j: float, m2: float, n0: int, n: int, p: float, rho: float, time: bool = True
) -> float:
    """The % of ``total_j`` in ``rows`` whose predicted 95 % half-width (k × 1.96 × the prior's σ) is within ±15 % for
    a design of ``n`` configurations at ``p`` and neighbour dependence ``rho``; ``time``: with the time part."""
    got = 0.0
    for r in rows:
        in_step = in_step_rel(r, m2, n0, n, p, rho)
        sigma = math.sqrt(in_step**2 + (r.time**2 if time else 0.0) + r.scale**2)
        if Z95 * r.k * sigma <= HALF_WIDTH:
            got += r.energy_j
    return 100.0 * got / total_j


def _rho80(rows: list[Row], total_j: float, m2: float, n0: int, n: int, time: bool) -> str:
    """The largest ρ_f on the grid (%) for which a design of ``n`` configurations at p = ½ reaches the target,
    'none' if not even ρ_f = 0 does."""
    ok = [rho for rho in RHO_GRID if share(rows, total_j, m2, n0, n, 0.5, float(rho), time) >= 100 * TARGET]
    return f"{100 * max(ok):.1f}" if ok else "none"


def _line(att: dict[str, Any], got: tuple[list[Row], dict[str, Any], float, float]) -> str:
    rows, d, m2, total = got
    n0, rho = int(d["configurations"]), float(d.get("rho_fold", d.get("rho_up", math.nan)))
    run_share = 100 * float(att.get("identifiable_within_15pct_share") or 0.0)
    cells = " ".join(f"{share(rows, total, m2, n0, n, p, rho):8.1f}" for n, p in DESIGNS)
    own = share(rows, total, m2, n0, n0, 0.5, rho)
    return (
        f"{n0:4d} {100 * rho:5.1f} {run_share:5.1f} {own:6.1f}  "
        f"{cells}  {share(rows, total, m2, n0, LONG, 0.5, rho, time=False):7.1f}  "
        f"{_rho80(rows, total, m2, n0, LONG, True):>5s} {_rho80(rows, total, m2, n0, LONG, False):>7s}"
    )


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, __doc__, HEAD, "design_power", _rows, _line)


if __name__ == "__main__":
    raise SystemExit(main())

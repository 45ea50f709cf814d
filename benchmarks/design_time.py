"""Would each configuration's measured time explain a replay design's misfit? (an exploration, session 17; not adopted)

    python benchmarks/design_time.py REPLAY_DIR [REPLAY_DIR ...]
    python benchmarks/design_time.py --simulate SEEDS

A REPLAY_DIR is a replay run directory with a randomized halves design in its ``replay.json``. Every configuration
records its time per replay beside its energy. The idea: a configuration whose kernels run longer than in the
step's company (a consumer reading from memory what a switched-off producer left out of the L2) spends the board's
power over that time, so its time beyond what its groups' times add up to, Z(S), should explain part of the
misfit that the design folds into every group's interval as ρ. Here each design is refitted with archline's own
fit (replay_design.fit_design, replicates included) three ways, and √E[ρ²] printed for each:

* ``additive``: E = c0 + Σ x_g e_g;
* ``links``: + κ·B, B the broken producer→consumer links (the default since session 14; '-' where the design did
  not record its factors' nodes: the runs before session 14);
* ``time``: + β·Z, Z the residual of the additive time fit T = t0 + Σ x_g t_g less the whole step's (0 in the whole
  step, as a covariate must be), with β ± 1 σ in W and the step's mean power E/T beside it;
* ``busy``: for a design that timed its configurations kernel by kernel (the busy-time model, archline replay's
  default since session 17), its own fit: κ·B + β·Z with Z its recorded busy_excess_s ('-' for earlier designs).

**Why it was not adopted** (``--simulate``; tests/unit/test_bench_design_time.py): Z is orthogonal to the groups'
main effects, so it takes only the part of a slowdown the main effects cannot carry. The part they do carry, each
group's share of its neighbours' slowdowns averaged over the configurations, stays in its in-step energy, while ρ,
which the fold turns into that bias's σ, shrinks. On a fake step whose consumers run 25 % longer while their
producer is off, the time fit's 95 % intervals held the in-step energies far less often than the additive fit's. The
links model's covariate counts broken links with their main effects, so what it takes out is out of the energies
too. Information for choosing a next design model, not a rule archline applies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
HEAD = (
    "replay                                          cfgs  additive    links     time   β W (time)   step E/T W"
    "      busy"
)


def excess_time(x: F64, t: F64) -> F64:
    """Each configuration's time beyond its groups' least-squares times, less the whole step's (row 0): 0 there."""
    a = np.hstack([np.ones((x.shape[0], 1)), x])
    r = t - a @ np.linalg.lstsq(a, t, rcond=None)[0]
    return np.asarray(r - r[0], np.float64)


def design_arrays(d: dict[str, Any]) -> tuple[F64, list[float], list[float], F64, list[Any]]:
    """Configurations (0/1 rows), first measurements' energies and σ, times (a row measured twice at its mean
    time, as its energy is fitted), and the replicates as replay_design.Repeat. ValueError without a halves design."""
    from archline.measurement.attribute.replay_design import Repeat

    cfgs = d.get("configs") or []
    if not cfgs or d.get("kind", "halves") != "halves" or not all(isinstance(c.get("on"), str) for c in cfgs):
        raise ValueError("no randomized halves design")
    x = np.array([[1.0 if ch == "1" else 0.0 for ch in c["on"]] for c in cfgs])
    t = np.array([float(c["time_s"]) for c in cfgs])
    reps = []
    for r in d.get("repeats") or []:
        if not (np.isfinite(r["energy_j"]) and np.isfinite(r["sigma_j"])):
            continue
        reps.append(Repeat(int(r["row"]), float(r["energy_j"]), float(r["sigma_j"])))
        if "time_s" in r:
            t[int(r["row"])] = (t[int(r["row"])] + float(r["time_s"])) / 2.0
    if not np.all(np.isfinite(t)):
        raise ValueError("a configuration's time is not finite")
    return x, [float(c["energy_j"]) for c in cfgs], [float(c["sigma_j"]) for c in cfgs], t, reps


def refit(d: dict[str, Any]) -> dict[str, Any]:
    """The design's three fits (replay_design.DesignFit; ``links`` None without the factors' nodes)."""
    from archline.measurement.attribute.replay_context import link_breaks
    from archline.measurement.attribute.replay_design import fit_design

    x, y, s, t, reps = design_arrays(d)
    nodes = d.get("factor_nodes")
    links_ok = isinstance(nodes, list) and len(nodes) == x.shape[1]
    z = [c.get("busy_excess_s") for c in d["configs"]]
    busy = None
    if all(isinstance(v, (int, float)) for v in z):  # a busy design (session 17 on): its own fit, links beside
        cov = {"broken_link_j": link_breaks(x, nodes).tolist()} if links_ok else {}
        busy = fit_design(x, y, s, reps, {**cov, "excess_busy_w": [float(v) for v in z]})
    return {
        "busy": busy,
        "additive": fit_design(x, y, s, reps),
        "links": fit_design(x, y, s, reps, {"broken_link_j": link_breaks(x, nodes).tolist()})
        if isinstance(nodes, list) and len(nodes) == x.shape[1]
        else None,
        "time": fit_design(x, y, s, reps, {"excess_time_w": excess_time(x, t).tolist()}),
        "configs": len(y),
        "step_power_w": y[0] / t[0],
    }


def line(name: str, r: dict[str, Any]) -> str:
    lk = r["links"]
    b, se = r["time"].covariates["excess_time_w"]
    busy = r.get("busy")
    return (
        f"{name[-46:]:46s} {r['configs']:5d} {100 * r['additive'].rho_fold:8.2f}% "
        + (f"{100 * lk.rho_fold:7.2f}%" if lk is not None else "       -")
        + f" {100 * r['time'].rho_fold:7.2f}% {b:6.0f} ± {se:3.0f} {r['step_power_w']:12.0f}"
        + (f" {100 * busy.rho_fold:8.2f}%" if busy is not None else "         -")
    )


#: The simulated step's slowdown: a consumer runs this much longer while its producer is switched off.
SLOW = 0.25


def simulate(seeds: int) -> dict[str, dict[str, float]]:
    """Designs of 60 configurations on fake steps (tests/helpers/fake_graph.py: 16 nodes, each its own group at
    400 W, each running SLOW longer while the node before it is off), refitted three ways: per model, the share
    of in-step energies within 1 σ and 2 σ of the fold (replay_context.fold_sigma), the mean √E[ρ²] and, for
    the time model, the mean β."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.fake_graph import FakeGraphGPU, FakeNode, NoisyMeasure
    from tests.unit.test_replay_context import FIXED_S, FIXED_W, in_step, step_nodes

    from archline.measurement.attribute.replay import replay_energy
    from archline.measurement.attribute.replay_context import fold_sigma

    z: dict[str, list[float]] = {"additive": [], "links": [], "time": []}
    rho: dict[str, list[float]] = {k: [] for k in z}
    betas: list[float] = []
    for seed in range(seeds):
        nodes = [FakeNode(f"{n.name}-{i}", n.time_s, 400.0) for i, n in enumerate(step_nodes(seed))]
        gpu = FakeGraphGPU(nodes, fixed_s=FIXED_S, fixed_w=FIXED_W,
                           slowdowns={i: (i - 1, SLOW) for i in range(1, len(nodes))})  # fmt: skip
        res = replay_energy(gpu, NoisyMeasure(gpu, rel=0.002, seed=seed), gpu.clock, top=2, marginal=False,
                            design=60, design_seed=seed)  # fmt: skip
        if res.design is None:
            raise ValueError(f"seed {seed}: the design did not run")
        truth = in_step(gpu)
        fits = refit(res.design)
        for model in z:
            fit = fits[model]
            typical = float(np.mean(np.square(fit.energy_j)))
            for name, e, se in zip(res.design["factor_names"], fit.energy_j, fit.energy_se_j, strict=True):
                z[model].append((e - truth[name]) / fold_sigma(e, se, fit.rho_fold, typical))
            rho[model].append(fit.rho_fold)
        betas.append(fits["time"].covariates["excess_time_w"][0])
    out = {
        m: {"within_1sd": float(np.mean(np.abs(v) <= 1.0)), "within_2sd": float(np.mean(np.abs(v) <= 2.0)),
            "rho_fold": float(np.mean(rho[m])), "groups": float(len(v))}
        for m, v in z.items()
    }  # fmt: skip
    out["time"]["beta_w"] = float(np.mean(betas))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="*", type=Path)
    ap.add_argument("--simulate", type=int, metavar="SEEDS", help="the fake steps' coverage (SEEDS steps) instead")
    a = ap.parse_args(argv)
    if a.simulate:
        sim = simulate(a.simulate)
        print(f"{a.simulate} fake steps, each consumer {100 * SLOW:.0f} % longer while its producer is off "
              f"({int(sim['additive']['groups'])} groups):")  # fmt: skip
        for m, r in sim.items():
            print(f"  {m:8s} √E[ρ²] {100 * r['rho_fold']:5.2f} %; in-step energies within 1 σ "
                  f"{100 * r['within_1sd']:3.0f} %, within 2 σ {100 * r['within_2sd']:3.0f} %"
                  + (f"; β {r['beta_w']:.0f} W (the nodes draw 400 W)" if "beta_w" in r else ""))  # fmt: skip
        return 0
    if not a.replays:
        ap.error("name at least one replay directory, or --simulate SEEDS")
    print(HEAD)
    bad = 0
    for p in a.replays:
        try:
            d = json.loads((p / "replay.json").read_text(encoding="utf-8")).get("design") or {}
            r = refit(d)
        except (OSError, ValueError, KeyError) as exc:
            print(f"design_time: {p}: {exc}", file=sys.stderr)
            bad += 1
            continue
        session = p.parent.parent.name.replace("attribution-", "")
        print(line(f"{session} GPU-{p.parent.name.split('-GPU-')[-1][:8]} {p.name}", r))
    return 2 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

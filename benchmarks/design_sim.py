"""Graph replay's randomized design on simulated steps whose switched-off producers corrupt their consumers.

    python benchmarks/design_sim.py [--groups 40] [--configs 120] [--seeds 20] [--p-on 0.5 0.7 0.85]
        [--corruption 0 0.1 0.2]

On a real training step a kernel whose producer is switched off reads what the graph left in the
producer's buffer, often another tensor's bytes, and draws less power on them
(docs/replay.md, "The step's state"). This asks, before any GPU scores it, how the design's in-step energies
behave then, and whether switching fewer groups off per configuration (each group on in a share ``p_on``
of them, not half) helps. Simulated step: ``--groups`` groups with log-normal energies (median 30 mJ,
σ_ln 1), a fixed cost c0 of 30 mJ, run as 4 layers that each run every group once in their own order
(each node fed by the node before it); a node whose producer is off draws (1 − corruption) of its
energy. The halves design switches groups (each on in a share ``p_on`` of the configurations); the prefix
design replays random prefixes (replay_context.prefix_rows), where no node runs without its producer;
each configuration measured with 0.4 % noise of its own energy
of the whole step (what the H100 runs' design reported). The truth is every group's energy in the full
step. Printed per (p_on, corruption), medians over ``--seeds`` steps:

* bias: the energy-weighted median of |ê/e − 1|;
* within 15 %: the share of energy whose ê is within 15 % of the truth;
* ρ̂ and its 95 % bound ρ_up, as the design reports them;
* ±15 %: the share of energy whose folded 95 % interval (the σ the attribution's prior takes) is within ±15 %;
* coverage: the share of groups whose folded 95 % interval holds the truth.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import numpy as np

from archline.measurement.attribute.replay_context import fold_sigma, prefix_rows
from archline.measurement.attribute.replay_design import draw_design, fit_design

#: Layers of the simulated step: each runs every group once.
ROUNDS = 4
#: Each configuration's relative measurement noise (1 σ): what the H100 runs' designs reported, 0.4 %.
NOISE = 0.004


def _weighted_median(values: np.ndarray[Any, Any], weights: np.ndarray[Any, Any]) -> float:
    order = np.argsort(values)
    c = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(c, 0.5 * c[-1])])


def simulate(
    groups: int, configs: int, p_on: float, corruption: float, seed: int, kind: str = "halves"
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    e = 0.030 * np.exp(rng.normal(0.0, 1.0, groups))
    # the step: ``ROUNDS`` layers, each running every group once in its own order; a node's producer is the
    # node before it
    seq = np.concatenate([rng.permutation(groups) for _ in range(ROUNDS)])
    cols = [list(np.nonzero(seq == g)[0]) for g in range(groups)]
    c0 = 0.030
    if kind.startswith("prefix"):
        x, enabled = prefix_rows(cols, configs, rng, choose="random" if kind == "prefix-random" else "d-optimal")
        on_nodes = [np.ones(seq.size, bool), np.zeros(seq.size, bool)]
        for nodes in enabled:
            m = np.zeros(seq.size, bool)
            m[nodes] = True
            on_nodes.append(m)
    else:
        x = draw_design(groups, configs, rng, p_on=p_on).astype(np.float64)
        on_nodes = [row[seq].astype(bool) for row in x]
    clean = []
    for on in on_nodes:
        fed = np.where(np.concatenate([[True], on[:-1]]), 1.0, 1.0 - corruption)
        clean.append(c0 + float(np.sum(on * fed * e[seq] / ROUNDS)))
    # each configuration measured to a relative noise (measure_callable's target is relative to the call)
    noise = NOISE * np.asarray(clean)
    y = np.asarray(clean) + rng.normal(0.0, 1.0, configs) * noise
    fit = fit_design(x, list(y), list(noise))
    est = np.asarray(fit.energy_j)
    se = np.asarray(fit.energy_se_j)
    typical = float(np.mean(est**2))
    p = p_on if kind == "halves" else 0.5  # the fold replay_context uses (at p = ½ for a prefix design)
    sd = np.array([fold_sigma(float(v), float(u), fit.rho_fold, typical, p) for v, u in zip(est, se, strict=True)])
    rel = np.abs(est / e - 1.0)
    w = e / e.sum()
    return {
        "bias": _weighted_median(rel, w),
        "within15": float(w[rel <= 0.15].sum()),
        "rho": fit.rho,
        "rho_up": fit.rho_up,
        "narrow": float(w[1.96 * sd <= 0.15 * np.abs(est)].sum()),
        "coverage": float(np.mean(np.abs(est - e) <= 1.96 * sd)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=40)
    ap.add_argument("--configs", type=int, default=120)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--p-on", type=float, nargs="+", default=[0.5, 0.7, 0.85])
    ap.add_argument("--corruption", type=float, nargs="+", default=[0.0, 0.1, 0.2])
    a = ap.parse_args()
    print(f"{a.groups} groups, {a.configs} configurations, {a.seeds} simulated steps each; medians over steps")
    print(f"{'design':>12} {'corr':>5} {'bias':>7} {'≤15 %':>7} {'ρ̂':>6} {'ρ_up':>6} {'±15 %':>7} {'cover':>6}")
    kinds = [(f"halves {p:.2f}", "halves", p) for p in a.p_on]
    kinds += [("prefix rand", "prefix-random", 0.5), ("prefix D-opt", "prefix", 0.5)]
    for label, kind, p in kinds:
        for c in a.corruption:
            runs = [simulate(a.groups, a.configs, p, c, s, kind) for s in range(a.seeds)]
            m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"{label:>12} {c:5.2f} {100 * m['bias']:6.1f}% {100 * m['within15']:6.1f}% {100 * m['rho']:5.1f}% "
                  f"{100 * m['rho_up']:5.1f}% {100 * m['narrow']:6.1f}% {100 * m['coverage']:5.1f}%")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

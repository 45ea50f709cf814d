"""Would anchoring replay's in-step energies on the isolated replays narrow them honestly? (session 15: no)

    python benchmarks/anchor_check.py [REPLAY_DIR ...]      (docs/data/anchor_check_s15.txt)

The idea, tried and not adopted: a group's energy in the step is its isolated energy × (1 + μ + η_g),
η_g ~ N(0, ω²); μ and ω are fitted by REML from the groups measured both ways (d_g = c_g / i_g − 1 with the
design's σ, the fold included), and each in-step energy becomes the precision-weighted mean of the design's c_g and
its anchor i_g (1 + μ₋g) (μ without the group itself). On the shipped designs the ratios scatter no more than their
σ say (the transformer's ω̂ 0-3.8 %), which would narrow the transformer's largest rows to ±7-10 %.

It is wrong where kernels interact in pairs, the model the design's fold is calibrated on: a random-halves design's
c_g carries half of g's interaction energy, the step all of it, so c_g − i_g shows half of η_g, and the error
of c_g is anti-correlated with η_g rather than independent of it. The simulation below (random halves, each
group drawing ±amp while a random partner runs, as tests/unit/test_replay_context.py's fake step) scores both
against each group's true energy in the step: the design's 95 % intervals cover it, the anchored ones do not, while
the anchor's own check (the leave-one-out RMS z of c_g against its anchor) still looks fine. So the check that
looks good on the shipped designs cannot tell; the anchor is not used.

For each REPLAY_DIR (a replay run directory with a design and isolated replays): μ, ω̂, its one-sided 95 % bound,
√E[ω²], the leave-one-out RMS z. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from archline.measurement.attribute.prior_marginal import ONE_SIDED_95
from archline.measurement.attribute.replay_context import fold_sigma
from archline.measurement.attribute.replay_design import draw_design, fit_design

#: The ω values the likelihood is evaluated at (0 … 50 %, by 0.1 %).
OMEGA_GRID = np.linspace(0.0, 0.5, 501)
MIN_GROUPS = 6
Array = np.ndarray[Any, np.dtype[np.float64]]


def _omega(d: Array, s2: Array) -> tuple[float, float, float]:
    """ω̂, its one-sided 95 % bound and √E[ω²] (flat prior) from ω's restricted likelihood."""
    v = np.square(OMEGA_GRID)[:, None] + s2[None, :]
    w = 1.0 / v
    mu = np.sum(w * d[None, :], axis=1) / np.sum(w, axis=1)
    ll = -0.5 * (np.sum(np.log(v) + w * np.square(d[None, :] - mu[:, None]), axis=1) + np.log(np.sum(w, axis=1)))
    k = int(np.argmax(ll))
    up = float(OMEGA_GRID[int(np.nonzero(2.0 * (ll[k] - ll) <= ONE_SIDED_95)[0].max())])
    post = np.exp(ll - ll[k])
    return float(OMEGA_GRID[k]), up, math.sqrt(float(np.sum(post * OMEGA_GRID**2) / np.sum(post)))


def anchor(
    design: Mapping[str, tuple[float, float]], isolated: Mapping[str, tuple[float, float]]
) -> dict[str, Any] | None:
    """The anchor's fit (μ, ω̂, bound, √E[ω²], RMS z) and each group's anchored (J, 1 σ); None under MIN_GROUPS."""
    names = [g for g, (c, cs) in design.items() if g in isolated and cs > 0 and isolated[g][0] > 0
             and all(math.isfinite(v) for v in (c, cs, *isolated[g]))]  # fmt: skip
    if len(names) < MIN_GROUPS:
        return None
    c, cs = (np.array([design[g][k] for g in names]) for k in (0, 1))
    i, is_ = (np.array([isolated[g][k] for g in names]) for k in (0, 1))
    d = c / i - 1.0
    s2 = np.square(cs / i) + np.square(c * is_ / i**2)
    omega, up, fold = _omega(d, s2)
    w = 1.0 / (fold**2 + s2)
    sw, swd = float(np.sum(w)), float(np.sum(w * d))
    mu_loo, se_loo = (swd - w * d) / (sw - w), 1.0 / np.sqrt(sw - w)
    pred = i * (1.0 + mu_loo)
    pvar = i**2 * (fold**2 + se_loo**2) + np.square((1.0 + mu_loo) * is_)
    z = (c - pred) / np.sqrt(cs**2 + pvar)
    prec = 1.0 / cs**2 + 1.0 / pvar
    e = (c / cs**2 + pred / pvar) / prec
    return {"mu": swd / sw, "mu_se": 1.0 / math.sqrt(sw), "omega": omega, "omega_up": up, "omega_fold": fold,
            "rms_z": float(np.sqrt(np.mean(z**2))), "groups": len(names),
            "values": {g: (float(e[k]), float(1.0 / math.sqrt(prec[k]))) for k, g in enumerate(names)}}  # fmt: skip


def simulate(
    seed: int, amp: float, groups: int = 16, configs: int = 60, top: int = 12
) -> tuple[list[tuple[bool, bool]], float]:
    """One simulated step: (design's 95 % interval holds the truth, anchored one does) for each top group, and the
    anchor's leave-one-out RMS z."""
    rng = np.random.default_rng(seed)
    e = rng.uniform(0.05, 0.5, groups)
    partner = (np.arange(groups) + 1 + rng.integers(groups - 1, size=groups)) % groups
    r = rng.choice([-amp, amp], size=groups)
    x = draw_design(groups, configs, rng).astype(np.float64)
    y = 0.05 + x @ e + (x * x[:, partner]) @ (r * e)
    s = 0.003 * y
    y = y + s * rng.standard_normal(len(y))
    fit = fit_design(x, y.tolist(), s.tolist())
    eh, se = np.asarray(fit.energy_j), np.asarray(fit.energy_se_j)
    typical = float(np.mean(eh**2))
    design = {f"g{k}": (float(eh[k]), fold_sigma(float(eh[k]), float(se[k]), fit.rho_fold, typical)) for k in
              range(groups)}  # fmt: skip
    chosen = [f"g{k}" for k in np.argsort(-eh)[:top]]
    iso = {g: (float(e[int(g[1:])] * (1 + 0.003 * rng.standard_normal())), 0.003 * float(e[int(g[1:])])) for g in
           chosen}  # fmt: skip
    truth = e * (1.0 + r)  # the whole step runs every partner
    a = anchor(design, iso)
    assert a is not None
    out = []
    for g in chosen:
        t = float(truth[int(g[1:])])
        (cd, sd), (ca, sa) = design[g], a["values"][g]
        out.append((abs(cd - t) <= 1.96 * sd, abs(ca - t) <= 1.96 * sa))
    return out, float(a["rms_z"])


def sim_table(seeds: int = 40) -> list[str]:
    lines = ["simulated steps (16 groups, random halves of 60 configurations, the 12 largest measured alone),",
             f"{seeds} seeds each: the share of 95 % intervals holding each group's true energy in the step",
             f"{'pairwise amp':>12}  {'design':>7}  {'anchored':>8}  anchor's LOO RMS z (mean)"]  # fmt: skip
    for amp in (0.0, 0.05, 0.1):
        runs = [simulate(s, amp) for s in range(seeds)]
        hits = [h for got, _ in runs for h in got]
        lines.append(f"{amp:>12.2f}  {np.mean([h[0] for h in hits]):>7.3f}  {np.mean([h[1] for h in hits]):>8.3f}  "
                     f"{np.mean([z for _, z in runs]):.2f}")  # fmt: skip
    return lines


def _num(v: Any) -> float:
    try:
        return float(v) if v not in (None, "") else math.nan
    except (TypeError, ValueError):
        return math.nan


def real_table(dirs: list[Path]) -> list[str]:
    lines = [f"{'replay':44s} groups  {'μ':>12s}  {'ω̂':>5s}  {'bound':>5s}  √E[ω²]  LOO RMS z"]
    for p in dirs:
        with (p / "replay.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        design = {r["group"]: (_num(r["context_j"]), _num(r["context_sigma_j"])) for r in rows
                  if r.get("context_j") and not r["group"].startswith("[")}  # fmt: skip
        iso = {r["group"]: (_num(r["energy_j"]), _num(r["energy_sigma_j"])) for r in rows if r["group"] in design
               and r.get("energy_j") and not _num(r.get("nonfinite_reps")) > 0}  # fmt: skip
        a = anchor(design, iso)
        name = "/".join(p.parts[-2:])[-44:]
        if a is None:
            lines.append(f"{name:44s} fewer than {MIN_GROUPS} groups measured both ways")
            continue
        lines.append(f"{name:44s} {a['groups']:>6d}  {100 * a['mu']:+5.1f}±{100 * a['mu_se']:.1f} %  "
                     f"{100 * a['omega']:4.1f}%  {100 * a['omega_up']:4.1f}%  {100 * a['omega_fold']:5.1f}%  "
                     f"{a['rms_z']:9.2f}")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="*", type=Path)
    ap.add_argument("--seeds", type=int, default=40)
    a = ap.parse_args(argv)
    try:
        lines = real_table(a.replays) if a.replays else []
    except (OSError, KeyError) as exc:
        print(f"anchor_check: {exc}", file=sys.stderr)
        return 2
    print("\n".join([*lines, *([""] if lines else []), *sim_table(a.seeds)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

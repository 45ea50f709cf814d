"""How much of a replay design's neighbour dependence ρ one measurement's own scatter τ can account for (session 14).

    python benchmarks/design_replicates.py REPLAY_DIR [REPLAY_DIR ...]

A REPLAY_DIR is a replay run directory with a randomized design in its ``replay.json``. Designs recorded before
session 14 measured no configuration twice, but each measured the whole step twice: as the design's first
configuration, and apart after the design (``step_energy_j``), minutes later. Those pairs give τ, the relative
scatter of one measurement that its σ leaves out, pooled over the directories by maximum likelihood
(difference ~ N(0, σ₁² + σ₂² + τ² (E₁² + E₂²)), replay_design's likelihood, on its τ grid). Each design's ρ is
then refitted with τ at that pooled value (replay_design.rho_tau_profile) beside ρ as recorded (τ = 0). A design
with replicates (session 14 on) also prints its own τ.

Printed: one line per design (the pair's difference in % and its σ in %, √E[ρ²] at τ = 0 from each configuration's
first measurement and at the pooled τ; where it has replicates, its own τ with its bound, the replicates' RMS
relative difference over √2, and √E[ρ²] as recorded, with them), then the pooled τ with its one-sided 95 % bound.
Post hoc on the designs that showed ρ, it chose the rule (replicates, ``archline replay --design-replicates``);
it does not score it. A directory without a design is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
HEAD = (
    "replay                                          pair diff  its σ  √E[ρ²] τ=0  at pooled τ  own τ (bound)  "
    "rep. RMS  with own"
)


def load(path: Path) -> dict[str, Any]:
    """The design's configurations, the all-on pair and any replicates of one replay directory."""
    doc: dict[str, Any] = json.loads((path / "replay.json").read_text(encoding="utf-8"))
    d = doc.get("design") or {}
    cfgs = d.get("configs") or []
    if not cfgs or not all(isinstance(c.get("on"), str) for c in cfgs):
        raise ValueError("no randomized (on/off) design")
    return {
        "x": np.array([[1.0 if ch == "1" else 0.0 for ch in c["on"]] for c in cfgs]),
        "y": np.array([float(c["energy_j"]) for c in cfgs]),
        "s": np.array([float(c["sigma_j"]) for c in cfgs]),
        "pair": (float(cfgs[0]["energy_j"]), float(cfgs[0]["sigma_j"]),
                 float(doc["step_energy_j"]), float(doc["step_sigma_j"])),
        "own": (d["tau"], d["tau_up"], d["replicate_rms_pct"], d["rho_fold"]) if d.get("replicates") else None,
    }  # fmt: skip


def pooled_tau(pairs: list[tuple[float, float, float, float]]) -> tuple[float, float]:
    """τ̂ and its one-sided 95 % bound from pairs (E₁, σ₁, E₂, σ₂) of one configuration measured twice."""
    from archline.measurement.attribute.prior_marginal import ONE_SIDED_95
    from archline.measurement.attribute.replay_design import TAU_GRID, _diff_loglik

    p = np.asarray(pairs, np.float64)
    ll = _diff_loglik(p[:, 0] - p[:, 2], p[:, 1] ** 2 + p[:, 3] ** 2, p[:, 0] ** 2 + p[:, 2] ** 2, TAU_GRID)
    k = int(np.argmax(ll))
    inside = np.nonzero(2.0 * (ll[k] - ll) <= ONE_SIDED_95)[0]
    return float(TAU_GRID[k]), float(TAU_GRID[int(inside.max())])


def rho_fold_at(x: F64, y: F64, s: F64, tau: float) -> float:
    """√E[ρ²] over ρ's REML likelihood with τ fixed (no replicates)."""
    from archline.measurement.attribute.replay_design import RHO_GRID, _gls, _model_matrix, rho_tau_profile

    s = np.maximum(s, 1e-9 * float(np.max(np.abs(y))))
    beta, _, _ = _gls(_model_matrix(x), y, s**2)
    empty = np.zeros(0)
    ll = rho_tau_profile(x, y, s, beta[1:], y**2, np.ones(len(y)), empty, empty, empty, tau_grid=np.array([tau]))[0]
    post = np.exp(ll - ll.max())
    return math.sqrt(float(np.sum(post * RHO_GRID**2) / np.sum(post)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="+", type=Path)
    args = ap.parse_args(argv)
    designs = []
    for p in args.replays:
        try:
            designs.append((p, load(p)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"design_replicates: {p}: {exc}", file=sys.stderr)
            return 2
    tau, tau_up = pooled_tau([d["pair"] for _, d in designs])
    lines = [HEAD]
    for p, d in designs:
        e1, s1, e2, s2 = d["pair"]
        own = "             -         -         -"
        if d["own"] is not None:
            t, t_up, rms, fold = (float(v) for v in d["own"])
            own = f"{100 * t:5.2f} ({100 * t_up:4.2f})% {rms:8.2f}% {100 * fold:8.1f}%"
        name = f"{p.parent.name[-12:]}/{p.name}"
        before, after = (100 * rho_fold_at(d["x"], d["y"], d["s"], t) for t in (0.0, tau))
        lines.append(
            f"{name:46s} {100 * (e1 / e2 - 1):+9.2f}% {100 * math.hypot(s1, s2) / e2:5.2f}% {before:10.1f}% "
            f"{after:11.1f}% {own}"
        )
    lines.append(f"pooled τ over {len(designs)} pairs: {100 * tau:.2f} % (95 % upper bound {100 * tau_up:.2f} %)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

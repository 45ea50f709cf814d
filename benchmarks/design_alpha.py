"""How a replay design's neighbour dependence scales with a group's energy (an exploration, session 23; post hoc).

    python benchmarks/design_alpha.py REPLAY_DIR [REPLAY_DIR ...]

archline's design fit takes the residual of a configuration S to have the variance σ_S² + ρ² Σ_{g∈S} e_g²: each
present group's energy moves by a relative ρ with its neighbours, so a large group's in-step energy is as uncertain,
relatively, as a small one's (replay_design.py), and the fold puts about √2·ρ_f into every large row's prior. Were
the dependence a sum of many small interactions, or a cost per broken link whatever the group's size, the variance
would grow more slowly, as e_g^α with α < 2, and the largest rows, which carry most of the kernel energy, would be
relatively surer. This fits each design's configurations (the design model as run,
additive or links with its broken-link covariate, except that a busy design is fitted as additive and replicates are
not used) with the variance σ_S² + ρ_α² Σ_{g∈S} e_g^α · e_rms^(2−α) (replay_design.interaction_load; e_rms the
groups' RMS energy, so ρ_α is relative at a typical group) for α = 0, 0.5, 1, 1.25, 1.5, 1.75, 2 and 2.5, and
prints each α's maximum restricted log-likelihood over ρ_α against α = 2's (positive: that α fits better), each
design's best α, and the sums over the designs. A REPLAY_DIR is a replay run directory whose replay.json holds
its design's configurations; one without is one line and exit 2. Information, not a rule archline applies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ALPHAS = (0.0, 0.5, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5)


def profile(replay_dir: Path) -> tuple[int, list[float]]:
    """(the design's factors, each α's maximum REML log-likelihood less α = 2's)."""
    from archline.measurement.attribute.replay_context import link_breaks
    from archline.measurement.attribute.replay_design import (
        RHO_GRID,
        _model_matrix,
        _reml,
        fit_design,
        interaction_load,
    )

    doc = json.loads((replay_dir / "replay.json").read_text(encoding="utf-8"))
    d = doc.get("design") if isinstance(doc, dict) else None
    if not isinstance(d, dict) or not d.get("configs"):
        raise ValueError("no randomized design with its configurations in replay.json")
    cf = [c for c in d["configs"] if np.isfinite(float(c["energy_j"])) and np.isfinite(float(c["sigma_j"]))]
    if not cf or str(cf[0]["on"]).strip("1"):
        raise ValueError("the design's whole step (its first configuration) is not among its finite measurements")
    x = np.array([[float(ch == "1") for ch in str(c["on"])] for c in cf])
    y = np.array([float(c["energy_j"]) for c in cf])
    s = np.array([float(c["sigma_j"]) for c in cf])
    cov = None
    if d.get("model") == "links" and d.get("factor_nodes"):
        cov = {"broken_link_j": [float(v) for v in link_breaks(x, d["factor_nodes"])]}
    fit = fit_design(x, list(y), list(s), covariates=cov)
    e = np.abs(np.asarray(fit.energy_j, np.float64))
    a = _model_matrix(x, None if cov is None else np.asarray(cov["broken_link_j"])[:, None])
    best = []
    for al in ALPHAS:
        load = interaction_load(x, e, al)
        best.append(float(np.max(_reml(a, y, s[None, :] ** 2 + np.square(RHO_GRID)[:, None] * load[None, :]))))
    ref = best[ALPHAS.index(2.0)]
    return x.shape[1], [b - ref for b in best]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="+", type=Path)
    args = ap.parse_args(argv)
    head = f"{'design':58s} {'factors':>7s} " + " ".join(f"{'a=' + format(a, 'g'):>7s}" for a in ALPHAS) + "  best"
    lines, total = [head], np.zeros(len(ALPHAS))
    for p in args.replays:
        try:
            k, d = profile(p)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"design_alpha: {p}: {exc}", file=sys.stderr)
            return 2
        total += d
        name = "/".join(p.parts[-3:]) if len(p.parts) >= 3 else str(p)
        best: Any = ALPHAS[int(np.argmax(d))]
        lines.append(f"{name[-58:]:58s} {k:7d} " + " ".join(f"{v:+7.1f}" for v in d) + f"  {best:g}")
    lines.append(f"{'sum over ' + str(len(args.replays)) + ' designs':58s} {'':7s} "
                 + " ".join(f"{v:+7.1f}" for v in total) + f"  {ALPHAS[int(np.argmax(total))]:g}")  # fmt: skip
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

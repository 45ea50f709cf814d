"""Whether the interactions of neighbouring groups explain a replay design's misfit (an exploration, session 14).

    python benchmarks/design_adjacency.py REPLAY_DIR [REPLAY_DIR ...]

A REPLAY_DIR is a replay run directory whose design recorded its factors' nodes (``factor_nodes``, session 13 on).
Groups whose nodes follow each other in capture order are neighbours. The design's configurations (each the mean
of its measurements where it has replicates) are fitted four ways, each scored by 10-fold cross-validation (the
whole step and the fixed cost always in the training folds; the error as a share of the mean configuration's
energy):

* ``additive``: E = c0 + Σ x_g e_g, as archline fits it;
* ``+ neighbours``: plus one term r_gh x_g x_h per pair of neighbouring groups, ridge-penalised (λ in units of
  one configuration's mean weight 1/σ²; the best of a fixed ladder, 0.01 … 1000, is printed with its λ: at the
  ladder's top the pairs are all but left out);
* ``+ random pairs``: as many pairs drawn at random among the others (seeded), the same ladder: the control;
* ``links``: one term κ·B, B the configuration's broken producer→consumer links (replay_context.link_breaks): the
  model ``archline replay --design-model links`` fits since session 14, chosen on these designs.

Also printed: κ ± 1 σ (mJ per broken link), and √E[ρ²] of archline's fit (fit_design, replicates included) under
the additive and the links model.

Printed per design: its factors, neighbour pairs, and the four cross-validated RMS errors in %. It chose the links
model (session 14); the pair models are information, not a rule archline applies. A directory without a design
with ``factor_nodes`` is one line and exit 2.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
LADDER = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
HEAD = (
    "replay                                  factors pairs  additive  + neighbours (λ)  + random pairs (λ)    links"
    "  κ mJ/link    √E[ρ²] additive → links"
)


def load(path: Path) -> tuple[F64, F64, F64, list[list[int]], dict[str, Any]]:
    """Configurations (0/1 rows), their mean energies and σ, each factor's nodes, and the design as recorded."""
    d: dict[str, Any] = (json.loads((path / "replay.json").read_text(encoding="utf-8")).get("design")) or {}
    cfgs, nodes = d.get("configs") or [], d.get("factor_nodes")
    if not cfgs or not isinstance(nodes, list) or not all(isinstance(c.get("on"), str) for c in cfgs):
        raise ValueError("no randomized design with factor_nodes (session 13 on)")
    x = np.array([[1.0 if ch == "1" else 0.0 for ch in c["on"]] for c in cfgs])
    y = np.array([float(c["energy_j"]) for c in cfgs])
    s = np.array([float(c["sigma_j"]) for c in cfgs])
    for r in d.get("repeats") or []:
        i = int(r["row"])
        y[i], s[i] = (y[i] + float(r["energy_j"])) / 2.0, float(np.hypot(s[i], float(r["sigma_j"]))) / 2.0
    return x, y, s, [[int(i) for i in idx] for idx in nodes], d


def neighbour_pairs(nodes: list[list[int]]) -> list[tuple[int, int]]:
    """Pairs of factors (g < h) with a node of one right after a node of the other in capture order."""
    owner = {i: g for g, idx in enumerate(nodes) for i in idx}
    order = sorted(owner)
    return sorted(
        {
            (min(owner[a], owner[b]), max(owner[a], owner[b]))
            for a, b in itertools.pairwise(order)
            if owner[a] != owner[b]
        }
    )


def cv_rms(a: F64, y: F64, s: F64, n_main: int, lam: float, folds: int = 10) -> float:
    """10-fold cross-validated RMS error (% of the mean energy) of a weighted ridge fit; only columns from ``n_main``
    on are penalised, by ``lam`` × the mean weight."""
    w = 1.0 / s**2
    rng = np.random.default_rng(0)
    test = np.array_split(rng.permutation(np.arange(2, len(y))), folds)
    pen = np.zeros(a.shape[1])
    pen[n_main:] = lam * float(np.mean(w))
    err: list[float] = []
    for f in test:
        m = np.ones(len(y), bool)
        m[f] = False
        am, wm = a[m], w[m]
        b = np.linalg.solve(am.T @ (am * wm[:, None]) + np.diag(pen), am.T @ (wm * y[m]))
        err += list((y[f] - a[f] @ b) / float(np.mean(y)))
    return float(np.sqrt(np.mean(np.square(err)))) * 100.0


def compare(x: F64, y: F64, s: F64, nodes: list[list[int]], design: dict[str, Any] | None = None) -> dict[str, float]:
    """The fits' cross-validated errors, the λ each pair model chose, and κ; with ``design`` (as recorded) also
    √E[ρ²] of archline's fit under each model."""
    from archline.measurement.attribute.replay_context import link_breaks
    from archline.measurement.attribute.replay_design import Repeat, fit_design

    f = x.shape[1]
    a0 = np.hstack([np.ones((len(y), 1)), x])
    pairs = neighbour_pairs(nodes)
    others = [(g, h) for g in range(f) for h in range(g + 1, f) if (g, h) not in set(pairs)]
    rng = np.random.default_rng(1)
    random = [others[i] for i in rng.choice(len(others), size=min(len(pairs), len(others)), replace=False)]
    out: dict[str, float] = {"factors": f, "pairs": len(pairs), "additive": cv_rms(a0, y, s, f + 1, 0.0)}
    for name, chosen in (("neighbours", pairs), ("random", random)):
        a = np.hstack([a0, np.array([x[:, g] * x[:, h] for g, h in chosen]).T])
        scores = {lam: cv_rms(a, y, s, f + 1, lam) for lam in LADDER}
        best = min(scores, key=lambda k: scores[k])
        out[name], out[name + "_lambda"] = scores[best], best
    breaks = link_breaks(x, nodes)
    out["links"] = cv_rms(np.hstack([a0, breaks[:, None]]), y, s, f + 2, 0.0)
    out["rho_additive"] = out["rho_links"] = out["kappa"] = out["kappa_se"] = float("nan")
    if design is not None:
        cfgs = design["configs"]
        x1, y1, s1 = x, [float(c["energy_j"]) for c in cfgs], [float(c["sigma_j"]) for c in cfgs]
        reps = [Repeat(int(r["row"]), float(r["energy_j"]), float(r["sigma_j"])) for r in design.get("repeats") or []]
        add = fit_design(x1, y1, s1, reps)
        lk = fit_design(x1, y1, s1, reps, {"broken_link_j": breaks.tolist()})
        out["rho_additive"], out["rho_links"] = add.rho_fold, lk.rho_fold
        out["kappa"], out["kappa_se"] = lk.covariates["broken_link_j"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="+", type=Path)
    args = ap.parse_args(argv)
    lines = [HEAD]
    for p in args.replays:
        try:
            r = compare(*load(p))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"design_adjacency: {p}: {exc}", file=sys.stderr)
            return 2
        lines.append(
            f"{p.parent.name[-12:] + '/' + p.name:40s} {r['factors']:7.0f} {r['pairs']:5.0f} {r['additive']:8.2f}% "
            f"{r['neighbours']:8.2f}% ({r['neighbours_lambda']:g}) {r['random']:10.2f}% ({r['random_lambda']:g}) "
            f"{r['links']:7.2f}% {1e3 * r['kappa']:6.3f}±{1e3 * r['kappa_se']:.3f} {100 * r['rho_additive']:9.2f}% → "
            f"{100 * r['rho_links']:.2f}%"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

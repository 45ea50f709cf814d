"""How much of a replay design's misfit one common curvature in the enabled load explains (an exploration, session 13).

    python benchmarks/design_curvature.py REPLAY_DIR [REPLAY_DIR ...]

A REPLAY_DIR is a replay run directory with a randomized design in its ``replay.json`` (``<workload>-replay/`` of
``benchmarks/validate_attribution_real.py``). The design fits each configuration's energy as additive,
E(S) = c0 + Σ x_g e_g (replay_design.fit_design), and its misfit is folded into every group's interval as the
neighbour dependence ρ. Here the same configurations (those that stayed finite) are fitted twice more, by weighted
least squares with their own σ:

* ``+γL²``: one common term in the enabled load L = Σ x_g e_g, E = c0 + L + γ L² (e and γ by fixed-point
  iteration from the additive fit): the energy of a configuration bending with how much of the step runs;
* ``+γT²``: the same with the configuration's measured time T instead of L.

Printed per design: the configurations used, the residual degrees of freedom, χ² of each fit, the share of the
additive χ² the load term removes, and γ L_all² as a share of the whole step's predicted energy (the all-on step's
energy below (negative) or above the additive extrapolation). Information for choosing a next design model,
not a rule archline applies. One line per design ('-' where fewer finite configurations remain than the fits have
parameters: ResNet-50's designs, most of whose configurations computed on non-finite values); a directory without
a design is one line and exit 2.
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
HEAD = "replay                                        cfgs  dof   chi2 add   +γL²   +γT²  removed  γL²/step"
ITERATIONS = 30


def _wls(a: F64, y: F64, w: F64) -> tuple[F64, float]:
    sw = np.sqrt(w)
    b, *_ = np.linalg.lstsq(a * sw[:, None], y * sw, rcond=None)
    r = y - a @ b
    return b, float(np.sum(w * r**2))


def curvature(x: F64, y: F64, s: F64, t: F64) -> dict[str, float]:
    """The three fits of configurations ``x`` (0/1 rows), energies ``y`` ± ``s`` and times ``t``."""
    w = 1.0 / np.maximum(s, 1e-12) ** 2
    a0 = np.hstack([np.ones((len(y), 1)), x])
    b0, chi_add = _wls(a0, y, w)
    b, gamma, chi_load = b0, 0.0, chi_add
    for _ in range(ITERATIONS):
        load = x @ b[1:]
        bb, chi_load = _wls(np.hstack([a0, (load**2)[:, None]]), y, w)
        b, gamma = bb[:-1], float(bb[-1])
    _, chi_time = _wls(np.hstack([a0, (t**2)[:, None]]), y, w)
    l_all = float(np.sum(b[1:]))
    step = float(b[0]) + l_all + gamma * l_all**2
    return {
        "configs": float(len(y)),
        "dof": float(len(y) - a0.shape[1]),
        "chi2_additive": chi_add,
        "chi2_load": chi_load,
        "chi2_time": chi_time,
        "removed": 1.0 - chi_load / chi_add if chi_add > 0 else float("nan"),
        "gamma_share": gamma * l_all**2 / step if step else float("nan"),
        "gamma": gamma,
    }


def from_replay(path: Path) -> dict[str, float]:
    """The fits of one replay directory's design (its finite configurations)."""
    doc: dict[str, Any] = json.loads((path / "replay.json").read_text(encoding="utf-8"))
    cfgs = [c for c in (doc.get("design") or {}).get("configs") or [] if not c.get("nonfinite")]
    if not cfgs or not all(isinstance(c.get("on"), str) for c in cfgs):
        raise ValueError("no randomized (on/off) design with finite configurations")
    x = np.array([[1.0 if ch == "1" else 0.0 for ch in c["on"]] for c in cfgs])
    y = np.array([float(c["energy_j"]) for c in cfgs])
    s = np.array([float(c["sigma_j"]) for c in cfgs])
    t = np.array([float(c["time_s"]) for c in cfgs])
    return curvature(x, y, s, t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="+", type=Path)
    args = ap.parse_args(argv)
    lines = [HEAD]
    for p in args.replays:
        try:
            r = from_replay(p)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"design_curvature: {p}: {exc}", file=sys.stderr)
            return 2
        name = f"{p.parent.name[-12:]}/{p.name}"
        if r["dof"] < 2:  # fewer finite configurations than the fits have parameters: nothing to compare
            lines.append(f"{name:44s} {r['configs']:5.0f} {r['dof']:4.0f}          -      -      -        -         -")
            continue
        lines.append(
            f"{name:44s} {r['configs']:5.0f} {r['dof']:4.0f} {r['chi2_additive']:10.0f} {r['chi2_load']:6.0f} "
            f"{r['chi2_time']:6.0f} {100 * r['removed']:7.1f}% {100 * r['gamma_share']:+8.1f}%"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

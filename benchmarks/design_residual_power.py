"""Whether a replay design's misfit follows its configurations' power (an exploration, session 23; post hoc).

    python benchmarks/design_residual_power.py REPLAY_DIR [REPLAY_DIR ...]

On an H200 at batch 128 the transformer's whole step ran near the 700 W limit and three GEMMs alone were power-capped;
if the controller made the design non-additive, the additive fit's residuals would fall as a configuration's mean
power rises. For each design (the configurations with finite energies; the whole step and the empty replay left out
of the statistics) this fits E = c0 + Σ x_g e_g by ordinary least squares and prints the configurations counted, the
residuals' RMS as a share of each configuration's energy, their correlation with the configuration's mean power
(energy over time) and that power's range. A directory without a design's configurations is one line and exit 2.
Information, not a rule archline applies.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def residual_power(replay_dir: Path) -> tuple[int, float, float, float, float]:
    """(configurations, residual RMS %, correlation with power, lowest and highest power W)."""
    doc = json.loads((replay_dir / "replay.json").read_text(encoding="utf-8"))
    d = doc.get("design") if isinstance(doc, dict) else None
    if not isinstance(d, dict) or not d.get("configs"):
        raise ValueError("no randomized design with its configurations in replay.json")
    cf = [c for c in d["configs"] if not int(c.get("nonfinite") or 0) and np.isfinite(float(c["energy_j"]))]
    x = np.array([[float(ch == "1") for ch in str(c["on"])] for c in cf])
    e = np.array([float(c["energy_j"]) for c in cf])
    t = np.array([float(c["time_s"]) for c in cf])
    a = np.hstack([np.ones((len(e), 1)), x])
    beta, *_ = np.linalg.lstsq(a, e, rcond=None)
    rel = (e - a @ beta) / e
    p = e / t
    inner = (x.sum(axis=1) > 0) & (x.sum(axis=1) < x.shape[1])
    if inner.sum() < 3:
        raise ValueError("fewer than three configurations besides the whole step and the empty replay")
    return (int(inner.sum()), 100.0 * float(np.sqrt(np.mean(rel[inner] ** 2))),
            float(np.corrcoef(rel[inner], p[inner])[0, 1]), float(p[inner].min()), float(p[inner].max()))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="+", type=Path)
    args = ap.parse_args(argv)
    lines = [f"{'design':44s} {'cfgs':>4s} {'rms %':>6s} {'corr':>5s} {'power W':>9s}"]
    for p in args.replays:
        try:
            n, rms, corr, lo, hi = residual_power(p)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"design_residual_power: {p}: {exc}", file=sys.stderr)
            return 2
        name = f"{p.parts[-3].removeprefix('attribution-')}/{p.parts[-2]}" if len(p.parts) >= 3 else str(p)
        lines.append(f"{name[-44:]:44s} {n:4d} {rms:6.2f} {corr:+5.2f} {lo:4.0f}-{hi:4.0f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Refit a replay's randomized design from its ``replay.json``, with every configuration or without those that
computed on NaN, and print what changes.

    python benchmarks/refit_design.py REPLAY_DIR [--drop-nonfinite] [--json]

Graph replay records, for each design configuration, how many of its repetitions ended with the step's state
non-finite (``design.configs[].nonfinite``; docs/replay.md). Whether the fit should leave such
configurations out is to be decided on a run's design data before any attribution is scored with it: this
prints the fit both ways (c0, ρ̂ and its bound, Σ e + c0 against the whole step, and the groups' in-step
energies side by side), and says where leaving them out leaves a group that can no longer be fitted.
Configurations from before the record (no ``nonfinite``) count as clean.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _rows(configs: list[dict[str, Any]]) -> np.ndarray[Any, Any]:
    out = []
    for c in configs:
        on = c["on"]
        out.append([float(ch == "1") for ch in on] if isinstance(on, str) else [float(v) for v in on])
    return np.asarray(out, np.float64)


def refit(design: dict[str, Any], drop_nonfinite: bool) -> dict[str, Any]:
    from archline.measurement.attribute.replay_design import fit_design

    configs = list(design.get("configs") or [])
    if not configs:
        raise ValueError("the design keeps no configurations (written before they were recorded)")
    x = _rows(configs)
    y = [float(c["energy_j"]) for c in configs]
    s = [float(c["sigma_j"]) for c in configs]
    keep = [k for k, c in enumerate(configs) if k == 0 or not (drop_nonfinite and int(c.get("nonfinite") or 0) > 0)]
    fit = fit_design(x[keep], [y[k] for k in keep], [s[k] for k in keep])
    step = float(design.get("step_j") or fit.all_on_j)
    return {"configurations": len(keep), "left_out": len(configs) - len(keep), **fit.summary(),
            "sum_vs_step_pct": (fit.sum_j / step - 1.0) * 100.0 if step else float("nan"),
            "energy_j": list(fit.energy_j), "energy_se_j": list(fit.energy_se_j)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("replay_dir", type=Path)
    ap.add_argument("--drop-nonfinite", action="store_true", help="also fit without the NaN configurations")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    p = a.replay_dir / "replay.json"
    try:
        summary = json.loads(p.read_text(encoding="utf-8"))
        design = summary["design"]
        if not isinstance(design, dict):
            raise KeyError("design")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"{p}: no randomized design to refit ({exc!r})", file=sys.stderr)
        return 2
    out: dict[str, Any] = {}
    try:
        out["all"] = refit(design, False)
        if a.drop_nonfinite:
            out["clean"] = refit(design, True)
    except ValueError as exc:
        print(f"{p}: {exc}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    for k, f in out.items():
        print(f"{k:>5}: {f['configurations']} configurations ({f['left_out']} left out); c0 {f['c0_j']:.4g} J; "
              f"ρ̂ {100 * f['rho']:.1f} % (bound {100 * f['rho_up']:.1f} %, √E[ρ²] {100 * f['rho_fold']:.1f} %); "
              f"Σ e + c0 {f['sum_vs_step_pct']:+.2f} % of the step")  # fmt: skip
    if "clean" in out:
        print(f"{'factor':>6} {'all (J)':>10} {'clean (J)':>10} {'change':>8}")
        for j, (e0, e1) in enumerate(zip(out["all"]["energy_j"], out["clean"]["energy_j"], strict=True)):
            ch = f"{100 * (e1 / e0 - 1):+.1f} %" if e0 else "—"
            print(f"{j:6d} {e0:10.4g} {e1:10.4g} {ch:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Redo a replay's in-step σ with the current fold (√E[ρ²] since session 12), into a copy of its run directory.

    python benchmarks/refold_replay.py REPLAY_DIR OUT_DIR

For post-hoc comparisons of the fold on replays recorded before it changed: the design is refitted from
``replay.json``'s configurations (the same arithmetic, so the same in-step energies), each row's ``context_sigma_j``
in ``replay.csv`` is refolded with the refit's ``rho_fold``, and the design summary gains ``rho_fold`` and the
current fold's text. The copy is then a replay as this archline would have written it (e.g. for
``benchmarks/redo_attribution.py --prior-replay OUT_DIR``). A design with replicates (session 14) is refitted with
them, as archline fits it; ``--no-replicates`` refits it from each configuration's first measurement alone, with the
design's model (``--model additive --no-replicates``: archline before session 14), and rewrites the in-step energies
too (the counterfactual of a held-out run: what the replicates changed). A design is refitted with the model it
recorded (``busy`` since session 17, from each configuration's recorded ``busy_excess_s``; ``links`` in sessions
14–16; else additive); ``--model links|additive|busy`` refits it with another (``links`` needs the design's
``factor_nodes``, session 13 on) and rewrites the in-step energies; ``--first N`` refits it from its first N
configurations (what a smaller design budget would have given; session 15). Bad input: one line, exit 2."""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np


def refold(
    design: dict[str, Any],
    rows: list[dict[str, str]],
    replicates: bool = True,
    model: str | None = None,
    step_sigma_j: float = 0.0,
    first: int | None = None,
    alpha: float = 2.0,
) -> tuple[dict[str, Any], list[dict[str, str]], int]:
    """The design summary and rows with the current fold; how many rows were refolded. ValueError where a row's
    in-step energy matches no refitted factor (a design refitted differently). ``replicates=False``: refit from the
    first measurements alone and rewrite the rows' in-step energies (matched by the design's factor names).
    ``first``: refit from the design's first ``first`` configurations (and the replicates among them) alone, and
    rewrite the in-step energies: what a smaller design budget would have given. ``alpha``: the neighbour
    dependence taken to scale as |e|^(α/2) (replay_design.interaction_load; 2, archline's, by default): ρ refitted
    that way and folded with it (replay_context.fold_sigma), recorded as the design's ``rho_alpha``."""
    from archline.measurement.attribute.replay_busy import BUSY_COVARIATE
    from archline.measurement.attribute.replay_context import (
        fold_sigma,
        fold_typical,
        link_breaks,
    )
    from archline.measurement.attribute.replay_design import Repeat, fit_design

    configs = design["configs"]
    if first is not None:
        if not 2 <= first <= len(configs):
            raise ValueError(f"--first must be between 2 and the design's {len(configs)} configurations, not {first}")
        configs = configs[:first]
    x = np.asarray([[float(ch == "1") for ch in c["on"]] if isinstance(c["on"], str) else c["on"] for c in configs])
    reps = [Repeat(int(r["row"]), float(r["energy_j"]), float(r["sigma_j"])) for r in design.get("repeats") or []]
    reps = [r for r in reps if np.isfinite(r.energy_j) and r.row < len(configs)]
    recorded = str(design.get("model", "additive"))
    model = model or recorded
    covariates = None
    if model == "links" and design.get("kind", "halves") == "halves":
        nodes = design.get("factor_nodes")
        if not isinstance(nodes, list) or len(nodes) != x.shape[1]:
            raise ValueError("the links model needs the design's factor_nodes (recorded since session 13)")
        covariates = {"broken_link_j": link_breaks(x, nodes).tolist()}
    elif model == "busy":
        z = [c.get("busy_excess_s") for c in configs]
        if not all(isinstance(v, (int, float)) for v in z):
            raise ValueError("the busy model needs each configuration's busy_excess_s (a busy design, session 17 on)")
        covariates = {}
        if "broken_link_j" in (design.get("covariates") or {}):  # fitted beside the links, as it was recorded
            covariates["broken_link_j"] = link_breaks(x, design["factor_nodes"]).tolist()
        covariates[BUSY_COVARIATE] = [float(v) for v in z]
    fit = fit_design(
        x,
        [c["energy_j"] for c in configs],
        [c["sigma_j"] for c in configs],
        reps if replicates else (),
        covariates,
        alpha=alpha,
    )
    e = np.asarray(fit.energy_j)
    if (not replicates and reps) or model != recorded or first is not None:
        names = design.get("factor_names")
        if not isinstance(names, list) or len(names) != len(e):
            raise ValueError("a design refitted another way needs its factor names (recorded since session 13)")
        at = {str(g): j for j, g in enumerate(names)}
        typical, e_rms = float(np.mean(e**2)), 1.0
        if alpha != 2.0:
            typical, e_rms = fold_typical([float(v) for v in e], alpha)
        p = float(design.get("p_on", 0.5)) if design.get("kind", "halves") == "halves" else 0.5
        out, n = [], 0
        for r in rows:
            j = at.get(r.get("group", ""))
            if j is None or r.get("context_j", "") in ("", None):
                out.append(r)
                continue
            sd = fold_sigma(float(e[j]), float(fit.energy_se_j[j]), fit.rho_fold, typical, p, alpha, e_rms)
            out.append({**r, "context_j": repr(float(e[j])), "context_sigma_j": repr(sd)})
            n += 1
        drop = ("replicates", "tau", "tau_up", "replicate_rms_pct", "covariates", "rho_alpha") + (
            () if replicates else ("repeats",)
        )
        kept = {k: v for k, v in design.items() if k not in drop}
        if first is not None:  # the smaller design, as it would have been recorded
            kept["configs"], kept["configurations"] = configs, len(configs)
            if "repeats" in kept:
                kept["repeats"] = [r for r in kept["repeats"] or [] if int(r["row"]) < len(configs)]
        summary = {**kept, **fit.summary(), "model": model if covariates else "additive",
                   "fold": _fold_text(p, alpha)}  # fmt: skip
        if "step_j" in design:  # Σ e + c0 against the whole step measured apart, with the refitted sum
            step, sd = float(design["step_j"]), float(np.hypot(fit.sum_se_j, step_sigma_j))
            summary["sum_vs_step_pct"] = (fit.sum_j / step - 1.0) * 100.0
            summary["sum_vs_step_sigma"] = (fit.sum_j - step) / sd if sd else float("nan")
        return summary, out, n
    typical, e_rms = float(np.mean(e**2)), 1.0
    if alpha != 2.0:
        typical, e_rms = fold_typical([float(v) for v in e], alpha)
    p = float(design.get("p_on", 0.5)) if design.get("kind", "halves") == "halves" else 0.5
    out, n = [], 0
    for r in rows:
        c = r.get("context_j", "")
        if c in ("", None) or not np.isfinite(float(c)):
            out.append(r)
            continue
        j = int(np.argmin(np.abs(e - float(c))))
        if abs(e[j] - float(c)) > 1e-6 * max(abs(float(c)), 1e-12):
            raise ValueError(f"row {r.get('group')!r}: its in-step energy {c} matches no refitted factor")
        sd = fold_sigma(float(e[j]), float(fit.energy_se_j[j]), fit.rho_fold, typical, p, alpha, e_rms)
        out.append({**r, "context_sigma_j": repr(sd)})
        n += 1
    summary = {k: v for k, v in design.items() if k != "rho_alpha"}
    summary.update(rho_fold=fit.rho_fold, fold=_fold_text(p, alpha))
    if alpha != 2.0 or "rho_alpha" in design:  # ρ̂ and its bound as this α's fit gives them (a refold of a refold)
        summary.update(rho=fit.rho, rho_up=fit.rho_up, **({"rho_alpha": alpha} if alpha != 2.0 else {}))
    return summary, out, n


def _fold_text(p: float, alpha: float) -> str:
    """The fold's formula as replay.json records it."""
    from archline.measurement.attribute.replay_context import FOLD, FOLD_ALPHA, FOLD_P

    if alpha != 2.0:
        return FOLD_ALPHA.format(a=alpha, p=p)
    return FOLD if p == 0.5 else FOLD_P.format(p=p)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replay_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--no-replicates", action="store_true", help="refit from each configuration's first measurement")
    ap.add_argument("--model", choices=("links", "additive", "busy"), help="refit with this design model")
    ap.add_argument("--first", type=int, help="refit from the design's first N configurations alone")
    ap.add_argument("--alpha", type=float, default=2.0, help="the neighbour dependence scales as |e|^(alpha/2)")
    a = ap.parse_args(argv)
    if not 0.0 < a.alpha <= 4.0:
        print(f"refold_replay: --alpha {a.alpha}: must be above 0 and at most 4", file=sys.stderr)
        return 2
    try:
        summary = json.loads((a.replay_dir / "replay.json").read_text())
        with (a.replay_dir / "replay.csv").open(newline="") as f:
            reader = csv.DictReader(f)
            fields, rows = list(reader.fieldnames or []), list(reader)
        design = summary.get("design")
        if not isinstance(design, dict) or not design.get("configs"):
            raise ValueError("no randomized design to refold")
        new_design, new_rows, n = refold(design, rows, replicates=not a.no_replicates, model=a.model, first=a.first,
                                         step_sigma_j=float(summary.get("step_sigma_j") or 0.0),
                                         alpha=a.alpha)  # fmt: skip
    except (OSError, ValueError, KeyError) as exc:
        print(f"refold_replay: {a.replay_dir}: {exc}", file=sys.stderr)
        return 2
    if a.out_dir.exists():
        print(f"refold_replay: {a.out_dir}: exists; choose another", file=sys.stderr)
        return 2
    shutil.copytree(a.replay_dir, a.out_dir)
    (a.out_dir / "replay.json").write_text(json.dumps({**summary, "design": new_design}, indent=1))
    with (a.out_dir / "replay.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(new_rows)
    print(f"{a.out_dir}: {n} rows refolded with √E[ρ²] = {100 * new_design['rho_fold']:.2f} % "
          f"(ρ̂ {100 * new_design['rho']:.1f} %, bound {100 * new_design['rho_up']:.1f} %)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The counted energy model on a real program's kernels: each kernel's model prior against replay's in-step energy.

    python3 benchmarks/model_vs_replay.py RUN_SET [--model RUN] [--precise 0.10] [--json]

RUN_SET: a run set of ``validate_attribution_real.py --prior-source model`` (``<w>-counts.csv``, the ncu counts of one
step, ``archline counts``; ``<w>-replay/``, the step's graph replay with its randomized design). ``--model``: the
calibrated model (default: the one the run set's summary.json names). For each kernel group that replay measured inside
the step (``context_j``), the model's energy per call at replay's CUPTI busy time per call (π0·t + the counted dynamic
energy, :mod:`archline.characterize.model_priors`) is set against replay's in-step energy per call. Prints each group,
replay's power over that busy time (above the board's limit: replay's in-step energy holds more than the kernel's own
busy time), and the energy-weighted share within ±15 % and ±30 % and median error: over every group, and over the
groups replay measured to ``--precise`` (its in-step 1 σ / energy; 10 % by default). The board is the run set's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


def _f(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def compare(run_set: Path, model: Path | None = None, precise: float = 0.10) -> dict[str, Any]:
    from archline.characterize.model_priors import read_model_priors
    from archline.core.activity import demangle
    from archline.records.rundir import read_csv

    summary = json.loads((run_set / "summary.json").read_text()) if (run_set / "summary.json").is_file() else {}
    if model is None:
        if not summary.get("prior_model"):
            raise SystemExit(f"{run_set}: its summary.json names no model; give --model")
        # the device's absolute path: the shipped run of the same name in this checkout
        model = Path("results") / Path(summary["prior_model"]).parent.name / Path(summary["prior_model"]).name
    counts = sorted(run_set.glob("*-counts.csv"))
    replays = sorted(run_set.glob("*-replay/replay.csv"))
    if not counts or not replays:
        raise SystemExit(f"{run_set}: no *-counts.csv or *-replay/replay.csv")
    mp = read_model_priors(model, counts[0])
    rows = read_csv(replays[0])
    names = demangle([str(r.get("group", "")) for r in rows])
    out: list[dict[str, Any]] = []
    for r in rows:
        g = str(r.get("group", ""))
        n, ctx, sd, busy = (_f(r.get(k)) for k in ("nodes_per_step", "context_j", "context_sigma_j", "busy_time_s"))
        if g.startswith("[") or not (n > 0 and ctx > 0 and busy > 0):
            continue
        name = names.get(g, g)
        p = mp.priors.get(name)
        e_ref, t = ctx / n, busy / n
        row = {"name": name, "replay_j": e_ref, "replay_rel_sd": sd / ctx, "busy_s": t, "replay_w": e_ref / t}
        if p is not None:
            e = p.power_at(t) * t
            row.update(model_j=e, model_w=e / t, ncu_s=p.time_per_call_s, err=e / e_ref - 1.0)
        # the group measured alone (replay's isolated energy, its own time beyond an empty replay), where it was
        iso, iso_sd, t_alone = (_f(r.get(k)) for k in ("energy_j", "energy_sigma_j", "group_time_s"))
        if p is not None and iso > 0 and t_alone > 0:
            e_iso = p.power_at(t_alone / n) * t_alone / n
            row.update(isolated_j=iso / n, isolated_rel_sd=iso_sd / iso, err_isolated=e_iso / (iso / n) - 1.0)
        out.append(row)
    out.sort(key=lambda x: -x["replay_j"] * 1.0)

    def stats(sel: list[dict[str, Any]], err_key: str = "err", e_key: str = "replay_j") -> dict[str, Any]:
        """Energy-weighted (by ``e_key``) shares within ±15 and ±30 % and median of ``err_key`` over ``sel``."""
        got = [x for x in sel if err_key in x]
        e = sum(x[e_key] for x in got)
        acc, med = 0.0, math.nan
        for err, w in sorted((x[err_key], x[e_key]) for x in got):
            acc += w
            if acc >= e / 2:
                med = err
                break

        def within(lim: float) -> float:
            return sum(x[e_key] for x in got if abs(x[err_key]) <= lim) / e if e else math.nan

        return {
            "groups": len(sel),
            "with_model": len(got),
            "within_15pct_share": within(0.15),
            "within_30pct_share": within(0.30),
            "weighted_median_err": med,
        }

    # the run's rows that took a model prior (its attribution.json), by kernel energy
    coverage: dict[str, Any] = {}
    att = sorted(run_set.glob("*-run/attribution.json"))
    if att:
        a = json.loads(att[0].read_text())
        used = a.get("extra", {}).get("priors") or {}
        krows = [r for r in a.get("rows", []) if r.get("kind") in ("kernel", "memcpy", "memset")]
        e = sum(_f(r.get("energy_j")) for r in krows)
        coverage = {
            "rows": len(krows),
            "rows_with_prior": sum(1 for r in krows if used.get(r.get("name")) == "model"),
            "energy_share": sum(_f(r.get("energy_j")) for r in krows if used.get(r.get("name")) == "model") / e
            if e > 0
            else math.nan,
        }
    board = summary.get("board", "")
    return {
        "run_coverage": coverage,
        "board": board,
        "model": str(model),
        "counts": str(counts[0]),
        "replay": str(replays[0].parent),
        "precise": precise,
        "all": stats(out),
        "precise_groups": stats([x for x in out if x["replay_rel_sd"] <= precise]),
        "isolated": stats(out, "err_isolated", "isolated_j"),
        "rows": out,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_set", type=Path)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--precise", type=float, default=0.10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    s = compare(a.run_set, a.model, a.precise)
    if a.json:
        print(json.dumps(s, indent=1))
        return 0
    print(f"board: {s['board']}; model: {s['model']}; counts: {s['counts']}; replay: {s['replay']}")
    print(f"{'group':<58} {'replay mJ':>9} {'±1σ':>6} {'busy µs':>8} {'replay W':>8} {'model mJ':>9} {'err':>7}"
          f" {'alone mJ':>9} {'err':>7}")  # fmt: skip
    for x in s["rows"]:
        m = f"{x['model_j'] * 1e3:9.3f} {100 * x['err']:+6.1f}%" if "err" in x else f"{'—':>9} {'—':>7}"
        iso = f"{x['isolated_j'] * 1e3:9.3f} {100 * x['err_isolated']:+6.1f}%" if "err_isolated" in x else ""
        print(f"{x['name'][:58]:<58} {x['replay_j'] * 1e3:9.3f} {100 * x['replay_rel_sd']:5.1f}% "
              f"{x['busy_s'] * 1e6:8.1f} {x['replay_w']:8.0f} {m} {iso}")  # fmt: skip
    for key, label in (
        ("all", "every group"),
        ("precise_groups", f"groups replay measured to ≤ {100 * s['precise']:.0f} %"),
    ):
        st = s[key]
        print(f"{label}: {st['with_model']} of {st['groups']} with a model prior; of replay's in-step energy "
              f"{100 * st['within_15pct_share']:.1f} % within ±15 %, {100 * st['within_30pct_share']:.1f} % within "
              f"±30 %; energy-weighted median error {100 * st['weighted_median_err']:+.1f} %")  # fmt: skip
    ratios = sorted(x["ncu_s"] / x["busy_s"] - 1.0 for x in s["rows"] if "ncu_s" in x)
    if ratios:
        med = ratios[len(ratios) // 2]
        print(f"ncu's time per call against CUPTI's busy time in the step: median {100 * med:+.1f} %, "
              f"range {100 * ratios[0]:+.1f} to {100 * ratios[-1]:+.1f} % over {len(ratios)} groups")  # fmt: skip
    c = s["run_coverage"]
    if c:
        print(f"the run's rows with a model prior: {c['rows_with_prior']} of {c['rows']} kernel, memcpy, memset rows, "
              f"{100 * c['energy_share']:.1f} % of their energy")  # fmt: skip
    st = s["isolated"]
    print(f"groups measured alone: {st['with_model']}; the model at their time alone: of their isolated energy "
          f"{100 * st['within_15pct_share']:.1f} % within ±15 %, {100 * st['within_30pct_share']:.1f} % within ±30 %; "
          f"energy-weighted median error {100 * st['weighted_median_err']:+.1f} %")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How far apart a replay prior's call time and the program's are, by session 19's rule and by session 20's.

    python benchmarks/time_parts.py RUN_SET [RUN_SET ...]

A RUN_SET is what ``benchmarks/validate_attribution_real.py --out`` wrote (``summary.json``, ``<workload>-replay/``
and ``<workload>-run/``). For each kernel row of the run with a replay prior of the design, its time part: session
19's, ``|ln(time here / time in replay)|`` with replay's time the design's fit of the replays' wall time
(``context_time_s``), and session 20's, against the group's CUPTI busy time in the whole step (``busy_time_s``, or a
busy design's ``factor_busy_s``) beyond the calls' common shift (the energy-weighted median of the log ratios,
``buffer_fit.time_common``); between them, the busy time without that shift. "Here" is the row's mean call time in
the program (CUPTI, all its calls; the attribution takes its short calls only, nearly all of a training step's);
the weights are each prior's energy in the run (its energy per call × the row's calls), as the attribution's, and
the priors the run capped at their bound are left out, as the attribution leaves them out. Printed per workload:
the rows compared, the common shift, and each rule's weighted mean and plain median time part (%). A workload whose
replay recorded no busy time is named and skipped.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_sets import table_main

HEAD = (
    f"{'gpu  set  board        workload':34s} {'rows':>4s} {'common%':>8s}  "
    f"{'s19 mean':>8s} {'median':>6s}  {'busy mean':>9s} {'median':>6s}  {'s20 mean':>8s} {'median':>6s}"
)


def _parts(run: Path, name: str) -> tuple[float, ...] | str:
    """(rows, common shift, s19's energy-weighted mean and median, the busy time's without the shift, s20's) in %, or
    why the workload is skipped."""
    from archline.core.activity import demangle
    from archline.measurement.attribute.buffer_fit import time_common

    rep = json.loads((run / f"{name}-replay" / "replay.json").read_text())
    d = rep.get("design") or {}
    with (run / f"{name}-replay" / "replay.csv").open(newline="") as fh:
        groups = list(csv.DictReader(fh))
    f_names, f_busy = d.get("factor_names") or [], d.get("factor_busy_s") or []
    busy = dict(zip(f_names, f_busy, strict=True)) if len(f_names) == len(f_busy) else {}  # as prior.py reads it
    names = demangle([str(g.get("group", "")) for g in groups])
    # demangled name -> (context time per call, busy time per call, the prior's energy per call)
    by_name: dict[str, tuple[float, float, float]] = {}
    for g in groups:
        n = int(float(g.get("nodes_per_step") or 0))
        ctx = float(g.get("context_time_s") or "nan")
        bt = float(g.get("busy_time_s") or busy.get(g["group"], math.nan) or math.nan)
        if n > 0 and g.get("context_j") and ctx > 0 and bt > 0:
            by_name[names.get(g["group"], g["group"])] = (ctx / n, bt / n, float(g["context_j"]) / n)
    if not by_name:
        return "no CUPTI busy time in its replay"
    att: dict[str, Any] = json.loads((run / f"{name}-run" / "attribution.json").read_text())
    capped = set((att.get("extra") or {}).get("capped_priors_w") or {})  # left out, as the attribution leaves them
    old, new, w = [], [], []
    for r in att["rows"]:
        t = by_name.get(r["name"])
        if r.get("kind") != "kernel" or t is None or r["name"] in capped or not float(r.get("mean_time_s") or 0) > 0:
            continue
        here = float(r["mean_time_s"])
        old.append(math.log(here / t[0]))
        new.append(math.log(here / t[1]))
        w.append(t[2] * float(r["calls"]))  # the prior's energy in the run, as buffer_fit.prior_arrays weights it
    if len(new) < 2:
        return "fewer than two rows to compare"
    a, b, wt = np.array(old), np.array(new), np.array(w)
    common = time_common(b.tolist(), wt.tolist())
    b_rel = np.abs(b - (common if math.isfinite(common) else 0.0))

    def mean(x: np.ndarray[Any, np.dtype[np.float64]]) -> float:
        return float(100 * np.sum(wt * x) / np.sum(wt))

    return (
        len(new),
        100 * math.expm1(common) if math.isfinite(common) else math.nan,
        mean(np.abs(a)),
        float(100 * np.median(np.abs(a))),
        mean(np.abs(b)),
        float(100 * np.median(np.abs(b))),
        mean(b_rel),
        float(100 * np.median(b_rel)),
    )


def _line(att: dict[str, Any], got: tuple[float, ...]) -> str:
    n, common, om, omed, bm, bmed, nm, nmed = got
    return f"{int(n):4d} {common:+8.1f}  {om:8.1f} {omed:6.1f}  {bm:9.1f} {bmed:6.1f}  {nm:8.1f} {nmed:6.1f}"


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, __doc__, HEAD, "time_parts", _parts, _line)


if __name__ == "__main__":
    raise SystemExit(main())

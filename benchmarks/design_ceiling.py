"""How far issue 13's ≥ 80 % within ±15 % is from every shipped run set, even with the prior's call-time part gone.

    python benchmarks/design_ceiling.py RUN_SET [RUN_SET ...]

Session 31, post hoc planning on the shipped runs (no GPU): ``design_power.py``'s fold model of each prior-led row
(the design's se and its neighbour dependence ρ_f, the call-time part |ln(time here / time in replay)|, the priors'
scale, the row's own ratio k of half-width to prior σ in the run), asked four questions per workload:

* ``own``: the share of kernel energy within ±15 % the model gives at the run's own design (as design_power's
  ``model%``);
* ``own-nt``: the same with the call-time part taken out of every row (a replay whose kernels ran exactly as fast
  as the program's);
* ``1280-nt``: that at 1280 configurations (16 times session 22's design, about an hour of replay at 3 s a
  configuration), the design's own noise nearly gone;
* ``rho0``: at the run's own design with no neighbour dependence (ρ_f = 0) but the call-time part kept.

A last line counts, over the workloads scored, how many reach 80 % in each column, CNNs (ResNet-50, VGG-16) apart.
Rows the windows did not lean on a replay prior for are as the run had them (the model counts only prior-led rows,
so its share can be below the run's). Planning, not a score: it says which part of a row's width stands between a
run and the target, not what a run would measure.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from design_power import LONG, TARGET, Row, _rows, share
from run_sets import each_workload, summaries

HEAD = f"{'gpu  set board        workload':34s} {'cfgs':>4s} {'rho_f':>5s} {'run%':>5s} {'own':>6s} {'own-nt':>6s} " \
    f"{'1280-nt':>7s} {'rho0':>6s}"  # fmt: skip
COLUMNS = ("own", "own-nt", "1280-nt", "rho0")
CNN = ("resnet", "vgg")


def ceilings(got: tuple[list[Row], dict[str, Any], float, float]) -> dict[str, float]:
    """The four shares (%) of the module docstring for one workload's rows, design, ⟨e²⟩ and kernel energy."""
    rows, d, m2, total = got
    n0, rho = int(d["configurations"]), float(d.get("rho_fold", d.get("rho_up", float("nan"))))
    no_time = [replace(r, time=0.0) for r in rows]
    return {
        "own": share(rows, total, m2, n0, n0, 0.5, rho),
        "own-nt": share(no_time, total, m2, n0, n0, 0.5, rho),
        "1280-nt": share(no_time, total, m2, n0, LONG, 0.5, rho),
        "rho0": share(rows, total, m2, n0, n0, 0.5, 0.0),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    a = ap.parse_args(argv)
    if summaries(a.runs, "design_ceiling") is None:
        return 2
    scored: list[dict[str, float]] = []

    def show(att: dict[str, Any], got: tuple[list[Row], dict[str, Any], float, float]) -> str:
        d = got[1]
        c = ceilings(got)
        rho = float(d.get("rho_fold", d.get("rho_up", float("nan"))))
        run_share = 100 * float(att.get("identifiable_within_15pct_share") or 0.0)
        scored.append(c)
        return f"{int(d['configurations']):4d} {100 * rho:5.1f} {run_share:5.1f} " + " ".join(
            f"{c[k]:{max(6, len(k))}.1f}" for k in COLUMNS
        )

    def analyse(run: Path, name: str) -> tuple[list[Row], dict[str, Any], float, float] | str:
        got = _rows(run, name)
        if not isinstance(got, str):
            names.append(name)
        return got

    names: list[str] = []
    print(HEAD)
    rc = each_workload(a.runs, "design_ceiling", analyse, show)
    if rc:
        return rc
    cnn = [any(w in n for w in CNN) for n in names]
    cells = []
    for k in COLUMNS:
        hit = [i for i, c in enumerate(scored) if c[k] >= 100 * TARGET]
        cells.append(f"{k} {len(hit)} ({sum(cnn[i] for i in hit)} CNN)")
    print(f"reach {100 * TARGET:.0f} %, of {len(scored)} workloads scored ({sum(cnn)} CNN): " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Print what each replay prior says a kernel draws over its time per call in an attribution run's loop.

    python benchmarks/prior_powers.py RUN_DIR REPLAY_DIR [--top N] [--limit-w W]

RUN_DIR is an ``archline run`` directory (its ``kernels.csv`` gives each kernel's calls and traced time), REPLAY_DIR
the ``archline replay`` directory whose priors the run used. One line per kernel with a prior, by the loop's energy
at the prior: energy per call and time per call where the prior was measured, the loop's time per call, the prior's
power over that time, and ``over`` where it exceeds the board's limit × 1.05 (the limit from the run's
``attribution.json`` unless ``--limit-w``), which the attribution caps (``column_fit.cap_impossible_priors``).
The last line counts them. Bad input is one line and exit 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

HEAD = "loop J   mJ/call  µs there  µs here   W there  W here      name"


def _kernels(run: Path) -> dict[str, tuple[int, float]]:
    """Each kernel row's calls and traced time (s) from ``RUN_DIR/kernels.csv``."""
    out: dict[str, tuple[int, float]] = {}
    with (run / "kernels.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r.get("kind") == "kernel" and int(r["calls"]) > 0:
                out[r["name"]] = (int(r["calls"]), float(r["time_s"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("replay", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--limit-w", type=float, default=None)
    a = ap.parse_args(argv)
    from archline.cli.run_cmd import read_replay_priors
    from archline.errors import InputError
    from archline.measurement.attribute.buffer_fit import LIMIT_SLACK

    try:
        kernels = _kernels(a.run)
        priors = read_replay_priors(a.replay)
        limit = a.limit_w
        if limit is None:
            limit = float(json.loads((a.run / "attribution.json").read_text())["extra"]["power_limit_w"])
    except (OSError, KeyError, ValueError, TypeError, InputError) as exc:
        print(f"prior_powers: {a.run} / {a.replay}: {exc}", file=sys.stderr)
        return 2
    bound = limit * LIMIT_SLACK
    lines = []
    for name, p in priors.items():
        if name not in kernels:
            continue
        calls, t = kernels[name]
        here = t / calls
        there = p.time_per_call_s
        w_here = p.energy_per_call_j / here
        w_there = p.energy_per_call_j / there if there > 0 else math.nan
        lines.append((p.energy_per_call_j * calls, p.energy_per_call_j, there, here, w_there, w_here, name))
    lines.sort(key=lambda x: -x[0])
    print(HEAD)
    for e, ec, there, here, wt, wh, name in lines[: a.top]:
        flag = "over" if wh > bound else "    "
        print(f"{e:7.1f} {1e3 * ec:8.3f} {1e6 * there:9.1f} {1e6 * here:8.1f} {wt:8.0f} {wh:7.0f} {flag} {name[:70]}")
    over = sum(1 for x in lines if x[5] > bound)
    print(f"{over} of {len(lines)} priors over the limit × {LIMIT_SLACK:g} = {bound:.0f} W at the loop's time per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())

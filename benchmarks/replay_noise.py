"""Each measured group's 1 σ per pass in a graph replay (a check of session 23's figures).

    python benchmarks/replay_noise.py REPLAY_DIR [REPLAY_DIR ...]

A replay that made k passes records each group's energy as the mean of its k passes with the σ of that mean
(``replay.csv``'s ``energy_j``, ``energy_sigma_j``; ``replay.json``'s ``repeats``): one pass's 1 σ is that σ × √k. It
is printed as a share of the group's energy (net of the fixed cost, as replay records it), for every measurable
kernel group and the fixed cost's row, with the group's power alone. A directory that is not a replay is one line
and exit 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path


def rows(replay_dir: Path) -> list[tuple[str, float, float]]:
    """(group, one measurement's 1 σ in % of its energy, mean power W) of each measurable kernel group and the fixed
    cost; ValueError where the directory holds no replay."""
    try:
        doc = json.loads((replay_dir / "replay.json").read_text(encoding="utf-8"))
        with (replay_dir / "replay.csv").open(newline="", encoding="utf-8") as fh:
            table = list(csv.DictReader(fh))
    except (OSError, csv.Error) as exc:
        raise ValueError(f"not a replay directory ({exc.__class__.__name__}: {exc})") from exc
    k = int(doc.get("repeats") or 1) if isinstance(doc, dict) else 1
    out = []
    for r in table:
        kind, group = r.get("kind", ""), r.get("group", "")
        if str(r.get("measurable", "")).lower() != "true" or not (kind == "kernel" or group.startswith("[a replay")):
            continue
        try:
            e, sd, w = float(r["energy_j"]), float(r["energy_sigma_j"]), float(r["mean_power_w"])
        except (KeyError, ValueError):
            continue
        if e > 0 and math.isfinite(sd):
            out.append((group, 100.0 * sd * math.sqrt(k) / e, w))
    if not out:
        raise ValueError("no measured group in replay.csv")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("replays", nargs="+", type=Path)
    args = ap.parse_args(argv)
    lines = []
    for p in args.replays:
        try:
            got = rows(p)
        except ValueError as exc:
            print(f"replay_noise: {p}: {exc}", file=sys.stderr)
            return 2
        lines.append(f"== {p}")
        lines += [f"  {g[:46]:46s} {s:6.2f} % {w:5.0f} W" for g, s, w in got]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A shipped attribution redone with each kernel name's calls split by their length: does the share within ±15 % move?

    python benchmarks/split_by_length.py RUN_DIR REPLAY_DIR [--cupti FILE.bin[.gz|.xz] ...] [--sensor-profiles FILE]

Session 31, post hoc, no GPU. ``archline run`` fits one power per kernel name, and a per-name power cannot fit a name
whose calls are of shapes that draw different powers: on session 22's transformer run its largest cuBLAS GEMM name
ran calls of 57 and 181 µs (this script's output there, docs/data/split_by_length_s31.txt). Here the run is attributed
twice, as ``benchmarks/redo_attribution.py`` redoes it (the run's sensor model,
power limit, burst ceiling and REPLAY_DIR's priors): as run, and with every kernel name whose sorted log call times
jump by more than ln 1.25 between two calls (with at least 5 % of its calls on either side) split into classes at
those jumps, each class a column of its own (``NAME [class K]``) with its name's replay prior at the name's power (the
prior's energy and time per call scaled by the class's mean call time over the name's). Prints, for each: the kernel
rows, the share of kernel energy in identifiable rows within ±15 % at 95 % (issue 13's figure), the windows the fit
used, and the replay priors' calibrated scale, whether the windows refuted their spread, and ρ's bound; then the
names split and their share of the kernel energy, and the three largest with their classes' mean call times. A figure,
not a rule: nothing in archline splits names.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: A jump in the sorted log call times larger than this splits a name's calls (a ratio of call times).
JUMP = 1.25
#: Each side of a split holds at least this share of the name's calls.
MIN_SHARE = 0.05
KERNEL_KINDS = ("kernel", "memcpy", "memset")


def cuts(times_s: Sequence[float], jump: float = JUMP, min_share: float = MIN_SHARE) -> list[float]:
    """The log call times between which a name's calls are split (empty: one class)."""
    x = np.sort(np.log(np.asarray(times_s, np.float64)))
    if x.size < 2:
        return []
    gaps = np.diff(x)
    return [
        float(0.5 * (x[i] + x[i + 1]))
        for i in np.flatnonzero(gaps > math.log(jump))
        if min_share * x.size <= i + 1 <= (1.0 - min_share) * x.size
    ]


def split_activities(acts: Sequence[Any], priors: dict[str, Any]) -> tuple[list[Any], dict[str, Any], dict[str, int]]:
    """The activities with each splittable kernel name's calls renamed ``NAME [class K]``, the priors with each class
    given its name's at the name's power, and the classes of each name split."""
    from archline.core.activity import demangle

    by: dict[str, list[float]] = {}
    for a in acts:
        if a.kind == "kernel":
            by.setdefault(a.name, []).append(a.end_s - a.start_s)
    at = {n: cuts(v) for n, v in by.items()}
    out, cls_t = [], {}
    for a in acts:
        c = at.get(a.name) if a.kind == "kernel" else None
        if c:
            name = f"{a.name} [class {int(np.searchsorted(c, math.log(a.end_s - a.start_s)))}]"
            cls_t.setdefault(name, []).append(a.end_s - a.start_s)
            out.append(dataclasses.replace(a, name=name))
        else:
            out.append(a)
    plain = demangle(list(by))
    split = {n: len(c) + 1 for n, c in at.items() if c}
    new = dict(priors)
    for n in split:
        pr = priors.get(plain.get(n, n), priors.get(n))
        if pr is None:
            continue
        mean_t = float(np.mean(by[n]))
        for name, ts in cls_t.items():
            if not name.startswith(f"{n} [class "):
                continue
            r = float(np.mean(ts)) / mean_t
            t = pr.time_per_call_s * r if math.isfinite(pr.time_per_call_s) else pr.time_per_call_s
            key = demangle([name]).get(name, name)
            new[key] = dataclasses.replace(pr, energy_per_call_j=pr.energy_per_call_j * r, sd_j=pr.sd_j * r,
                                           time_per_call_s=t)  # fmt: skip
    return out, new, split


def load(d: Path, replay: Path, cupti: list[Path], profiles: Path | None = None) -> tuple[Any, ...]:
    """The run's recording, activities, span, traced intervals, options (its sensor model, or ``profiles``', its
    power limit and burst ceiling, as ``redo_attribution.py`` takes them) and REPLAY_DIR's priors."""
    from dataclasses import replace

    from redo_attribution import board_limits, buffer_model_choice, cut_inputs, open_run, profile_model

    from archline.cli.run_cmd import read_replay_priors
    from archline.measurement.attribute.attribution import AttributionOptions

    manifest = open_run(d, cupti)
    model = profile_model(profiles)[0] if profiles is not None else buffer_model_choice(manifest).model
    opts = AttributionOptions(buffer_model=model)
    limit, ceiling = board_limits(manifest)
    if limit is not None:
        opts = replace(opts, power_limit_w=limit)
    if ceiling is not None:
        opts = replace(opts, power_ceiling_w=ceiling.power_w)
    rec, acts, span, traced = cut_inputs(d, 0.0)
    return rec, acts, span, traced, opts, dict(read_replay_priors(replay))


def attribute(loaded: tuple[Any, ...], split: bool) -> tuple[Any, dict[str, int]]:
    """The run :func:`load` read, attributed (module docstring) with its names split or not."""
    from dataclasses import replace

    from archline.measurement.attribute.attribution import attribute_energy

    rec, acts, span, traced, opts, priors = loaded
    classes: dict[str, int] = {}
    if split:
        acts, priors, classes = split_activities(acts, priors)
    opts = replace(opts, priors=priors)
    return attribute_energy(rec, acts, program_span=span, options=opts, traced=traced), classes


def line(res: Any) -> str:
    """One redo's figures (module docstring)."""
    rows = [r for r in res.rows if r.kind in KERNEL_KINDS]
    total = sum(r.energy_j for r in rows)
    within = sum(r.energy_j for r in rows if r.identifiable and r.energy_hi_j - r.energy_lo_j <= 0.30 * r.energy_j)
    fit = (res.extra.get("prior_fit") or {}).get("replay") or {}

    def num(v: Any, spec: str) -> str:
        return format(float(v), spec) if isinstance(v, int | float) and math.isfinite(v) else "—"

    return (
        f"{len(rows)} kernel rows, within ±15 % {100 * within / total:.1f} %, fitted on the "
        f"{res.extra.get('fit_windows')}'s windows; replay priors' scale {num(fit.get('scale'), '.3f')}, "
        f"refuted {bool(fit.get('refuted'))}, ρ's bound {num(100 * float(fit.get('rho_up', math.nan)), '.1f')} %"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("replay_dir", type=Path)
    ap.add_argument("--cupti", type=Path, nargs="*", default=[])
    ap.add_argument("--sensor-profiles", type=Path, help="the buffer's model from this calibration's profiles.json")
    a = ap.parse_args(argv)
    for p, what in ((a.run_dir, "manifest.json"), (a.replay_dir, "replay.csv")):
        if not (p / what).is_file():
            print(f"{p / what}: no such file", file=sys.stderr)
            return 2
    from archline.errors import ArchlineError

    try:
        loaded = load(a.run_dir, a.replay_dir, list(a.cupti), a.sensor_profiles)
        plain, _ = attribute(loaded, False)
        split, classes = attribute(loaded, True)
    except (SystemExit, ArchlineError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"redone:                       {line(plain)}")
    print(f"redone, split by call length: {line(split)}")
    energy = {r.name: r.energy_j for r in plain.rows if r.kind in KERNEL_KINDS}
    total = sum(energy.values())
    from archline.core.activity import demangle

    names = demangle(list(classes))
    held = sum(energy.get(names.get(n, n), 0.0) for n in classes)
    print(f"names split: {len(classes)} ({sum(classes.values())} classes), {100 * held / total:.1f} % of the kernel "
          "energy, redone")  # fmt: skip
    # the three largest names split, with their classes' mean call times (µs), from the trace
    times: dict[str, list[float]] = {}
    for act in loaded[1]:
        if act.kind == "kernel" and act.name in classes:
            times.setdefault(act.name, []).append(act.end_s - act.start_s)
    for n in sorted(classes, key=lambda n: -energy.get(names.get(n, n), 0.0))[:3]:
        c = cuts(times[n])
        t = np.asarray(times[n])
        k = np.searchsorted(c, np.log(t))
        means = ", ".join(f"{1e6 * float(t[k == i].mean()):.0f}" for i in range(len(c) + 1))
        print(f"  {100 * energy.get(names.get(n, n), 0.0) / total:4.1f} % {names.get(n, n)[:70]}: calls of {means} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Graph replay's per-group energies from one process to the next: issue 13's 3 % reproducibility across runs.

    python benchmarks/replay_across.py REPLAY_DIR REPLAY_DIR [REPLAY_DIR ...]
    python benchmarks/replay_across.py --tally RESULTS_DIR

``archline replay``'s repeats share one capture and one process (docs/replay.md, "Reproducibility"); a new process
captures the step again, and cuDNN and cuBLAS may choose other algorithms at warm-up. Given the run directories of
two or more separate replays of the same step on one board (``replay.csv`` and ``replay.json`` each), this matches
the measured groups by name and judges each group's isolated energy per step across the runs exactly as replay
judges its repeats (``replay_stats.reproducibility``: the range of the runs in % of their mean, two-sided; a group
whose reported σ alone would spread it beyond the target is left unresolved unless its spread is beyond that
noise). It prints each group's energies and spread, each group's SM clock alone in each run where the replays
recorded it (from session 22 on; '*' where the board slowed its clocks), the whole step's, the groups measured in some
runs only (a different capture), and the verdict. The runs must name one board (their manifests' GPU UUID): a
comparison across boards is refused. Exit 0 on PASS, 1 otherwise, 2 with one line on bad input.

``--raw`` (information, session 22, post hoc): judges each group's isolated replay as measured, before a replay's
fixed cost (a replay with no group enabled) is taken out of it, i.e. the group's energy plus the fixed cost's, each
run its own. Where the groups move together by what the fixed cost moved and not as measured, the spread comes from
the fixed cost's measurement, not from the groups (docs/replay.md "Session 22"). Runs whose replays took no fixed
cost out are refused with --raw.

``--tally RESULTS_DIR``: every shipped pair (``<gpu>/replay-across-sNN-…/{a,b}/<workload>``) from session 19 on,
judged as above, one line each, then each workload's count of boards judged and passing, by GPU kind (a board passes
when every pair on it passes): the figures docs/replay.md and the README give. Exit 0 whatever the verdicts (it
counts them), 2 with one line on bad input (a half pair included). Session 18's pairs are left out: their processes
measured the first five groups in capture order, not the five largest by busy time as every pair since
(docs/replay.md "Session 19").
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from archline.core.activity import demangle, short_name
from archline.measurement.attribute.replay_stats import Energy, mean_of_runs, reproducibility, run_spread_pct

TARGET_PCT = 3.0


class BadInput(Exception):
    """A replay directory that cannot be read, or runs that cannot be compared."""


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


FIXED = "[a replay's fixed cost]"


def _csv_rows(run: Path) -> list[dict[str, str]]:
    """replay.csv's rows; a malformed file raises ValueError (csv.Error's message kept)."""
    try:
        with (run / "replay.csv").open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except csv.Error as exc:
        raise ValueError(f"replay.csv: {exc}") from exc


def load(run: Path, raw: bool = False) -> tuple[str, dict[str, Energy], Energy]:
    """(board UUID, {group: isolated energy per step}, the whole step) of one replay directory; ``raw``: each kernel
    group with the run's fixed cost added back (its energy and time, and the replay's own σ)."""
    try:
        rows = _csv_rows(run)
        doc = json.loads((run / "replay.json").read_text(encoding="utf-8"))
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput(f"{run}: not a replay directory ({exc.__class__.__name__}: {exc})") from exc
    gpu = manifest.get("gpu") if isinstance(manifest, dict) else None
    if not isinstance(doc, dict) or not isinstance(gpu, dict) or (rows and "group" not in rows[0]):
        raise BadInput(f"{run}: not a replay directory (replay.json or manifest.json is not an object with a 'gpu', "
                       "or replay.csv has no 'group' column)")  # fmt: skip
    uuid = str(gpu.get("uuid") or "")
    groups = {}
    for r in rows:
        if str(r.get("measurable", "")).lower() != "true":
            continue
        e, sd, t = _num(r.get("energy_j")), _num(r.get("energy_sigma_j")), _num(r.get("time_s"))
        if math.isfinite(e) and math.isfinite(sd):
            mhz = _num(r.get("sm_clock_mhz"))
            reasons = tuple(x for x in str(r.get("clock_event_reasons") or "").split(",") if x)
            groups[str(r["group"])] = Energy(e, sd, t, 0, mhz if math.isfinite(mhz) else None, reasons)
    if raw:
        fixed = groups.get(FIXED)
        if fixed is None:
            raise BadInput(f"{run}: its replay took no fixed cost out (no {FIXED!r} row): nothing to add back (--raw)")
        # the isolated replay as measured: its energy and time before the fixed cost was taken out, and its own σ
        # (a group's σ is the replay's and the fixed cost's in quadrature)
        groups = {
            g: e if g.startswith("[") else Energy(
                e.energy_j + fixed.energy_j, math.sqrt(max(e.sigma_j**2 - fixed.sigma_j**2, 0.0)),
                e.time_s + fixed.time_s, 0, e.sm_clock_mhz, e.clock_reasons,
            )
            for g, e in groups.items()
        }  # fmt: skip
    step = Energy(_num(doc.get("step_energy_j")), _num(doc.get("step_sigma_j")), _num(doc.get("step_time_s")))
    if not groups or not math.isfinite(step.energy_j):
        raise BadInput(f"{run}: no measured group or no whole-step energy in its replay.csv / replay.json")
    return uuid, groups, step


class Comparison(NamedTuple):
    """compare's printed lines, whether every judged group is within the target, the board (UUID prefix) and the
    verdict: PASS, PASS (coarse), FAIL, FAIL (coarse) or UNRESOLVED."""

    lines: list[str]
    ok: bool
    board: str
    verdict: str


def compare(runs: list[Path], target_pct: float = TARGET_PCT, raw: bool = False) -> Comparison:
    """The printed lines and the verdict of the runs' groups against ``target_pct`` (``raw``: each group as
    measured, the fixed cost not taken out)."""
    loaded = [load(r, raw) for r in runs]
    boards = {u for u, _, _ in loaded}
    if len(boards) != 1 or "" in boards:
        raise BadInput(f"the runs name {len(boards)} boards ({', '.join(sorted(b[:12] for b in boards))}): compare "
                       "runs of one board")  # fmt: skip
    names = [set(g) for _, g, _ in loaded]
    common = sorted(set.intersection(*names), key=lambda g: -loaded[0][1][g].energy_j)
    only = sorted(set.union(*names) - set(common))
    # replay's own rows ("[all other nodes]", "[a replay's fixed cost]", ...) depend on which groups each capture
    # measured and on what it took out: shown, never judged; runs that differ in them are not comparable
    parts = [{g for g in n if g.startswith("[")} for n in names]
    common, shown_only = [g for g in common if not g.startswith("[")], [g for g in common if g.startswith("[")]
    board = next(iter(boards))[:12]
    what = " (raw: each group with its run's fixed cost added back; information)" if raw else ""
    lines = [f"board {board}, {len(runs)} runs{what}: {', '.join(str(r) for r in runs)}",
             f"{'group':<60} {'energy per step, each run (J)':<34} {'spread':>7} {'noise':>7}"]  # fmt: skip
    judged: list[tuple[str, float | None, float | None]] = []
    full = demangle(common)
    shown = {g: short_name(full[g], 60) for g in common}
    for g in common:
        each = [gs[g] for _, gs, _ in loaded]
        _, spread, noise = mean_of_runs(each)
        judged.append((g, spread, noise))
        vals = " ".join(f"{e.energy_j:.4f}" for e in each)
        lines.append(f"{shown[g][:60]:<60} {vals:<34} {_pct(spread):>7} {_pct(noise):>7}")
    lines += _clock_lines(common, shown, loaded)
    for g in shown_only:
        vals = " ".join(f"{gs[g].energy_j:.4f}" for _, gs, _ in loaded)
        lines.append(f"{g[:60]:<60} {vals:<34} {_pct(run_spread_pct([gs[g].energy_j for _, gs, _ in loaded])):>7}"
                     "  (replay's own row: not judged)")  # fmt: skip
    lines += _fixed_lines(runs)
    steps = [s for _, _, s in loaded]
    lines.append(f"{'whole step':<60} {' '.join(f'{s.energy_j:.4f}' for s in steps):<34} "
                 f"{_pct(run_spread_pct([s.energy_j for s in steps])):>7}")  # fmt: skip
    if only:
        some = ", ".join(short_name(n, 50) for n in demangle(only).values())
        lines.append(f"measured in some runs only (another capture): {some}")
    if any(p != parts[0] for p in parts) or any(set(gs) - set(common) - parts[0] for _, gs, _ in loaded):
        odd = (
            ", ".join(sorted(set[str]().union(*parts) - parts[0].intersection(*parts[1:])))
            or "groups only some measured"
        )
        lines.append(f"UNRESOLVED: the captures measured different groups or took out different parts of the step "
                     f"({odd}), so replay's rows for the rest differ by more than any group's energy")  # fmt: skip
        return Comparison(lines, False, board, "UNRESOLVED")
    rep = reproducibility(judged, target_pct)
    if rep is None:
        lines.append("no group measured in every run: nothing to judge")
        return Comparison(lines, False, board, "UNRESOLVED")
    lines.append(
        f"across processes: median spread {rep['median_spread_pct']:.2f} %, max {rep['max_spread_pct']:.2f} % "
        f"({shown[rep['worst_group']][:50]}); {len(rep['groups_outside_target'])} of {rep['groups']} groups outside "
        f"{target_pct:g} %; {len(rep['groups_unresolved'])} too noisy to judge; {rep['verdict']} ({rep['resolution']})"
    )
    coarse = " (coarse)" if str(rep["resolution"]).startswith("coarse") else ""
    return Comparison(lines, rep["verdict"] == "PASS", board, f"{rep['verdict']}{coarse}")


Loaded = tuple[str, dict[str, Energy], Energy]


def _fixed_lines(runs: list[Path]) -> list[str]:
    """Where every run made several passes: the fixed cost each pass took out (from session 23 on, the mean of its
    measurements in that pass) and their spread inside each run, beside the spread of the runs' means above."""
    each: list[list[float]] = []
    for run in runs:
        try:
            row = next((r for r in _csv_rows(run) if r.get("group") == FIXED), None)
        except (OSError, ValueError) as exc:
            raise BadInput(f"{run}: not a replay directory ({exc.__class__.__name__}: {exc})") from exc
        vals = [_num(x) for x in str((row or {}).get("energy_runs_j") or "").split(";") if x]
        if len(vals) < 2 or not all(math.isfinite(v) for v in vals):
            return []
        each.append(vals)
    passes = "; ".join(" ".join(f"{v:.4f}" for v in vals) for vals in each)
    spreads = ", ".join(_pct(run_spread_pct(vals)) for vals in each)
    return [f"  fixed cost, each pass of each run (J): {passes}; spread inside each run {spreads}"]


def _clock_lines(common: list[str], shown: dict[str, str], loaded: list[Loaded]) -> list[str]:
    """Each judged group's SM clock alone in each run (MHz; replays from session 22 on record it), a '*' where a
    clock-event reason that slows the clocks was set (a power cap, a thermal or hardware slowdown); none for older
    replays."""
    from archline.hw.nvml import SLOWDOWN_REASONS as slowing

    out = []
    for g in common:
        each = [gs[g] for _, gs, _ in loaded]
        if all(e.sm_clock_mhz is None for e in each):
            continue
        vals = " ".join(
            ("-" if e.sm_clock_mhz is None else f"{e.sm_clock_mhz:.0f}")
            + ("*" if slowing & set(e.clock_reasons) else "")
            for e in each
        )
        reasons = sorted({x for e in each for x in e.clock_reasons if x in slowing})
        out.append(f"  SM clock alone, each run (MHz): {vals}" + (f"  * {', '.join(reasons)}" if reasons else "")
                   + f"  [{shown[g][:30]}]")  # fmt: skip
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}%"


#: The first session whose pairs measured the five largest groups by CUPTI busy time (the tally's start).
TALLY_FROM = 19


def tally(root: Path, target_pct: float = TARGET_PCT) -> list[str]:
    """One line per shipped pair under ``root`` (from session TALLY_FROM on) and each workload's counts. A board
    passes a workload when every pair of it on that board passes; a half pair (a workload in one process's folder
    only) is bad input, not left out."""
    rows: list[tuple[str, int, str, str, str]] = []  # gpu kind, session, board, workload, verdict
    for folder in sorted(root.glob("*/replay-across-s*")):
        m = re.search(r"replay-across-s(\d+)", folder.name)
        if m is None or int(m.group(1)) < TALLY_FROM:
            continue
        found = [
            {d.name for d in (folder / r).iterdir() if d.is_dir()} if (folder / r).is_dir() else set() for r in "ab"
        ]
        if found[0] != found[1] or not found[0]:
            raise BadInput(f"{folder}: a/ and b/ do not hold the same workloads ({sorted(found[0])} against "
                           f"{sorted(found[1])}): a half pair")  # fmt: skip
        for w in sorted(found[0]):
            c = compare([folder / "a" / w, folder / "b" / w], target_pct)
            rows.append((folder.parent.name, int(m.group(1)), c.board, w, c.verdict))
    if not rows:
        raise BadInput(f"{root}: no replay-across pair from session {TALLY_FROM} on")
    out = [f"{'gpu':<5} {'session':<8} {'board':<13} {'workload':<12} verdict"]
    out += [f"{g:<5} s{s:<7} {b:<13} {w:<12} {v}" for g, s, b, w, v in rows]
    for w in sorted({r[3] for r in rows}):
        mine = [r for r in rows if r[3] == w]
        boards = {(r[0], r[2]) for r in mine}
        passing = {b for b in boards if all(r[4].startswith("PASS") for r in mine if (r[0], r[2]) == b)}
        coarse = {b for b in passing if any(r[4] == "PASS (coarse)" for r in mine if (r[0], r[2]) == b)}
        kinds = ", ".join(f"{k.upper()} {sum(1 for b in passing if b[0] == k)} of {sum(1 for b in boards if b[0] == k)}"
                          for k in sorted({b[0] for b in boards}))  # fmt: skip
        out.append(f"{w}: {len(passing)} of {len(boards)} boards pass ({kinds}; {len(coarse)} of the passing boards "
                   f"coarse); {len(mine)} pairs")  # fmt: skip
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"replay_across: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="*", help="replay run directories of one step on one board")
    ap.add_argument("--tally", type=Path, metavar="RESULTS_DIR", help="every shipped pair under it, and the counts")
    ap.add_argument("--target-pct", type=float, default=TARGET_PCT)
    ap.add_argument("--raw", action="store_true", help="judge each group with its run's fixed cost added back")
    try:
        a = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    if a.tally is not None:
        if a.runs or a.raw:
            print("replay_across: --tally takes no run directories and no --raw", file=sys.stderr)
            return 2
        try:
            print("\n".join(tally(a.tally, a.target_pct)))
        except BadInput as exc:
            print(f"replay_across: {exc}", file=sys.stderr)
            return 2
        return 0
    if len(a.runs) < 2:
        print("replay_across: give at least two replay directories", file=sys.stderr)
        return 2
    try:
        lines, ok, _, _ = compare(a.runs, a.target_pct, a.raw)
    except BadInput as exc:
        print(f"replay_across: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

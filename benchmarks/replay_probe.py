"""Which node switches a captured step survives: each group alone, and each group switched off.

    python3 benchmarks/replay_probe.py --out DIR [--workload mlp|transformer|resnet50|vgg16cl] [--jobs 4]
        [--modes alone,without] [--timeout-s 120]

Graph replay loses the CUDA context on real training steps (docs/replay.md). This probe captures
the step once to list its node groups, then tries, each in a child process of its own (a lost
context ends only that child), a replay with only one group enabled and a replay with only that
group disabled. It prints and writes (``DIR/probe-<workload>.json``) which succeed, each trial as it ends (the JSON
is rewritten after each, so a run its time limit ends keeps what it found). A child that does not end within
``--timeout-s`` is killed and counted as a hang (session 29: VGG-16's replay with a cuDNN weight-gradient group alone
did not finish; which of its groups hang alone is what this finds). The children switch nodes by toggling, without
the priming and the state copy ``archline replay`` adds, so what fails here is a candidate, not the replay's own
failure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Each workload's module in benchmarks/workloads and the keywords of its ``make_step`` beyond the device.
MODULES: dict[str, tuple[str, dict[str, Any]]] = {
    "resnet50": ("train_resnet", {}),
    "transformer": ("transformer_step", {}),
    "mlp": ("mlp_step", {}),
    "vgg16cl": ("train_resnet", {"batch": 64, "channels_last": True, "arch": "vgg16"}),
}

CHILD = r"""
import sys, json
sys.path.insert(0, {workloads!r})
from archline.hw.graph import capture_torch
from archline.measurement.attribute.replay import group_nodes, kept_nodes
make = __import__({module!r}).make_step
g = capture_torch(make("cuda:0", **{kwargs!r}), 0)
groups = group_nodes(g.nodes)
if {mode!r} == "list":
    print(json.dumps({{k: len(v) for k, v in groups.items()}}))
    raise SystemExit(0)
idx = groups[{group!r}]
every = [i for v in groups.values() for i in v]
keep = kept_nodes(g.nodes)
g.set_enabled((idx if {mode!r} == "alone" else [i for i in every if i not in set(idx)]) + keep)
for _ in range(3):
    g.replay()
g.synchronize()
g.set_enabled(None)
g.replay()
g.synchronize()
print("ok")
"""


def child(
    module: str, mode: str, group: str = "", kwargs: dict[str, Any] | None = None, timeout_s: float = 120.0
) -> tuple[bool, str]:
    """One child: list the groups, or replay with ``group`` alone or without it; (whether it ended well, its last
    line or why not)."""
    code = CHILD.format(
        workloads=str(HERE / "workloads"), module=module, mode=mode, group=group, kwargs=dict(kwargs or {})
    )
    try:
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:  # killed: a replay that did not finish (or a capture that slow)
        return False, f"HANG: did not end within {timeout_s:g} s"
    tail = (
        (res.stdout.strip().splitlines() or [""])[-1]
        if res.returncode == 0
        else (res.stderr.strip().splitlines() or ["?"])[-1]
    )
    return res.returncode == 0, tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workload", default="mlp", choices=sorted(MODULES))
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--modes", default="alone,without", help="which replays to try per group")
    ap.add_argument("--timeout-s", type=float, default=120.0, help="a child that runs longer is killed: a hang")
    a = ap.parse_args(argv)
    modes = [m for m in a.modes.split(",") if m]
    if not modes or any(m not in ("alone", "without") for m in modes):
        ap.error(f"--modes: {a.modes!r} is not a comma list of alone, without")
    if a.jobs < 1 or not a.timeout_s > 0:
        ap.error(f"--jobs must be ≥ 1 and --timeout-s > 0 (got {a.jobs}, {a.timeout_s:g})")
    a.out.mkdir(parents=True, exist_ok=True)
    module, kwargs = MODULES[a.workload]
    t0 = time.time()
    ok, listing = child(module, "list", kwargs=kwargs, timeout_s=a.timeout_s)
    if not ok:
        print(f"capture failed: {listing}")
        return 1
    groups: dict[str, int] = json.loads(listing)
    print(f"{a.workload}: {len(groups)} groups, {sum(groups.values())} switchable nodes", flush=True)
    trials = [(g, m) for g in groups for m in modes]
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(child, module, m, g, kwargs, a.timeout_s): (g, m) for g, m in trials}
        for fut in as_completed(futures):
            (g, mode), (passed, tail) = futures[fut], fut.result()
            rows.append({"group": g, "nodes": groups[g], "mode": mode, "ok": passed, "detail": tail})
            why = "" if passed else ": " + tail
            print(f"{'ok  ' if passed else 'FAIL'} {mode:8s} {g[:90]} ({groups[g]} nodes){why}", flush=True)
            summary = _summary(a.workload, groups, rows, len(trials), time.time() - t0)
            _write(a.out / f"probe-{a.workload}.json", summary)
    print(f"alone: {summary['alone_ok']}/{len(groups)} survive; without: {summary['without_ok']}/{len(groups)} survive")
    return 0


def _summary(
    workload: str, groups: dict[str, int], rows: list[dict[str, Any]], trials: int, wall_s: float
) -> dict[str, Any]:
    return {
        "workload": workload,
        "groups": len(groups),
        "trials": trials,
        "done": len(rows),
        "alone_ok": sum(1 for r in rows if r["mode"] == "alone" and r["ok"]),
        "without_ok": sum(1 for r in rows if r["mode"] == "without" and r["ok"]),
        "hangs": sum(1 for r in rows if str(r["detail"]).startswith("HANG")),
        "rows": rows,
        "wall_s": wall_s,
    }


def _write(path: Path, summary: dict[str, Any]) -> None:
    """Atomically: a run ended between two trials leaves the last whole JSON."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(path)


if __name__ == "__main__":
    raise SystemExit(main())

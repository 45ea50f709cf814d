"""Which node switches a captured step survives: each group alone, and each group switched off.

    python3 benchmarks/replay_probe.py --out DIR [--workload mlp|transformer|resnet50|vgg16cl] [--jobs 4]
        [--modes alone,without] [--timeout-s 120]
    python3 benchmarks/replay_probe.py --out DIR --workload vgg16cl --walk [--no-workspace-init] [--timeout-s 30]
        [--limit-s 240]

Graph replay loses the CUDA context on real training steps (docs/replay.md). This probe captures
the step once to list its node groups, then tries, each in a child process of its own (a lost
context ends only that child), a replay with only one group enabled and a replay with only that
group disabled. It prints and writes (``DIR/probe-<workload>.json``) which succeed, each trial as it ends (the JSON
is rewritten after each, so a run its time limit ends keeps what it found). A child that does not end within
``--timeout-s`` is killed and counted as a hang (session 29: VGG-16's replay with a cuDNN weight-gradient group alone
did not finish; which of its groups hang alone is what this finds). The children switch nodes by toggling, without
the priming and the state copy ``archline replay`` adds, so what fails here is a candidate, not the replay's own
failure.

``--walk`` replays as ``archline replay`` does (its switching mode, its pinned and kept nodes, a whole step from the
restored state before each switched replay): one child walks the groups in capture order, each alone three times;
one that does not end within ``--timeout-s`` of its start is killed, its group counted a hang, and a new child goes
on after it (``DIR/walk-<workload>[-memsets].json``). ``--no-workspace-init`` keeps only the memsets on, as before
session 30, instead of the memsets and the workspace set-up kernels (replay's ``WORKSPACE_INIT``): the pair of walks
tells whether those kernels are what a hanging group waits for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import queue
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: A Python exception's line in a traceback: ``RuntimeError: …``, ``torch.AcceleratorError: …``.
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)(?::|$)")
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
groups = group_nodes(g.nodes, {workspace_init!r})
if {mode!r} == "list":
    print(json.dumps({{k: len(v) for k, v in groups.items()}}))
    raise SystemExit(0)
idx = groups[{group!r}]
every = [i for v in groups.values() for i in v]
keep = kept_nodes(g.nodes, {workspace_init!r})
g.set_enabled((idx if {mode!r} == "alone" else [i for i in every if i not in set(idx)]) + keep)
for _ in range(3):
    g.replay()
g.synchronize()
g.set_enabled(None)
g.replay()
g.synchronize()
print("ok")
"""


WALK = r"""
import sys, json
sys.path.insert(0, {workloads!r})
from archline.hw.graph import capture_torch
from archline.hw.graph_nodes import SwitchError
from archline.measurement.attribute.replay import _plan
make = __import__({module!r}).make_step
g = capture_torch(make("cuda:0", **{kwargs!r}), 0)
plan, switching = _plan(g, {{}}, workspace_init={workspace_init!r})
kept = [g.nodes[i].name for i in plan.keep if g.nodes[i].kind == "kernel"]
import torch
props = torch.cuda.get_device_properties(0)
board = {{"name": props.name, "uuid": "GPU-" + str(getattr(props, "uuid", "?"))}}
print("plan " + json.dumps({{"mode": switching.mode, "groups": list(plan.groups), "blocked": sorted(plan.blocked),
                             "memsets": len(plan.keep) - len(kept), "kept_kernels": kept, "board": board}}), flush=True)
skip = set(json.loads({skip!r}))
for name in plan.measurable:
    if name in skip:
        continue
    print("try " + json.dumps(name), flush=True)
    try:
        g.restore_state()
        g.set_enabled(None)
        g.replay()
        g.synchronize()
        g.restore_state()
        g.set_enabled(plan.groups[name] + plan.base)
        for _ in range(3):
            g.reset_state()
            g.replay()
        g.synchronize()
    except SwitchError as exc:
        print("fail " + json.dumps([name, str(exc)]), flush=True)
        continue
    print("ok " + json.dumps(name), flush=True)
if "[whole step]" not in skip:  # the whole step at the end, every node on (not again after a child hung in it)
    print("try " + json.dumps("[whole step]"), flush=True)
    g.set_enabled(None)
    g.replay()
    g.synchronize()
print("done", flush=True)
"""


class Lines:
    """A child's stdout, line by line, each wait bounded: ``next(timeout_s)`` is the next line, or None when none came
    in time or the child ended (``ended`` tells which). Its stderr is read as it comes (a child blocked on a full
    pipe would look like a hang); its last lines are kept for :meth:`stop`."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._q: queue.Queue[str | None] = queue.Queue()
        self._err: deque[str] = deque(maxlen=200)
        self.ended = False
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_err, daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._err.append(line.rstrip("\n"))

    def next(self, timeout_s: float) -> str | None:
        try:
            line = self._q.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if line is None:
            self.ended = True
        return line

    def stop(self) -> str:
        """Kill the child (if it runs) and return what its stderr says went wrong (:func:`last_error`)."""
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self._readers[1].join(timeout=5)
        return last_error(list(self._err))


def last_error(lines: list[str]) -> str:
    """The last exception line of a child's stderr (``torch.AcceleratorError: CUDA error: …``), not PyTorch's advice
    after it; else its last line."""
    for line in reversed(lines):
        if EXCEPTION_LINE.match(line.strip()):
            return line.strip()
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "")


def walked_groups(plan: dict[str, Any]) -> list[str]:
    """The groups a walk tries: the plan's, less those pinned on (blocked)."""
    blocked = set(plan.get("blocked", []))
    return [g for g in plan.get("groups", []) if g not in blocked]


def walk(
    module: str,
    kwargs: dict[str, Any],
    *,
    workspace_init: bool,
    timeout_s: float,
    limit_s: float,
    spawn: Callable[[list[str]], Any] = Lines,
    now: Callable[[], float] = time.monotonic,
    capture_s: float = 240.0,
    on_row: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Walk the groups alone in children until each has ended, hung or failed, or ``limit_s`` has passed (checked
    between trials and before a new child: a trial under way gets its whole ``timeout_s``). ``on_row`` gets each row
    as it comes and the walk so far (the result's shape, ``complete`` False, no ``wall_s``)."""
    t0 = now()
    rows: list[dict[str, Any]] = []
    plan: dict[str, Any] = {}
    children = 0
    complete = cut = False

    def result() -> dict[str, Any]:
        return {
            "workspace_init": workspace_init,
            "plan": plan,
            "rows": rows,
            "alone_ok": sum(1 for r in rows if r["ok"]),
            "hangs": [r["group"] for r in rows if str(r["detail"]).startswith("HANG")],
            "errors": [r["group"] for r in rows if str(r["detail"]).startswith("ERROR")],
            "complete": complete,
            "children": children,
        }

    def add(row: dict[str, Any]) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row, result())

    def left() -> bool:
        done = {r["group"] for r in rows}
        return not plan or any(g not in done for g in walked_groups(plan))

    while not complete and not cut:
        if children and now() - t0 > limit_s:  # after a hang or an error: no new child past the limit
            cut = True
            break
        code = WALK.format(
            workloads=str(HERE / "workloads"), module=module, kwargs=dict(kwargs), workspace_init=workspace_init,
            skip=json.dumps([r["group"] for r in rows]),
        )  # fmt: skip
        child = spawn([sys.executable, "-c", code])
        children += 1
        current: str | None = None
        progressed = False
        while True:
            line = child.next(timeout_s if current is not None else capture_s)
            if line is None:
                why = child.stop()
                if current is not None:  # killed in a trial (a hang), or the child died or raised in it (an error)
                    raised = bool(EXCEPTION_LINE.match(why))  # a child that raised and then stuck on its way out
                    if child.ended or raised:
                        detail = f"ERROR: {why or '?'}"
                    else:
                        detail = f"HANG: did not end within {timeout_s:g} s"
                    add({"group": current, "ok": False, "detail": detail})
                    progressed = True
                else:  # before its plan (the capture) or between two groups: another child would do the same
                    where = "[between groups]" if plan else "[capture]"
                    late = f"no line within {capture_s:g} s" if not child.ended else why or "the child ended"
                    add({"group": where, "ok": False, "detail": f"ERROR: {late}"})
                    progressed = False
                break
            kind, _, rest = line.partition(" ")
            if kind == "plan":
                plan = json.loads(rest)
            elif kind == "try":
                current = json.loads(rest)
            elif kind == "ok":
                add({"group": json.loads(rest), "ok": True, "detail": "ok"})
                current, progressed = None, True
            elif kind == "fail":
                name, detail = json.loads(rest)
                add({"group": name, "ok": False, "detail": detail})
                current, progressed = None, True
            elif kind == "done":
                child.stop()
                complete = True
                break
            # past the limit between two trials: stop, unless every group is done (then the last whole step runs)
            if kind in ("ok", "fail") and now() - t0 > limit_s and left():
                child.stop()
                cut = True
                break
        if not progressed and not complete:
            break  # a child that learnt nothing: another would not either
    return {**result(), "wall_s": now() - t0}


def child(
    module: str,
    mode: str,
    group: str = "",
    kwargs: dict[str, Any] | None = None,
    timeout_s: float = 120.0,
    workspace_init: bool = True,
) -> tuple[bool, str]:
    """One child: list the groups, or replay with ``group`` alone or without it; (whether it ended well, its last
    line or why not). ``workspace_init``: the workspace set-up kernels kept on, as replay keeps them (else the
    memsets only, as before session 30)."""
    code = CHILD.format(
        workloads=str(HERE / "workloads"), module=module, mode=mode, group=group, kwargs=dict(kwargs or {}),
        workspace_init=workspace_init,
    )  # fmt: skip
    try:
        res = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:  # killed: a replay that did not finish (or a capture that slow)
        return False, f"HANG: did not end within {timeout_s:g} s"
    tail = (res.stdout.strip().splitlines() or [""])[-1] if res.returncode == 0 else last_error(res.stderr.splitlines())
    return res.returncode == 0, tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="where the probe's or walk's JSON goes (all but --table)")
    ap.add_argument("--workload", default="mlp", choices=sorted(MODULES))
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--modes", default="alone,without", help="which replays to try per group")
    ap.add_argument("--timeout-s", type=float, default=120.0, help="a child that runs longer is killed: a hang")
    ap.add_argument("--walk", action="store_true", help="walk the groups alone as archline replay switches them")
    ap.add_argument(
        "--no-workspace-init", dest="workspace_init", action="store_false",
        help="keep only the memsets on, not the workspace set-up kernels (as before session 30)",
    )  # fmt: skip
    ap.add_argument("--limit-s", type=float, default=240.0, help="--walk: stop starting children after this long")
    ap.add_argument("--table", nargs="+", type=Path, metavar="WALK_JSON", help="print the walks' lines and stop")
    a = ap.parse_args(argv)
    if a.table:
        return table(a.table)
    if a.out is None:
        ap.error("--out is required (all but --table)")
    modes = [m for m in a.modes.split(",") if m]
    if not modes or any(m not in ("alone", "without") for m in modes):
        ap.error(f"--modes: {a.modes!r} is not a comma list of alone, without")
    if a.jobs < 1 or not a.timeout_s > 0:
        ap.error(f"--jobs must be ≥ 1 and --timeout-s > 0 (got {a.jobs}, {a.timeout_s:g})")
    a.out.mkdir(parents=True, exist_ok=True)
    module, kwargs = MODULES[a.workload]
    if a.walk:
        if not a.limit_s > 0:
            ap.error(f"--limit-s must be > 0 (got {a.limit_s:g})")
        return _walk_main(a, module, kwargs)
    t0 = time.time()
    ok, listing = child(module, "list", kwargs=kwargs, timeout_s=a.timeout_s, workspace_init=a.workspace_init)
    if not ok:
        print(f"capture failed: {listing}")
        return 1
    groups: dict[str, int] = json.loads(listing)
    print(f"{a.workload}: {len(groups)} groups, {sum(groups.values())} switchable nodes", flush=True)
    trials = [(g, m) for g in groups for m in modes]
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = {pool.submit(child, module, m, g, kwargs, a.timeout_s, a.workspace_init): (g, m) for g, m in trials}
        for fut in as_completed(futures):
            (g, mode), (passed, tail) = futures[fut], fut.result()
            rows.append({"group": g, "nodes": groups[g], "mode": mode, "ok": passed, "detail": tail})
            why = "" if passed else ": " + tail
            print(f"{'ok  ' if passed else 'FAIL'} {mode:8s} {g[:90]} ({groups[g]} nodes){why}", flush=True)
            summary = _summary(a.workload, groups, rows, len(trials), time.time() - t0)
            _write(a.out / f"probe-{a.workload}.json", summary)
    print(f"alone: {summary['alone_ok']}/{len(groups)} survive; without: {summary['without_ok']}/{len(groups)} survive")
    return 0


def _board(path: Path, walked: dict[str, Any]) -> str:
    """The walk's board: its own record (since session 30's plans), else the nvidia-smi.csv shipped beside it."""
    uuid = str(walked.get("plan", {}).get("board", {}).get("uuid", ""))
    if uuid.startswith("GPU-") and uuid != "GPU-?":
        return uuid[:12]
    smi = path.with_suffix(".nvidia-smi.csv")
    if smi.is_file():
        lines = [ln for ln in smi.read_text().splitlines()[1:] if ln.strip()]
        if len(lines) == 1:
            return lines[0].split(",")[2].strip()[:12]
    return "board ?"


def table(paths: list[Path]) -> int:
    """One line per walk: its board, what was kept on, how many groups alone ended well, which hung."""
    for path in paths:
        try:
            walked = json.loads(path.read_text())
            kept = "memsets and set-up kernels" if walked["workspace_init"] else "memsets only"
            groups = len(walked_groups(walked["plan"]))
            line = (
                f"{_board(path, walked)} {walked['workload']}: {kept} kept on ({len(walked['plan']['kept_kernels'])} "
                f"set-up kernel nodes, switching {walked['plan'].get('mode', '?')}): {walked['alone_ok']} of {groups} "
                f"groups alone ended well, {len(walked['hangs'])} hung, {len(walked['errors'])} errors"
                f"{'' if walked['complete'] else ' (cut short)'}"
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"replay_probe: {path}: not a walk's JSON ({type(exc).__name__}: {exc})", file=sys.stderr)
            return 2
        print(line)
        for h in walked["hangs"]:
            print(f"  hung: {h}")
    return 0


def _walk_main(a: argparse.Namespace, module: str, kwargs: dict[str, Any]) -> int:
    path = a.out / f"walk-{a.workload}{'' if a.workspace_init else '-memsets'}.json"
    kept = "memsets and workspace set-up kernels" if a.workspace_init else "memsets only"
    print(f"{a.workload}: walking the groups alone ({kept} kept on)", flush=True)

    def row(r: dict[str, Any], so_far: dict[str, Any]) -> None:
        why = "" if r["ok"] else ": " + str(r["detail"])
        print(f"{'ok  ' if r['ok'] else 'FAIL'} alone    {r['group'][:110]}{why}", flush=True)
        _write(path, {"workload": a.workload, **so_far})  # what a walk its time limit ends keeps: --table reads it

    res = walk(module, kwargs, workspace_init=a.workspace_init, timeout_s=a.timeout_s, limit_s=a.limit_s, on_row=row)
    _write(path, {"workload": a.workload, **res})
    groups = len(walked_groups(res["plan"]))
    print(
        f"walk ({kept}): {res['alone_ok']} of {groups} groups alone ended well, {len(res['hangs'])} hung, "
        f"{len(res['errors'])} errors, {res['children']} children, {'complete' if res['complete'] else 'cut short'}; "
        f"switching {res['plan'].get('mode', '?')}, kept kernels: {res['plan'].get('kept_kernels', [])}"
    )
    for h in res["hangs"]:
        print(f"hang: {h}")
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

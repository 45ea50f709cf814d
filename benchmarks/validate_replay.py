"""Issue 13's graph replay on real training steps: per-kernel energies, how nodes were switched, reproducibility.

    python3 benchmarks/validate_replay.py --out DIR [--only resnet50,transformer] [--repeats 2] [--top 5]
        [--replay-s 1.0] [--batch 64] [--no-marginal] [--budget-s 200] [--gpu 0]

Each workload (torchvision ResNet-50 training, bf16 autocast, channels_last, synthetic batch;
a 4-layer transformer encoder training step; an MLP step) runs in a child process of its own
that captures one step and runs ``archline.replay`` with ``repeats`` (``DIR/<workload>``: an
archline run directory with its report). The child announces every replay before it runs it;
if the child dies or hangs (a lost CUDA context, a kernel spinning on a buffer a switched-off
node never wrote), the parent kills it after its time, keeps the group whose replay it was out
(enabled in every replay, not measured, with the reason) and starts it again, while time is
left (``--restarts``). So one group never costs the whole step.

For each workload it prints the way nodes were switched (and the nodes the driver refused, with
their launch shape), each group's isolated energy per step in every run, the run-to-run spread
and the verdict against 3 % (two-sided: the range of the runs in % of their mean), and the sum
of the isolated energies against the whole step. ``DIR/summary.json`` holds every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TRIAL = "@@TRIAL "
RESULT = "@@RESULT "
#: Replays whose loss can be pinned on one group (timing, alone, without); others end the workload.
GROUP_TRIALS = ("timing", "alone", "without")
#: Shares of the time budget (ResNet-50 builds and captures slowest, and is the one expected to need a restart).
WEIGHTS = {"resnet50": 3.0, "transformer": 2.0, "mlp": 1.5}
#: Process groups of the children running now (killed if this script is stopped: they run in sessions of their own).
_RUNNING: set[int] = set()


def _stop(signum: int, frame: Any) -> None:
    for pgid in list(_RUNNING):
        os.killpg(pgid, signal.SIGKILL)
    raise SystemExit(128 + signum)


def _design(design: str | None) -> int | str | None:
    """``--design``: None, 'auto' or a number of configurations."""
    return design if design in (None, "auto") else int(str(design))


def child_main(a: argparse.Namespace) -> int:
    """In the child: build the step, replay it, print the result as one JSON line."""
    sys.path.insert(0, str(HERE / "workloads"))
    import archline

    if a.child == "resnet50":
        from train_resnet import make_step

        step = make_step(f"cuda:{a.gpu}", batch=a.batch, channels_last=True)
    elif a.child == "transformer":
        from transformer_step import make_step as make_tstep

        step = make_tstep(f"cuda:{a.gpu}")
    else:
        from mlp_step import make_step as make_mstep

        step = make_mstep(f"cuda:{a.gpu}")

    def hook(group: str, what: str) -> None:
        print(f"{TRIAL}{what} {group}", flush=True)

    res = archline.replay(
        step, gpu=a.gpu, top=a.top, out=a.out / a.child, force=True, max_total_s=a.replay_s,
        marginal=not a.no_marginal, repeats=a.repeats, exclude=json.loads(a.exclude), on_trial=hook,
        design=_design(a.design), design_budget_s=a.design_budget_s,
    )  # fmt: skip
    print(RESULT + json.dumps({"summary": res.summary(), "rows": [r.to_row() for r in res.rows]}), flush=True)
    return 0


def run_child(cmd: Sequence[str], timeout_s: float, log: Path) -> tuple[int | None, list[str]]:
    """Run ``cmd`` (its own process group), echo its lines that are not markers, kill it after ``timeout_s``.

    Returns (exit status, None when it was killed for time; every line it printed).
    """
    lines: list[str] = []
    with log.open("a") as fh:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        _RUNNING.add(proc.pid)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                fh.write(line)
                if not line.startswith(("@@",)):
                    print(f"    | {line.rstrip()[:160]}", flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc: int | None = proc.wait(timeout=max(timeout_s, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child we started, and its own children
            with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in the driver: go on without it
                proc.wait(timeout=15.0)
            rc = None
        finally:
            _RUNNING.discard(proc.pid)
        reader.join(timeout=5.0)
    return rc, lines


def last_trial(lines: Sequence[str]) -> tuple[str, str] | None:
    """(what, group) of the last replay the child announced."""
    for line in reversed(lines):
        if line.startswith(TRIAL):
            what, _, group = line[len(TRIAL) :].partition(" ")
            return what, group
    return None


def last_error(lines: Sequence[str]) -> str:
    for line in reversed(lines):
        s = line.strip()
        if s and not s.startswith("@@"):
            return s[:200]
    return "no output"


def run_workload(
    launch: Callable[[Mapping[str, str], float], tuple[int | None, list[str]]],
    budget_s: Callable[[], float],
    restarts: int,
) -> dict[str, Any]:
    """Launch the child until it gives a result: each time it dies or hangs during a group's replay, that group
    is excluded (kept enabled, not measured) and the child started again, at most ``restarts`` times and while
    ``budget_s()`` leaves time. Returns the result, or an error in one line, with every exclusion made."""
    exclude: dict[str, str] = {}
    for attempt in range(restarts + 1):
        left = budget_s()
        if left < 20.0:
            return {"error": f"out of time before attempt {attempt + 1}", "excluded": exclude}
        rc, lines = launch(dict(exclude), left)
        for line in lines:
            if line.startswith(RESULT):
                return {**json.loads(line[len(RESULT) :]), "excluded": exclude, "attempts": attempt + 1}
        trial = last_trial(lines)
        how = "hung (killed for time)" if rc is None else f"exited {rc}: {last_error(lines)}"
        if trial is None or trial[0] not in GROUP_TRIALS or trial[1] in exclude:
            where = f" during the {trial[0]} replay of {trial[1][:60]}" if trial else ""
            return {"error": f"the child {how}{where}", "excluded": exclude, "attempts": attempt + 1}
        exclude[trial[1]] = f"its replay ({trial[0]}) {how}; kept enabled and not measured"
    return {"error": f"still failing after {restarts} restarts", "excluded": exclude, "attempts": restarts + 1}


def _fmt(v: Any, spec: str) -> str:
    try:
        return format(float(v), spec)
    except (TypeError, ValueError):
        return "—"


def report(name: str, res: Mapping[str, Any]) -> list[str]:
    """The lines printed for one workload."""
    if "error" in res:
        excluded = f" (excluded: {list(res['excluded'])})" if res.get("excluded") else ""
        return [f"PASS/FAIL {name}: ERROR {res['error']}{excluded}"]
    s, rows = res["summary"], res["rows"]
    sw = s.get("switching") or {}
    out = [f"== {name}: nodes switched by '{sw.get('mode')}', {sw.get('not_switchable_nodes', 0)} not switchable"]
    for t in sw.get("tried", []):
        got = t["error"] if "error" in t else f"{t['not_switchable']} not switchable {t.get('first_error', '')}"
        out.append(f"   tried {t['mode']}: {got}")
    for d in sw.get("refused_nodes", [])[:6]:
        out.append(
            f"   refused by {d.get('mode')}: node {d.get('index')} {str(d.get('name'))[:70]} grid {d.get('grid')} "
            f"block {d.get('block')} cluster node {d.get('node_cluster')} compiled {d.get('compiled_cluster')} "
            f"preferred {d.get('preferred_cluster')} non-portable {d.get('non_portable_cluster_allowed')} "
            f"shared {d.get('shared_mem_bytes')} kern {d.get('has_library_kernel')}: {d.get('why')}"
        )
    for r in rows:
        g = str(r["group"])[:70]
        if r.get("measurable") is False:
            out.append(f"   {g}: not measured ({r.get('reason')})")
            continue
        runs = " / ".join(_fmt(e, ".4g") for e in str(r.get("energy_runs_j") or "").split(";") if e)
        marg = "" if r.get("marginal_j") is None else f", marginal {_fmt(r['marginal_j'], '.4g')} J"
        out.append(
            f"   {g}: {_fmt(r['energy_j'], '.4g')} ± {_fmt(r['energy_sigma_j'], '.2g')} J per step (runs {runs}; "
            f"spread {_fmt(r.get('run_spread_pct'), '.2f')} %, noise alone {_fmt(r.get('run_noise_pct'), '.2f')} %)"
            f"{marg}, {_fmt(r['mean_power_w'], '.0f')} W"
            + ("" if r.get("sm_clock_mhz") is None else f", SM {_fmt(r['sm_clock_mhz'], '.0f')} MHz")
            + (f" ({r['clock_event_reasons']})" if r.get("clock_event_reasons") else "")
        )
    out.append(
        f"   sum of isolated {_fmt(s['sum_isolated_j'], '.4g')} J vs whole step {_fmt(s['step_energy_j'], '.4g')} J "
        f"({_fmt(s['sum_vs_step_pct'], '+.2f')} %); whole step runs {[round(e, 4) for e in s.get('step_runs_j', [])]} "
        f"(spread {_fmt(s.get('step_run_spread_pct'), '.2f')} %)"
    )
    rep = s.get("reproducibility")
    if rep:
        from archline.measurement.attribute.replay_stats import unresolved_text

        out.append(
            f"PASS/FAIL {name}: run-to-run spread of {rep['groups']} groups: median {rep['median_spread_pct']:.2f} %, "
            f"max {rep['max_spread_pct']:.2f} % ({str(rep['worst_group'])[:50]}) → {rep['verdict']} against "
            f"{rep['target_pct']:g} % (two-sided){unresolved_text(rep)}; resolution {rep['resolution']}"
        )
    else:
        out.append(f"PASS/FAIL {name}: no reproducibility (one run)")
    if res.get("excluded"):
        out.append(f"   excluded after a lost child: {res['excluded']}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--only", default="resnet50,transformer")
    ap.add_argument("--top", type=int, default=5, help="groups measured one by one")
    ap.add_argument("--repeats", type=int, default=2, help="runs of the whole measurement (reproducibility)")
    ap.add_argument("--replay-s", type=float, default=1.0, help="measuring time per replay configuration")
    ap.add_argument("--batch", type=int, default=64, help="ResNet-50 batch")
    ap.add_argument("--no-marginal", action="store_true", help="skip the marginal energies (half the time)")
    ap.add_argument("--budget-s", type=float, default=200.0, help="wall time for all workloads together")
    ap.add_argument("--restarts", type=int, default=2, help="restarts of a workload after a lost child")
    ap.add_argument("--quick", action="store_true", help="one run, top 3, no marginals")
    ap.add_argument("--design", default=None, help="randomized design: configurations or 'auto' (context energies)")
    ap.add_argument("--design-budget-s", type=float, default=150.0, help="measuring time of the design per workload")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--exclude", default="{}", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.top, a.no_marginal = 1, 3, True
    if a.child:
        return child_main(a)
    t0 = time.monotonic()
    signal.signal(signal.SIGTERM, _stop)  # scripts/device.sh's timeout: take the children down too
    a.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in a.only.split(",") if n]
    from archline.errors import ArchlineError
    from archline.hw.nvml import device_static

    try:
        static = device_static(a.gpu)
        board = f"{static.get('name')} {static.get('uuid')} driver {static.get('driver_version')}"
    except ArchlineError as exc:  # the children will say what is missing, each in one line
        board = f"unknown board ({exc})"
    print(f"board: {board}", flush=True)
    summary: dict[str, Any] = {"board": board, "args": {k: str(v) for k, v in vars(a).items()}, "workloads": {}}
    lines: list[str] = []
    for k, name in enumerate(names):
        left = a.budget_s - (time.monotonic() - t0)
        share = left * WEIGHTS.get(name, 2.0) / sum(WEIGHTS.get(n, 2.0) for n in names[k:])
        deadline = time.monotonic() + share

        def launch(exclude: Mapping[str, str], left_s: float, name: str = name) -> Any:
            cmd = [sys.executable, "-u", __file__, "--child", name, "--out", str(a.out), "--gpu", str(a.gpu),
                   "--top", str(a.top), "--repeats", str(a.repeats), "--replay-s", str(a.replay_s),
                   "--batch", str(a.batch), "--exclude", json.dumps(dict(exclude))]  # fmt: skip
            cmd += ["--no-marginal"] * a.no_marginal
            if a.design is not None:
                cmd += ["--design", a.design, "--design-budget-s", str(a.design_budget_s)]
            return run_child(cmd, left_s, a.out / f"{name}-child.log")

        w0 = time.monotonic()
        print(f"-- {name} (at most {share:.0f} s)", flush=True)
        res = run_workload(launch, lambda deadline=deadline: deadline - time.monotonic(), a.restarts)
        res["wall_s"] = time.monotonic() - w0
        summary["workloads"][name] = res
        lines += report(name, res)
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print("\n".join(["", f"== graph replay on {board} ({time.monotonic() - t0:.0f} s)", *lines]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

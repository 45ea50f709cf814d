"""archline run's whole cost on a launch-bound program, two copies at once on two GPUs of one host (issue 13).

    python benchmarks/overhead_concurrent.py --gpus 0,1 --workload decode --reps 10 --aa 2 --block-s 30 --out DIR

Why: a Python launch-bound loop (GPT-2 decoding) runs 0.3 to 0.8 s a loop on the lent hosts, in slow spells of
seconds that differ from one process to the next (41 % between processes in session 26), so runs made one after the
other cannot place a 3 % cost. Here every repetition starts two copies of the same program at the same moment: one
plain, one under ``archline run`` (its default: sensors, automatic duty-cycled tracing, the injection library), each
on its own GPU and its own CPUs. A slowing of the host that both feel cancels in the ratio of their speeds over the
stretch both run.

* Each child (``bench_run_overhead.py --child NAME --block-s B --wait-go``) sets up and warms up, prints ``READY``
  and waits for a line on its stdin; the parent sends it to both once both are ready, and each then runs its loop
  until its block lasts ``B`` s, stamping the end of each loop.
* Over the stretch both blocks cover, each copy's time per loop is the stretch over the loops it completed in it
  (counted in fractions of a loop: :func:`progress`).
* ``d`` of a repetition is ln(time per loop of the copy in slot 0 / that in slot 1). The recorded copy alternates
  between the slots (repetition 0 records slot 0, 1 slot 1, …), so a pair of repetitions gives the cost free of
  the slots' own difference (GPU, CPUs): ``(d_even - d_odd) / 2`` (:func:`pair_costs`).
* ``--aa N`` repetitions first with neither copy recorded: their ``d`` is the slots' own difference, and how much
  it moves from one repetition to the next is the design's noise, printed beside the verdict.
* The verdict is the one bench_run_overhead.py gives ``auto`` (session 12's, two-sided, on the whole interval):
  the pairs' Hodges-Lehmann estimate with its signed-rank interval, PASS inside ±3 %, FAIL above, NOISE below,
  UNRESOLVED across a limit.
* ``--spin-n N`` (since plan_s28b: the decode loop's main thread is on its CPU all the time, and a spin on one CPU of
  a lent host changed its speed 1.73× over 2 s bins, not with the copies on other CPUs):
  each copy's main thread is pinned to one CPU and times N iterations of a pure-Python loop before its first loop
  and after each; a loop's time over the mean of the spins around it is its time per CPU speed
  (:func:`per_speed`), and the verdict is on that. archline's own work inside the program's thread (CUPTI's
  callbacks, the driver's locks the sensors take) lengthens the loops, not the spins; its threads elsewhere do
  neither unless they share that CPU. The time per loop as it ran is printed beside it.
* The host's steal time (``/proc/stat``) is sampled every second: a slow spell that is the hypervisor's shows
  there.

Writes ``overhead_concurrent.json`` (every loop of every copy, the stretches, the pairs, the verdict) and the
recorded copies' run directories under ``--out``. Needs archline installed (its ``archline`` command) and two GPUs.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run_overhead import (  # this script's folder
    LIMIT,
    WORKLOADS,
    interval_verdict,
    paired_estimate,
    parse_cpus,
)
from overhead_noise import Z90  # the one-sided normal quantile of a two-sided 90 % interval

BENCH = Path(__file__).resolve().parent / "bench_run_overhead.py"


def progress(stamps_s: list[float], t: float) -> float:
    """Loops completed by time ``t`` of a block whose loops end at ``stamps_s[1:]`` (``stamps_s[0]`` its start),
    counting the loop under way in proportion to its time elapsed: 0 before the start, the loop count after the
    end."""
    if len(stamps_s) < 2 or t <= stamps_s[0]:
        return 0.0
    if t >= stamps_s[-1]:
        return float(len(stamps_s) - 1)
    i = bisect.bisect_right(stamps_s, t) - 1  # stamps_s[i] <= t < stamps_s[i + 1]
    a, b = stamps_s[i], stamps_s[i + 1]
    return i + (t - a) / (b - a)


@dataclass(frozen=True)
class Stretch:
    """The stretch two blocks both cover and each one's time per loop in it."""

    start_s: float
    end_s: float
    per_loop_s: tuple[float, float]

    @property
    def d(self) -> float:
        """ln(time per loop of slot 0 / that of slot 1)."""
        return math.log(self.per_loop_s[0] / self.per_loop_s[1])


def common_stretch(a: list[float], b: list[float]) -> Stretch:
    """Each block's time per loop over the stretch both cover (stamps in seconds, as :func:`progress`). ValueError
    where they do not overlap or a block completes no part of a loop there."""
    lo, hi = max(a[0], b[0]), min(a[-1], b[-1])
    if not hi > lo:
        raise ValueError("the two blocks do not overlap")
    n = [progress(s, hi) - progress(s, lo) for s in (a, b)]
    if min(n) <= 0:
        raise ValueError("a block completes nothing in the common stretch")
    return Stretch(lo, hi, ((hi - lo) / n[0], (hi - lo) / n[1]))


def _spins_around(block: dict[str, Any]) -> tuple[list[float], list[float]] | None:
    """(each loop's time, the mean of the spins just before and after it) of a block timed with ``--spin-n``; None
    without spins."""
    loops, spins = block.get("loop_s") or [], block.get("spin_s") or []
    if not loops or len(spins) != len(loops) + 1 or min(spins) <= 0:
        return None
    return loops, [(spins[k] + spins[k + 1]) / 2.0 for k in range(len(loops))]


def per_speed(block: dict[str, Any]) -> float | None:
    """A block's mean time per loop in units of its CPU's speed at the time: each loop's time over the mean of the
    spins just before and after it (``bench_run_overhead.py --spin-n``; the main thread pinned to one CPU, whose
    speed the spins read). None without spins."""
    got = _spins_around(block)
    if got is None:
        return None
    return statistics.fmean(w / s for w, s in zip(*got, strict=True))


def correlation(x: list[float], y: list[float]) -> float | None:
    """Pearson's r, None with fewer than three points or a constant series."""
    if len(x) < 3 or statistics.pstdev(x) == 0 or statistics.pstdev(y) == 0:
        return None
    return statistics.correlation(x, y)


def pair_costs(ds: list[float], recorded: list[int]) -> list[float]:
    """The recording's cost (relative change of the time per loop) from consecutive repetitions that recorded slot
    0 then slot 1: exp((d_0 - d_1) / 2) - 1 per pair, where d = ln(slot 0 / slot 1). The slots' own difference
    (their GPUs and CPUs) is in both d's and cancels. ValueError where the repetitions do not alternate so."""
    if len(ds) != len(recorded) or len(ds) % 2:
        raise ValueError("pairs need an even number of repetitions, each with its recorded slot")
    out = []
    for k in range(0, len(ds), 2):
        if (recorded[k], recorded[k + 1]) != (0, 1):
            raise ValueError(f"repetitions {k} and {k + 1} do not record slot 0 then slot 1")
        out.append(math.expm1((ds[k] - ds[k + 1]) / 2.0))
    return out


#: The bins of :func:`comovement` (s).
BIN_S = 2.0


def comovement(a: list[float], b: list[float], bin_s: float = BIN_S) -> float | None:
    """Pearson's r of the two blocks' log speeds (loops per bin, :func:`progress`) over the bins of ``bin_s`` that
    fit in the stretch both cover: near 1 where the host's slow spells hit both copies alike, so that their ratio
    cancels them. None with fewer than three bins or a constant speed."""
    lo, hi = max(a[0], b[0]), min(a[-1], b[-1])
    n = int((hi - lo) // bin_s)
    if n < 3:
        return None
    edges = [lo + k * bin_s for k in range(n + 1)]
    rates = []
    for s in (a, b):
        p = [progress(s, t) for t in edges]
        done = [q - r for r, q in itertools.pairwise(p)]
        if min(done) <= 0:
            return None
        rates.append([math.log(x) for x in done])
    return correlation(*rates)


def steal_share(samples: list[tuple[float, int, int]], lo: float, hi: float) -> float | None:
    """The share of the CPUs' time the hypervisor took (steal) between ``lo`` and ``hi`` from ``/proc/stat``
    samples (time, steal jiffies, all jiffies): None with fewer than two samples in the stretch."""
    inside = [s for s in samples if lo <= s[0] <= hi]
    if len(inside) < 2 or inside[-1][2] == inside[0][2]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][2] - inside[0][2])


def _read_stat() -> tuple[int, int]:
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts]
    return (vals[7] if len(vals) > 7 else 0), sum(vals)


class StealSampler:
    """/proc/stat's steal and total jiffies every ``period_s`` in a thread, stamped with Unix time."""

    def __init__(self, period_s: float = 1.0) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                steal, total = _read_stat()
            except (OSError, ValueError):
                return
            self.samples.append((time.time(), steal, total))
            self._stop.wait(self.period_s)

    def __enter__(self) -> StealSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Child:
    proc: subprocess.Popen[str]
    lines: list[str]
    ready: threading.Event
    reader: threading.Thread


def _reader(stream: IO[str], lines: list[str], ready: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        if line.strip() == "READY":
            ready.set()
    ready.set()  # ended without READY: the parent finds out from the exit status


def _start(cmd: list[str], env: dict[str, str], log: IO[str]) -> Child:
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
    lines: list[str] = []
    ready = threading.Event()
    assert proc.stdout is not None
    t = threading.Thread(target=_reader, args=(proc.stdout, lines, ready), daemon=True)
    t.start()
    return Child(proc, lines, ready, t)


def _block(child: Child, what: str) -> dict[str, Any]:
    child.proc.wait()
    child.reader.join()
    if child.proc.returncode != 0:
        raise RuntimeError(f"{what} exited {child.proc.returncode}")
    for line in reversed(child.lines):
        if line.startswith("{") and '"stamps_ns"' in line:
            out: dict[str, Any] = json.loads(line)
            return out
    raise RuntimeError(f"{what} printed no block")


def run_pair(
    workload: str,
    gpus: tuple[int, int],
    cpus: tuple[list[int], list[int]],
    block_s: float,
    recorded: int | None,
    run_dir: Path,
    log: IO[str],
    spin_n: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both copies at once; what slot 0's child printed of its block, and slot 1's."""
    children: list[Child] = []
    for slot in (0, 1):
        child = [sys.executable, str(BENCH), "--child", workload, "--block-s", f"{block_s:g}", "--wait-go"]
        child += ["--cpus", ",".join(map(str, cpus[slot]))] if cpus[slot] else []
        child += ["--spin-n", str(spin_n)] if spin_n else []
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", PYTHONUNBUFFERED="1")
        if slot == recorded:
            env.pop("CUDA_VISIBLE_DEVICES", None)
            cmd = ["archline", "run", "--gpu", str(gpus[slot]), "-o", str(run_dir), "--", *child]
        else:
            env["CUDA_VISIBLE_DEVICES"] = str(gpus[slot])
            cmd = child
        children.append(_start(cmd, env, log))
    for c in children:
        c.ready.wait()
    for c in children:  # both go within microseconds of each other
        assert c.proc.stdin is not None
        try:
            c.proc.stdin.write("go\n")
            c.proc.stdin.flush()
        except BrokenPipeError:
            pass
    names = [
        "slot 0" + (" (archline run)" if recorded == 0 else ""),
        "slot 1" + (" (archline run)" if recorded == 1 else ""),
    ]
    try:
        return _block(children[0], names[0]), _block(children[1], names[1])
    finally:
        for c in children:  # one failed: the other is not left running on its GPU
            if c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait()


def split_two(allowed: list[int], spec: str) -> tuple[list[int], list[int], list[int]]:
    """(slot 0's CPUs, slot 1's, this process's) for ``--cpus``: ``auto`` gives the upper half of ``allowed`` to the
    copies, a quarter each (at most 8), the rest here; ``none`` pins nothing; ``A/B`` names the two sets."""
    cpus = sorted(allowed)
    if spec == "none":
        return [], [], []
    if spec == "auto":
        if len(cpus) < 8:
            return [], [], []
        k = max(2, min(8, len(cpus) // 4))
        return cpus[-2 * k : -k], cpus[-k:], cpus[: -2 * k]
    a_text, sep, b_text = spec.partition("/")
    if not sep:
        raise ValueError(f"--cpus {spec}: give two sets as A/B (e.g. 16-23/24-31), auto or none")
    a, b = parse_cpus(a_text), parse_cpus(b_text)
    if set(a) & set(b) or not set(a) <= set(cpus) or not set(b) <= set(cpus) or not a or not b:
        raise ValueError(f"--cpus {spec}: two disjoint, non-empty sets of the allowed CPUs {cpus}")
    rest = [c for c in cpus if c not in a and c not in b]
    return a, b, rest or cpus


def verdict_of(costs: list[float]) -> dict[str, Any]:
    """The pairs' estimate, interval, coverage and verdict (bench_run_overhead's ``auto`` rule)."""
    est = paired_estimate(costs)
    return {
        "estimate": est.centre,
        "lo": est.lo,
        "hi": est.hi,
        "coverage": est.coverage,
        "n": est.n,
        "verdict": interval_verdict(est.lo, est.hi, LIMIT),
    }


def analyse(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict and what is printed beside it, from the repetitions (judged per CPU speed where every repetition
    has it, else on the time per loop as it ran)."""
    key = "d_speed" if reps and all(r.get("d_speed") is not None for r in reps) else "d"
    aa = [r[key] for r in reps if r["recorded_slot"] is None]
    main_reps = [r for r in reps if r["recorded_slot"] is not None]
    rec_slots = [r["recorded_slot"] for r in main_reps]
    costs = pair_costs([r[key] for r in main_reps], rec_slots)
    result = verdict_of(costs)
    slots = [(main_reps[k][key] + main_reps[k + 1][key]) / 2 for k in range(0, len(main_reps), 2)]
    result |= {
        "judged_on": "time per loop per CPU speed" if key == "d_speed" else "time per loop",
        "pair_costs": costs,
        "aa_d": aa,
        "slot_difference_per_pair": slots,
        "aa_spread": (max(aa) - min(aa)) if len(aa) > 1 else None,
    }
    if key == "d_speed":
        raw = verdict_of(pair_costs([r["d"] for r in main_reps], rec_slots))
        result["raw"] = raw | {"pair_costs": pair_costs([r["d"] for r in main_reps], rec_slots)}
    return result


def pairs_needed(costs: list[float]) -> tuple[float, float, int | None] | None:
    """(sd of the pairs' ln costs, their mean, the pairs a 90 % interval would need to fit inside ±LIMIT around that
    mean by the normal approximation: (Z90 · sd / (LIMIT − |mean|))², None where the mean is beyond LIMIT); None with
    fewer than two pairs. Not the verdict's interval (the signed-rank one, about the Hodges-Lehmann estimate)."""
    if len(costs) < 2:
        return None
    d = [math.log1p(c) for c in costs]
    sd, mean = statistics.stdev(d), statistics.fmean(d)
    room = LIMIT - abs(mean)
    if room <= 0:
        return sd, mean, None
    return sd, mean, max(2, math.ceil((Z90 * sd / room) ** 2))


def spin_tracking(reps: list[dict[str, Any]]) -> list[tuple[float, float, float]] | None:
    """Per block with spins: (correlation of ln loop time with ln mean spin around it, the loops' coefficient of
    variation as they ran, and per CPU speed): how much of a block's own spread the spins take out."""
    out = []
    for r in reps:
        for blk in r.get("blocks") or []:
            got = _spins_around(blk)
            if got is None or len(got[0]) < 3:
                continue
            loops, around = got
            per = [w / s for w, s in zip(loops, around, strict=True)]
            r_ = correlation([math.log(x) for x in loops], [math.log(x) for x in around])
            if r_ is None:
                continue  # a constant series has no correlation
            out.append(
                (r_, statistics.pstdev(loops) / statistics.fmean(loops), statistics.pstdev(per) / statistics.fmean(per))
            )
    return out or None


def report(result: dict[str, Any], reps: list[dict[str, Any]]) -> None:
    """Print the verdict, the pairs, the slots' difference, the copies' co-movement and the spins' tracking."""
    costs, aa, slots = result["pair_costs"], result["aa_d"], result["slot_difference_per_pair"]
    print(
        f"archline run's default, whole cost on the {result['judged_on']}: {100 * result['estimate']:+.2f} % "
        f"[{100 * result['lo']:+.2f}, {100 * result['hi']:+.2f}] ({100 * result['coverage']:.0f} %, "
        f"n = {result['n']} pairs) {result['verdict']}"
    )
    print("  pairs: " + ", ".join(f"{100 * c:+.2f} %" for c in costs))
    if "raw" in result:
        r0 = result["raw"]
        print(
            f"  on the time per loop as it ran (not judged): {100 * r0['estimate']:+.2f} % [{100 * r0['lo']:+.2f}, "
            f"{100 * r0['hi']:+.2f}] {r0['verdict']}; pairs " + ", ".join(f"{100 * c:+.2f} %" for c in r0["pair_costs"])
        )
    print(
        "  the slots' own difference (ln): without recording "
        + (", ".join(f"{100 * x:+.2f} %" for x in aa) or "not measured")
        + "; from each pair "
        + ", ".join(f"{100 * x:+.2f} %" for x in slots)
    )
    r_all = [r["comovement"] for r in reps if r["comovement"] is not None]
    if r_all:
        print(
            f"  the copies' speeds over {BIN_S:g} s bins move together: correlation of their log rates, median "
            f"{statistics.median(r_all):+.2f} (range {min(r_all):+.2f} .. {max(r_all):+.2f})"
        )
    need = pairs_needed(costs)
    if need is not None:
        sd, mean, n_est = need
        print(
            f"  the pairs' spread (sd of ln) {100 * sd:.2f} % about their mean {100 * mean:+.2f} %: an interval "
            f"inside ±{100 * LIMIT:.0f} % around that mean would take about {n_est} pairs (90 %, normal "
            "approximation)"
            if n_est is not None
            else f"  the pairs' spread (sd of ln) {100 * sd:.2f} % about their mean {100 * mean:+.2f} %, beyond "
            f"±{100 * LIMIT:.0f} %"
        )
    track = spin_tracking(reps)
    if track:
        rs, raw_cv, per_cv = zip(*track, strict=True)
        print(
            f"  inside each block ({len(track)}): ln loop time against the spins around it r = {min(rs):+.2f} .. "
            f"{max(rs):+.2f} (median {statistics.median(rs):+.2f}); the loops' spread as they ran "
            f"{100 * statistics.median(raw_cv):.0f} % (median CV), per CPU speed "
            f"{100 * statistics.median(per_cv):.0f} %"
        )


def _save(out: Path, summary: dict[str, Any]) -> None:
    """overhead_concurrent.json, written whole or not at all (after each repetition, then with the verdict)."""
    tmp = out / "overhead_concurrent.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(out / "overhead_concurrent.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--gpus", default="0,1", help="the two GPUs (NVML indices), slot 0's then slot 1's")
    ap.add_argument("--workload", default="decode", help=f"one of {', '.join(WORKLOADS)}")
    ap.add_argument("--reps", type=int, default=10, help="recorded repetitions, even (pairs of slot 0, slot 1)")
    ap.add_argument("--aa", type=int, default=2, help="repetitions first with neither copy recorded")
    ap.add_argument("--block-s", type=float, default=30.0, help="each copy's block lasts at least this")
    ap.add_argument("--cpus", default="auto", help="auto, none, or the two copies' sets as A/B (16-23/24-31)")
    ap.add_argument(
        "--spin-n",
        type=int,
        default=0,
        help="time a pure-Python spin of this many iterations around each loop and judge the time per loop per "
        "CPU speed (0: the time per loop as it ran)",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--from-json", type=Path, default=None, help="print the analysis of a saved overhead_concurrent.json"
    )
    args = ap.parse_args(argv)
    if args.from_json is not None:
        try:
            saved = json.loads(args.from_json.read_text())
            reps_saved = saved["reps"]
            result = analyse(reps_saved)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {args.from_json}: not a readable overhead_concurrent.json ({exc})", file=sys.stderr)
            return 2
        gpus_saved, block = saved.get("gpus"), saved.get("block_s")
        print(f"== {args.from_json}: {saved.get('workload')}, blocks of {block} s, GPUs {gpus_saved}")
        report(result, reps_saved)
        return 0 if result["verdict"] == "PASS" else 1
    try:
        g = [int(x) for x in args.gpus.split(",")]
        if len(g) != 2 or g[0] == g[1]:
            raise ValueError
    except ValueError:
        ap.error(f"--gpus {args.gpus}: two different GPU indices, e.g. 0,1")
    if args.workload not in WORKLOADS:
        ap.error(f"--workload {args.workload}: one of {', '.join(WORKLOADS)}")
    if args.reps < 2 or args.reps % 2:
        ap.error("--reps: an even number, at least 2")
    try:
        c0, c1, own = split_two(sorted(os.sched_getaffinity(0)), args.cpus)
    except ValueError as exc:
        ap.error(str(exc))
    if own:
        os.sched_setaffinity(0, own)  # this process, and archline run's sensors, away from the copies' CPUs
    out = args.out or Path(tempfile.mkdtemp(prefix="archline-concurrent-"))
    out.mkdir(parents=True, exist_ok=True)
    gpus = (g[0], g[1])
    plan: list[int | None] = [None] * args.aa + [k % 2 for k in range(args.reps)]
    reps: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    print(
        f"== {args.workload}: {args.aa} repetitions without recording, then {args.reps} recording slot 0 and "
        f"slot 1 in turn; blocks of {args.block_s:g} s; GPUs {gpus}; CPUs {c0 or 'free'} / {c1 or 'free'}, "
        f"this process {own or 'free'}",
        flush=True,
    )
    with open(out / "children.log", "w") as log, StealSampler() as steal:
        for i, rec in enumerate(plan):
            run_dir = out / f"run-{i}"
            try:
                blocks = run_pair(args.workload, gpus, (c0, c1), args.block_s, rec, run_dir, log, args.spin_n)
                a, b = ([int(x) * 1e-9 for x in blk["stamps_ns"]] for blk in blocks)
                st = common_stretch(a, b)
            except (RuntimeError, ValueError, KeyError) as exc:
                print(f"error: repetition {i}: {exc} (the children's stderr: {out / 'children.log'})", file=sys.stderr)
                return 3
            share = steal_share(steal.samples, st.start_s, st.end_s)
            speed = [per_speed(blk) for blk in blocks]
            row = {
                "rep": i,
                "recorded_slot": rec,
                "blocks": list(blocks),
                "stretch_s": [st.start_s, st.end_s],
                "per_loop_s": list(st.per_loop_s),
                "d": st.d,
                "per_speed": speed,
                "d_speed": math.log(speed[0] / speed[1]) if speed[0] and speed[1] else None,
                "steal_share": share,
                "start_skew_s": b[0] - a[0],
                "comovement": comovement(a, b),
            }
            reps.append(row)
            _save(out, {"workload": args.workload, "gpus": list(gpus), "block_s": args.block_s, "reps": reps})
            who = "neither" if rec is None else f"slot {rec}"
            print(
                f"  rep {i} (recorded: {who}): slot 0 {1e3 * st.per_loop_s[0]:.1f} ms/loop, slot 1 "
                f"{1e3 * st.per_loop_s[1]:.1f} ms/loop over {st.end_s - st.start_s:.1f} s; d = {100 * st.d:+.2f} %"
                + ("" if row["d_speed"] is None else f", per CPU speed {100 * row['d_speed']:+.2f} %")
                + f"; start skew {1e3 * (b[0] - a[0]):+.1f} ms; speeds' correlation "
                + ("n/a" if row["comovement"] is None else f"{row['comovement']:+.2f}")
                + "; steal "
                + ("n/a" if share is None else f"{100 * share:.2f} %"),
                flush=True,
            )
    result = analyse(reps)
    report(result, reps)
    print(f"took {time.perf_counter() - t_all:.0f} s for {len(reps)} repetitions")
    summary = {"workload": args.workload, "gpus": list(gpus), "cpus": [c0, c1, own], "block_s": args.block_s}
    summary |= {"reps": reps, "result": result}
    _save(out, summary)
    return 0 if result["verdict"] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())

"""Whether archline's sensors delay a program's CUDA calls: launch + synchronise latency with 0, 1 and K samplers.

Usage (GPU machine):
    python benchmarks/sensor_contention.py [--seconds 90] [--half-s 2] [--copies 16] [--launches 1] [--gpu 0]
        [--cpus auto|none|LIST] [--json FILE]
    python benchmarks/sensor_contention.py --summarize FILE.json[.xz] [...]      (any machine)

Why: toggling the sensors on real loops did not resolve their share of the default's cost (docs/attribution.md,
sessions 13-16): those loops' time moves by tens of per cent within seconds. A sampler runs in archline's process, on
other CPUs, so it can slow a program mainly through the driver, where NVML's energy reads are serialised (4.4 ms
each alone, ~66 ms each with 16 samplers queued) and CUPTI's attach was seen waiting behind them (session 16). This
measures the program's side of that directly, on the most driver-bound loop there is: a child process (pinned as
``bench_run_overhead --cpus auto`` pins it) launches one tiny kernel and synchronises, over and over, for
``--seconds``, timing every iteration on the Unix clock. Meanwhile this process cycles the sensors through three
states, ``--half-s`` each, the order rotating from cycle to cycle: ``none``; ``one``, archline's sensors as
``archline run`` records them (``Attribution(trace=False)``, the energy counter and the power buffer); and ``xK``,
those plus K - 1 bare samplers (``overhead_interleaved.BareSampler``), a dose. Switching states falls between
halves. ``--copies 1`` leaves the dose out: none and one alone, so in the same time about 1.5 times the cycles of
the default's figure (two halves and switches a cycle instead of three), its two halves always adjacent (session
19: the halves' means follow the host with a lag-one autocorrelation of 0.34-0.67 in session 18's runs, so pairs
close in time cancel more of it). ``--launches K`` (session 21) makes each iteration K launches and one
synchronise: a launch-bound loop that synchronises rarely, as a decode loop does once a token, rather than after
every kernel; the figures are then per iteration of K launches.

Figures: per half, the iterations that start inside it: their count, mean, and (from a log-spaced histogram) median
and 99th percentile. Per full cycle, each sensor state's mean over the cycle's ``none`` mean, minus 1; the cycles'
changes give a Hodges-Lehmann estimate with its signed-rank interval (``bench_run_overhead.paired_estimate``, ~90 %).
The ``one`` state is the default's figure, judged two-sided against ±3 % like the other overhead figures (PASS: all of
the interval within). The mean, not the median, is judged: a wait for a driver lock is a rare long iteration, and
the mean counts it. A program that spends all its time launching and synchronising is the worst case for a cost
through the driver; costs through the CPUs' shared caches or memory are not what this loop would show.

``--json`` keeps every half's state, times, count, sum and histogram, so ``--summarize`` redoes every
figure exactly. Exit 0 when the ``one`` figure passes, 1 otherwise, 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import lzma
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_run_overhead as bro  # noqa: E402
import overhead_interleaved as oi  # noqa: E402

LIMIT = bro.LIMIT
LEVEL = bro.LEVEL
#: Histogram of each half's iteration times: log-spaced edges from 1 µs to 10 s (ns), 100 per decade (2.3 % wide).
EDGES_NS = np.logspace(3, 10, 7 * 100 + 1)
#: Fewest iterations a half needs to count; fewest cycles for an interval.
MIN_ITER = 100
MIN_N = 5
#: About how long a switch of states takes outside the halves (s): the sensors' 0.3 s pre- and post-roll, the
#: attribution on leaving, stopping the bare samplers.
SWITCH_S = 1.0
NONE = "none"
ONE = "one"
#: The most launches an iteration may queue before it synchronises: past about a thousand the loop waits on the GPU,
#: not the driver, and a 2 s half would hold too few iterations to count (``MIN_ITER``).
MAX_LAUNCHES = 1000


# ---------------------------------------------------------------- pure analysis


@dataclass(frozen=True)
class Half:
    """One half: the sensors' state, its Unix seconds, and the iterations starting inside it."""

    state: str
    start_s: float
    end_s: float
    n: int
    sum_ns: float
    hist: list[int]
    nvml_reads: int | None = None  # archline's NVML reads in this process during the half (None: not counted)
    cycle: int | None = None  # the rotation's cycle the half belongs to (None: runs before session 19, by position)

    @property
    def mean_ns(self) -> float:
        return self.sum_ns / self.n if self.n else math.nan

    def quantile_ns(self, q: float) -> float:
        """The q-quantile from the histogram (the upper edge of the bin that reaches it)."""
        if not self.n:
            return math.nan
        c = np.cumsum(self.hist)
        i = int(np.searchsorted(c, q * self.n))
        return float(EDGES_NS[min(i + 1, len(EDGES_NS) - 1)])

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "start_s": self.start_s, "end_s": self.end_s, "n": self.n, "sum_ns": self.sum_ns,
                "hist": self.hist, **({} if self.cycle is None else {"cycle": self.cycle})}  # fmt: skip


Span = tuple[str, float, float] | tuple[str, float, float, int]


def halves_of(starts_ns: np.ndarray, durs_ns: np.ndarray, spans: Sequence[Span]) -> list[Half]:
    """Each span's (state, start, end in Unix s[, cycle]) iterations: those whose start lies inside it."""
    order = np.argsort(starts_ns, kind="stable")
    s, d = starts_ns[order], durs_ns[order].astype(np.float64)
    out = []
    for span in spans:
        state, a, b = span[0], span[1], span[2]
        lo, hi = np.searchsorted(s, round(a * 1e9)), np.searchsorted(s, round(b * 1e9))
        x = d[lo:hi]
        hist = np.histogram(np.clip(x, EDGES_NS[0], EDGES_NS[-1] - 1), EDGES_NS)[0]
        cycle = int(span[3]) if len(span) > 3 else None
        out.append(Half(state, a, b, int(x.size), float(x.sum()), [int(v) for v in hist], cycle=cycle))
    return out


def cycles_of(halves: Sequence[Half], states: Sequence[str]) -> list[dict[str, Half]]:
    """The rotating order's cycles, each holding every state once: the halves of each recorded cycle number (since
    session 19, so a half lost when the sensors failed to start leaves only its own cycle incomplete), else
    consecutive runs of len(states) halves. Halves with too few iterations make their cycle incomplete."""
    k = len(states)
    if halves and all(h.cycle is not None for h in halves):
        by: dict[int, list[Half]] = {}
        for h in halves:
            by.setdefault(int(h.cycle or 0), []).append(h)
        chunks = [by[c] for c in sorted(by)]
    else:
        chunks = [list(halves[i : i + k]) for i in range(0, len(halves) - k + 1, k)]
    out = []
    for hs in chunks:
        chunk = {h.state: h for h in hs if h.n >= MIN_ITER}
        if len(hs) == k and set(chunk) == set(states):
            out.append(chunk)
    return out


@dataclass(frozen=True)
class Change:
    """A sensor state's change of the mean iteration time against none, over the cycles."""

    state: str
    centre: float | None
    lo: float | None
    hi: float | None
    n: int
    extra_ns: float | None  # the change in ns per iteration, at the centre
    p99_change: float | None  # information: the median over cycles of the 99th percentile's change

    @property
    def verdict(self) -> str:
        return bro.interval_verdict(self.lo, self.hi)

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "centre": self.centre, "lo": self.lo, "hi": self.hi, "n": self.n,
                "extra_ns": self.extra_ns, "p99_change": self.p99_change, "verdict": self.verdict}  # fmt: skip


def changes(halves: Sequence[Half], states: Sequence[str], level: float = LEVEL) -> list[Change]:
    """Each sensor state's change of the mean against ``none`` over the full cycles."""
    cyc = cycles_of(halves, states)
    base = [c[NONE].mean_ns for c in cyc]
    out = []
    for st in states:
        if st == NONE:
            continue
        ch = [c[st].mean_ns / c[NONE].mean_ns - 1.0 for c in cyc]
        p99 = [c[st].quantile_ns(0.99) / c[NONE].quantile_ns(0.99) - 1.0 for c in cyc]
        med_p99 = float(np.median(p99)) if p99 else None
        if len(ch) < MIN_N:
            centre = float(np.median(ch)) if ch else None
            out.append(Change(st, centre, None, None, len(ch), None, med_p99))
            continue
        pe = bro.paired_estimate(ch, level)
        out.append(Change(st, pe.centre, pe.lo, pe.hi, pe.n, pe.centre * float(np.median(base)), med_p99))
    return out


def report_lines(halves: Sequence[Half], states: Sequence[str], got: Sequence[Change], launches: int = 1) -> list[str]:
    lines = [f"  {'sensors':<8} {'halves':>6} {'iterations':>10} {'mean µs':>8} {'median µs':>9} {'p99 µs':>8} "
             f"{'NVML reads/s':>12}"]  # fmt: skip
    for st in states:
        hs = [h for h in halves if h.state == st and h.n]
        n = sum(h.n for h in hs)
        mean = sum(h.sum_ns for h in hs) / n if n else math.nan
        med = float(np.median([h.quantile_ns(0.5) for h in hs])) if hs else math.nan
        p99 = float(np.median([h.quantile_ns(0.99) for h in hs])) if hs else math.nan
        secs = sum(h.end_s - h.start_s for h in hs)
        rd = [h.nvml_reads for h in hs if h.nvml_reads is not None]
        rate = f"{sum(rd) / secs:.0f}" if rd and secs > 0 else "-"
        lines.append(
            f"  {st:<8} {len(hs):>6} {n:>10} {mean / 1e3:>8.2f} {med / 1e3:>9.2f} {p99 / 1e3:>8.2f} {rate:>12}"
        )
    for c in got:
        iv = f"[{100 * c.lo:+.2f} .. {100 * c.hi:+.2f} %]" if c.lo is not None and c.hi is not None else "[no interval]"
        centre = f"{100 * c.centre:+.2f} %" if c.centre is not None else "n/a"
        what = "launch + sync" if launches == 1 else f"{launches} launches + sync"
        extra = f", {c.extra_ns / 1e3:+.2f} µs per {what}" if c.extra_ns is not None else ""
        tail = f"; p99 {100 * c.p99_change:+.1f} %" if c.p99_change is not None else ""
        judged = " (the default's figure)" if c.state == ONE else " (a dose: information)"
        lines.append(f"  {c.state} vs none: mean {centre} {iv} {c.verdict}{judged}, n={c.n} cycles{extra}{tail}")
    return lines


# ---------------------------------------------------------------- the measurement (GPU machine)


def child(seconds: float, out: Path, cpus: list[int], launches: int = 1) -> int:
    """Launch ``launches`` tiny kernels and synchronise, until ``seconds`` have passed; save every iteration's start
    (Unix ns) and length (ns) to ``out`` (.npz). Prints READY when the timed loop starts."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        import torch
    except ImportError:
        print("sensor_contention: the child needs PyTorch", file=sys.stderr)
        return 3
    x = torch.zeros(1, device="cuda")
    for _ in range(1000):  # warm up
        x.add_(1.0)
        torch.cuda.synchronize()
    starts: list[int] = []
    durs: list[int] = []
    clock = time.time_ns
    print("READY", flush=True)
    end = clock() + int(seconds * 1e9)
    while True:
        t0 = clock()
        for _ in range(launches):
            x.add_(1.0)
        torch.cuda.synchronize()
        t1 = clock()
        starts.append(t0)
        durs.append(t1 - t0)
        if t1 >= end:
            break
    np.savez(out, starts_ns=np.asarray(starts, dtype=np.int64), durs_ns=np.asarray(durs, dtype=np.int64))
    return 0


def states_for(copies: int) -> list[str]:
    """The sensor states a run cycles through: none, one and the dose x``copies``; none and one alone where
    ``copies`` is 1 (about 1.5 times the cycles of none against one in the same time, the pair always adjacent)."""
    return [NONE, ONE] if copies == 1 else [NONE, ONE, f"x{copies}"]


@contextlib.contextmanager
def state_of(state: str, gpu: int, copies: int) -> Iterator[None]:
    """The sensors of one state: none, archline's (one), or those and copies - 1 bare samplers."""
    if state == NONE:
        yield
        return
    with oi.sensors_on(gpu, 1 if state == ONE else copies):
        yield


def measure(
    seconds: float, half_s: float, copies: int, gpu: int, child_cpus: list[int], launches: int = 1
) -> dict[str, Any]:
    """Run the child and cycle the sensors' states; every half's figures (the raw iterations are summarised)."""
    from archline.errors import ArchlineError

    states = states_for(copies)
    with tempfile.TemporaryDirectory(prefix="archline-contention-") as tmp:
        out = Path(tmp) / "iterations.npz"
        cmd = [sys.executable, __file__, "--child", "--seconds", repr(seconds), "--child-out", str(out),
               "--cpus", ",".join(map(str, child_cpus)) or "none", "--launches", str(launches)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        spans: list[tuple[str, float, float, int]] = []
        reads: list[int] = []
        notes: list[str] = []
        try:
            for line in proc.stdout:
                if line.strip() == "READY":
                    break
            else:
                raise RuntimeError(f"the child ended before its loop (exit {proc.wait()})")
            orders = list(itertools.permutations(states))  # every order in turn: each state follows each other
            oi.COUNTER.install()  # NVML reads per half: the dose as it was, not as asked
            c = 0
            while proc.poll() is None:
                for st in orders[c % len(orders)]:
                    if proc.poll() is not None:
                        break
                    try:
                        with state_of(st, gpu, copies):
                            oi.COUNTER.take()
                            a = time.time()
                            with contextlib.suppress(subprocess.TimeoutExpired):
                                proc.wait(timeout=half_s)
                            b = time.time()
                            spans.append((st, a, b, c))
                            reads.append(oi.reads(oi.COUNTER.take()))
                    except ArchlineError as exc:  # the sensors failed to end (their half is kept): go on
                        notes.append(f"the sensors of a {st!r} half ended with an error: {exc}")
                c += 1
            if proc.wait() != 0:
                raise RuntimeError(f"the child failed (exit {proc.returncode})")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        data = np.load(out)
        halves = halves_of(data["starts_ns"], data["durs_ns"], spans)
    return {"states": states, "seconds": seconds, "half_s": half_s, "copies": copies, "launches": launches,
            "gpu": gpu, "level": LEVEL,
            "cpus": child_cpus, "notes": notes,
            "halves": [{**h.to_json(), "nvml_reads": r} for h, r in zip(halves, reads, strict=True)]}  # fmt: skip


def analysed(doc: dict[str, Any]) -> tuple[list[Half], list[str], list[Change]]:
    halves = [Half(str(h["state"]), float(h["start_s"]), float(h["end_s"]), int(h["n"]), float(h["sum_ns"]),
                   [int(v) for v in h["hist"]],
                   int(h["nvml_reads"]) if h.get("nvml_reads") is not None else None,
                   int(h["cycle"]) if h.get("cycle") is not None else None)
              for h in doc["halves"]]  # fmt: skip
    states = [str(s) for s in doc["states"]]
    return halves, states, changes(halves, states, float(doc.get("level", LEVEL)))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"sensor_contention: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seconds", type=float, default=90.0, help="the child's timed loop (s)")
    ap.add_argument("--half-s", type=float, default=2.0, help="each state's half (s)")
    ap.add_argument("--copies", type=int, default=16, help="samplers in the dosed state (1: no dosed state)")
    ap.add_argument("--launches", type=int, default=1, help="launches per iteration, one synchronise after them")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--cpus", default="auto", help="the child's CPUs (auto: the upper half of this process's)")
    ap.add_argument("--json", type=Path, default=None, help="write every half's figures here")
    ap.add_argument("--summarize", type=Path, nargs="+", default=None, help="redo the figures of saved JSON files")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    try:
        a = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    if a.child:
        cpus = [] if a.cpus in ("none", "") else [int(c) for c in a.cpus.split(",")]
        return child(a.seconds, a.child_out, cpus, a.launches)
    if a.summarize is not None:
        for path in a.summarize:
            try:
                raw = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
                doc = json.loads(raw.decode("utf-8"))
                halves, states, got = analysed(doc)
            except (OSError, ValueError, KeyError, TypeError, lzma.LZMAError) as exc:
                print(f"sensor_contention: {path}: not a run's JSON ({exc.__class__.__name__}: {exc})", file=sys.stderr)
                return 2
            print(f"== {path.name}: {len(halves)} halves of {doc['half_s']:g} s, {len(cycles_of(halves, states))} "
                  f"full cycles")  # fmt: skip
            print("\n".join(report_lines(halves, states, got, int(doc.get("launches", 1)))))
        return 0
    problem = None
    if not (math.isfinite(a.half_s) and a.half_s > 0):
        problem = "--half-s must be a positive number of seconds"
    elif not 1 <= a.copies <= 64:
        problem = "--copies must be 1 (no dose) to 64"
    elif not (
        math.isfinite(a.seconds) and a.seconds >= MIN_N * (k := len(states_for(a.copies))) * (a.half_s + SWITCH_S)
    ):
        problem = (f"--seconds must be at least {MIN_N} x {k} x (--half-s + {SWITCH_S:g}): {MIN_N} full cycles of "
                   f"{k} states, each switch about {SWITCH_S:g} s")  # fmt: skip
    elif a.gpu < 0:
        problem = "--gpu must be >= 0"
    elif not 1 <= a.launches <= MAX_LAUNCHES:
        problem = f"--launches must be 1 to {MAX_LAUNCHES}"
    child_cpus: list[int] = []
    own_cpus: list[int] = []
    if problem is None:
        try:
            child_cpus, own_cpus = bro.split_cpus(sorted(os.sched_getaffinity(0)), a.cpus)
        except ValueError as exc:
            problem = f"--cpus {a.cpus}: {exc}"
    if problem is not None:
        print(f"sensor_contention: {problem}", file=sys.stderr)
        return 2
    if "CUDA_VISIBLE_DEVICES" not in os.environ:  # the child's CUDA device is the GPU the sensors read
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = str(a.gpu)
    if own_cpus:
        os.sched_setaffinity(0, own_cpus)
    names = " / ".join(states_for(a.copies))
    loop = "launch" if a.launches == 1 else f"{a.launches} launches"
    print(f"== {loop} + synchronise, {a.seconds:g} s; sensors {names}, {a.half_s:g} s each; child "
          f"CPUs {','.join(map(str, child_cpus)) or 'not pinned'}", flush=True)  # fmt: skip
    doc = measure(a.seconds, a.half_s, a.copies, a.gpu, child_cpus, a.launches)
    halves, states, got = analysed(doc)
    doc["figures"] = [c.to_json() for c in got]
    if a.json is not None:
        oi.write_json(a.json, doc)
    print("\n".join(report_lines(halves, states, got, a.launches)))
    one = next(c for c in got if c.state == ONE)
    return 0 if one.verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""What archline run's default recording costs a workload, measured inside one process, so that its noise cancels.

Usage (GPU machine):
    python benchmarks/overhead_interleaved.py [--workloads torch,decode] [--seconds 300] [--toggle-s 10]
        [--gpu 0] [--cpus auto|none|LIST] [--out DIR]
        [--sensor-copies K]
    python benchmarks/overhead_interleaved.py --summarize RUN.json [RUN.json ...]     (any machine)
    python benchmarks/overhead_interleaved.py --switches RUN.json [RUN.json ...]      (any machine)

Why: benchmarks/bench_run_overhead.py compares separate child processes with and without recording; on the
lent GPU hosts a workload's speed differs by 5-11 % from one process to the next, so a 3 % target cannot be
resolved that way. Here each workload runs in ONE child (bench_run_overhead.py's child, ``--block-s``: its
loop repeated for ``--seconds``, each loop's end stamped on the Unix clock) under the CUPTI injection library
with exactly archline run's default environment (``--trace-duty auto``: AUTO_DUTY_MS, AUTO_PROBE_MS,
AUTO_RATE_PER_S of archline.measurement.attribute.run; CUPTI traces in full until it sees a launch-bound
phase, then 0.5 s of every 10 s, detached in between), pinned to CPUs as ``--cpus auto`` does there (the
upper half of this process's CPUs; this process and its sensor threads keep the rest). The child prints
``READY`` just before its block; from then on this process toggles archline's sensors (exactly
bench_run_overhead's ``Attribution(gpu, trace=False, pre_s=0.3, post_s=0.3)``): on for ``--toggle-s``
seconds, off for as long, the order of the two halves alternating from cycle to cycle (on-off, off-on,
on-off, ...: a slow drift of the GPU's speed cancels over pairs of cycles). An on-half runs from just after
entering the ``with`` to just before leaving it; an off-half from just after the ``with`` has ended
(its post-roll and its attribution included) to just before the next one starts: the sensors' pre- and
post-roll fall in neither half.

Figures (each with its interval; the verdicts are the intervals', two-sided against ±3 %: PASS all of it
within, FAIL all of it at or above +3 %, NOISE all of it at or below -3 %, UNRESOLVED otherwise):

* sensors: per full cycle, the median of the loops wholly inside its on-half that touch no traced period
  over the median of such loops in its off-half, minus 1; the cycles' changes -> Hodges-Lehmann estimate with
  its signed-rank interval (bench_run_overhead.paired_estimate, ~90 %; fewer than 5 cycles: no interval).
* tracing: per traced period after the first, its excess = the sum, over the loops it touches (any overlap),
  of the loop's time minus the median of the untraced loops (touching no traced period) around it (the 10
  before and the 10 after). The cost = the sum of the excesses / the block's time after the first traced
  period, with a t interval (~90 %) from the excesses (mean excess x periods / time); also per period in ms.
  It reads somewhat high where the loops' noise is skewed (the reference is a median, and the loops a period
  touches are the longer ones): a few ms per period at 10 % lognormal noise on 0.3 s loops (the unit tests).
* the guard: the injection library stamps a traced period's ON after attaching CUPTI and its OFF before it
  disables, waits, flushes and detaches, so the switches' cost falls just outside the stamps; both figures
  treat each period as ``GUARD_S`` (0.5 s) longer on both sides (added after session 13's runs: post hoc for
  them; ``--summarize`` shows their figures both ways). The charged loops then include a few untraced ones,
  whose skew adds a little: the figure errs high.
* the probe at start (information, not judged): the first traced interval (full tracing from CUPTI's start
  until the automatic mode decides), how far it reaches into the block and its excess there: a one-off cost.
* total (steady state) = sensors + tracing; its interval adds the two intervals' half-widths (conservative).

What this does NOT measure: the cost of the injection library being loaded while CUPTI is detached, against a
process without it (only comparable across processes: bench_run_overhead.py), and CUPTI's initialisation at
start-up (before the block). A program traced throughout (the automatic mode never switched to the duty
cycle) has no untraced loops to compare with: its tracing figure is then UNRESOLVED.

``--summarize`` redoes every figure from saved JSON files (their loops, halves and traced periods), prints them
as the run did, and checks them against the figures the run saved; then it pools every cycle's sensors change
over the files into one Hodges-Lehmann estimate, labelled post hoc (pooling runs of different boards and
workloads was not decided before them).

A dose (``--sensor-copies K``, session 16): every on-half holds archline's sensors plus K - 1 bare samplers (the same
NVML sources polled at their own intervals, nothing recorded); NVML reads are counted per source in every on-half,
and one sampler's reads per second are measured alone just before the child starts. The sensors' figure is then the
measured change divided by the reads' ratio (cost proportional to reads assumed; a cost of merely running a sampler
would be divided too). On H100 and H200 the driver serialises the energy counter's reads (4.4 ms each): 16 samplers
reach only about 3x one sampler's reads, each read then waiting ~66 ms, and CUPTI's attach waits behind them
(``--switches``: each traced period's attach time and excess by the sensors' state), so a dosed run's tracing figure
is not the default's.

All raw data (every loop's start and end, the sensors' halves, the traced periods, the figures) go to
``--out DIR/overhead_interleaved.json`` (rewritten after each workload). Exit 0 if every figure passes,
1 otherwise, 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_run_overhead as bro  # noqa: E402

Interval = tuple[float, float]

LIMIT = bro.LIMIT
LEVEL = bro.LEVEL
#: The sensors' pre- and post-roll, as bench_run_overhead.as_child records them.
PRE_S = POST_S = 0.3
#: Untraced loops taken on each side of a traced period for its reference.
K_REF = 10
#: Fewest loops a half needs for its median to count; fewest cycles or traced periods for an interval.
MIN_LOOPS = 3
MIN_N = 5
#: Seconds added before each traced period's ON stamp and after its OFF stamp before charging loops to it: the
#: injection library stamps ON after attaching CUPTI and OFF before it disables, waits, flushes and detaches
#: (gpu/cupti_inject.c, set_tracing), so the switches' cost falls just outside the stamps. Added after session
#: 13's review of its runs (the first loop after each period ran 8-59 ms over its reference): post hoc for them.
GUARD_S = 0.5
DEFAULT_WORKLOADS = "torch,decode"
#: Seconds of each calibration of the sensors' NVML reads per second (one sampler, then ``--sensor-copies``).
CALIBRATE_S = 3.0
OUT_NAME = "overhead_interleaved.json"


# ---------------------------------------------------------------- pure analysis (plain lists, no GPU)


interval_verdict = bro.interval_verdict


@dataclass(frozen=True)
class Estimate:
    """A relative change (or time) with its interval; lo and hi are None where there is none."""

    centre: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str
    note: str = ""

    @property
    def verdict(self) -> str:
        return interval_verdict(self.lo, self.hi)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


@dataclass(frozen=True)
class Probe:
    """The first traced interval (full tracing from CUPTI's start): how far into the block, its excess there."""

    interval: Interval | None
    in_block_s: float
    excess_s: float | None
    loops: int


@dataclass(frozen=True)
class Dose:
    """The sensors' dose (``--sensor-copies``): ``copies`` samplers ran at once in every on-half; ``one_per_s`` is
    one sampler's NVML reads per second (measured alone just before the child starts), ``on_per_s`` the reads per
    second over the on-halves."""

    copies: int
    one_per_s: float
    on_per_s: float

    @property
    def factor(self) -> float:
        return self.on_per_s / self.one_per_s if self.one_per_s > 0 else math.nan

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "factor": self.factor}


def per_sampler(e: Estimate, dose: Dose) -> Estimate:
    """The change the dosed on-halves measured, scaled to one sampler: divided by the dose's factor (its reads per
    second over one sampler's). Assumes the cost is proportional to the NVML reads; a cost of merely running a
    sampler, whatever its rate, would be divided too, so such a cost is not bounded by this."""
    f = dose.factor

    def sc(x: float | None) -> float | None:
        return None if x is None else x / f

    how = f"{e.method}; ÷ {f:.2f}, the NVML reads of {dose.copies} samplers over one's (cost ∝ reads assumed)"
    return Estimate(sc(e.centre), sc(e.lo), sc(e.hi), e.n, how, e.note)


@dataclass(frozen=True)
class TracingCost:
    """The steady state's traced periods: each one's excess (s), their cost over the steady state's time."""

    fraction: Estimate
    per_period_s: Estimate
    periods: list[Interval]
    excess_s: list[float]
    steady_s: float
    skipped: int


@dataclass(frozen=True)
class Analysis:
    block: Interval
    loops: int
    median_loop_s: float
    sensor_changes: list[float]
    sensors: Estimate
    tracing: TracingCost
    probe: Probe
    total: Estimate
    guard_s: float = 0.0
    #: With a dose: the change the on-halves measured with ``dose.copies`` samplers (``sensors`` is it per sampler).
    sensors_dosed: Estimate | None = None
    dose: Dose | None = None

    def judged(self) -> dict[str, Estimate]:
        return {"sensors": self.sensors, "tracing": self.tracing.fraction, "total": self.total}

    @property
    def passed(self) -> bool:
        return all(e.verdict == "PASS" for e in self.judged().values())

    def to_json(self) -> dict[str, Any]:
        return {
            "block": list(self.block),
            "loops": self.loops,
            "median_loop_s": self.median_loop_s,
            "sensor_changes": self.sensor_changes,
            "sensors": self.sensors.to_json(),
            "tracing": {
                "fraction": self.tracing.fraction.to_json(),
                "per_period_s": self.tracing.per_period_s.to_json(),
                "periods": [list(p) for p in self.tracing.periods],
                "excess_s": self.tracing.excess_s,
                "steady_s": self.tracing.steady_s,
                "skipped": self.tracing.skipped,
            },
            "probe": {
                "interval": list(self.probe.interval) if self.probe.interval is not None else None,
                "in_block_s": self.probe.in_block_s,
                "excess_s": self.probe.excess_s,
                "loops": self.probe.loops,
            },
            "total": self.total.to_json(),
            "guard_s": self.guard_s,
            "passed": self.passed,
            **(
                {"sensors_dosed": self.sensors_dosed.to_json(), "dose": self.dose.to_json()}
                if self.sensors_dosed is not None and self.dose is not None
                else {}
            ),
        }


def loops_from_stamps(stamps_ns: Sequence[int]) -> list[Interval]:
    """(start, end) Unix seconds of each loop from the child's stamps (the block's start, then each loop's end)."""
    t = [s * 1e-9 for s in stamps_ns]
    return list(itertools.pairwise(t))


def _merged(ivs: Sequence[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for lo, hi in sorted(ivs):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def touched_flags(loops: Sequence[Interval], traced: Sequence[Interval]) -> list[bool]:
    """For each loop, whether any traced period overlaps it (a < hi and lo < b)."""
    merged = _merged(traced)
    starts = [lo for lo, _ in merged]
    out = []
    for a, b in loops:
        i = bisect.bisect_left(starts, b) - 1  # the last period starting before the loop ends
        out.append(i >= 0 and merged[i][1] > a)
    return out


def _touching(loops: Sequence[Interval], period: Interval) -> range:
    """Indices of the (time-ordered, consecutive) loops that overlap ``period``."""
    lo, hi = period
    first = bisect.bisect_right([b for _, b in loops], lo)
    last = bisect.bisect_left([a for a, _ in loops], hi) - 1
    return range(first, max(first, last + 1))


def _inside(loops: Sequence[Interval], half: Interval) -> range:
    """Indices of the loops wholly inside ``half``."""
    lo, hi = half
    first = bisect.bisect_left([a for a, _ in loops], lo)
    last = bisect.bisect_right([b for _, b in loops], hi)
    return range(first, max(first, last))


def sensor_changes(
    loops: Sequence[Interval],
    cycles: Sequence[tuple[Interval, Interval]],
    traced: Sequence[Interval] | None,
    min_loops: int = MIN_LOOPS,
) -> list[float]:
    """Per cycle (on-half, off-half): the median of the loops wholly inside the on-half that touch no traced
    period over the median of such loops in the off-half, minus 1; cycles whose halves hold fewer than
    ``min_loops`` such loops are left out."""
    touched = touched_flags(loops, traced or [])
    dur = [b - a for a, b in loops]
    out = []
    for on, off in cycles:
        x_on = [dur[i] for i in _inside(loops, on) if not touched[i]]
        x_off = [dur[i] for i in _inside(loops, off) if not touched[i]]
        if len(x_on) >= min_loops and len(x_off) >= min_loops:
            out.append(statistics.median(x_on) / statistics.median(x_off) - 1.0)
    return out


def period_excess(
    loops: Sequence[Interval], period: Interval, touched: Sequence[bool], k: int = K_REF
) -> tuple[float, int] | None:
    """(excess seconds, loops touched) of one traced period: the sum over the loops it touches of their time
    minus the reference, the median of the ``k`` untraced loops before and the ``k`` after it (``touched``:
    :func:`touched_flags` of all traced periods). None where it touches no loop or has fewer than 3 references."""
    idx = _touching(loops, period)
    if not idx:
        return None
    ref: list[float] = []
    for step, start in ((-1, idx.start - 1), (1, idx.stop)):
        got, i = 0, start
        while 0 <= i < len(loops) and got < k:
            if not touched[i]:
                ref.append(loops[i][1] - loops[i][0])
                got += 1
            i += step
    if len(ref) < 3:
        return None
    r = statistics.median(ref)
    return sum(loops[i][1] - loops[i][0] - r for i in idx), len(idx)


def first_after_excess(loops: Sequence[Interval], traced: Sequence[Interval], k: int = K_REF) -> Estimate:
    """How much longer than its reference the first loop after each traced period (after the probe, as stamped)
    ran: the reference is :func:`period_excess`'s (the ``k`` untraced loops on each side); mean with a t
    interval over the periods. What the switch leaves just past the OFF stamp, the reason for :data:`GUARD_S`."""
    ivs = sorted(traced)
    touched = touched_flags(loops, ivs)
    dur = [b - a for a, b in loops]
    out: list[float] = []
    for p in ivs[1:]:
        idx = _touching(loops, p)
        if not idx or idx.stop >= len(loops):
            continue
        got = period_excess(loops, p, touched, k)
        if got is None:
            continue
        ref = (sum(dur[i] for i in idx) - got[0]) / len(idx)  # the reference period_excess subtracted
        out.append(dur[idx.stop] - ref)
    method = "first loop after each traced period, t 90 %"
    if len(out) < MIN_N:
        return Estimate(statistics.fmean(out) if out else None, None, None, len(out), method, "too few periods")
    half = t_quantile(0.5 + LEVEL / 2, len(out) - 1) * statistics.stdev(out) / math.sqrt(len(out))
    mean = statistics.fmean(out)
    return Estimate(mean, mean - half, mean + half, len(out), method)


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile."""
    from scipy.stats import t  # imported here: the analysis of a run needs it, the child does not

    return float(t.ppf(p, df))


def tracing_cost(
    loops: Sequence[Interval], traced: Sequence[Interval], k: int = K_REF, level: float = LEVEL
) -> TracingCost:
    """The traced periods after the first (the probe) that touch the block: each one's excess, and their sum
    over the block's time after the probe (a t interval from the excesses: mean excess x periods / time)."""
    block = (loops[0][0], loops[-1][1])
    ivs = sorted(traced)
    touched = touched_flags(loops, ivs)
    steady_start = min(max(block[0], ivs[0][1]), block[1]) if ivs else block[0]
    steady = block[1] - steady_start
    periods: list[Interval] = []
    excess: list[float] = []
    skipped = 0
    for p in ivs[1:]:
        if not (p[0] < block[1] and block[0] < p[1]):
            continue
        got = period_excess(loops, p, touched, k)
        if got is None:
            skipped += 1
            continue
        periods.append(p)
        excess.append(got[0])
    n = len(excess)
    method = f"t {100 * level:.0f} % over traced periods"
    if n == 0 or steady <= 0:
        none = Estimate(None, None, None, n, method, "no traced period after the first in the block")
        return TracingCost(none, none, periods, excess, steady, skipped)
    mean = statistics.fmean(excess)
    if n < MIN_N:
        note = f"too few traced periods for an interval (< {MIN_N})"
        per = Estimate(mean, None, None, n, method, note)
        frac = Estimate(mean * n / steady, None, None, n, method, note)
        return TracingCost(frac, per, periods, excess, steady, skipped)
    half = t_quantile(0.5 + level / 2, n - 1) * statistics.stdev(excess) / math.sqrt(n)
    per = Estimate(mean, mean - half, mean + half, n, method)
    frac = Estimate(mean * n / steady, (mean - half) * n / steady, (mean + half) * n / steady, n, method)
    return TracingCost(frac, per, periods, excess, steady, skipped)


def probe_cost(loops: Sequence[Interval], traced: Sequence[Interval], k: int = K_REF) -> Probe:
    """The first traced interval: how long it lasted from the block's start, and its excess in the block."""
    if not traced:
        return Probe(None, 0.0, None, 0)
    ivs = sorted(traced)
    first = ivs[0]
    block = (loops[0][0], loops[-1][1])
    in_block = max(0.0, min(first[1], block[1]) - max(first[0], block[0]))
    got = period_excess(loops, first, touched_flags(loops, ivs), k)
    if got is None:
        return Probe(first, in_block, 0.0 if in_block == 0.0 else None, 0)
    return Probe(first, in_block, got[0], got[1])


def combine(a: Estimate, b: Estimate) -> Estimate:
    """a + b, the interval adding the two half-widths on each side (conservative)."""
    centre = a.centre + b.centre if a.centre is not None and b.centre is not None else None
    if a.lo is None or a.hi is None or b.lo is None or b.hi is None:
        return Estimate(centre, None, None, 0, "sum", "a part has no interval")
    return Estimate(centre, a.lo + b.lo, a.hi + b.hi, 0, "sum, half-widths added")


def analyse(
    loops: Sequence[Interval],
    cycles: Sequence[tuple[Interval, Interval]],
    traced: Sequence[Interval] | None,
    k: int = K_REF,
    level: float = LEVEL,
    guard_s: float = GUARD_S,
    dose: Dose | None = None,
) -> Analysis:
    """Every figure from one child's loops, the sensors' (on, off) cycles and the traced periods (None:
    traced throughout). The sensors' and the tracing's figures treat each traced period as ``guard_s`` longer
    on both sides (:data:`GUARD_S`); the probe's is reported as stamped. With a ``dose`` (several samplers in
    each on-half) the sensors' figure is scaled to one sampler (:func:`per_sampler`), the measured one kept."""
    if not loops:
        raise ValueError("no loops")
    block = (loops[0][0], loops[-1][1])
    stamped = traced
    if traced is not None and guard_s > 0:
        traced = [(lo - guard_s, hi + guard_s) for lo, hi in traced]
    changes = sensor_changes(loops, cycles, traced)
    hl = "Hodges-Lehmann, signed-rank interval"
    if not changes:
        sensors = Estimate(None, None, None, 0, hl, "no full cycle")
    else:
        pe = bro.paired_estimate(changes, level)
        if pe.n < MIN_N:
            sensors = Estimate(pe.centre, None, None, pe.n, hl, f"too few cycles for an interval (< {MIN_N})")
        else:
            sensors = Estimate(pe.centre, pe.lo, pe.hi, pe.n, f"{hl} ({100 * pe.coverage:.0f} %)")
    if traced is None:
        why = "traced throughout: no untraced loops in this process to compare with"
        none = Estimate(None, None, None, 0, "", why)
        tracing = TracingCost(none, none, [], [], block[1] - block[0], 0)
        probe = Probe(None, 0.0, None, 0)
    else:
        tracing = tracing_cost(loops, traced, k, level)
        probe = probe_cost(loops, stamped or [], k)
    median_loop = statistics.median(b - a for a, b in loops)
    dosed = None
    if dose is not None:
        dosed, sensors = sensors, per_sampler(sensors, dose)
    return Analysis(
        block,
        len(loops),
        median_loop,
        changes,
        sensors,
        tracing,
        probe,
        combine(sensors, tracing.fraction),
        guard_s,
        dosed,
        dose,
    )


def _pct(e: Estimate) -> str:
    if e.centre is None:
        return "n/a"
    iv = f"[{100 * e.lo:+.2f} .. {100 * e.hi:+.2f} %]" if e.lo is not None and e.hi is not None else "[no interval]"
    return f"{100 * e.centre:+.2f} % {iv}"


def report_lines(a: Analysis) -> list[str]:
    """The printed figures of one workload."""
    t, per = a.tracing, a.tracing.per_period_s
    if t.fraction.centre is None:
        tracing = f"{t.fraction.note}"
    else:
        tracing = f"of the {t.steady_s:.1f} s after the probe; {t.fraction.method}, n={t.fraction.n}"
        if per.centre is not None:
            tracing += f"; {1e3 * per.centre:.1f} ms per traced period"
            if per.lo is not None and per.hi is not None:
                tracing += f" [{1e3 * per.lo:.1f} .. {1e3 * per.hi:.1f} ms]"
        tracing += f" {t.fraction.note}"
    sensors = f"of the loop time; {a.sensors.method}, n={a.sensors.n} cycles {a.sensors.note}"
    total = "sensors + tracing, the intervals' half-widths added"
    lines = []
    if a.sensors_dosed is not None and a.dose is not None:
        d = a.dose
        lines.append(
            f"  {f'sensors x{d.copies} samplers (measured)':<35}{_pct(a.sensors_dosed):<30} {'':<10} "
            f"{d.on_per_s:.0f} NVML reads/s in the on-halves, one sampler {d.one_per_s:.0f}/s: x{d.factor:.2f}"
        )
        sensors = f"the line above ÷ {d.factor:.2f} (cost ∝ NVML reads assumed), n={a.sensors.n} cycles"
    lines += [
        f"  sensors (NVML polling here)        {_pct(a.sensors):<30} {a.sensors.verdict:<10} {sensors}".rstrip(),
        f"  tracing (duty-cycled CUPTI)        {_pct(t.fraction):<30} {t.fraction.verdict:<10} {tracing}".rstrip(),
        f"  total (steady state)               {_pct(a.total):<30} {a.total.verdict:<10} {total}",
    ]
    p = a.probe
    if p.interval is None:
        lines.append("  probe at start (once, not judged)  no traced periods (traced throughout)")
    else:
        ex = f"{1e3 * p.excess_s:.1f} ms" if p.excess_s is not None else "n/a"
        lines.append(
            f"  probe at start (once, not judged)  first traced interval {p.interval[1] - p.interval[0]:.2f} s, "
            f"{p.in_block_s:.2f} s of it in the block (from its start); excess there {ex} over {p.loops} loops"
        )
    return lines


NOT_MEASURED = (
    "  not measured here: the cost of the injection library being loaded while CUPTI is detached, against a "
    "process without it\n  (only comparable across processes: bench_run_overhead.py), and CUPTI's "
    "initialisation at start-up (before the block)"
)


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically (a temporary file in the same folder, then os.replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---------------------------------------------------------------- the measurement (GPU machine)


@dataclass
class ChildRecord:
    """One child's raw data: its loops' stamps, the sensors' halves, the traced periods."""

    stamps_ns: list[int]
    halves: list[tuple[str, float, float]]  # ("on" | "off", start, end), in order
    cycles: list[tuple[Interval, Interval]]  # full cycles: (on-half, off-half)
    traced: list[Interval] | None
    block_s: float
    setup_s: float
    wall_s: float
    records: int
    errors: list[str]
    #: The injection library's switches (s): how long each switch took, how long after a detach request the
    #: program's next CUDA call came, and how long cuptiFinalize held it.
    switch_s: list[float] = field(default_factory=list)
    detach_wait_s: list[float] = field(default_factory=list)
    detach_s: list[float] = field(default_factory=list)
    attach_s: list[float] = field(default_factory=list)  # the injection reader's (InjectionTrace.attach_s)
    #: Per on-half, {source: [NVML reads, seconds in them]}; the calibration (:func:`calibrate`) where dosed.
    on_reads: list[dict[str, list[float]]] = field(default_factory=list)
    copies: int = 1
    calibration: dict[str, Any] | None = None

    @property
    def dose(self) -> Dose | None:
        """The dose where several samplers ran in each on-half (None with one: the default's own figure)."""
        if self.copies <= 1 or self.calibration is None or not float(self.calibration["1"]["per_s"]) > 0:
            return None  # no dose, or a calibration that counted no read: the figure stays the measured one
        on_s = sum(b - a for kind, a, b in self.halves if kind == "on")
        n = sum(reads(r) for r in self.on_reads)
        return Dose(self.copies, float(self.calibration["1"]["per_s"]), n / on_s if on_s > 0 else math.nan)


class ReadCounter:
    """Counts archline's NVML source reads in this process, and their time, per source (it wraps
    ``archline.hw.nvml._NVMLSource.read``, which every source's read goes through)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n: dict[str, list[float]] = {}

    def install(self) -> None:
        from archline.hw import nvml

        inner = nvml._NVMLSource.read
        if getattr(inner, "_counted", False):
            return
        counter = self

        def read(src: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(src)
            finally:
                dt = time.perf_counter() - t0
                with counter._lock:
                    got = counter._n.setdefault(str(src.name), [0.0, 0.0])
                    got[0] += 1
                    got[1] += dt

        read._counted = True  # type: ignore[attr-defined]
        nvml._NVMLSource.read = read  # type: ignore[method-assign]

    def take(self) -> dict[str, list[float]]:
        """{source: [reads, seconds in them]} since the last take; resets."""
        with self._lock:
            out, self._n = self._n, {}
        return out


COUNTER = ReadCounter()


def reads(counts: dict[str, list[float]]) -> int:
    return int(sum(n for n, _ in counts.values()))


class BareSampler:
    """One more copy of archline's sensors without a recording: the NVML sources ``archline run`` opens
    (``measurement.attribute.backend.SOURCES``), each polled on a thread of its own at its own interval, as
    ``measurement.sampler`` polls it, the readings dropped. Stopping it waits only for the reads in flight (with 15
    queued, up to ~70 ms each); a full ``Attribution`` also attributes its recording on exit (with 16 at once,
    16 at once took 13.6-13.8 s to leave an on-half in session 16)."""

    def __init__(self, gpu: int) -> None:
        from archline.hw.nvml import open_sources
        from archline.measurement.attribute.backend import SOURCES

        self._sources = open_sources(gpu, SOURCES)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll, args=(src,), daemon=True) for src in self._sources]

    def _poll(self, src: Any) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            src.read()
            self._stop.wait(max(0.0, float(src.poll_interval_s) - (time.perf_counter() - t0)))

    def __enter__(self) -> BareSampler:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        for src in self._sources:
            src.close()


def sensors_on(gpu: int, copies: int) -> contextlib.ExitStack:
    """archline's sensors exactly as bench_run_overhead records them (``Attribution(gpu, trace=False, pre_s=0.3,
    post_s=0.3)``), and ``copies - 1`` :class:`BareSampler` beside them (a dose)."""
    from archline.measurement.attribute.api import Attribution

    stack = contextlib.ExitStack()
    try:  # the bare samplers last, so that they stop first and leave archline's sensors an empty NVML queue to end on
        stack.enter_context(Attribution(gpu, trace=False, pre_s=PRE_S, post_s=POST_S))
        for _ in range(copies - 1):
            stack.enter_context(BareSampler(gpu))
    except BaseException:
        stack.close()
        raise
    return stack


def calibrate(gpu: int, copies: int, seconds: float = CALIBRATE_S) -> dict[str, Any]:
    """NVML reads per second of one sampler and of ``copies`` at once, ``seconds`` each (before the child starts:
    the GPU idle), with the reads per source."""
    out: dict[str, Any] = {}
    for k in (1, copies):
        with sensors_on(gpu, k):
            COUNTER.take()
            a = time.time()
            time.sleep(seconds)
            b = time.time()
            got = COUNTER.take()
        out[str(k)] = {"seconds": b - a, "reads": got, "per_s": reads(got) / (b - a)}
    return out


def auto_env() -> dict[str, str]:
    """archline run's default tracing (``--trace-duty auto``), as bench_run_overhead.as_child sets it."""
    from archline.measurement.attribute.run import AUTO_DUTY_MS, AUTO_PROBE_MS, AUTO_RATE_PER_S

    return {
        "ARCHLINE_CUPTI_DUTY_MS": f"{AUTO_DUTY_MS[0]},{AUTO_DUTY_MS[1]}",
        "ARCHLINE_CUPTI_DUTY_MODE": "detach",
        "ARCHLINE_CUPTI_DUTY_AUTO": f"{AUTO_PROBE_MS},{AUTO_RATE_PER_S:g}",
    }


def measure_workload(
    name: str,
    seconds: float,
    toggle_s: float,
    gpu: int,
    cpus: list[int],
    lib: Path,
    out_dir: Path,
    copies: int = 1,
) -> ChildRecord | None:
    """Run the workload's child for ``seconds`` under the injection library (the default duty cycle), toggling
    the sensors (``copies`` sets at once in every on-half) while its block runs; None where the workload is not
    installed."""
    from archline.hw.cupti.inject import injection_env, read_injection_output

    COUNTER.install()
    calibration = calibrate(gpu, copies) if copies > 1 else None
    on_reads: list[dict[str, list[float]]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("cupti-*"):
        old.unlink()  # a previous run's trace would be read with this one's
    env = {**os.environ, **injection_env(lib, out_dir), **auto_env()}
    cmd = [sys.executable, bro.__file__, "--child", name, "--block-s", repr(float(seconds))]
    if cpus:
        cmd += ["--cpus", ",".join(map(str, cpus))]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    halves: list[tuple[str, float, float]] = []
    cycles: list[tuple[Interval, Interval]] = []
    lines: list[str] = []
    done = threading.Event()
    try:
        for line in proc.stdout:
            if line.strip() == "READY":
                break
        else:
            rc = proc.wait()
            if rc == 3:
                return None
            raise RuntimeError(f"the child of {name} ended before its block (exit {rc})")

        def read_rest() -> None:  # the JSON may outgrow the pipe: read it while the sensors toggle
            assert proc.stdout is not None
            for ln in proc.stdout:
                lines.append(ln)
                if ln.startswith("{"):
                    done.set()
            done.set()

        reader = threading.Thread(target=read_rest, daemon=True)
        reader.start()
        c = 0
        while not done.is_set():
            got: dict[str, Interval] = {}
            for kind in ("on", "off") if c % 2 == 0 else ("off", "on"):
                if done.is_set():
                    break
                if kind == "on":
                    with sensors_on(gpu, copies):
                        COUNTER.take()
                        a = time.time()
                        done.wait(toggle_s)
                        b = time.time()
                        on_reads.append(COUNTER.take())
                else:
                    a = time.time()
                    done.wait(toggle_s)
                    b = time.time()
                halves.append((kind, a, b))
                got[kind] = (a, b)
            if len(got) == 2:
                cycles.append((got["on"], got["off"]))
            c += 1
        rc = proc.wait()
        reader.join()
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise
    wall = time.perf_counter() - t0
    if rc != 0 or not lines:
        raise RuntimeError(f"the child of {name} failed (exit {rc})")
    res = json.loads(lines[-1])
    tr = read_injection_output(out_dir)
    return ChildRecord(
        stamps_ns=[int(x) for x in res["stamps_ns"]],
        halves=halves,
        cycles=cycles,
        traced=sorted(tr.traced) if tr.traced is not None else None,
        block_s=float(res["block_s"]),
        setup_s=float(res.get("setup_s", 0.0)),
        wall_s=wall,
        records=len(tr.records),
        errors=list(tr.errors),
        switch_s=list(tr.switch_s),
        detach_wait_s=list(tr.detach_wait_s),
        detach_s=list(tr.detach_s),
        attach_s=list(tr.attach_s),
        on_reads=on_reads,
        copies=copies,
        calibration=calibration,
    )


def record_json(name: str, rec: ChildRecord, a: Analysis, cpus: list[int]) -> dict[str, Any]:
    """All of one workload's raw data and figures, for the JSON file."""
    loops = loops_from_stamps(rec.stamps_ns)
    return {
        "workload": name,
        "cpus": cpus,
        "env": auto_env(),
        "block_s": rec.block_s,
        "setup_s": rec.setup_s,
        "child_wall_s": rec.wall_s,
        "records": rec.records,
        "injection_errors": rec.errors,
        "stamps_ns": rec.stamps_ns,
        "loops": [list(x) for x in loops],
        "sensor_halves": [list(h) for h in rec.halves],
        "sensors_on": [list(on) for on, _ in rec.cycles],
        "sensors_off": [list(off) for _, off in rec.cycles],
        "traced": [list(x) for x in rec.traced] if rec.traced is not None else None,
        "switch_s": rec.switch_s,
        "detach_wait_s": rec.detach_wait_s,
        "detach_s": rec.detach_s,
        "attach_s": rec.attach_s,
        "sensor_copies": rec.copies,
        "sensor_reads_on": rec.on_reads,
        "calibration": rec.calibration,
        **({"dose": rec.dose.to_json()} if rec.dose is not None else {}),
        "figures": a.to_json(),
    }


def time_in_reads(c: dict[str, Any]) -> float:
    """Seconds spent in NVML reads per second of a calibration (above 1: the samplers' reads overlap, queued)."""
    return sum(float(t) for _, t in c["reads"].values()) / float(c["seconds"])


def switch_gaps(w: dict[str, Any]) -> dict[str, list[float]]:
    """Seconds between consecutive sensor halves of different kinds, outside both: 'leave' after an on-half (the
    post-roll, the attribution on leaving, stopping the samplers), 'enter' before one (opening the sensors, the
    pre-roll)."""
    h = sorted((float(a), float(b), str(k)) for k, a, b in w["sensor_halves"])
    out: dict[str, list[float]] = {"leave": [], "enter": []}
    for p, n in itertools.pairwise(h):
        if p[2] != n[2]:
            out["leave" if p[2] == "on" else "enter"].append(max(0.0, n[0] - p[1]))
    return out


def busy_factor(w: dict[str, Any]) -> float | None:
    """A dosed run's dose by the driver's busy time rather than by reads: min(1, the K samplers' time in reads per
    second) over one sampler's (NVML serialises the energy counter's reads, so K samplers keep the read path busy at
    most all the time). None without a calibration."""
    cal = w.get("calibration")
    if not cal or len(cal) < 2:
        return None
    one = time_in_reads(cal["1"])
    many = time_in_reads(cal[max(cal, key=int)])
    return min(1.0, many) / one if one > 0 else None


def calibration_lines(w: dict[str, Any]) -> list[str]:
    """A dosed run's calibration and on-halves: NVML reads per second and each source's mean time per read."""

    def per(reads_by: dict[str, list[float]]) -> str:
        return ", ".join(f"{src} {1e3 * t / n:.1f} ms" for src, (n, t) in sorted(reads_by.items()) if n)

    cal = w.get("calibration")
    if not cal:
        return []
    out = [f"  calibration ({k} sampler{'s' if k != '1' else ''} alone, {c['seconds']:.1f} s): {c['per_s']:.0f} NVML "
           f"reads/s; per read: {per(c['reads'])}; time in reads {time_in_reads(c):.2f} s/s"
           for k, c in cal.items()]  # fmt: skip
    on: dict[str, list[float]] = {}
    for half in w.get("sensor_reads_on") or []:
        for src, (n, t) in half.items():
            got = on.setdefault(src, [0.0, 0.0])
            got[0] += n
            got[1] += t
    if on:
        out.append(f"  on-halves ({w.get('sensor_copies', 1)} samplers, the child running): per read: {per(on)}")
    return out


def summarize(paths: Sequence[Path]) -> int:
    """Redo the figures of saved runs; 0 if they match the saved ones, 1 if any differs, 2 on an unreadable file."""
    pooled: list[float] = []
    dosed = False
    same = True
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            runs = {n: w for n, w in doc["workloads"].items() if "loops" in w}
            own_guard = float(doc.get("guard_s", 0.0))  # runs before GUARD_S had none

            own_attach = bool(doc.get("attach_guard", False))  # runs before session 16's review: none
            redone = {n: (_redo(doc, w, own_guard, own_attach), _redo(doc, w, GUARD_S, True)) for n, w in runs.items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"overhead_interleaved: {path}: not a run's JSON ({exc.__class__.__name__}: {exc})", file=sys.stderr)
            return 2
        for name, (a, now) in redone.items():
            saved = dict(runs[name]["figures"])
            saved.setdefault("guard_s", own_guard)
            match = _close(a.to_json(), saved)
            same &= match
            print(f"== {path.name}: {name}, {a.loops} loops, {len(a.sensor_changes)} sensor cycles; as the run "
                  f"analysed it (guard {own_guard:g} s)"
                  + ("" if match else " (DIFFERS from the figures the run saved)"))  # fmt: skip
            for line in report_lines(a):
                print(line)
            w = runs[name]
            for line in calibration_lines(w):
                print(line)
            for how, gaps in switch_gaps(w).items():
                if gaps:
                    print(f"  switching the sensors ({how} an on-half): {min(gaps):.2f}-{max(gaps):.2f} s outside the "
                          f"halves (median {statistics.median(gaps):.2f} s, n={len(gaps)})")  # fmt: skip
            busy = busy_factor(w)
            if busy is not None and a.sensors_dosed is not None and a.dose is not None:
                alt = per_sampler(a.sensors_dosed, Dose(a.dose.copies, 1.0, busy))
                print(f"  scaled by the time in reads instead (one sampler's, against the read path busy throughout): "
                      f"÷ {busy:.2f}: {_pct(alt)}")  # fmt: skip
            if w["traced"]:
                after = first_after_excess([(float(x), float(y)) for x, y in w["loops"]],
                                           [(float(x), float(y)) for x, y in w["traced"]])  # fmt: skip
                if after.centre is not None and after.lo is not None and after.hi is not None:
                    print(f"  first loop after each traced period (as stamped): {1e3 * after.centre:+.1f} ms "
                          f"[{1e3 * after.lo:+.1f} .. {1e3 * after.hi:+.1f} ms] over its reference, "
                          f"n={after.n} periods")  # fmt: skip
            if own_guard != GUARD_S:
                print(f"  redone with each traced period {GUARD_S:g} s longer on both sides (GUARD_S; post hoc for "
                      "this run):")  # fmt: skip
                for line in report_lines(now):
                    print(line)
            elif not own_attach and not _close(a.to_json(), now.to_json()):
                print("  redone with each traced period starting its CUPTI attach time earlier where that is longer "
                      "than the guard (post hoc for this run):")  # fmt: skip
                for line in report_lines(now):
                    print(line)
            f = now.dose.factor if now.dose is not None else 1.0
            dosed |= now.dose is not None
            pooled += [c / f for c in now.sensor_changes]  # a dosed run's changes per sampler
    if pooled:
        pe = bro.paired_estimate(pooled, LEVEL)
        pct = f"{100 * pe.centre:+.2f} % [{100 * pe.lo:+.2f} .. {100 * pe.hi:+.2f} %]"
        how = "post hoc; a dosed run's changes ÷ its factor" if dosed else "post hoc"
        print(f"sensors, every cycle of these files pooled ({how}): {pct} "
              f"(Hodges-Lehmann, signed-rank interval {100 * pe.coverage:.0f} %, n={pe.n} cycles), "
              f"{interval_verdict(pe.lo, pe.hi)}")  # fmt: skip
    return 0 if same else 1


def period_states(w: dict[str, Any]) -> list[str]:
    """The sensors' state during each traced period after the first (the probe), as saved: 'on' or 'off' where the
    period lies wholly inside an on- or an off-half, 'between' otherwise (it overlaps a switch of the sensors)."""
    halves = [(str(k), float(a), float(b)) for k, a, b in w["sensor_halves"]]
    out = []
    for lo, hi in sorted((float(a), float(b)) for a, b in w["traced"] or [])[1:]:
        got = [k for k, a, b in halves if a <= lo and hi <= b]
        out.append(got[0] if got else "between")
    return out


def attach_times(w: dict[str, Any]) -> list[float] | None:
    """Each traced period's (after the first) CUPTI attach time (s): the injection reader's attach times where the
    run saved them, one per period; else from its switch times, one per switch, the probe's start left out, so
    OFF(probe), ON, OFF, ON, ... (the ONs attach CUPTI and take milliseconds, the OFFs microseconds). None where
    neither pairs with the periods."""
    n = len(w["traced"] or []) - 1
    if n <= 0:
        return None
    att = w.get("attach_s")  # saved since session 16's review: the injection reader's own on-switches after a detach
    if att is not None and len(att) == n:
        return [float(x) for x in att]
    sw = [float(x) for x in w.get("switch_s") or []]
    if len(sw) != 2 * n + 1:
        return None
    return sw[1::2]


def switch_table(paths: Sequence[Path]) -> int:
    """Per run and sensors' state: the traced periods, their CUPTI attach time and their excess (medians): what
    queued NVML reads do to the tracer's switches. 0, or 2 on an unreadable file."""
    print(f"{'run':<34} {'workload':<8} {'samplers':>8}  {'state':<8} {'periods':>7} {'attach ms':>10} "
          f"{'excess ms':>10}")  # fmt: skip
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            runs = {n: w for n, w in doc["workloads"].items() if "loops" in w and w.get("traced")}
            rows = []
            for name, w in runs.items():
                states = period_states(w)
                attach = attach_times(w)
                fig = w["figures"]["tracing"]
                # the figures' periods are the saved ones widened by the guard: matched by their mid-points (ms)
                excess = {
                    round((float(a) + float(b)) * 500): float(e)
                    for (a, b), e in zip(fig["periods"], fig["excess_s"], strict=True)
                }
                traced = [(float(a), float(b)) for a, b in w["traced"]]
                if doc.get("attach_guard"):  # the run analysed its periods widened by slow attaches (widened)
                    traced = widened(traced, attach, float(doc.get("guard_s", 0.0))) or traced
                mids = [round((a + b) * 500) for a, b in sorted(traced)[1:]]
                copies = int(w.get("sensor_copies", 1))
                for state in ("on", "off", "between"):
                    idx = [i for i, st in enumerate(states) if st == state]
                    if not idx:
                        continue
                    att = [attach[i] for i in idx] if attach is not None else []
                    exc = [excess[mids[i]] for i in idx if mids[i] in excess]
                    rows.append((name, copies if state == "on" else 0, state, len(idx), att, exc))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"overhead_interleaved: {path}: not a run's JSON ({exc.__class__.__name__}: {exc})", file=sys.stderr)
            return 2
        for name, copies, state, n, att, exc in rows:
            a_ms = f"{1e3 * statistics.median(att):.1f}" if att else "-"
            e_ms = f"{1e3 * statistics.median(exc):.0f}" if exc else "-"
            samplers = str(copies) if state != "between" else "-"
            print(f"{path.stem.removeprefix('overhead_interleaved-')[:34]:<34} {name:<8} {samplers:>8}  {state:<8} "
                  f"{n:>7} {a_ms:>10} {e_ms:>10}")  # fmt: skip
    return 0


def widened(traced: Sequence[Interval] | None, attach: Sequence[float] | None, guard: float) -> list[Interval] | None:
    """The traced periods with each one after the first (the probe) starting earlier by its CUPTI attach time beyond
    ``guard``: the injection library stamps ON only once CUPTI is attached, and where the attach takes longer than
    the guard (2 s with 16 samplers queued, session 16) the guard alone leaves part of it among the untraced loops.
    Unchanged where the attach times are unknown or within the guard (12-20 ms with at most one sampler)."""
    if traced is None:
        return None
    ivs = sorted(traced)
    if attach is None:
        return list(ivs)
    return ivs[:1] + [(lo - max(0.0, t - guard), hi) for (lo, hi), t in zip(ivs[1:], attach, strict=True)]


def _redo(doc: dict[str, Any], w: dict[str, Any], guard: float, attach: bool = False) -> Analysis:
    """One saved workload's figures, redone from its loops, halves and traced periods with ``guard`` (and, with
    ``attach``, each period started earlier by its attach time beyond the guard: :func:`widened`)."""
    traced = [(float(a), float(b)) for a, b in w["traced"]] if w["traced"] is not None else None
    return analyse(
        [(float(a), float(b)) for a, b in w["loops"]],
        [((float(on[0]), float(on[1])), (float(off[0]), float(off[1])))
         for on, off in zip(w["sensors_on"], w["sensors_off"], strict=True)],
        widened(traced, attach_times(w), guard) if attach else traced,
        int(doc.get("k_ref", K_REF)),
        float(doc.get("level", LEVEL)),
        guard,
        Dose(int(w["dose"]["copies"]), float(w["dose"]["one_per_s"]), float(w["dose"]["on_per_s"]))
        if w.get("dose") else None,
    )  # fmt: skip


def _close(a: Any, b: Any) -> bool:
    """Whether two JSON values agree (numbers to 1e-4 relative or 1e-5 absolute, fractions and seconds alike: the
    session-13 runs saved t quantiles from a series approximation, within 0.04 % of scipy's; any change of method
    moves them far more)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=1e-5) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"overhead_interleaved: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"from {','.join(bro.WORKLOADS)}")
    ap.add_argument("--seconds", type=float, default=300.0, help="each child's block (s)")
    ap.add_argument("--toggle-s", type=float, default=10.0, help="sensors on this long, then off as long (s)")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument(
        "--cpus", default="auto", help="the child's CPUs (auto: the upper half of this process's; none; a list)"
    )
    ap.add_argument("--sensor-copies", type=int, default=1,
                    help="sets of sensors at once in every on-half (a dose: the sensors' figure is then scaled to "
                    "one set by the NVML reads, cost ∝ reads assumed)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=None, help=f"write {OUT_NAME} and the traces here")
    ap.add_argument("--summarize", type=Path, nargs="+", default=None, help="redo the figures of saved JSON files")
    ap.add_argument("--switches", type=Path, nargs="+", default=None,
                    help="saved runs: traced periods' CUPTI attach time and excess by the sensors' state")  # fmt: skip
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    if args.summarize is not None:
        return summarize(args.summarize)
    if args.switches is not None:
        return switch_table(args.switches)
    names = [w for w in args.workloads.split(",") if w]
    bad = [w for w in names if w not in bro.WORKLOADS]
    problem = None
    if not names:
        problem = "--workloads: none given"
    elif bad:
        problem = f"unknown workloads: {', '.join(bad)} (from {','.join(bro.WORKLOADS)})"
    elif not (args.toggle_s > 0 and math.isfinite(args.toggle_s)):
        problem = "--toggle-s must be a positive number of seconds"
    elif not (args.seconds >= 2 * MIN_N * args.toggle_s and math.isfinite(args.seconds)):
        problem = f"--seconds must be at least {2 * MIN_N} x --toggle-s ({MIN_N} full sensor cycles)"
    elif args.gpu < 0:
        problem = "--gpu must be >= 0"
    elif not 1 <= args.sensor_copies <= 64:
        problem = "--sensor-copies must be 1 to 64"
    child_cpus: list[int] = []
    own_cpus: list[int] = []
    if problem is None:
        try:
            child_cpus, own_cpus = bro.split_cpus(sorted(os.sched_getaffinity(0)), args.cpus)
        except ValueError as exc:
            problem = f"--cpus {args.cpus}: {exc}"
    if problem is not None:
        print(f"overhead_interleaved: {problem}", file=sys.stderr)
        return 2
    return run(names, args.seconds, args.toggle_s, args.gpu, child_cpus, own_cpus, args.out, args.sensor_copies)


def run(
    names: list[str],
    seconds: float,
    toggle_s: float,
    gpu: int,
    child_cpus: list[int],
    own_cpus: list[int],
    out: Path | None,
    copies: int = 1,
) -> int:
    """Measure every workload (GPU machine); print the figures, write the JSON; 0 if every figure passes."""
    from archline.errors import CUPTIUnavailableError
    from archline.hw.cupti.inject import build_injection

    # The sensors read NVML GPU --gpu; show CUDA (in the children) the same GPU.
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    out = out or Path(tempfile.mkdtemp(prefix="archline-interleaved-"))
    out.mkdir(parents=True, exist_ok=True)
    if own_cpus:
        os.sched_setaffinity(0, own_cpus)  # the sensors' threads too, away from the child's CPUs
    try:
        lib = build_injection()
    except CUPTIUnavailableError as exc:
        print(f"overhead_interleaved: no injection library: {exc}")
        return 1
    doc: dict[str, Any] = {
        "seconds": seconds,
        "toggle_s": toggle_s,
        "gpu": gpu,
        "limit": LIMIT,
        "level": LEVEL,
        "k_ref": K_REF,
        "guard_s": GUARD_S,
        "pre_s": PRE_S,
        "post_s": POST_S,
        "sensor_copies": copies,
        "attach_guard": True,  # each traced period starts its CUPTI attach time earlier beyond the guard (widened)
        "workloads": {},
    }
    ok = True
    cpus_txt = ",".join(map(str, child_cpus)) if child_cpus else "not pinned"
    for name in names:
        dosed = f" ({copies} sets at once)" if copies > 1 else ""
        print(f"== {name}: one child, {seconds:g} s block, sensors{dosed} {toggle_s:g} s on / {toggle_s:g} s off; "
              f"CPUs {cpus_txt}", flush=True)  # fmt: skip
        rec = measure_workload(name, seconds, toggle_s, gpu, child_cpus, lib, out / f"trace-{name}", copies)
        if rec is None:
            print("  skipped (not installed)")
            doc["workloads"][name] = {"skipped": "not installed"}
            ok = False
            write_json(out / OUT_NAME, doc)
            continue
        loops = loops_from_stamps(rec.stamps_ns)
        attach = attach_times({"traced": rec.traced, "switch_s": rec.switch_s, "attach_s": rec.attach_s})
        a = analyse(loops, rec.cycles, widened(rec.traced, attach, GUARD_S), dose=rec.dose)
        mode = "traced throughout" if rec.traced is None else f"{len(rec.traced)} traced periods"
        print(
            f"  {a.loops} loops, median {1e3 * a.median_loop_s:.1f} ms; {len(rec.cycles)} full sensor cycles; "
            f"{rec.records} records, {mode}; set-up {rec.setup_s:.1f} s, child {rec.wall_s:.0f} s"
            + (f"; injection errors: {'; '.join(rec.errors)}" if rec.errors else "")
        )
        for line in report_lines(a):
            print(line)
        print(NOT_MEASURED, flush=True)
        ok &= a.passed and rec.records > 0
        doc["workloads"][name] = record_json(name, rec, a, child_cpus)
        write_json(out / OUT_NAME, doc)
    doc["passed"] = ok
    write_json(out / OUT_NAME, doc)
    print(f"overall: {'PASS' if ok else 'not PASS'} (every figure's interval within ±{100 * LIMIT:.0f} %); "
          f"{out / OUT_NAME}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

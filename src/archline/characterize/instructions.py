"""Per-instruction energy (Arafa §III): instruction vs overhead kernels, and the three techniques compared."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archline.characterize.kernels.instructions import InstructionPair
from archline.characterize.runner import KernelRun, Runner
from archline.measurement.counter import counter_energy
from archline.measurement.techniques import compare_techniques
from archline.records import RunDir
from archline.records.instructions import (
    InstructionRow,
    TechniqueRow,
    per_instruction_energy,
    write_instruction_rows,
    write_technique_rows,
)

if TYPE_CHECKING:
    from archline.hw.nvml import NVMLSession

__all__ = [
    "TECHNIQUE_SOURCES",
    "TECHNIQUE_SUBSET",
    "InstructionResult",
    "measure_instructions",
    "repeat_diffs",
    "run_instruction_table",
    "run_techniques",
]

#: Sources the techniques are applied to; the first is the one techniques.csv reports.
TECHNIQUE_SOURCES: tuple[str, ...] = ("nvml.buffer", "nvml.instant", "nvml.usage")
_TECH_KEY = {"sma": "sma", "mtsm": "mtsm", "end-instant": "end_instant"}


@dataclass
class InstructionResult:
    rows: list[InstructionRow] = field(default_factory=list)
    techniques: list[TechniqueRow] = field(default_factory=list)
    by_source: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False


def _category(pair: InstructionPair) -> str:
    k = pair.key
    if k.endswith(("f16", "f16x2", "bf16", "bf16x2")):
        return "fp16"
    if k.endswith("f64"):
        return "fp64"
    if k.startswith(("sin", "cos", "ex2", "lg2", "rcp", "rsqrt", "sqrt")):
        return "sfu"
    if k.startswith("cvt"):
        return "conversion"
    if k.endswith("f32"):
        return "fp32"
    if k.startswith(("add.cc", "addc", "sub.cc", "subc", "mad.cc", "madc")):
        return "multi-precision"
    return "integer"


def _row(pair: InstructionPair, lvl: int, a: KernelRun, b: KernelRun) -> InstructionRow:
    ra, rb = a.row, b.row
    threads = int(ra.get("threads") or 0)
    iters = int(ra.get("iters") or 0)
    n = float(pair.per_thread_per_iter) * threads * iters
    base: dict[str, Any] = {
        "instruction": pair.key,
        "category": _category(pair),
        "opt_level": lvl,
        "shape": pair.shape,
        "grid": ra.get("grid"),
        "block": ra.get("block"),
        "threads": threads,
        "iters": iters,
        "instructions_per_launch": n or None,
        "time_per_launch_s": ra.get("time_s"),
        "overhead_time_per_launch_s": rb.get("time_s"),
        "kernel_energy_j": ra.get("energy_j"),
        "kernel_energy_uncertainty_j": ra.get("energy_uncertainty_j"),
        "overhead_energy_j": rb.get("energy_j"),
        "overhead_energy_uncertainty_j": rb.get("energy_uncertainty_j"),
        "sm_clock_mhz": ra.get("sm_clock_mhz"),
        "throttled": bool(ra.get("throttled") or rb.get("throttled")),
        "verified": None
        if ra.get("verified") is None
        else bool(ra.get("verified") and rb.get("verified") is not False),
    }
    notes = list(dict.fromkeys(x for x in (ra.get("note"), rb.get("note")) if x))
    ok = ra.get("status") == "ok" and rb.get("status") == "ok"
    ea, eb = ra.get("energy_j"), rb.get("energy_j")
    ua, ub = ra.get("energy_uncertainty_j"), rb.get("energy_uncertainty_j")
    if ok and ea is not None and eb is not None and ua is not None and ub is not None and n > 0:
        lanes = 1 if pair.shape == "single" else 32
        e = per_instruction_energy(float(ea), float(ua), float(eb), float(ub), n, active_lanes_per_warp=lanes)
        base.update(
            energy_per_thread_instr_pj=e.per_thread_pj,
            energy_per_thread_instr_uncertainty_pj=e.per_thread_uncertainty_pj,
            energy_per_warp_instr_pj=e.per_warp_pj,
            energy_per_warp_instr_uncertainty_pj=e.per_warp_uncertainty_pj,
            resolvable=e.resolvable,
        )
        if not e.resolvable:
            notes.append("the difference from the overhead kernel is within the sensor's uncertainty")
        idle = ra.get("idle_power_w")
        ta, tb = ra.get("time_s"), rb.get("time_s")
        if idle is not None and ta is not None and tb is not None:
            # The same idle draw is charged to both kernels for their own durations.
            dyn = (float(ea) - float(idle) * float(ta)) - (float(eb) - float(idle) * float(tb))
            base.update(
                idle_power_w=float(idle),
                dynamic_energy_per_thread_instr_pj=dyn / n * 1e12,
                dynamic_energy_per_thread_instr_uncertainty_pj=e.per_thread_uncertainty_pj,
            )
    status = "ok" if ok else ("skipped" if ra.get("status") == "skipped" else "failed")
    return InstructionRow(**base, status=status, note="; ".join(notes))


def run_instruction_table(
    runner: Runner,
    pairs: Sequence[InstructionPair],
    opt_levels: Sequence[int],
    rd: RunDir,
    *,
    target_full_s: float = 0.5,
    target_single_s: float = 0.3,
    on_start: Callable[[str, int, int], None] | None = None,
) -> InstructionResult:
    """Measure every pair at every optimisation level; write ``instructions.csv`` after each."""
    res = InstructionResult()
    total = len(pairs) * len(opt_levels)
    i = 0
    try:
        for pair in pairs:
            for lvl in opt_levels:
                if on_start:
                    on_start(f"{pair.instruction.name} -O{lvl}", i, total)
                i += 1
                t = target_single_s if pair.shape == "single" else target_full_s
                a = runner.run(pair.instruction, opt_level=lvl, target_s=t)
                iters = a.row.get("iters")
                b = runner.run(pair.overhead, opt_level=lvl, target_s=t, iters=int(iters) if iters else None)
                res.rows.append(_row(pair, lvl, a, b))
                write_instruction_rows(rd.file("instructions.csv"), res.rows)
    except KeyboardInterrupt:
        res.interrupted = True
    return res


def run_techniques(
    runner: Runner,
    pairs: Sequence[InstructionPair],
    rd: RunDir,
    res: InstructionResult,
    *,
    long_s: float = 3.0,
    on_start: Callable[[str, int, int], None] | None = None,
) -> InstructionResult:
    """SMA, end-instant (PAPI) and MTSM on the same long runs, against the energy counter.

    Each kernel runs ``long_s`` seconds back to back (so the counter's 100 ms updates are a
    small part of the window); every technique is applied to the same recording of it.
    """
    specs = [s for p in pairs for s in (p.instruction, p.overhead)]
    try:
        for i, spec in enumerate(specs):
            if on_start:
                on_start(f"techniques: {spec.name}", i, len(specs))
            run = runner.run(spec, opt_level=3, target_s=long_s)
            if run.region is None:
                continue
            rec = runner.sampler.recording()
            en = rec.get("nvml.energy")
            ref = counter_energy(en, run.region.start_s, run.region.end_s) if en is not None else None
            for src in TECHNIQUE_SOURCES:
                if rec.get(src) is None or not len(rec.readings[src]):
                    continue
                for name, est in compare_techniques(rec, run.region, src).items():
                    row = TechniqueRow(
                        run=src,
                        benchmark=spec.name,
                        technique=_TECH_KEY[name],
                        energy_j=est.energy_j if est.energy_j == est.energy_j else None,
                        reference_energy_j=ref,
                        duration_s=est.duration_s,
                        note="" if ref is not None else "no energy-counter reference",
                    )
                    if src == TECHNIQUE_SOURCES[0]:
                        res.techniques.append(row)
                    res.by_source.append(row.to_row())
            write_technique_rows(rd.file("techniques.csv"), res.techniques)
            rd.write_csv("techniques_by_source.csv", res.by_source)
    except KeyboardInterrupt:
        res.interrupted = True
    return res


#: Instructions whose long runs feed the technique comparison (full-GPU shape, -O3).
TECHNIQUE_SUBSET: tuple[str, ...] = (
    "add.u32",
    "mul.lo.u32",
    "fma.f32",
    "fma.f64",
    "sin.approx.f32",
    "div.rn.f32",
    "popc.b32",
    "fma.bf16x2",
)


def repeat_diffs(rows: Sequence[InstructionRow], earlier: Path) -> list[InstructionRow]:
    """The rows with their change (%) against the same rows of an earlier run."""
    from archline.records.instructions import read_instruction_rows

    old = {
        (r.instruction, r.opt_level, r.shape): r
        for r in read_instruction_rows(RunDir.open(earlier).path / "instructions.csv")
    }
    out = []
    for r in rows:
        o = old.get((r.instruction, r.opt_level, r.shape))
        d = None
        if o is not None and o.energy_per_thread_instr_pj and r.energy_per_thread_instr_pj is not None:
            d = (r.energy_per_thread_instr_pj / o.energy_per_thread_instr_pj - 1.0) * 100.0
        out.append(dataclasses.replace(r, repeat_diff_pct=d))
    return out


def measure_instructions(
    gpu: int,
    pairs: Sequence[InstructionPair],
    levels: Sequence[int],
    output: Path,
    *,
    force: bool,
    repeat_of: Path | None,
    techniques: bool,
    target_s: float,
    say: Callable[[str], None],
    on_start: Callable[[str, int, int], None] | None = None,
    nvml: Callable[[int], NVMLSession] | None = None,
) -> InstructionResult:
    """``archline instructions`` on one GPU: the instruction table at each ptxas level, the
    techniques compared on a subset, and the agreement with an earlier run when given. ``nvml``: the
    caller's NVML session of the GPU (see :class:`~archline.characterize.session.GPUSession`)."""
    from archline.characterize.kernels.instructions import instruction_pairs
    from archline.characterize.runner import RunnerOptions
    from archline.characterize.session import GPUSession

    t0 = time.time()
    res = InstructionResult()
    try:
        with GPUSession(gpu, output, "instructions", force=force, nvml=nvml) as s:
            s.note_extra(
                planned=[f"{p.instruction.name} -O{lvl}" for p in pairs for lvl in levels],
                opt_levels=list(levels),
                target_s=target_s,
            )
            est = s.estimator(progress=lambda m: say(f"sensor calibration: {m}"))
            # Short idle gaps: the overhead kernel follows its instruction kernel at once by design.
            opts = RunnerOptions(target_s=target_s, warmup=False, idle_gap_s=0.2)
            runner = Runner(s.ex, s.sampler, opts, estimator=est)
            res = run_instruction_table(runner, pairs, levels, s.rd, target_full_s=target_s, on_start=on_start)
            if techniques and not res.interrupted:
                keys = {p.key for p in pairs}
                subset = [k for k in TECHNIQUE_SUBSET if k in keys] or sorted(keys)[:4]
                tpairs = instruction_pairs(subset, shapes=["full"])
                res = run_techniques(runner, tpairs, s.rd, res, on_start=on_start)
            if repeat_of is not None:
                res.rows = repeat_diffs(res.rows, repeat_of)
                write_instruction_rows(s.rd.file("instructions.csv"), res.rows)
                s.note_extra(repeat_of=str(repeat_of))
            s.note_extra(table_wall_s=time.time() - t0)
            if res.interrupted:
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        res.interrupted = True
    return res

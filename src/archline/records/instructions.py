"""The tables of an instruction-energy run (Arafa): instructions.csv and techniques.csv, their rows and helpers."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from archline.records import write_csv
from archline.records.csvload import ColType, CsvRow, load_csv

__all__ = [
    "CATEGORIES",
    "INSTRUCTIONS_NAME",
    "INSTRUCTION_COLUMNS",
    "INSTRUCTION_TYPES",
    "RESOLVE_SIGMAS",
    "TECHNIQUES",
    "TECHNIQUES_NAME",
    "TECHNIQUE_COLUMNS",
    "TECHNIQUE_TYPES",
    "InstructionEnergy",
    "InstructionRow",
    "TechniqueRow",
    "TechniqueSummary",
    "normalize_technique",
    "per_instruction_energy",
    "read_instruction_rows",
    "read_technique_rows",
    "summarize_techniques",
    "write_instruction_rows",
    "write_technique_rows",
]

#: kernel − overhead must exceed this many standard deviations to be resolvable.
RESOLVE_SIGMAS = 2.0

INSTRUCTIONS_NAME = "instructions.csv"
TECHNIQUES_NAME = "techniques.csv"

#: Category key → heading, in the order of the paper's Table I; the last three are not in the paper.
CATEGORIES: dict[str, str] = {
    "integer": "(1) Integer arithmetic",
    "logic": "(2) Logic and shift",
    "fp32": "(3) Single precision",
    "fp64": "(4) Double precision",
    "fp16": "(5) Half precision",
    "multiprecision": "(6) Multi-precision",
    "special": "(7) Special mathematical",
    "intrinsic": "(8) Integer intrinsics",
    "bf16": "BF16 (not in the paper)",
    "conversion": "Conversions (not in the paper)",
    "other": "Other",
}

#: Column → (unit, meaning) of instructions.csv: one row per instruction × opt_level × shape (× technique).
INSTRUCTION_COLUMNS: dict[str, tuple[str, str]] = {
    "instruction": ("", "PTX instruction with its modifiers and type, e.g. add.u32, div.rn.f32, mad.cc.lo.u32"),
    "category": ("", f"one of {', '.join(CATEGORIES)}"),
    "opt_level": ("", "ptxas optimisation level of both kernels: 3 (the paper's Optimized) or 0 (Non-Optimized)"),
    "shape": ("", "single: one thread in one block (the paper's shape); full: every SM, enough warps to saturate"),
    "grid": ("blocks", "blocks per launch"),
    "block": ("threads", "threads per block"),
    "threads": ("threads", "threads per launch"),
    "iters": ("", "outer-loop trip count"),
    "instructions_per_launch": ("instr", "target thread-instructions per launch (threads × per-thread count)"),
    "time_per_launch_s": ("s", "instruction kernel: mean time per launch"),
    "overhead_time_per_launch_s": ("s", "overhead kernel (same code without the target instructions)"),
    "kernel_energy_j": ("J", "instruction kernel: board energy per launch"),
    "kernel_energy_uncertainty_j": ("J", "1σ of kernel_energy_j"),
    "overhead_energy_j": ("J", "overhead kernel: board energy per launch"),
    "overhead_energy_uncertainty_j": ("J", "1σ of overhead_energy_j"),
    "energy_per_thread_instr_pj": ("pJ", "(kernel − overhead) / instructions_per_launch: Arafa eq. (1)"),
    "energy_per_thread_instr_uncertainty_pj": ("pJ", "1σ, both kernels' uncertainties in quadrature"),
    "energy_per_warp_instr_pj": ("pJ", "per warp-instruction: × active lanes per warp (1 in the single shape)"),
    "energy_per_warp_instr_uncertainty_pj": ("pJ", "1σ of energy_per_warp_instr_pj"),
    "idle_power_w": ("W", "board power at idle just before the instruction kernel"),
    "dynamic_energy_per_thread_instr_pj": (
        "pJ",
        "as energy_per_thread_instr_pj after removing idle power × time from both kernels: the energy the "
        "instruction adds above the board's idle draw",
    ),
    "dynamic_energy_per_thread_instr_uncertainty_pj": ("pJ", "1σ of dynamic_energy_per_thread_instr_pj"),
    "resolvable": (
        "",
        f"false when kernel − overhead is under {RESOLVE_SIGMAS:g}σ or not positive: energies are then noise",
    ),
    "repeat_diff_pct": (
        "%",
        "100 × abs(E1 − E2) / mean(E1, E2) of the per-instruction energy of two independent repeats",
    ),
    "technique": ("", "estimator of the kernel energies: mtsm, end_instant, sma or counter"),
    "sm_clock_mhz": ("MHz", "mean SM clock during the instruction kernel"),
    "throttled": ("", "true if a power, thermal or slowdown clock-event reason was active"),
    "verified": ("", "true if the kernel's output checked out on the host"),
    "status": ("", "ok, failed or skipped"),
    "note": ("", "why a row failed, or what to watch for"),
}

#: Column → (unit, meaning) of techniques.csv: one row per run, benchmark and technique.
TECHNIQUE_COLUMNS: dict[str, tuple[str, str]] = {
    "run": ("", "label of the run (repeat) the estimate comes from"),
    "benchmark": ("", "kernel measured, e.g. div.u32@O3/single"),
    "technique": ("", "sma, end_instant (PAPI-style: last reading × elapsed time) or mtsm"),
    "duration_s": ("s", "kernel duration"),
    "energy_j": ("J", "the technique's energy estimate of the kernel"),
    "reference_energy_j": ("J", "reference: the energy counter over long repeated runs of the same kernel"),
    "reference_uncertainty_j": ("J", "1σ of the reference"),
    "error_j": ("J", "energy_j − reference_energy_j"),
    "error_pct": ("%", "100 × error_j / reference_energy_j"),
    "note": ("", "anything to watch for"),
}

TECHNIQUES = ("sma", "end_instant", "mtsm")

_INT = ("opt_level", "grid", "block", "threads", "iters")
_TEXT = ("instruction", "category", "shape", "technique", "status", "note")
_BOOL = ("resolvable", "throttled", "verified")
INSTRUCTION_TYPES: dict[str, ColType] = {
    c: "int" if c in _INT else "text" if c in _TEXT else "bool" if c in _BOOL else "num" for c in INSTRUCTION_COLUMNS
}
TECHNIQUE_TYPES: dict[str, ColType] = {
    c: "text" if c in ("run", "benchmark", "technique", "note") else "num" for c in TECHNIQUE_COLUMNS
}


@dataclass(frozen=True)
class InstructionRow:
    """One row of instructions.csv (see :data:`INSTRUCTION_COLUMNS` for units and meaning)."""

    instruction: str
    category: str
    opt_level: int
    shape: str
    grid: int | None = None
    block: int | None = None
    threads: int | None = None
    iters: int | None = None
    instructions_per_launch: float | None = None
    time_per_launch_s: float | None = None
    overhead_time_per_launch_s: float | None = None
    kernel_energy_j: float | None = None
    kernel_energy_uncertainty_j: float | None = None
    overhead_energy_j: float | None = None
    overhead_energy_uncertainty_j: float | None = None
    energy_per_thread_instr_pj: float | None = None
    energy_per_thread_instr_uncertainty_pj: float | None = None
    energy_per_warp_instr_pj: float | None = None
    energy_per_warp_instr_uncertainty_pj: float | None = None
    idle_power_w: float | None = None
    dynamic_energy_per_thread_instr_pj: float | None = None
    dynamic_energy_per_thread_instr_uncertainty_pj: float | None = None
    resolvable: bool | None = None
    repeat_diff_pct: float | None = None
    technique: str = "mtsm"
    sm_clock_mhz: float | None = None
    throttled: bool | None = None
    verified: bool | None = None
    status: str = "ok"
    note: str = ""

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TechniqueRow:
    """One row of techniques.csv. ``error_*`` are derived from the estimate and the reference."""

    run: str
    benchmark: str
    technique: str
    energy_j: float | None
    reference_energy_j: float | None
    duration_s: float | None = None
    reference_uncertainty_j: float | None = None
    note: str = ""

    @property
    def error_j(self) -> float | None:
        if self.energy_j is None or self.reference_energy_j is None:
            return None
        return self.energy_j - self.reference_energy_j

    @property
    def error_pct(self) -> float | None:
        e = self.error_j
        if e is None or not self.reference_energy_j:
            return None
        return 100.0 * e / self.reference_energy_j

    def to_row(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_j"] = self.error_j
        d["error_pct"] = self.error_pct
        return d


@dataclass(frozen=True)
class InstructionEnergy:
    """Arafa eq. (1) for one instruction: energy per thread- and per warp-instruction (pJ, 1σ)."""

    per_thread_pj: float
    per_thread_uncertainty_pj: float
    per_warp_pj: float
    per_warp_uncertainty_pj: float
    resolvable: bool


def per_instruction_energy(
    kernel_energy_j: float,
    kernel_uncertainty_j: float,
    overhead_energy_j: float,
    overhead_uncertainty_j: float,
    instructions_per_launch: float,
    *,
    active_lanes_per_warp: int = 32,
    sigmas: float = RESOLVE_SIGMAS,
) -> InstructionEnergy:
    """E_instruction = (E_total − E_overhead) / instructions (Arafa eq. 1), with 1σ from both kernels.

    ``active_lanes_per_warp`` is 1 for the single-thread shape (a warp-instruction is then one
    thread-instruction) and 32 for full warps. The result is unresolvable when the difference is
    not positive or under ``sigmas`` standard deviations.
    """
    if instructions_per_launch <= 0:
        raise ValueError("instructions_per_launch must be positive")
    diff_j = kernel_energy_j - overhead_energy_j
    sigma_j = math.hypot(kernel_uncertainty_j, overhead_uncertainty_j)
    thread = diff_j / instructions_per_launch * 1e12
    thread_u = sigma_j / instructions_per_launch * 1e12
    lanes = max(1, active_lanes_per_warp)
    resolvable = diff_j > 0 and diff_j > sigmas * sigma_j
    return InstructionEnergy(thread, thread_u, thread * lanes, thread_u * lanes, resolvable)


def normalize_technique(name: str) -> str:
    """Canonical technique key: ``papi``/``end-instant`` → ``end_instant``; lower case."""
    n = name.strip().lower().replace("-", "_").replace(" ", "_")
    return "end_instant" if n in ("papi", "end_instant", "endinstant", "end") else n


def _row_kw(row: CsvRow, names: Iterable[str]) -> dict[str, Any]:
    return {n: row.raw(n) for n in names if row.raw(n) is not None}


def read_instruction_rows(path: str | os.PathLike[str]) -> list[InstructionRow]:
    """Read instructions.csv strictly (one-line :class:`RunDirError` naming the file and line on a bad one)."""
    table = load_csv(
        Path(path), INSTRUCTION_TYPES, ("instruction", "opt_level", "shape"), what="instruction-energy table"
    )
    from archline.errors import RunDirError

    out = []
    names = [f.name for f in fields(InstructionRow)]
    for r in table.rows:
        if not r.text("instruction") or r.integer("opt_level") is None or not r.text("shape"):
            raise RunDirError(f"{table.path}:{r.line}: instruction, opt_level and shape must not be empty")
        kw = _row_kw(r, names)
        kw.setdefault("category", "other")
        kw["technique"] = normalize_technique(str(kw.get("technique", "mtsm")))
        out.append(InstructionRow(**kw))
    return out


def read_technique_rows(path: str | os.PathLike[str]) -> list[TechniqueRow]:
    """Read techniques.csv strictly; ``error_*`` columns are recomputed, not trusted."""
    required = ("technique", "energy_j", "reference_energy_j")
    table = load_csv(Path(path), TECHNIQUE_TYPES, required, what="technique table")
    names = [f.name for f in fields(TechniqueRow)]
    out = []
    for r in table.rows:
        kw = _row_kw(r, names)
        kw.setdefault("run", "")
        kw.setdefault("benchmark", "")
        kw["technique"] = normalize_technique(str(kw.get("technique", "")))
        kw.setdefault("energy_j", None)
        kw.setdefault("reference_energy_j", None)
        out.append(TechniqueRow(**kw))
    return out


def write_instruction_rows(path: str | os.PathLike[str], rows: Sequence[InstructionRow]) -> None:
    """Write instructions.csv atomically with the columns of :data:`INSTRUCTION_COLUMNS`."""
    write_csv(path, [r.to_row() for r in rows], list(INSTRUCTION_COLUMNS))


def write_technique_rows(path: str | os.PathLike[str], rows: Sequence[TechniqueRow]) -> None:
    """Write techniques.csv atomically with the columns of :data:`TECHNIQUE_COLUMNS`."""
    write_csv(path, [r.to_row() for r in rows], list(TECHNIQUE_COLUMNS))


@dataclass(frozen=True)
class TechniqueSummary:
    """A technique's errors over every run and benchmark: count, MAPE (%), RMSE (J), mean signed error (%)."""

    technique: str
    n: int
    mape_pct: float
    rmse_j: float
    mean_error_pct: float


def summarize_techniques(rows: Sequence[TechniqueRow]) -> list[TechniqueSummary]:
    """MAPE and RMSE per technique, over rows with both an estimate and a non-zero reference."""
    by: dict[str, list[TechniqueRow]] = {}
    for r in rows:
        if r.error_pct is not None:
            by.setdefault(r.technique, []).append(r)
    order = {t: i for i, t in enumerate(TECHNIQUES)}
    out = []
    for tech in sorted(by, key=lambda t: (order.get(t, len(order)), t)):
        rs = by[tech]
        pct = [r.error_pct for r in rs if r.error_pct is not None]
        err = [r.error_j for r in rs if r.error_j is not None]
        out.append(
            TechniqueSummary(
                tech,
                len(rs),
                sum(abs(p) for p in pct) / len(pct),
                math.sqrt(sum(e * e for e in err) / len(err)),
                sum(pct) / len(pct),
            )
        )
    return out

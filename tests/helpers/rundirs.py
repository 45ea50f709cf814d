"""Builders of synthetic run directories (characterize, instructions) for report tests; values are made up."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archline.records import Manifest, RunDir, write_csv
from archline.records.characterize import RESULT_COLUMNS, TARGET_COLUMNS
from archline.records.instructions import (
    INSTRUCTION_COLUMNS,
    TECHNIQUE_COLUMNS,
    InstructionRow,
    TechniqueRow,
    per_instruction_energy,
)

__all__ = [
    "ARITH",
    "MEMORY",
    "SM_COUNT",
    "SYNC",
    "SyntheticRun",
    "instruction_rows",
    "make_characterize_run",
    "make_instructions_run",
    "result_row",
    "technique_rows",
]

SM_COUNT = 132
SM_CLOCK_MHZ = 1980.0

#: name → (unit, spec ops/clk/SM or None, measured ops/clk/SM, time_s, avg power W)
ARITH: dict[str, tuple[str, float | None, float, float, float]] = {
    "arith.int32.add": ("int32", 64.0, 60.5, 0.0125, 310.0),
    "arith.int32.mad": ("int32", 64.0, 31.5, 0.024, 320.0),
    "arith.int32.popc": ("int32", 16.0, 15.9, 0.048, 280.0),
    "arith.int32.shl": ("int32", 64.0, 62.0, 0.0122, 305.0),
    "arith.int32.xor": ("int32", 64.0, 63.1, 0.0121, 300.0),
    "arith.int32.setp": ("int32", 64.0, 61.0, 0.0124, 298.0),
    "arith.int64.add": ("int64", None, 20.5, 0.037, 315.0),
    "arith.fp32.fma": ("fp32", 128.0, 125.3, 0.0375, 420.0),
    "arith.fp32.add": ("fp32", 128.0, 122.0, 0.0062, 400.0),
    "arith.fp32.rsqrt": ("sfu", 16.0, 15.7, 0.048, 350.0),
    "arith.fp64.fma": ("fp64", 64.0, 63.0, 0.012, 450.0),
    "arith.fp16.hfma2": ("fp16", 128.0, 120.0, 0.0063, 390.0),
    "arith.bf16.fma": ("bf16", 128.0, 118.0, 0.0064, 395.0),
    "arith.fp32.div.rn.normal": ("fp32", None, 4.1, 0.18, 330.0),
    "arith.fp32.div.rn.denormal": ("fp32", None, 0.9, 0.84, 300.0),
    "arith.fp32.div.approx.normal": ("fp32", None, 15.0, 0.05, 340.0),
    "arith.fp32.div.approx.denormal": ("fp32", None, 14.9, 0.051, 341.0),
}

#: name → (unit, bytes/clk/SM, time_s, avg power W)
MEMORY: dict[str, tuple[str, float, float, float]] = {
    "mem.dram.stride": ("dram", 3.1, 1.17, 520.0),
    "mem.dram.stream": ("dram", 11.2, 0.33, 610.0),
    "mem.dram.copy": ("dram", 11.0, 0.34, 640.0),
    "mem.l2.read": ("l2", 40.0, 0.094, 480.0),
    "mem.shared.read": ("shared", 120.0, 0.031, 380.0),
    "mem.const.read": ("constant", 60.0, 0.062, 330.0),
}

SYNC: dict[str, tuple[float, float, float]] = {
    "sync.bar": (16.0, 0.05, 300.0),
    "sync.atomic.global.uncontended": (8.0, 0.1, 350.0),
    "sync.atomic.shared.contended": (1.0, 0.8, 290.0),
}

SWEEPS: dict[str, tuple[str, str, str, list[float]]] = {
    "mem.dram.coalescing": ("memory", "dram", "coalescing", [1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0]),
    "mem.dram.access_size": ("memory", "dram", "access_bytes", [1, 2, 4, 8, 16]),
    "mem.shared.conflicts": ("memory", "shared", "conflict_ways", [0, 1, 3, 7, 15, 31]),
    "arith.fp32.fma.occupancy": ("arithmetic", "fp32", "block", [32, 64, 128, 256, 512, 1024]),
}


def _base(name: str, group: str, unit: str, time_s: float, power_w: float, ops: float, nbytes: float) -> dict[str, Any]:
    idle_w = 110.0
    energy = power_w * time_s
    dyn = energy - idle_w * time_s
    return {
        "name": name,
        "group": group,
        "unit": unit,
        "description": f"synthetic {name}",
        "sweep_var": "",
        "sweep_value": None,
        "opt_level": 3,
        "grid": 8 * SM_COUNT,
        "block": 256,
        "threads": 8 * SM_COUNT * 256,
        "iters": 1000,
        "launches": 10,
        "time_s": time_s,
        "time_cv": 0.002,
        "sm_clock_mhz": SM_CLOCK_MHZ,
        "mem_clock_mhz": 2619.0,
        "ops": ops,
        "flops": None,
        "bytes": nbytes or None,
        "bytes_per_s": nbytes / time_s if nbytes else None,
        "bytes_per_clk_per_sm": None,
        "avg_power_w": power_w,
        "max_power_w": power_w * 1.05,
        "idle_power_w": idle_w,
        "energy_j": energy,
        "energy_uncertainty_j": energy * 0.01,
        "dynamic_energy_j": dyn,
        "nj_per_op": energy / ops * 1e9 if ops else None,
        "dyn_nj_per_op": dyn / ops * 1e9 if ops else None,
        "mips_per_w_per_sm": ops / time_s / 1e6 / power_w / SM_COUNT if ops else None,
        "temperature_c": 55.0,
        "throttle_reasons": "",
        "throttled": False,
        "verified": True,
        "resolvable": True,
        "status": "ok",
        "note": "",
    }


def result_row(name: str, **overrides: Any) -> dict[str, Any]:
    """One results.csv row for a benchmark of the synthetic catalogue, with consistent derived columns."""
    clocks = SM_CLOCK_MHZ * 1e6 * SM_COUNT
    if name in ARITH:
        unit, spec, meas, t, p = ARITH[name]
        ops = meas * clocks * t
        row = _base(name, "arithmetic", unit, t, p, ops, 0.0)
        row["ops_per_clk_per_sm"] = meas
        row["spec_ops_per_clk_per_sm"] = spec
        row["frac_of_spec"] = meas / spec if spec else None
    elif name in MEMORY:
        unit, bpc, t, p = MEMORY[name]
        nbytes = bpc * clocks * t
        row = _base(name, "memory", unit, t, p, nbytes / 16, nbytes)
        row["bytes_per_clk_per_sm"] = bpc
    elif name in SYNC:
        meas, t, p = SYNC[name]
        row = _base(name, "sync", "sync", t, p, meas * clocks * t, 0.0)
        row["ops_per_clk_per_sm"] = meas
    else:
        raise KeyError(name)
    row.update(overrides)
    return row


def sweep_rows() -> list[dict[str, Any]]:
    rows = []
    for name, (group, unit, var, values) in SWEEPS.items():
        for i, v in enumerate(values):
            t = 0.01 * (i + 1)
            p = 300.0 + 20.0 * i
            nbytes = 1e9 * (i + 1) if group == "memory" else 0.0
            # As shipped runs name them: one benchmark per block size (so a text sort would misorder them).
            point = f"{name}.{int(v)}" if var == "block" else name
            row = _base(point, group, unit, t, p, 1e9, nbytes)
            row.update(sweep_var=var, sweep_value=v, ops_per_clk_per_sm=10.0 * (i + 1))
            rows.append(row)
    return rows


def all_names() -> list[str]:
    return [*ARITH, *MEMORY, *SYNC]


@dataclass
class SyntheticRun:
    path: Path
    rows: list[dict[str, Any]]
    manifest: Manifest
    targets: list[dict[str, Any]] = field(default_factory=list)

    def row(self, name: str) -> dict[str, Any]:
        return next(r for r in self.rows if r["name"] == name and not r["sweep_var"])


def _manifest(
    kind: str, status: str, cc: Any, planned: Sequence[str], gpu_name: str = "NVIDIA H100 80GB HBM3"
) -> Manifest:
    return Manifest(
        kind=kind,
        status=status,  # type: ignore[arg-type]
        created_utc="2026-05-01T10:00:00+00:00",
        finished_utc="2026-05-01T10:42:17+00:00" if status != "running" else None,
        command=("archline", kind),
        host={"hostname": "gpu-node-7", "platform": "Linux-test", "python": "3.12.3"},
        gpu={
            "name": gpu_name,
            "uuid": "GPU-1234",
            "compute_capability": cc,
            "sm_count": SM_COUNT,
            "memory_total_b": 80 * 2**30,
            "driver_version": "580.159.04",
            "cuda_driver_version": 13000,
        },
        # Keys as archline.hw.nvml.device_state writes them.
        state_before={
            "sm_clock_mhz": 345,
            "mem_clock_mhz": 2619,
            "power_limit_w": 700.0,
            "power_w": 107.5,
            "temperature_c": 31,
            "persistence_mode": True,
            "pstate": 0,
            "throttle": {"mask": 1, "reasons": ["gpu_idle"], "throttled": False},
        },
        state_after={
            "sm_clock_mhz": 1980,
            "mem_clock_mhz": 2619,
            "temperature_c": 58,
            "power_w": 131.0,
            "throttle": {"mask": 0, "reasons": [], "throttled": False},
        },
        packages={"archline": "0.1.0", "numpy": "2.4.6"},
        extra={"planned": list(planned)},
    )


def make_characterize_run(
    path: Path,
    *,
    status: str = "complete",
    missing: Iterable[str] = (),
    failed: Iterable[str] = (),
    unresolvable: Iterable[str] = (),
    throttled: Iterable[str] = (),
    unverified: Iterable[str] = (),
    unknown_cc: bool = False,
    targets: bool = True,
    sweeps: bool = True,
    gpu_name: str = "NVIDIA H100 80GB HBM3",
) -> SyntheticRun:
    """A characterization run directory: every catalogue benchmark, less ``missing``, with the given flags.

    ``unknown_cc`` gives the GPU compute capability 12.7 and leaves every spec (and % of spec) empty.
    """
    missing, failed = set(missing), set(failed)
    unresolvable, throttled, unverified = set(unresolvable), set(throttled), set(unverified)
    planned = all_names()
    rows = []
    for name in planned:
        if name in missing:
            continue
        row = result_row(name)
        if name in failed:
            row.update(status="failed", note="output check failed: 12 of 4096 values differ")
            for col in ("time_s", "energy_j", "avg_power_w", "ops_per_clk_per_sm"):
                row[col] = None
        if name in unresolvable:
            row["resolvable"] = False
        if name in throttled:
            row.update(throttled=True, throttle_reasons="sw_power_cap")
        if name in unverified:
            row["verified"] = False
        if unknown_cc:
            row.update(spec_ops_per_clk_per_sm=None, frac_of_spec=None)
        rows.append(row)
    if sweeps:
        rows += sweep_rows()
    cc = "12.7" if unknown_cc else [9, 0]
    run = RunDir.create(path, _manifest("characterize", status, cc, planned, gpu_name))
    write_csv(path / "results.csv", rows, list(RESULT_COLUMNS))
    tg: list[dict[str, Any]] = []
    if targets:
        tg = [
            {"target": "FP32 FMA ≥ 95 % of spec", "required": 95.0, "measured": 97.89, "unit": "%", "passed": True},
            {
                "target": "DRAM copy ≥ 90 % of 3.35 TB/s",
                "required": 90.0,
                "measured": 81.2,
                "unit": "%",
                "passed": False,
                "detail": "missed by 8.8 points: power cap reached",
            },
            {"target": "shared 8-way conflict ≈ 8× time", "required": "within 10 %", "unit": "", "passed": None},
        ]
        write_csv(path / "targets.csv", tg, list(TARGET_COLUMNS))
    return SyntheticRun(path, rows, run.manifest, tg)


# --------------------------------------------------------------------------- instructions

#: instruction → (category, pJ per thread-instruction at -O3 single, at -O0 single)
INSTRUCTIONS: dict[str, tuple[str, float, float]] = {
    "add.u32": ("integer", 250.0, 900.0),
    "div.u32": ("integer", 3500.0, 21000.0),
    "fma.rn.f32": ("fp32", 260.0, 950.0),
    "div.rn.f64": ("fp64", 4000.0, 30000.0),
    "sin.approx.f32": ("special", 600.0, 1100.0),
    "fma.rn.bf16": ("bf16", 300.0, 1000.0),
    "popc.b32": ("intrinsic", 400.0, 1500.0),
}


def instruction_rows(*, unresolvable: Iterable[str] = (), failed: Iterable[str] = ()) -> list[InstructionRow]:
    """Rows for every instruction × opt level × shape, computed with Arafa eq. (1) from made-up energies."""
    unresolvable, failed = set(unresolvable), set(failed)
    out = []
    for instr, (cat, pj3, pj0) in INSTRUCTIONS.items():
        for opt, pj in ((3, pj3), (0, pj0)):
            for shape, threads, lanes in (("single", 1, 1), ("full", SM_COUNT * 2048, 32)):
                n = 1e9 if shape == "single" else 1e12
                per_thread = pj if shape == "single" else pj / 40.0
                overhead = 50.0 if shape == "single" else 300.0
                kernel = overhead + per_thread * 1e-12 * n
                u = 2e-5 * kernel
                if instr in unresolvable and shape == "single":
                    kernel = overhead + u * 0.5
                e = per_instruction_energy(kernel, u, overhead, u, n, active_lanes_per_warp=lanes)
                bad = instr in failed and opt == 3 and shape == "single"
                out.append(
                    InstructionRow(
                        instruction=instr,
                        category=cat,
                        opt_level=opt,
                        shape=shape,
                        grid=1 if shape == "single" else SM_COUNT * 8,
                        block=1 if shape == "single" else 256,
                        threads=threads,
                        iters=1_000_000,
                        instructions_per_launch=n,
                        time_per_launch_s=2.0,
                        overhead_time_per_launch_s=1.5,
                        kernel_energy_j=kernel,
                        kernel_energy_uncertainty_j=u,
                        overhead_energy_j=overhead,
                        overhead_energy_uncertainty_j=u,
                        energy_per_thread_instr_pj=None if bad else e.per_thread_pj,
                        energy_per_thread_instr_uncertainty_pj=None if bad else e.per_thread_uncertainty_pj,
                        energy_per_warp_instr_pj=None if bad else e.per_warp_pj,
                        energy_per_warp_instr_uncertainty_pj=None if bad else e.per_warp_uncertainty_pj,
                        resolvable=e.resolvable,
                        repeat_diff_pct=1.5,
                        technique="mtsm",
                        sm_clock_mhz=SM_CLOCK_MHZ,
                        throttled=False,
                        verified=True,
                        status="failed" if bad else "ok",
                        note="kernel timed out" if bad else "",
                    )
                )
    return out


def technique_rows(*, mtsm_err_pct: float = 2.0, end_err_pct: float = 8.0, runs: int = 4) -> list[TechniqueRow]:
    """Per-run estimates whose errors against the reference alternate in sign with the given magnitudes."""
    out = []
    for i in range(runs):
        ref = 100.0 + 10.0 * i
        sign = 1.0 if i % 2 == 0 else -1.0
        for tech, err in (("mtsm", mtsm_err_pct), ("end_instant", end_err_pct), ("sma", 5.0)):
            out.append(
                TechniqueRow(
                    run=str(i + 1),
                    benchmark="div.u32@O3/single",
                    technique=tech,
                    energy_j=ref * (1 + sign * err / 100.0),
                    reference_energy_j=ref,
                    duration_s=2.0,
                    reference_uncertainty_j=0.1,
                )
            )
    return out


def make_instructions_run(
    path: Path,
    *,
    rows: Sequence[InstructionRow] | None = None,
    techniques: Sequence[TechniqueRow] | None = None,
    status: str = "complete",
) -> Path:
    """An instruction-energy run directory with instructions.csv and (unless empty) techniques.csv."""
    RunDir.create(path, _manifest("instructions", status, [9, 0], []))
    write_csv(path / "instructions.csv", [r.to_row() for r in rows or instruction_rows()], list(INSTRUCTION_COLUMNS))
    techs = technique_rows() if techniques is None else techniques
    if techs:
        write_csv(path / "techniques.csv", [t.to_row() for t in techs], list(TECHNIQUE_COLUMNS))
    return path

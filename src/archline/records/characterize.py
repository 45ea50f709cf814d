"""The columns of a characterization run's ``results.csv``: one tidy row per benchmark and sweep point."""

from __future__ import annotations

__all__ = ["RESULT_COLUMNS", "TARGET_COLUMNS"]

#: Column name → (unit, meaning). Energies and times are per launch of the kernel.
RESULT_COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("", "catalogue name, e.g. arith.fp32.fma or mem.shared.conflict"),
    "group": ("", "report section: arithmetic, memory, sync, instruction, roofline"),
    "unit": ("", "functional unit or memory level exercised: fp32, int32, sfu, fp64, dram, l2, shared …"),
    "description": ("", "one line saying what the kernel does"),
    "sweep_var": ("", "swept variable for a sweep point (coalescing, access_bytes, conflict_ways, block) or empty"),
    "sweep_value": ("", "value of the swept variable"),
    "opt_level": ("", "ptxas optimisation level the kernel was JIT-compiled at (0–4)"),
    "grid": ("blocks", "blocks per launch"),
    "block": ("threads", "threads per block"),
    "threads": ("threads", "threads per launch"),
    "iters": ("", "outer-loop trip count chosen by calibration"),
    "launches": ("", "launches measured back to back"),
    "time_s": ("s", "mean kernel time per launch (CUDA events)"),
    "time_cv": ("", "coefficient of variation of per-launch times"),
    "sm_clock_mhz": ("MHz", "mean SM clock during the measurement (NVML)"),
    "mem_clock_mhz": ("MHz", "mean memory clock during the measurement (NVML)"),
    "ops": ("ops", "target thread-instructions per launch, counted from the generated code"),
    "ops_per_clk_per_sm": ("ops/clk/SM", "measured throughput at the measured SM clock"),
    "spec_ops_per_clk_per_sm": ("ops/clk/SM", "spec throughput for the compute capability (empty if unknown)"),
    "frac_of_spec": ("", "measured / spec throughput (bytes per clock for memory rows)"),
    "flops": ("flop", "floating-point operations per launch (FMA = 2)"),
    "bytes": ("B", "bytes moved at the target memory level per launch"),
    "bytes_per_s": ("B/s", "achieved bandwidth"),
    "bytes_per_clk_per_sm": ("B/clk/SM", "achieved bandwidth per SM per SM clock"),
    "spec_bytes_per_clk_per_sm": ("B/clk/SM", "spec bandwidth per SM per clock of the level (empty if unknown)"),
    "avg_power_w": ("W", "mean board power while the kernel ran (corrected)"),
    "max_power_w": ("W", "largest sensor reading while the kernel ran"),
    "idle_power_w": ("W", "board power at idle just before the benchmark"),
    "energy_j": ("J", "board energy per launch"),
    "energy_uncertainty_j": ("J", "1-sigma uncertainty of energy_j"),
    "dynamic_energy_j": ("J", "energy per launch above the idle baseline"),
    "nj_per_op": ("nJ", "energy_j per target thread-instruction"),
    "dyn_nj_per_op": ("nJ", "dynamic_energy_j per target thread-instruction"),
    "mips_per_w_per_sm": ("MIPS/W/SM", "million target instructions per second, per W, per SM (MIPP's efficiency)"),
    "temperature_c": ("°C", "GPU temperature at the end of the measurement"),
    "throttle_reasons": ("", "NVML clock-event reasons seen during the measurement, comma-separated"),
    "throttled": ("", "true if a power, thermal or slowdown reason was active"),
    "verified": ("", "true if the kernel's output checked out on the host"),
    "resolvable": ("", "false if the sensor could not resolve the kernel's energy"),
    "status": ("", "ok, failed or skipped"),
    "note": ("", "why a row failed or what to watch for"),
}

#: Columns of ``targets.csv``: one row per acceptance target of the suite.
TARGET_COLUMNS: dict[str, tuple[str, str]] = {
    "target": ("", "what is checked, e.g. 'FP32 FMA ≥ 95 % of spec'"),
    "required": ("", "the threshold, in the unit of 'measured'"),
    "measured": ("", "the value measured in this run"),
    "unit": ("", "unit of required/measured"),
    "passed": ("", "true/false; empty if it could not be evaluated"),
    "detail": ("", "by how much a target is missed, and why, where known"),
}

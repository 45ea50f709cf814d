"""Nsight Compute counts for held-out workloads: flops by kind, DRAM/L2/L1/shared bytes, instructions.

One ``ncu`` run profiles every workload in a child interpreter whose command the caller gives
(the characterization's is ``python -m archline.characterize.ncu_child``).
The child brackets each workload's single invocation with the CUDA profiler API and launches a
marker kernel first whose grid size is the workload's index + 1, so the kernels of the report
are split by workload without relying on NVTX. ``ncu`` runs with ``--clock-control none`` (the
card's clocks are never touched) and only the metrics this ``ncu`` and GPU know are requested;
the counts of every kernel of one workload are summed.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from archline.errors import ArchlineError, InputError

__all__ = [
    "MARKER",
    "METRICS",
    "TENSOR_OP_PATHS",
    "NcuCounts",
    "NcuUnavailableError",
    "count_workloads",
    "find_ncu",
    "parse_query",
    "parse_raw_csv",
    "profile_program",
    "slim_raw_csv",
    "split_by_marker",
]

MARKER = "archline_ncu_marker"

#: Tensor-core paths ncu counts math ops on (``sm__ops_path_tensor_src_<path>``); unknown ones are skipped.
TENSOR_OP_PATHS: tuple[str, ...] = (
    "bf16_dst_fp32",
    "fp16",
    "fp16_dst_fp16",
    "fp16_dst_fp32",
    "tf32_dst_fp32",
    "fp64",
    "fp8",
    "fp8_dst_fp16",
    "fp8_dst_fp32",
    "int8",
)

#: Our name → the ncu metric. Missing ones (older ncu, other GPUs) are simply not collected.
METRICS: dict[str, str] = {
    "grid": "launch__grid_size",
    "time_ns": "gpu__time_duration.sum",
    "dram_read_b": "dram__bytes_read.sum",
    "dram_write_b": "dram__bytes_write.sum",
    "l2_b": "lts__t_bytes.sum",
    "l1_b": "l1tex__t_bytes.sum",
    "shared_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "shared_ld_b": "smsp__sass_data_bytes_mem_shared_op_ld.sum",
    "shared_st_b": "smsp__sass_data_bytes_mem_shared_op_st.sum",
    "shared_b": "smsp__sass_data_bytes_mem_shared.sum",
    "inst": "smsp__inst_executed.sum",
    "thread_inst": "smsp__thread_inst_executed.sum",
    "ffma": "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "fadd": "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "fmul": "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "dfma": "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "dadd": "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "dmul": "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "inst_shared_ld": "smsp__sass_inst_executed_op_shared_ld.sum",
    "inst_shared_st": "smsp__sass_inst_executed_op_shared_st.sum",
    "inst_global_ld": "smsp__sass_inst_executed_op_global_ld.sum",
    "inst_global_st": "smsp__sass_inst_executed_op_global_st.sum",
    "inst_ldgsts": "smsp__sass_inst_executed_op_ldgsts.sum",
    "inst_ldsm": "smsp__sass_inst_executed_op_ldsm.sum",
    "inst_fma_pipe": "smsp__inst_executed_pipe_fma.sum",
    "inst_alu_pipe": "smsp__inst_executed_pipe_alu.sum",
    "inst_fp64_pipe": "smsp__inst_executed_pipe_fp64.sum",
    "inst_lsu_pipe": "smsp__inst_executed_pipe_lsu.sum",
    "inst_tensor_pipe": "smsp__inst_executed_pipe_tensor.sum",
    "inst_dmma": "smsp__inst_executed_pipe_tensor_op_dmma.sum",
    "inst_hmma": "smsp__inst_executed_pipe_tensor_op_hmma.sum",
    "inst_xu_pipe": "smsp__inst_executed_pipe_xu.sum",
    "inst_uniform_pipe": "smsp__inst_executed_pipe_uniform.sum",
    "inst_gmma": "sm__inst_executed_pipe_tensor_op_gmma.sum",
    # Tensor-core math ops by source precision (ncu's "ops"; how many a flop is, the calibration says).
    **{f"tc_ops_{k}": f"sm__ops_path_tensor_src_{k}.sum" for k in TENSOR_OP_PATHS},
}


class NcuUnavailableError(ArchlineError):
    """``ncu`` is missing, refused (no permission for counters) or failed."""

    exit_code = 3


@dataclass
class NcuCounts:
    """Summed counts of one workload's kernels (keys of :data:`METRICS`, ``grid`` and ``time_ns`` excluded)."""

    name: str
    kernels: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)

    def get(self, key: str) -> float:
        """The summed count, NaN where the metric was not collected."""
        return self.values.get(key, math.nan)

    @property
    def flops_fp32(self) -> float:
        """FP32 flops on the CUDA cores: 2·FFMA + FADD + FMUL (thread instructions)."""
        return _flops(self.values, "ffma", "fadd", "fmul")

    @property
    def flops_fp64(self) -> float:
        """FP64 flops on the CUDA cores: 2·DFMA + DADD + DMUL (thread instructions)."""
        return _flops(self.values, "dfma", "dadd", "dmul")

    @property
    def dram_bytes(self) -> float:
        return self.get("dram_read_b") + self.get("dram_write_b")

    @property
    def shared_bytes(self) -> float:
        """Shared-memory bytes moved by SASS loads and stores (or wavefronts × 128 B if that is all there is)."""
        if "shared_b" in self.values:
            return self.values["shared_b"]
        if "shared_ld_b" in self.values or "shared_st_b" in self.values:
            return self.values.get("shared_ld_b", 0.0) + self.values.get("shared_st_b", 0.0)
        return self.get("shared_wavefronts") * 128.0

    def as_row(self) -> dict[str, float | str | int]:
        row: dict[str, float | str | int] = {"name": self.name, "kernels": len(self.kernels)}
        row.update({k: v for k, v in sorted(self.values.items())})
        row.update(
            flops_fp32=self.flops_fp32,
            flops_fp64=self.flops_fp64,
            dram_bytes=self.dram_bytes,
            shared_bytes=self.shared_bytes,
            kernel_names=" | ".join(sorted(set(self.kernels))),
        )
        return row


def _flops(v: Mapping[str, float], fma: str, add: str, mul: str) -> float:
    if fma not in v and add not in v and mul not in v:
        return math.nan
    return 2.0 * v.get(fma, 0.0) + v.get(add, 0.0) + v.get(mul, 0.0)


def find_ncu() -> str:
    """Path of ``ncu`` (PATH, then the CUDA toolkit). Raises :class:`NcuUnavailableError`."""
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise NcuUnavailableError("ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin")


def parse_query(text: str) -> set[str]:
    """Base metric names listed by ``ncu --query-metrics`` (first word of each table row)."""
    names = set()
    for line in text.splitlines():
        w = line.strip().split(" ", 1)[0]
        if "__" in w and all(c.isalnum() or c in "_." for c in w):
            names.add(w)
    return names


def _base(metric: str) -> str:
    head, _, tail = metric.rpartition(".")
    return head if tail in {"sum", "avg", "max", "min"} else metric


_SCALE = {
    "": 1.0,
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "Tbyte": 1e12,
    "nsecond": 1.0,
    "usecond": 1e3,
    "msecond": 1e6,
    "second": 1e9,
    "cycle": 1.0,
    "inst": 1.0,
    "warp": 1.0,
    "sector": 1.0,
    "request": 1.0,
}


def _number(text: str, unit: str, where: str) -> float:
    t = text.strip().replace(",", "")
    if t in {"", "n/a", "N/A"}:
        return math.nan
    try:
        v = float(t)
    except ValueError:
        raise InputError(f"{where}: not a number: {text!r}") from None
    u = unit.strip()
    if u in _SCALE:
        return v * _SCALE[u]
    for prefix, mult in (("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)):
        if u.startswith(prefix) and u[1:] in _SCALE:
            return v * mult * _SCALE[u[1:]]
    return v


def _csv_rows(text: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each CSV line of ncu's output: those start with a quote; ncu's own messages
    (``==PROF== …``) do not. Line numbers are the text's."""
    return [(n, next(csv.reader([ln]))) for n, ln in enumerate(text.splitlines(), start=1) if ln.startswith('"')]


def parse_raw_csv(
    text: str, source: str = "ncu raw CSV", metrics: Iterable[str] = METRICS.values()
) -> list[tuple[str, dict[str, float]]]:
    """(kernel name, {metric: value}) per kernel from ``ncu --import R --csv --page raw``.

    Only the columns of ``metrics`` are read (the raw page also lists device attributes,
    some of them text). Handles the units row, thousands separators and unit prefixes
    (Kbyte, usecond, …). Raises :class:`InputError` naming the line for a malformed file.
    """
    wanted = set(metrics)
    rows = _csv_rows(text)
    if not rows:
        raise InputError(f"{source}: no CSV rows (did ncu profile any kernel?)")
    head_line, head = rows[0]
    name_col = next((i for i, h in enumerate(head) if h in ("Kernel Name", "Function Name", "Demangled Name")), None)
    if name_col is None:
        raise InputError(f"{source}:{head_line}: no 'Kernel Name' column in {head[:8]}")
    units = [""] * len(head)
    body = rows[1:]
    if body and not body[0][1][0].strip().isdigit():
        units, body = body[0][1], body[1:]
    metric_cols = [i for i, h in enumerate(head) if h in wanted]
    out: list[tuple[str, dict[str, float]]] = []
    for line, r in body:
        where = f"{source}:{line}"
        if len(r) != len(head):
            raise InputError(f"{where}: {len(r)} fields, header has {len(head)}")
        vals = {head[i]: _number(r[i], units[i] if i < len(units) else "", where) for i in metric_cols}
        out.append((r[name_col], vals))
    return out


def split_by_marker(
    kernels: Iterable[tuple[str, Mapping[str, float]]], names: Sequence[str], metrics: Mapping[str, str] = METRICS
) -> dict[str, NcuCounts]:
    """Sum the kernels that follow each marker into the workload the marker's grid size names."""
    back = {m: k for k, m in metrics.items()}
    out: dict[str, NcuCounts] = {}
    cur: NcuCounts | None = None
    for kname, vals in kernels:
        if MARKER in kname:
            g = vals.get(metrics["grid"], math.nan)
            if not math.isfinite(g) or not 1 <= int(g) <= len(names):
                raise InputError(f"ncu report: marker kernel with grid size {g!r} names no workload")
            name = names[int(g) - 1]
            cur = out.setdefault(name, NcuCounts(name))
            continue
        if cur is None:
            continue  # a kernel before the first marker (none are expected)
        cur.kernels.append(kname)
        for m, v in vals.items():
            key = back.get(m)
            if key is None or key == "grid" or not math.isfinite(v):
                continue
            cur.values[key] = cur.values.get(key, 0.0) + v
    return out


def _run(cmd: list[str], timeout: float, what: str, env: Mapping[str, str] | None = None) -> str:
    """Run ``cmd`` in a process group of its own; past ``timeout`` the whole group is killed (ncu and the program it
    profiles: none is left on the GPU)."""
    try:
        p = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
    except OSError as exc:
        raise NcuUnavailableError(f"{what} could not start: {exc}") from None
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise NcuUnavailableError(f"{what} took longer than {timeout:g} s") from None
    text = stdout + stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise NcuUnavailableError(f"{what}: no permission for GPU performance counters (ERR_NVGPUCTRPERM)")
    if p.returncode != 0:
        last = [ln for ln in text.splitlines() if ln.strip()][-1:] or ["(no output)"]
        raise NcuUnavailableError(f"{what} failed with exit code {p.returncode}: {last[0].strip()}")
    return stdout


def _known_metrics(exe: str) -> list[str]:
    """The metrics of :data:`METRICS` this ``ncu`` knows (all of them where it lists none)."""
    known = parse_query(_run([exe, "--query-metrics"], 120, "ncu --query-metrics"))
    return [m for m in METRICS.values() if _base(m) in known] if known else list(METRICS.values())


def _profile_raw(
    exe: str,
    metrics: Sequence[str],
    flags: Sequence[str],
    argv: Sequence[str],
    timeout_s: float,
    what: str,
    *,
    env: Mapping[str, str] | None = None,
    import_flags: Sequence[str] = (),
    check_report: bool = False,
) -> str:
    """Run ``argv`` under ``ncu`` (clocks untouched, every child process, ``flags`` added) and return the report's raw
    page as CSV. Raises :class:`NcuUnavailableError` where ncu fails (or, with ``check_report``, wrote no report: it
    profiled no kernel)."""
    with tempfile.TemporaryDirectory(prefix="archline-ncu-") as tmp:
        rep = Path(tmp) / "profile"
        cmd = [exe, "--clock-control", "none", "--target-processes", "all", *flags, "--metrics", ",".join(metrics)]
        _run([*cmd, "--force-overwrite", "-o", str(rep), *argv], timeout_s, what, env)
        if check_report and not Path(str(rep) + ".ncu-rep").is_file():
            raise NcuUnavailableError(f"{what}: ncu profiled no kernel (did the program launch any in the range?)")
        imp = [exe, "--import", str(rep) + ".ncu-rep", "--csv", "--page", "raw", "--print-units", "base"]
        return _run([*imp, *import_flags], 300, "ncu --import")


def count_workloads(
    names: Sequence[str],
    *,
    gpu: int = 0,
    keep: str | os.PathLike[str] | None = None,
    timeout_s: float = 900.0,
    ncu: str | None = None,
    child: Sequence[str] = (),
) -> tuple[dict[str, NcuCounts], list[str]]:
    """Profile one invocation of each named workload under ``ncu``; counts per workload and the metrics used.

    ``child`` is the command that runs the workloads (it gets ``--gpu N --names a,b``).
    ``keep`` names a directory to keep the raw CSV in (``roofline_ncu_raw.csv``). Raises
    :class:`NcuUnavailableError` if ncu is missing, refused or fails.
    """
    if not child:
        raise ValueError("count_workloads needs the child command that runs the workloads")
    exe = ncu or find_ncu()
    metrics = _known_metrics(exe)
    if METRICS["grid"] not in metrics:
        metrics.insert(0, METRICS["grid"])
    argv = [*child, "--gpu", str(gpu), "--names", ",".join(names)]
    raw = _profile_raw(
        exe, metrics, ["--profile-from-start", "off"], argv, timeout_s, "ncu profile of the held-out kernels"
    )
    if keep is not None:
        Path(keep).mkdir(parents=True, exist_ok=True)
        tmpf = Path(keep) / "roofline_ncu_raw.csv.tmp"
        tmpf.write_text(raw)
        tmpf.replace(Path(keep) / "roofline_ncu_raw.csv")
    counts = split_by_marker(parse_raw_csv(raw, "ncu raw CSV"), names)
    return counts, metrics


def profile_program(
    command: Sequence[str],
    out_csv: str | os.PathLike[str],
    *,
    gpu: int | None = None,
    launch_skip: int = 0,
    launch_count: int | None = None,
    profile_from_start: bool = True,
    per_config: bool = False,
    timeout_s: float = 1800.0,
    ncu: str | None = None,
) -> tuple[int, list[str]]:
    """Profile a program's kernels under ``ncu`` into ``out_csv`` (the raw page, one row per launch, names mangled
    as CUPTI traces them); returns (launches profiled, the metrics asked for).

    ``ncu`` runs with ``--clock-control none`` (the card's clocks untouched), ``--cache-control none`` (caches not
    flushed: a launch's first pass meets what its predecessors left, as in the program, its later passes what its
    earlier ones and ncu's memory restore left, so the DRAM bytes of data that fits in L2 may come out low; the
    default flush would count them as if every launch started cold), every child process profiled, and only the
    metrics of :data:`METRICS` this ``ncu`` knows. ``gpu`` shows the program that GPU alone, by NVML's (PCI bus)
    order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, ``CUDA_VISIBLE_DEVICES``). ``profile_from_start=False`` profiles only
    between the program's ``cudaProfilerStart``/``Stop`` (e.g. ``torch.cuda.profiler.start()`` around one step).
    ``per_config``: the skip and the count apply to each launch configuration (kernel, grid, block: ncu's
    ``--filter-mode per-launch-config``), so a loop of many launches of few kernels is counted a few launches each.
    The CSV is written atomically. Raises :class:`NcuUnavailableError` if ncu is missing, refused or fails.
    """
    if not command:
        raise InputError("no program to profile (give it after --)")
    if launch_skip < 0 or (launch_count is not None and launch_count < 1):
        raise InputError(f"--launch-skip must be ≥ 0 and --launch-count ≥ 1 (got {launch_skip}, {launch_count})")
    exe = ncu or find_ncu()
    metrics = _known_metrics(exe)
    out = Path(out_csv)
    env = (
        {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else None
    )
    flags = [
        "--profile-from-start",
        "on" if profile_from_start else "off",
        "--cache-control",
        "none",
        *(["--launch-skip", str(launch_skip)] if launch_skip else []),
        *(["--launch-count", str(launch_count)] if launch_count is not None else []),
        *(["--filter-mode", "per-launch-config"] if per_config else []),
    ]
    raw = _profile_raw(
        exe,
        metrics,
        flags,
        command,
        timeout_s,
        "ncu profile of the program",
        env=env,
        import_flags=["--print-kernel-base", "mangled"],
        check_report=True,
    )
    slim = slim_raw_csv(raw, metrics)
    launches = parse_raw_csv(slim, "ncu raw CSV", metrics)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmpf = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmpf.write_text(slim)
        tmpf.replace(out)
    finally:
        tmpf.unlink(missing_ok=True)
    return len(launches), metrics


#: The raw page's columns a program's counts keep beside the metrics (the rest are device attributes, the same on
#: every row).
_KEEP_COLUMNS = ("ID", "Process ID", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC")


def slim_raw_csv(text: str, metrics: Iterable[str]) -> str:
    """ncu's raw CSV with only its launch columns and ``metrics`` (its units row kept), ncu's own messages dropped."""
    wanted = set(metrics) | set(_KEEP_COLUMNS)
    rows = [r for _, r in _csv_rows(text)]
    if not rows:
        raise InputError("ncu raw CSV: no CSV rows (did ncu profile any kernel?)")
    cols = [i for i, h in enumerate(rows[0]) if h in wanted]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in rows:
        w.writerow([r[i] if i < len(r) else "" for i in cols])
    return buf.getvalue()

"""The characterization suite: run the catalogue on one GPU and write results, repeats and targets."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archline.characterize.kernels.spec_table import spec_bytes_per_clk_per_sm, spec_ops_per_clk_per_sm
from archline.characterize.runner import KernelRun, Runner
from archline.characterize.targets import evaluate_targets
from archline.core.kernel import KernelSpec
from archline.errors import ArchlineError
from archline.records import RunDir
from archline.records.characterize import RESULT_COLUMNS, TARGET_COLUMNS

if TYPE_CHECKING:
    from archline.hw.nvml import NVMLSession

__all__ = ["REPEATED", "SuiteResult", "add_spec_columns", "characterize_gpu", "refresh_targets", "run_suite"]

#: Benchmarks measured a second time at the end of a run, for the repeatability targets.
REPEATED: tuple[str, ...] = (
    "arith.fp32.fma",
    "arith.int32.add",
    "mem.dram.read",
    "mem.shared.read",
    "tensor.wgmma.bf16.toggle-50",
    "operand.ffma.random",
)

_EXTRA_COLUMNS = ("energy_counter_j", "wall_s")


@dataclass
class SuiteResult:
    """What a suite run produced; ``interrupted`` is True after Ctrl-C (rows hold what finished)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    repeats: list[dict[str, Any]] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    runs: list[KernelRun] = field(default_factory=list)
    interrupted: bool = False


def add_spec_columns(row: dict[str, Any], spec: KernelSpec, cc: tuple[int, int]) -> dict[str, Any]:
    """Add the spec throughput (never guessed: empty for an unknown compute capability) and % of it."""
    spec_ops = spec_ops_per_clk_per_sm(cc, spec.spec_key)
    row["spec_ops_per_clk_per_sm"] = spec_ops
    measured = row.get("ops_per_clk_per_sm")
    row["frac_of_spec"] = measured / spec_ops if (spec_ops and measured is not None) else None
    spec_b = spec_bytes_per_clk_per_sm(cc, spec.spec_key)
    row["spec_bytes_per_clk_per_sm"] = spec_b
    if spec_b and row.get("bytes_per_clk_per_sm") is not None:
        row["frac_of_spec"] = row["bytes_per_clk_per_sm"] / spec_b
    return row


def _pct(a: Any, b: Any) -> float | None:
    if a is None or b is None or not a:
        return None
    return (float(b) / float(a) - 1.0) * 100.0


def run_suite(
    runner: Runner,
    specs: Sequence[KernelSpec],
    rd: RunDir,
    *,
    cc: tuple[int, int],
    copy_bytes_per_s: float | None,
    quick: bool,
    elapsed_s: Callable[[], float],
    on_start: Callable[[KernelSpec, int, int], None] | None = None,
    on_done: Callable[[KernelRun], None] | None = None,
    repeat: Sequence[str] = REPEATED,
) -> SuiteResult:
    """Measure every spec, writing ``results.csv`` after each so an interrupted run stays usable.

    Then measure the ``repeat`` benchmarks (those present) a second time and write
    ``repeat.csv``, and evaluate the targets into ``targets.csv``.
    """
    res = SuiteResult()
    columns = [*RESULT_COLUMNS, *_EXTRA_COLUMNS]
    total = len(specs)
    rd.write_csv("results.csv", [], columns)  # present from the start, even for a run of no kernels
    try:
        for i, spec in enumerate(specs):
            if on_start:
                on_start(spec, i, total)
            run = runner.run(spec)
            add_spec_columns(run.row, spec, cc)
            res.rows.append(run.row)
            res.runs.append(run)
            rd.write_csv("results.csv", res.rows, columns)
            if on_done:
                on_done(run)
        firsts = {r.spec.name: r for r in res.runs}
        for name in repeat:
            if name not in firsts:
                continue
            first = firsts[name]
            if on_start:
                on_start(first.spec, total, total)
            second = runner.run(first.spec)
            a, b = first.row, second.row
            res.repeats.append(
                {
                    "name": name,
                    "time_s_1": a.get("time_s"),
                    "time_s_2": b.get("time_s"),
                    "time_diff_pct": _pct(a.get("time_s"), b.get("time_s")),
                    "energy_j_1": a.get("energy_j"),
                    "energy_j_2": b.get("energy_j"),
                    "energy_diff_pct": _pct(a.get("energy_j"), b.get("energy_j")),
                }
            )
            rd.write_csv("repeat.csv", res.repeats)
    except KeyboardInterrupt:
        res.interrupted = True
    checks = evaluate_targets(
        res.rows,
        copy_bytes_per_s=copy_bytes_per_s,
        suite_seconds=None if res.interrupted else elapsed_s(),
        quick=quick,
        repeats=res.repeats,
    )
    res.targets = [c.as_row() for c in checks]
    rd.write_csv("targets.csv", res.targets, list(TARGET_COLUMNS))
    return res


def refresh_targets(rd: RunDir, reason: str) -> list[dict[str, Any]]:
    """Re-evaluate ``targets.csv`` of a finished run from its own tables with this archline.

    Uses only what the run recorded (results.csv, repeat.csv, the copy bandwidth and wall time
    in the manifest); a note in the manifest says when and why it was done.
    """
    import datetime as _dt

    from archline.errors import RunDirError

    rows = rd.read_csv("results.csv")
    repeats = rd.read_csv("repeat.csv") if (rd.path / "repeat.csv").is_file() else []
    extra = rd.manifest.extra
    if rd.manifest.kind != "characterize":
        raise RunDirError(f"{rd.path}: targets belong to characterize runs, not {rd.manifest.kind!r} runs")
    checks = evaluate_targets(
        rows,
        copy_bytes_per_s=extra.get("copy_bytes_per_s"),
        suite_seconds=extra.get("wall_s") if rd.manifest.status == "complete" else None,
        quick=bool(extra.get("quick")),
        repeats=repeats,
    )
    out = [c.as_row() for c in checks]
    rd.write_csv("targets.csv", out, list(TARGET_COLUMNS))
    from archline.core.version import __version__

    stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rd.update_manifest(
        notes=(*rd.manifest.notes, f"targets re-evaluated by archline {__version__} at {stamp}: {reason}")
    )
    return out


def _latency(s: Any, say: Callable[[str], None]) -> None:
    """Pointer-chase latencies (one thread, milliseconds): ``latency.csv`` in the run directory."""
    from archline.characterize.latency import LATENCY_COLUMNS, run_latency

    say("pointer-chase latency: L1, shared memory, L2, DRAM")
    try:
        rows = run_latency(s.ex)
    except ArchlineError as exc:
        say(f"pointer-chase latency failed: {exc}")
        return
    s.rd.write_csv("latency.csv", rows, LATENCY_COLUMNS)


def characterize_gpu(
    gpu: int,
    output: Path,
    *,
    quick: bool,
    only: Sequence[str],
    force: bool,
    target_s: float,
    roofline: bool,
    say: Callable[[str], None],
    on_start: Callable[[KernelSpec, int, int], None] | None = None,
    nvml: Callable[[int], NVMLSession] | None = None,
) -> tuple[SuiteResult, int]:
    """``archline characterize`` on one GPU: the selected benchmarks, the targets, and the energy
    roofline as a section when asked. Returns the suite's result and how many benchmarks were planned.

    An interrupt (Ctrl-C, SIGTERM) leaves a run directory marked ``interrupted``; the result says so.
    ``nvml``: the caller's NVML session of the GPU (see :class:`~archline.characterize.session.GPUSession`).
    """
    from archline.characterize.kernels import catalogue
    from archline.characterize.runner import Runner, RunnerOptions
    from archline.characterize.session import GPUSession

    t0 = time.time()
    res = SuiteResult()
    planned = 0
    try:
        extra = {"quick": quick, "only": list(only)}
        with GPUSession(gpu, output, "characterize", force=force, extra=extra, nvml=nvml) as s:
            dev = s.ex.device
            groups = ("arithmetic", "memory", "sync", "tensor")
            pool = [k for k in catalogue.catalogue(dev) if k.group in groups]
            # "lat…" selects the pointer-chase latencies, which are not catalogue kernels.
            kernel_only = [p for p in only if not p.startswith("lat")]
            if only and not kernel_only:
                specs: list[KernelSpec] = []
            else:
                specs = catalogue.select(kernel_only, specs=pool) if only else (catalogue.quick(dev) if quick else pool)
            if quick and not only:
                specs = [k for k in specs if k.group in groups]
            cc = dev.compute_capability
            skipped = {k.name: r for k in specs if (r := catalogue.skip_reason(k, cc)) is not None}
            specs = [k for k in specs if k.name not in skipped]
            for name, why in skipped.items():
                say(f"skipped {name}: {why}")
            s.note_extra(skipped=skipped)
            planned = len(specs)
            say(f"{dev.name}: measuring the device-to-device copy bandwidth")
            copy_bps, _ = s.ex.copy_bandwidth()
            s.note_extra(planned=[k.name for k in specs], copy_bytes_per_s=copy_bps, target_s=target_s)
            est = s.estimator(progress=lambda m: say(f"sensor calibration: {m}"))
            runner = Runner(s.ex, s.sampler, RunnerOptions(target_s=target_s), estimator=est)
            res = run_suite(
                runner,
                specs,
                s.rd,
                cc=dev.compute_capability,
                copy_bytes_per_s=copy_bps,
                quick=quick,
                elapsed_s=lambda: time.time() - t0,
                on_start=on_start,
            )
            if res.interrupted:
                raise KeyboardInterrupt  # the session then records "interrupted" and saves the traces
            if not only or any(p.startswith("lat") for p in only):
                _latency(s, say)
            if roofline:
                from archline.characterize.roofline import run_roofline

                s.note_extra(roofline=True)
                run_roofline(
                    s, runner, gpu, ["single", "double"], copy_bps, target_s=target_s, say=lambda m, *_: say(m)
                )
    except KeyboardInterrupt:
        res.interrupted = True
    if roofline and (output / "roofline_sweep.csv").is_file():
        from archline.model.build import fit_run_dir

        try:
            fit_run_dir(output)
        except ArchlineError as exc:
            say(f"the energy roofline could not be fitted: {exc}")
    return res, planned

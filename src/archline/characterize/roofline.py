"""The energy roofline on a GPU (Choi §IV): peaks, tuned intensity sweep, held-out kernels, component energies."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from archline.characterize.kernels.roofline import INTENSITIES, Precision, min_intensity, roofline_kernel
from archline.characterize.kernels.target import Target
from archline.characterize.runner import Runner
from archline.core.kernel import KernelSpec
from archline.errors import ArchlineError

__all__ = [
    "COMPONENT_CATALOGUE",
    "KNOBS",
    "measure_components",
    "measure_heldout",
    "run_roofline",
    "sweep",
    "tune",
]

#: Candidate knobs for auto-tuning: (block, blocks per SM, loads per thread).
KNOBS: tuple[tuple[int, int, int], ...] = tuple(itertools.product((256, 512), (4, 8), (1, 2, 4)))
_PREC: dict[str, Precision] = {"single": "fp32", "double": "fp64"}


def _time_one(runner: Runner, spec: KernelSpec) -> float:
    """Seconds per iteration of ``spec`` from a short calibration (no energy, no verification)."""
    ex = runner.ex
    k = ex.load(runner.ptx(spec), spec.entry, opt_level=3)
    threads = spec.launch.grid_for(ex.device.sm_count) * spec.launch.block
    bufs = runner._buffers(spec, threads)
    try:
        grid = spec.launch.grid_for(ex.device.sm_count)
        iters, one_s = runner._calibrate(spec, k, grid, spec.launch.block, bufs, 0.03)
    finally:
        for b, _ in bufs.values():
            ex.free(b)
    return one_s / max(iters, 1)


def _rate(runner: Runner, spec: KernelSpec, target: Target) -> float:
    """Work (flops + bytes) per second the kernel achieves, from a short calibration."""
    threads = spec.launch.grid_for(target.sm_count) * spec.launch.block
    s_per_iter = _time_one(runner, spec)
    work = (spec.work.flops + spec.work.bytes) * threads
    return work / s_per_iter if s_per_iter > 0 else 0.0


def tune(runner: Runner, precision: str, intensity: Fraction, target: Target) -> tuple[KernelSpec, dict[str, Any]]:
    """The knob set that runs ``intensity`` fastest per unit of work (flops + bytes rate)."""
    best: tuple[float, KernelSpec, dict[str, Any]] | None = None
    for block, bps, loads in KNOBS:
        try:
            spec = roofline_kernel(
                _PREC[precision], intensity, target=target, block=block, blocks_per_sm=bps, loads=loads
            )
        except ArchlineError:
            continue
        try:
            rate = _rate(runner, spec, target)
        except ArchlineError:
            continue
        if best is None or rate > best[0]:
            best = (rate, spec, {"block": block, "blocks_per_sm": bps, "loads_per_thread": loads})
    if best is None:
        raise ArchlineError(f"no roofline kernel could be built for {precision} at intensity {float(intensity):g}")
    return best[1], best[2]


def sweep(
    runner: Runner,
    precisions: Sequence[str],
    target: Target,
    *,
    power_limit_w: float | None,
    target_s: float,
    on_start: Callable[[str, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every intensity of each precision with tuned knobs; rows in the model's sweep columns.

    Knobs are tuned at both ends of the sweep (lowest and highest intensity); every point is
    then measured with whichever of the two sets runs it faster.
    """
    rows: list[dict[str, Any]] = []
    points = [(p, i) for p in precisions for i in INTENSITIES if i >= min_intensity(_PREC[p])]
    ends: dict[str, list[dict[str, Any]]] = {}
    for p in precisions:
        mine = [i for q, i in points if q == p]
        ends[p] = [tune(runner, p, mine[0], target)[1], tune(runner, p, mine[-1], target)[1]]
    for n, (p, inten) in enumerate(points):
        if on_start:
            on_start(f"roofline {p} I={float(inten):g}", n, len(points))
        cands = [
            roofline_kernel(
                _PREC[p],
                inten,
                target=target,
                loads=k["loads_per_thread"],
                block=k["block"],
                blocks_per_sm=k["blocks_per_sm"],
            )
            for k in ends[p]
        ]
        rates = [_rate(runner, c, target) for c in cands]
        best = max(range(len(cands)), key=lambda j: rates[j])
        spec, knobs = cands[best], ends[p][best]
        run = runner.run(spec, target_s=target_s)
        r = run.row
        rows.append(
            {
                "precision": p,
                "intensity": float(inten),
                "flops": r.get("flops"),
                "bytes": r.get("bytes"),
                "time_s": r.get("time_s"),
                "energy_j": r.get("energy_j"),
                "energy_uncertainty_j": r.get("energy_uncertainty_j"),
                "avg_power_w": r.get("avg_power_w"),
                "idle_power_w": r.get("idle_power_w"),
                "sm_clock_mhz": r.get("sm_clock_mhz"),
                "power_limit_w": power_limit_w,
                "max_power_w": r.get("max_power_w"),
                "throttled": r.get("throttled"),
                "verified": r.get("verified"),
                "status": r.get("status"),
                "note": r.get("note"),
                "name": spec.name,
                **knobs,
            }
        )
    return rows


def measure_heldout(
    gpu: int,
    workloads: Sequence[Any],
    *,
    target_rel_error: float = 0.02,
    on_start: Callable[[str, int, int], None] | None = None,
    group: str = "",
) -> tuple[list[Any], list[dict[str, Any]]]:
    """Time and energy of one invocation of each held-out workload (``measure_callable``).

    Returns the model's held-out rows and a log row per workload (with failures); ``group``
    (calibration or heldout) is written into each log row when given.
    """
    from archline.measurement.api import measure_callable

    rows: list[Any] = []
    log: list[dict[str, Any]] = []
    for n, w in enumerate(workloads):
        if on_start:
            on_start(f"{group or 'held-out'} {w.name}", n, len(workloads))
        extra = (
            {"group": group, "dtype": getattr(w, "dtype", ""), "library": getattr(w, "library", "")} if group else {}
        )
        try:
            w.setup()
            w.run()
            w.check()
            res = measure_callable(w.run, gpu=gpu, target_rel_error=target_rel_error, sync=w.synchronize)
            w.check()
            rows.append(w.heldout_row(res.time_s, res.energy_j, res.energy_uncertainty_j))
            log.append(
                {
                    "name": w.name,
                    **extra,
                    "status": "ok",
                    "precision": w.precision,
                    "time_s": res.time_s,
                    "energy_j": res.energy_j,
                    "energy_uncertainty_j": res.energy_uncertainty_j,
                    "counter_energy_j": res.counter_energy_j,
                    "calls": res.calls,
                    "flops": w.flops,
                    "bytes": w.dram_bytes,
                    "note": res.note or getattr(w, "note", ""),
                }
            )
        except ArchlineError as exc:
            log.append({"name": w.name, **extra, "status": "failed", "note": str(exc)})
        finally:
            w.teardown()
    return rows, log


#: Catalogue kernels whose energy per byte, instruction or tensor flop the counted models need
#: (those a GPU cannot run, wgmma before sm_90, are recorded as skipped).
COMPONENT_CATALOGUE = (
    "mem.l2.read",
    "mem.l1.read",
    "mem.shared.read",
    "arith.int32.add",
    "tensor.wgmma.bf16",
    "tensor.wgmma.fp16",
    "tensor.wgmma.fp8e4m3",
    "tensor.wgmma.bf16.toggle-0",
    "tensor.wgmma.bf16.toggle-50",
    "tensor.wgmma.bf16.toggle-100",
)


def measure_components(
    runner: Runner,
    target: Target,
    *,
    target_s: float,
    on_start: Callable[[str, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure the counted model's microbenchmarks: random-operand FMA/DMMA and L2, shared, integer rows.

    Rows carry ``name``, ``status``, ``time_s``, ``energy_j`` (and its uncertainty), ``flops``,
    ``bytes``, ``ops``, ``avg_power_w``, ``sm_clock_mhz`` and the note, as the runner measured them.
    """
    from archline.characterize.kernels.catalogue import catalogue
    from archline.characterize.kernels.operands import operand_kernels

    pool = {s.name: s for s in catalogue(target)}
    named = [pool[n] for n in COMPONENT_CATALOGUE if n in pool]
    specs = [*operand_kernels(), *named]
    keys = (
        "name",
        "status",
        "time_s",
        "energy_j",
        "energy_uncertainty_j",
        "flops",
        "bytes",
        "ops",
        "avg_power_w",
        "max_power_w",
        "idle_power_w",
        "sm_clock_mhz",
        "throttled",
        "verified",
        "note",
    )
    rows: list[dict[str, Any]] = []
    for n, spec in enumerate(specs):
        if on_start:
            on_start(f"component {spec.name}", n, len(specs))
        r = runner.run(spec, target_s=target_s).row
        rows.append({k: r.get(k) for k in keys} | {"description": spec.description})
    return rows


def _peaks(runner: Any, dev: Any, precisions: list[str]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Peak FLOP/s per precision from the FP32/FP64 FMA throughput kernels, measured now."""
    from archline.characterize.kernels import catalogue

    names = {"single": "arith.fp32.fma", "double": "arith.fp64.fma"}
    peaks: dict[str, float] = {}
    rows = []
    for p in precisions:
        spec = next(k for k in catalogue.catalogue(dev) if k.name == names[p])
        run = runner.run(spec, target_s=0.5)
        r = run.row
        if r.get("flops") and r.get("time_s"):
            peaks[p] = float(r["flops"]) / float(r["time_s"])
        rows.append(r)
    return peaks, rows


def run_roofline(
    s: Any,
    runner: Any,
    gpu: int,
    precisions: list[str],
    copy_bps: float,
    *,
    target_s: float,
    heldout: bool = True,
    heldout_error: float = 0.02,
    counted: bool = True,
    ml: bool = True,
    say: Any = None,
) -> None:
    """Peaks, intensity sweep, held-out kernels, component microbenchmarks and ncu counts, written
    into the open session's run directory (``archline roofline``, ``archline characterize --roofline``)."""
    from archline.records import to_jsonable

    say = say or (lambda *_: None)
    dev = s.ex.device
    peaks, peak_rows = _peaks(runner, dev, precisions)
    state = s.rd.manifest.state_before
    limit = state.get("enforced_power_limit_w") or state.get("power_limit_w")
    s.rd.write_json(
        "roofline_peaks.json",
        {"copy_bytes_per_s": copy_bps, "peak_flops_per_s": peaks, "power_limit_w": limit, "device": dev.name},
    )
    s.rd.write_csv("peaks_runs.csv", peak_rows)
    rows = sweep(
        runner,
        precisions,
        Target.from_device(dev),
        power_limit_w=float(limit) if isinstance(limit, (int, float)) else None,
        target_s=target_s,
        on_start=say,
    )
    good = [r for r in rows if r.get("status") == "ok" and r.get("energy_j") is not None]
    s.rd.write_csv("roofline_sweep_all.csv", rows)
    s.rd.write_csv("roofline_sweep.csv", good)
    if not heldout:
        return
    from archline.characterize.workloads import default_workloads

    hrows, log = measure_heldout(gpu, default_workloads(), target_rel_error=heldout_error, on_start=say)
    s.rd.write_csv("roofline_heldout_log.csv", log)
    if hrows:
        s.rd.write_csv("roofline_heldout.csv", [to_jsonable(r) for r in hrows])
    ml_names = _measure_ml(s, gpu, heldout_error, say) if ml else []
    if counted and (hrows or ml_names):
        comp = measure_components(runner, Target.from_device(dev), target_s=target_s, on_start=say)
        s.rd.write_csv("roofline_components.csv", comp)
        _count_heldout(s, gpu, [r.name for r in hrows], say, ml_names=ml_names)


def _measure_ml(s: Any, gpu: int, heldout_error: float, say: Any) -> list[str]:
    """Measure the ML calibration and held-out kernels (PyTorch) into ``roofline_ml.csv``; their names."""
    from archline.characterize.workloads_ml import ml_calibration_workloads, ml_heldout_workloads

    try:
        import torch

        torch.cuda.set_device(gpu)
    except Exception as exc:  # ImportError, or CUDA-less PyTorch's AssertionError/RuntimeError
        s.rd.update_manifest(notes=(*s.rd.manifest.notes, f"ML kernels not measured: PyTorch unusable ({exc})"))
        say(f"ML kernels not measured: PyTorch unusable ({exc})")
        return []
    log: list[dict[str, Any]] = []
    for group, ws in (("calibration", ml_calibration_workloads()), ("heldout", ml_heldout_workloads())):
        _, part = measure_heldout(gpu, ws, target_rel_error=heldout_error, on_start=say, group=group)
        log += part
    s.rd.write_csv("roofline_ml.csv", log)
    return [str(r["name"]) for r in log if r.get("status") == "ok"]


def _count_heldout(s: Any, gpu: int, names: list[str], say: Any, *, ml_names: Sequence[str] = ()) -> None:
    """Nsight Compute counts of one invocation of each held-out (and ML) kernel, in one ncu run;
    a note if ncu cannot run."""
    from archline.hw.ncu import NcuUnavailableError, count_workloads

    say("counting the held-out kernels with ncu")
    every = [*names, *ml_names]
    try:
        child = [sys.executable, "-m", "archline.characterize.ncu_child"]
        counts, metrics = count_workloads(every, gpu=gpu, keep=s.rd.path, child=child)
    except NcuUnavailableError as exc:
        s.rd.update_manifest(notes=(*s.rd.manifest.notes, f"held-out kernels not counted: {exc}"))
        say(f"held-out kernels not counted: {exc}")
        return
    s.rd.write_csv("roofline_heldout_counts.csv", [counts[n].as_row() for n in names if n in counts])
    if ml_names:
        s.rd.write_csv("roofline_ml_counts.csv", [counts[n].as_row() for n in ml_names if n in counts])
    s.note_extra(ncu_metrics=metrics)
    missing = [n for n in every if n not in counts]
    if missing:
        s.rd.update_manifest(notes=(*s.rd.manifest.notes, f"ncu recorded no kernel for {', '.join(missing)}"))

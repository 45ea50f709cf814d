"""``archline run --gpu all -- torchrun ...``: one program recorded on several GPUs at once, attributed per GPU.

Every GPU gets its own :class:`~archline.measurement.attribute.api.Attribution`: its own sensors,
sensor model and run directory (``gpu<i>/``), all recording over one span. The program runs once,
as a child with the CUPTI injection library, which every CUDA process it starts (torchrun's workers
too) inherits; each process writes its own trace and names its devices by UUID. A kernel goes to
the GPU with that UUID (never by CUDA ordinal: ``CUDA_VISIBLE_DEVICES`` renumbers those), and each
GPU's kernels are attributed against that GPU's sensors exactly as a single-GPU run's are.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archline.core.activity import demangle, is_communication
from archline.errors import ArchlineError, GPUUnavailableError, InputError
from archline.measurement.attribute.placement import split_by_gpu
from archline.measurement.attribute.program import ProgramSpec, TracerChoice, as_child, classify_command, run_binary
from archline.measurement.attribute.run import (
    build_injection_library,
    check_options,
    default_out,
    describe_injection,
    no_records_reason,
    prepare_tracing,
)
from archline.records import Manifest, RunDir, RunStatus
from archline.records.multi_run import (
    MULTI_RUN_FILES,
    gpu_dir_name,
    gpu_kernel_rows,
    gpu_summary,
    join_ids,
    uuid_prefix,
    write_multi_tables,
)

if TYPE_CHECKING:
    from archline.hw.cupti.processes import InjectedProcess
    from archline.measurement.attribute.api import Attribution
    from archline.measurement.attribute.attribution import AttributionOptions
    from archline.measurement.attribute.backend import Backend, ReportWriter

__all__ = ["GpuRun", "GpuTarget", "MultiRun", "run_program_gpus"]


@dataclass(frozen=True)
class GpuTarget:
    """A GPU the run measures: its NVML index and UUID (the key kernels are mapped by), and its facts."""

    index: int
    uuid: str
    static: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.static.get("name", "GPU"))


@dataclass
class GpuRun:
    """One GPU of the run: what it is, its attribution, and the processes whose work ran on it."""

    target: GpuTarget
    attribution: Attribution
    processes: list[InjectedProcess] = field(default_factory=list)
    busy_s: dict[str, dict[int, float]] = field(default_factory=dict)
    error: ArchlineError | None = None


@dataclass
class MultiRun:
    """An ``archline run`` over several GPUs: the run directory above the GPUs' own, each GPU's attribution, every
    traced process, notes, and the tables written from them."""

    run_dir: RunDir
    gpus: list[GpuRun]
    processes: list[InjectedProcess] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    status: RunStatus = "running"
    kernel_rows: list[dict[str, Any]] = field(default_factory=list)
    gpu_rows: list[dict[str, Any]] = field(default_factory=list)
    process_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total_energy_j(self) -> float:
        """Every GPU's energy over its span, summed (NaN if a GPU has none)."""
        return math.fsum(float(r["energy_j"]) for r in self.gpu_rows) if self.gpu_rows else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir.path),
            "status": self.status,
            "tracer": self.info.get("tracer"),
            "notes": list(self.notes),
            "total_energy_j": self.total_energy_j,
            "gpus": [
                {**row, "notes": list(g.attribution.notes),
                 "result": g.attribution.result.to_json() if g.attribution.result is not None else None}
                for row, g in zip(self.gpu_rows, self.gpus, strict=True)
            ],
            "processes": self.process_rows,
        }  # fmt: skip


def _targets(backend: Backend, gpus: Sequence[int]) -> list[GpuTarget]:
    out = []
    for g in gpus:
        static = backend.device_static(g)
        uuid = str(static.get("uuid") or "")
        if not uuid:
            raise GPUUnavailableError(f"GPU {g}: NVML gives no UUID, so no kernel could be placed on it")
        out.append(GpuTarget(g, uuid, static))
    return out


def _select_gpus(targets: Sequence[GpuTarget], show_only: bool, env: dict[str, str], notes: list[str]) -> None:
    if "CUDA_VISIBLE_DEVICES" in env:
        notes.append(
            f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} was already set; kernels are placed on GPUs by "
            "UUID whatever it says, and those on GPUs this run does not measure are left out"
        )
        return
    order = env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if show_only:
        # NVML numbers GPUs in PCI bus order; with another order CUDA's numbers differ, so name the GPUs by UUID.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(
            str(t.index) if order == "PCI_BUS_ID" else t.uuid for t in targets
        )  # fmt: skip


def _manifest(child: ProgramSpec, targets: Sequence[GpuTarget], backend: Backend) -> Manifest:
    states: dict[str, Any] = {}
    for t in targets:
        try:
            states[gpu_dir_name(t.index)] = backend.device_state(t.index)
        except ArchlineError as exc:
            states[gpu_dir_name(t.index)] = {"error": str(exc)}
    names = list(dict.fromkeys(t.name for t in targets))
    label = f"{len(targets)} × {names[0]}" if len(names) == 1 else " + ".join(t.name for t in targets)
    gpu = {"name": label, "count": len(targets), "devices": [t.static for t in targets]}
    extra = {"multi_gpu": True, "gpu_indices": [t.index for t in targets]}
    return Manifest.new("run", command=child.argv, gpu=gpu, state_before=states, extra=extra)


def _mixed_note(targets: Sequence[GpuTarget], notes: list[str]) -> None:
    kinds = {(t.name, str(t.static.get("driver_version", ""))) for t in targets}
    if len(kinds) > 1:
        notes.append(
            "GPUs of different models or drivers ("
            + "; ".join(f"{n}, driver {d}" for n, d in sorted(kinds))
            + "): each is attributed with its own sensor model, and only energies are added up"
        )


def run_program_gpus(
    cmd: Sequence[str],
    *,
    gpus: Sequence[int],
    out: Path | None = None,
    force: bool = False,
    trace: bool = True,
    tracer: str = "auto",
    quiet_stdout: bool = False,
    backend: Backend | None = None,
    duty_ms: tuple[int, int] | None = None,
    duty_mode: str = "detach",
    duty_auto: bool = False,
    render: ReportWriter | None = None,
    options: AttributionOptions | None = None,
    show_only: bool = True,
) -> tuple[MultiRun, int]:
    """Run ``cmd`` once while every GPU of ``gpus`` records; attribute each GPU's kernels to its own sensors.

    Returns the run and the program's exit status. ``show_only``: show the program only these GPUs
    (``CUDA_VISIBLE_DEVICES``; False when they are all the machine has). Options as
    :func:`~archline.measurement.attribute.run.run_program`, except that ``tracer`` cannot be
    ``python`` (cupti-python records one process). The first GPU whose attribution failed raises
    its error after everything is written.
    """
    check_options(tracer, duty_mode)
    if tracer == "python":
        raise InputError("--tracer python records one process on one GPU; several GPUs need --tracer inject or auto")
    if not gpus or len(set(gpus)) != len(gpus):
        raise InputError(f"several GPUs, each once, are needed (got {list(gpus)})")
    child = as_child(classify_command(cmd))
    if backend is None:
        from archline.measurement.attribute.backend import nvml_backend

        backend = nvml_backend()
    out = out or default_out()
    targets = _targets(backend, gpus)
    notes: list[str] = []
    env = dict(os.environ)
    _select_gpus(targets, show_only, env, notes)
    build = backend.injection or build_injection_library
    choice = prepare_tracing(child, tracer, trace=trace, build=build, duty_ms=duty_ms, duty_mode=duty_mode,
                             duty_auto=duty_auto, env=env, notes=notes)  # fmt: skip
    _mixed_note(targets, notes)
    top = RunDir.create(out, _manifest(child, targets, backend), overwrite=force)
    from archline.measurement.attribute.api import Attribution

    run = MultiRun(top, [], notes=notes, info={"tracer": "inject" if choice.lib is not None else "none"})
    for t in targets:
        a = Attribution(t.index, out=out / gpu_dir_name(t.index), force=force, options=options, trace=False,
                        backend=backend, command=child.argv, kind="run", render=render)  # fmt: skip
        a.notes.extend(notes)
        a.info.update(run.info, gpu_uuid=t.uuid)
        run.gpus.append(GpuRun(t, a))
    return run, _record(run, child, choice, env, backend, quiet_stdout)


def _record(
    run: MultiRun, child: ProgramSpec, choice: TracerChoice, env: dict[str, str], backend: Backend, quiet: bool
) -> int:
    """Start every GPU's sensors, run the program once, stop them together, then attribute and write."""
    from archline.core.readings import SystemClock

    clock = backend.clock or SystemClock()
    started: list[Attribution] = []
    try:
        for g in run.gpus:
            g.attribution.start_recording()
            started.append(g.attribution)
        clock.sleep(backend.pre_s)
    except BaseException as exc:
        for a in started:
            a.abort(f"could not start: {exc}")
        run.status = "failed"
        run.run_dir.finish("failed", notes=(*run.notes, f"could not start: {exc}"))
        raise
    t0 = clock.now_s()
    for g in run.gpus:
        g.attribution.mark_program_start(t0)
    cupti_dir = run.run_dir.path / "raw" / "cupti"
    if choice.lib is not None:
        from archline.hw.cupti.inject import injection_env

        cupti_dir.mkdir(parents=True, exist_ok=True)
        env.update(injection_env(choice.lib, cupti_dir.resolve()))  # absolute: the program may change directory
    pending: BaseException | None = None
    code = 1
    try:
        code = (backend.run_child or run_binary)(child, env, stdout_to_stderr=quiet)
    except BaseException as exc:  # Ctrl-C or a failure to start: finish what was recorded, then raise it
        pending = exc
    try:
        t1 = clock.now_s()
        clock.sleep(backend.post_s)
        for g in run.gpus:
            g.attribution.stop_recording(stop_s=t1, settle=False)
        if choice.lib is not None:
            _distribute(run, cupti_dir)
        else:
            for g in run.gpus:
                g.attribution.whole_program_only(choice.untraced or "kernel tracing was off")
        _analyze(run, type(pending) if pending is not None else None)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt) or isinstance(pending, KeyboardInterrupt)
        run.status = "interrupted" if interrupted else "failed"
        if run.run_dir.manifest.status == "running":
            run.run_dir.finish(run.status, notes=(*run.notes, f"could not finish: {exc}"))
        raise
    if pending is not None:
        raise pending
    failed = next((g.error for g in run.gpus if g.error is not None), None)
    if failed is not None:
        raise failed
    return 128 - code if code < 0 else code


def _distribute(run: MultiRun, cupti_dir: Path) -> None:
    """Read every process's trace and give each GPU's attribution its activities."""
    from archline.hw.cupti.inject import read_injection_output

    try:
        trace = read_injection_output(cupti_dir)
    except ArchlineError as exc:
        for g in run.gpus:
            g.attribution.whole_program_only(f"the injection library's output cannot be read ({exc})")
        return
    describe_injection(trace, run.notes, run.info)
    run.processes = list(trace.processes)
    split = split_by_gpu(trace, {g.target.index: g.target.uuid for g in run.gpus})
    run.notes.extend(split.notes)
    for g in run.gpus:
        i = g.target.index
        g.processes, g.busy_s = split.processes[i], split.busy_s[i]
        a = g.attribution
        a.notes.extend(split.notes)
        if split.records[i]:
            a.add_activities(split.records[i], split.clock[i], traced=split.traced[i])
        elif trace.records:
            a.whole_program_only("no kernel of the program ran on this GPU")
        else:
            a.whole_program_only(no_records_reason(trace))


def _analyze(run: MultiRun, exc_type: type[BaseException] | None) -> None:
    """Every GPU's attribution (one failing does not stop the others), then the run's own tables and manifest."""
    for g in run.gpus:
        try:
            g.attribution.end(exc_type, stopped=True)
        except ArchlineError as exc:
            g.error = exc
    _tables(run)
    statuses = {g.attribution.status for g in run.gpus}
    if exc_type is KeyboardInterrupt or "interrupted" in statuses:
        run.status = "interrupted"
    else:
        run.status = "complete" if statuses == {"complete"} and exc_type is None else "failed"
    files = {**MULTI_RUN_FILES}
    files.update({f"{gpu_dir_name(g.target.index)}/": f"GPU {g.target.index}'s own run directory" for g in run.gpus})
    states = {}
    for g in run.gpus:
        try:
            states[gpu_dir_name(g.target.index)] = g.attribution.backend.device_state(g.target.index)
        except ArchlineError as exc:
            states[gpu_dir_name(g.target.index)] = {"error": str(exc)}
    extra = {**run.run_dir.manifest.extra, **run.info, "gpus": run.gpu_rows, "processes": run.process_rows,
             "total_energy_j": run.total_energy_j}  # fmt: skip
    spans = [g.attribution.program_span for g in run.gpus if g.attribution.program_span is not None]
    if spans:
        extra["program_s"] = spans[0][1] - spans[0][0]
    run.run_dir.finish(run.status, state_after=states, files=files, notes=tuple(dict.fromkeys(run.notes)), extra=extra)


def _busy_by_row_name(g: GpuRun) -> dict[str, dict[int, float]]:
    """The GPU's busy time per activity name and process, under the (demangled) names its rows carry."""
    names = demangle(list(g.busy_s))
    return {names.get(n, n): per for n, per in g.busy_s.items()}


def _tables(run: MultiRun) -> None:
    """The run's kernels.csv (every GPU's rows, with their ranks and pids), gpus.csv and processes.csv."""
    kernel_j: dict[int, float] = defaultdict(float)
    comm_j: dict[int, float] = defaultdict(float)
    for g in run.gpus:
        a, t = g.attribution, g.target
        busy = _busy_by_row_name(g)
        rank = {p.pid: p.rank for p in g.processes}
        owners = {name: ([rank.get(pid) for pid in sorted(per)], sorted(per)) for name, per in busy.items()}
        if a.result is not None:
            run.kernel_rows.extend(gpu_kernel_rows(t.index, t.uuid, a.result, owners))
            # Each process's share of the GPU's activity rows: a row run by several processes is split by their time.
            for r in a.result.rows:
                per = busy.get(r.name)
                if r.kind not in ("kernel", "memcpy", "memset") or not per:
                    continue
                total = math.fsum(per.values())
                for pid, busy_s in per.items():
                    share = r.energy_j * (busy_s / total if total > 0 else 1 / len(per))
                    kernel_j[pid] += share
                    if is_communication(r.name):
                        comm_j[pid] += share
        run.gpu_rows.append({
            "gpu": t.index, "gpu_uuid": t.uuid, "name": t.name, "driver_version": t.static.get("driver_version"),
            "status": a.status, **gpu_summary(a.result),
            "ranks": join_ids(p.rank for p in g.processes), "pids": join_ids(p.pid for p in g.processes),
            "sensor_model": a.info.get("buffer_model"), "power_limit_w": a.info.get("power_limit_w"),
            "run_dir": gpu_dir_name(t.index),
        })  # fmt: skip
    for p in run.processes:
        info = p.to_json()
        gpus = [g.target.index for g in run.gpus if any(q is p for q in g.processes)]
        visible = sorted((d for d in p.devices.values() if d.cuda_visible), key=lambda d: d.id)
        run.process_rows.append({
            **{k: info[k] for k in ("pid", "rank", "local_rank", "world_size", "host", "cuda_visible_devices", "file")},
            "gpus": ",".join(map(str, gpus)),
            "devices": " ".join(f"{d.id}→{uuid_prefix(d.uuid)}" for d in visible),
            "calls": len(p.records),
            "busy_s": math.fsum(r.duration_s for r in p.records),
            "kernel_energy_j": kernel_j[p.pid] if gpus else None,
            "comm_energy_j": comm_j[p.pid] if gpus else None,
        })  # fmt: skip
    write_multi_tables(run.run_dir.path, run.kernel_rows, run.gpu_rows, run.process_rows)

"""Run the program that ``archline run`` measures, traced or not, under an :class:`Attribution`.

The workflow behind the command: which tracer (injection library or in-process CUPTI), the
environment protocol with the injection library (duty cycle, output folder), the GPU the program
is shown, and what the tracer wrote, handed to the attribution.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archline.errors import ArchlineError, InputError
from archline.measurement.attribute.program import (
    ProgramSpec,
    TracerChoice,
    as_child,
    check_tracer,
    choose_tracer,
    classify_command,
    run_binary,
    run_python,
)

if TYPE_CHECKING:  # the attribution pulls in scipy: imported when a program runs, not at CLI start
    from archline.hw.cupti.inject import InjectionTrace
    from archline.measurement.attribute.api import Attribution
    from archline.measurement.attribute.attribution import AttributionOptions
    from archline.measurement.attribute.backend import Backend, ReportWriter

__all__ = [
    "DUTY_MODES",
    "build_injection_library",
    "check_options",
    "default_out",
    "describe_injection",
    "no_records_reason",
    "prepare_tracing",
    "run_program",
]

#: How duty-cycled tracing switches off: detach CUPTI (cuptiFinalize), or disable its records only.
DUTY_MODES = ("detach", "disable")

#: The default tracing (``--trace-duty auto``): every kernel, until the records show a window of
#: AUTO_PROBE_MS (by their own timestamps) holding more than AUTO_RATE_PER_S per second; then
#: AUTO_DUTY_MS[0] of every AUTO_DUTY_MS[1] ms (CUPTI detached in between); any other program stays
#: traced throughout. The rate is the one at which full tracing would cost AUTO_MAX_COST of the
#: program's time at AUTO_RECORD_COST_S per record: the largest cost per record measured, H100
#: transformer training (loops traced in full +22 % at about 29 000 records/s, 7.5 µs each;
#: 0.7–2 µs on H200 launch-bound loops). Until session 30 the duty cycle was 0.5 s of every 10 s (5 %): a traced
#: period cost a launch-bound GPT-2 decode loop 37–243 ms, 0.4–2.4 % of its time, an interval reaching +3.43 %
#: (sessions 13 and 15), too much beside the sensors' own share to keep the whole under 3 %. Since session 31 it is
#: 0.5 s of every 30 s (1.7 %): a third of that (docs/attribution.md "Session 31").
AUTO_RECORD_COST_S = 7.5e-6
AUTO_MAX_COST = 0.01
AUTO_PROBE_MS = 1000
AUTO_RATE_PER_S = float(round(AUTO_MAX_COST / AUTO_RECORD_COST_S))
AUTO_DUTY_MS = (500, 30000)
#: A duty cycle's CUPTI attach slower than this (s, median) gets a note: 11-20 ms were measured with archline's own
#: sensors, about 2 s with 15 more NVML readers queueing the driver (session 16, docs/attribution.md).
SLOW_ATTACH_S = 0.2


def default_out() -> Path:
    """``archline-runs/run-<time>``: where a run goes when no directory is named."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("archline-runs") / f"run-{stamp}"


def _select_gpu(gpu: int, env: dict[str, str], notes: list[str]) -> None:
    if "CUDA_VISIBLE_DEVICES" in env:
        notes.append(
            f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} was already set; the program must run on "
            f"GPU {gpu} (NVML index) for its energy to be measured"
        )
        return
    # NVML numbers GPUs in PCI bus order; make CUDA agree, then show the program only that GPU.
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    env["CUDA_VISIBLE_DEVICES"] = str(gpu)


def run_program(
    cmd: Sequence[str],
    *,
    gpu: int = 0,
    out: Path | None = None,
    force: bool = False,
    trace: bool = True,
    tracer: str = "auto",
    quiet_stdout: bool = False,
    backend: Backend | None = None,
    duty_ms: tuple[int, int] | None = None,
    duty_mode: str = "detach",
    render: ReportWriter | None = None,
    duty_auto: bool = False,
    options: AttributionOptions | None = None,
) -> tuple[Attribution, int, str | None]:
    """Run ``cmd`` under an :class:`Attribution` writing into ``out``; return it, the exit status, and
    the program's failure (a line) if it raised in-process.

    ``tracer`` (``auto``, ``inject`` or ``python``) picks how kernels are recorded (:func:`choose_tracer`).
    ``duty_ms`` = (on, period) traces kernels for ``on`` ms of every ``period`` ms (injection only);
    ``duty_mode`` says how tracing is switched off: ``detach`` CUPTI from the process, or only
    ``disable`` its activity records. ``render`` writes the run's report files (the report
    layer's :func:`~archline.report.attribution_run.write_report_files`; the CLI passes it).
    ``duty_auto`` (the CLI's default) traces in full first and cycles only a launch-bound program
    (:data:`AUTO_PROBE_MS`, :data:`AUTO_RATE_PER_S`, :data:`AUTO_DUTY_MS`); without the injection
    tracer it traces throughout and says so.
    """
    check_options(tracer, duty_mode)
    spec = classify_command(cmd)
    out = out or default_out()
    notes: list[str] = []
    env = dict(os.environ)
    _select_gpu(gpu, env, notes)
    if backend is None:
        from archline.measurement.attribute.backend import nvml_backend

        backend = nvml_backend()
    choice = prepare_tracing(
        spec,
        tracer,
        trace=trace,
        build=backend.injection or build_injection_library,
        duty_ms=duty_ms,
        duty_mode=duty_mode,
        duty_auto=duty_auto,
        env=env,
        notes=notes,
    )
    if choice.mode == "python":
        for k in ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"):
            if k in env:
                os.environ[k] = env[k]
        return _run_in_process(spec, gpu, out, force, trace, quiet_stdout, backend, notes, render, options)
    return _run_child(spec, choice, gpu, out, force, quiet_stdout, backend, env, notes, render, options)


def check_options(tracer: str, duty_mode: str) -> None:
    """Refuse an unknown ``--tracer`` or ``--trace-duty-mode`` (InputError) before anything runs."""
    check_tracer(tracer)
    if duty_mode not in DUTY_MODES:
        raise InputError(f"--trace-duty-mode: expected one of {', '.join(DUTY_MODES)} (got {duty_mode!r})")


def prepare_tracing(
    spec: ProgramSpec,
    tracer: str,
    *,
    trace: bool,
    build: Callable[[], Path],
    duty_ms: tuple[int, int] | None,
    duty_mode: str,
    duty_auto: bool,
    env: dict[str, str],
    notes: list[str],
) -> TracerChoice:
    """Choose the tracer for ``spec`` and put the duty cycle's settings for the injection library into ``env``;
    what was chosen and why goes into ``notes``."""
    check_options(tracer, duty_mode)
    choice = choose_tracer(spec, tracer, trace=trace, build=build)
    if choice.note:
        notes.append(choice.note)
    if duty_auto and duty_ms is None:
        duty_ms = AUTO_DUTY_MS
    if duty_ms is not None and trace and duty_auto and (choice.mode != "inject" or choice.lib is None):
        notes.append(
            "tracing: every kernel, throughout (the automatic duty cycle needs the injection tracer); "
            "CUPTI costs launch-bound programs 4–16 % (docs/attribution.md)"
        )
    elif duty_ms is not None and trace:
        if choice.mode != "inject" or choice.lib is None:
            raise InputError("--trace-duty needs the injection tracer (--tracer inject or auto with a C compiler)")
        env["ARCHLINE_CUPTI_DUTY_MS"] = f"{duty_ms[0]},{duty_ms[1]}"
        env["ARCHLINE_CUPTI_DUTY_MODE"] = duty_mode
        how = "CUPTI detached" if duty_mode == "detach" else "CUPTI's records disabled"
        cycle = f"kernels traced {duty_ms[0]} ms of every {duty_ms[1]} ms ({how} in between)"
        if duty_auto:
            env["ARCHLINE_CUPTI_DUTY_AUTO"] = f"{AUTO_PROBE_MS},{AUTO_RATE_PER_S:g}"
            notes.append(
                f"tracing: automatic — every kernel until a {AUTO_PROBE_MS / 1e3:g} s window of records shows more "
                f"than {AUTO_RATE_PER_S:g} kernels/s; then {cycle}, else every kernel throughout. "
                "Expected cost after the start-up probe, on the program's own step time: all of it (sensors and "
                "tracing) +0.07 to +0.14 % of a GPU-bound transformer training step and +0.97 % of a ResNet-50 step "
                "(H100s, session 26, with 0.5 s traced of every 10 s); on a launch-bound GPT-2 decode loop a traced "
                "period of 0.5 s costs 37–243 ms (sessions 13 and 15: 0.4–2.4 % at one period in 10 s, a third of "
                "that at one in 30 s), the sensors' share is not resolved on the loop itself, and the whole is not "
                "resolved between processes, as the loop's speed moves by tens of per cent between them "
                "(session 28; docs/attribution.md); traced throughout, a launch-bound program pays 4–16 % "
                "(--trace-duty full)"
            )
        else:
            notes.append(f"tracing duty cycle: {cycle}")
    return choice


def build_injection_library() -> Path:
    """archline's CUPTI injection library, built on first use (CUPTIUnavailableError where it cannot be)."""
    from archline.hw.cupti import inject as cupti_inject

    return cupti_inject.build_injection()


def _run_in_process(
    spec: ProgramSpec,
    gpu: int,
    out: Path,
    force: bool,
    trace: bool,
    quiet_stdout: bool,
    backend: Backend,
    notes: list[str],
    render: ReportWriter | None,
    options: AttributionOptions | None = None,
) -> tuple[Attribution, int, str | None]:
    from archline.measurement.attribute.api import Attribution

    a = Attribution(
        gpu,
        out=out,
        force=force,
        options=options,
        trace=trace,
        backend=backend,
        command=spec.argv,
        kind="run",
        render=render,
    )
    a.notes.extend(notes)
    a.info["tracer"] = "python" if trace else "none"
    redirect = contextlib.redirect_stdout(sys.stderr) if quiet_stdout else contextlib.nullcontext()
    with a, redirect:
        code, failure = run_python(spec)
    return a, code, failure


def _run_child(
    spec: ProgramSpec,
    choice: TracerChoice,
    gpu: int,
    out: Path,
    force: bool,
    quiet_stdout: bool,
    backend: Backend,
    env: dict[str, str],
    notes: list[str],
    render: ReportWriter | None,
    options: AttributionOptions | None = None,
) -> tuple[Attribution, int, str | None]:
    from archline.hw.cupti.inject import injection_env
    from archline.measurement.attribute.api import Attribution

    child = as_child(spec)
    a = Attribution(
        gpu,
        out=out,
        force=force,
        options=options,
        trace=False,
        backend=backend,
        command=child.argv,
        kind="run",
        render=render,
    )
    a.notes.extend(notes)
    a.info["tracer"] = "inject" if choice.lib is not None else "none"
    with a:
        cupti_dir = out / "raw" / "cupti"
        if choice.lib is not None:
            cupti_dir.mkdir(parents=True, exist_ok=True)
            # Absolute: the program may change directory before it initialises CUDA.
            env.update(injection_env(choice.lib, cupti_dir.resolve()))
        try:
            code = (backend.run_child or run_binary)(child, env, stdout_to_stderr=quiet_stdout)
        finally:
            # Also after an interrupt: what the child wrote before it is kept.
            if choice.lib is not None:
                _add_injected(a, cupti_dir)
            else:
                a.whole_program_only(choice.untraced or "kernel tracing was off")
    if code < 0:
        code = 128 - code
    return a, code, None


def _add_injected(a: Attribution, cupti_dir: Path) -> None:
    """Give ``a`` the activities the injection library wrote into ``cupti_dir``."""
    from archline.hw.cupti.inject import read_injection_output

    try:
        traced = read_injection_output(cupti_dir)
    except ArchlineError as exc:
        a.whole_program_only(f"the injection library's output cannot be read ({exc})")
        return
    describe_injection(traced, a.notes, a.info)
    records, intervals = traced.records, traced.traced
    clock = traced.clocks[0].to_json() if traced.clocks else None
    uuid = _uuid(a)
    if uuid and traced.records:
        from archline.measurement.attribute.placement import split_by_gpu

        # Where every device is named by UUID, keep only what ran on this GPU (the program's own
        # CUDA_VISIBLE_DEVICES may have put work elsewhere); traces without the names are taken whole.
        split = split_by_gpu(traced, {a.gpu: uuid})
        if split.unnamed == 0:
            records, clock, intervals = split.records[a.gpu], split.clock[a.gpu], split.traced[a.gpu]
            a.notes.extend(split.notes)
    if records:
        a.add_activities(records, clock, traced=intervals)
    elif traced.records:
        a.whole_program_only(f"no kernel of the program ran on GPU {a.gpu}")
    else:
        a.whole_program_only(no_records_reason(traced))


def _uuid(a: Attribution) -> str:
    """The UUID of the attribution's GPU ("" where the backend cannot say)."""
    try:
        return str(a.backend.device_static(a.gpu).get("uuid") or "")
    except ArchlineError:
        return ""


def no_records_reason(traced: InjectionTrace) -> str:
    """Why the injection library's output holds no activity (its CUPTI errors, or none were launched)."""
    return "; ".join(traced.errors) if traced.errors else "the program launched no kernels CUPTI could see"


def describe_injection(traced: InjectionTrace, notes: list[str], info: dict[str, Any]) -> None:
    """Notes and manifest facts about what the injection library wrote: dropped and incomplete records, files cut
    short, duty-cycle switches and detaches."""
    if traced.dropped:
        notes.append(f"CUPTI dropped {traced.dropped} activity records (its buffers overflowed)")
    if traced.incomplete:
        notes.append(
            f"{traced.incomplete} kernel/copy records were still in flight when CUPTI handed them over "
            "(at a switch of duty-cycled tracing, or at exit) and are left out"
        )
    if traced.truncated:
        notes.append(
            f"{len(traced.truncated)} process(es) stopped while writing their kernel trace; "
            "everything written before that is kept"
        )
    if traced.switch_s:
        info["trace_switches"] = len(traced.switch_s)
        info["trace_switch_s_median"] = float(sorted(traced.switch_s)[len(traced.switch_s) // 2])
        notes.append(
            f"duty cycle: {len(traced.switch_s)} switches of tracing, median "
            f"{1e3 * info['trace_switch_s_median']:.3g} ms each"
        )
    if traced.attach_s:
        att = sorted(traced.attach_s)
        info["trace_attach_s_median"] = median = float(att[len(att) // 2])
        if median > SLOW_ATTACH_S:
            notes.append(
                f"duty cycle: CUPTI took {median:.2g} s to attach (median of {len(att)}; 11-20 ms on the H100s and "
                "H200s measured with archline's sensors alone): another process reading NVML (a monitoring agent, "
                "nvidia-smi in a loop) may be queueing the driver, and each traced period then costs the program "
                "about that long (docs/attribution.md, session 16)"
            )
    if traced.detach_s:
        fin = sorted(traced.detach_s)
        info["trace_detaches"] = len(fin)
        info["trace_detach_finalize_s_median"] = float(fin[len(fin) // 2])
        info["trace_detach_finalize_s_max"] = float(fin[-1])
        notes.append(
            f"duty cycle: CUPTI detached {len(fin)} times; cuptiFinalize held the program's thread "
            f"{1e3 * fin[len(fin) // 2]:.3g} ms (median), {1e3 * fin[-1]:.3g} ms at most"
        )

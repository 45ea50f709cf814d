"""CLI: ``archline run -- CMD ARGS``: run a program and attribute its GPU energy to its kernels."""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from archline.cli._common import console, err_console, handle_errors, print_json
from archline.core.activity import short_name
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
from archline.report.attribution_run import write_report_files

if TYPE_CHECKING:  # the attribution pulls in scipy: imported when a command runs, not at CLI start
    from archline.measurement.attribute.api import Attribution, Backend
    from archline.records.attribution import AttributionResult, KernelRow

__all__ = ["DUTY_MODES", "backend_factory", "parse_duty", "register", "render_table", "run_program"]

#: How duty-cycled tracing switches off: detach CUPTI (cuptiFinalize), or disable its records only.
DUTY_MODES = ("detach", "disable")

#: Where sensors and the tracer come from; tests replace it with fakes.
backend_factory: Callable[[], Backend] | None = None


def _default_out() -> Path:
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
) -> tuple[Attribution, int, str | None]:
    """Run ``cmd`` under an :class:`Attribution` writing into ``out``; return it, the exit status, and
    the program's failure (a line) if it raised in-process.

    ``tracer`` (``auto``, ``inject`` or ``python``) picks how kernels are recorded (:func:`choose_tracer`).
    ``duty_ms`` = (on, period) traces kernels for ``on`` ms of every ``period`` ms (injection only);
    ``duty_mode`` says how tracing is switched off: ``detach`` CUPTI from the process, or only
    ``disable`` its activity records.
    """
    check_tracer(tracer)
    if duty_mode not in DUTY_MODES:
        raise InputError(f"--trace-duty-mode: expected one of {', '.join(DUTY_MODES)} (got {duty_mode!r})")
    spec = classify_command(cmd)
    out = out or _default_out()
    notes: list[str] = []
    env = dict(os.environ)
    _select_gpu(gpu, env, notes)
    if backend is None:
        if backend_factory is None:
            from archline.measurement.attribute.api import nvml_backend

            backend = nvml_backend()
        else:
            backend = backend_factory()
    choice = choose_tracer(spec, tracer, trace=trace, build=backend.injection or _build_injection)
    if choice.note:
        notes.append(choice.note)
    if duty_ms is not None and trace:
        if choice.mode != "inject" or choice.lib is None:
            raise InputError("--trace-duty needs the injection tracer (--tracer inject or auto with a C compiler)")
        env["ARCHLINE_CUPTI_DUTY_MS"] = f"{duty_ms[0]},{duty_ms[1]}"
        env["ARCHLINE_CUPTI_DUTY_MODE"] = duty_mode
        how = "CUPTI detached" if duty_mode == "detach" else "CUPTI's records disabled"
        notes.append(f"tracing duty cycle: kernels traced {duty_ms[0]} ms of every {duty_ms[1]} ms ({how} in between)")
    if choice.mode == "python":
        for k in ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"):
            if k in env:
                os.environ[k] = env[k]
        return _run_in_process(spec, gpu, out, force, trace, quiet_stdout, backend, notes)
    return _run_child(spec, choice, gpu, out, force, quiet_stdout, backend, env, notes)


def parse_duty(text: str) -> tuple[int, int]:
    """``"0.25/1"`` (seconds) → (250, 1000) ms; InputError unless 0 < ON < PERIOD, both ≥ 10 ms."""
    try:
        on_s, period_s = (float(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f"--trace-duty: expected ON/PERIOD in seconds, e.g. 0.25/1 (got {text!r})") from None
    on, period = round(on_s * 1e3), round(period_s * 1e3)
    if not (10 <= on < period):
        raise InputError(f"--trace-duty: need 10 ms ≤ ON < PERIOD (got {text!r})")
    return on, period


def _build_injection() -> Path:
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
) -> tuple[Attribution, int, str | None]:
    from archline.measurement.attribute.api import Attribution

    a = Attribution(
        gpu,
        out=out,
        force=force,
        trace=trace,
        backend=backend,
        command=spec.argv,
        kind="run",
        render=write_report_files,
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
) -> tuple[Attribution, int, str | None]:
    from archline.hw.cupti.inject import injection_env
    from archline.measurement.attribute.api import Attribution

    child = as_child(spec)
    a = Attribution(
        gpu,
        out=out,
        force=force,
        trace=False,
        backend=backend,
        command=child.argv,
        kind="run",
        render=write_report_files,
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
            code = run_binary(child, env, stdout_to_stderr=quiet_stdout)
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
    if traced.dropped:
        a.notes.append(f"CUPTI dropped {traced.dropped} activity records (its buffers overflowed)")
    if traced.incomplete:
        a.notes.append(
            f"{traced.incomplete} kernel/copy records were still in flight when CUPTI handed them over "
            "(at a switch of duty-cycled tracing, or at exit) and are left out"
        )
    if traced.truncated:
        a.notes.append(
            f"{len(traced.truncated)} process(es) stopped while writing their kernel trace; "
            "everything written before that is kept"
        )
    if traced.switch_s:
        a.info["trace_switches"] = len(traced.switch_s)
        a.info["trace_switch_s_median"] = float(sorted(traced.switch_s)[len(traced.switch_s) // 2])
        a.notes.append(
            f"duty cycle: {len(traced.switch_s)} switches of tracing, median "
            f"{1e3 * a.info['trace_switch_s_median']:.3g} ms each"
        )
    if traced.detach_s:
        fin = sorted(traced.detach_s)
        a.info["trace_detaches"] = len(fin)
        a.info["trace_detach_finalize_s_median"] = float(fin[len(fin) // 2])
        a.info["trace_detach_finalize_s_max"] = float(fin[-1])
        a.notes.append(
            f"duty cycle: CUPTI detached {len(fin)} times; cuptiFinalize held the program's thread "
            f"{1e3 * fin[len(fin) // 2]:.3g} ms (median), {1e3 * fin[-1]:.3g} ms at most"
        )
    if traced.records:
        clock = traced.clocks[0].to_json() if traced.clocks else None
        a.add_activities(traced.records, clock, traced=traced.traced)
    else:
        why = "; ".join(traced.errors) if traced.errors else "the program launched no kernels CUPTI could see"
        a.whole_program_only(why)


def _energy_unit(j: float) -> tuple[float, str]:
    a = abs(j)
    if a >= 1 or a == 0 or not math.isfinite(a):
        return 1.0, "J"
    if a >= 1e-3:
        return 1e-3, "mJ"
    return 1e-6, "µJ"


def _fmt_e(j: float, half_j: float | None = None) -> str:
    """An energy with a unit chosen for its size, and optionally its ± half-width in the same unit."""
    if not math.isfinite(j):
        return "—"
    scale, unit = _energy_unit(j)
    if half_j is None or not math.isfinite(half_j):
        return f"{j / scale:.3g} {unit}"
    return f"{j / scale:.3g} ± {_plain(half_j / scale)} {unit}"


def _plain(x: float) -> str:
    """Two significant figures without an exponent."""
    a = abs(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.0f}" if a >= 20 else f"{x:.1f}".rstrip("0").rstrip(".")
    return f"{x:.2g}"


def _fmt_t(s: float) -> str:
    if not math.isfinite(s):
        return "—"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


_METHOD_SHORT = {"regression": "fit", "integrated": "int", "mixed": "f+i", "residual": "rest", "counter": "ctr"}


def _share(e: float, total: float) -> str:
    return f"{100 * e / total:.1f}%" if total else "—"


def render_table(result: AttributionResult, *, top: int = 20) -> Table:
    """The result as a Rich table: the ``top`` kernels by energy, the rest summed, then unattributed rows.

    Methods: ``fit`` (regression across the energy counter's windows), ``integral`` (power
    integrated over each call), ``rest`` (what the fit leaves unexplained); ``?`` marks a row the
    data cannot separate from others.
    """
    conf = round(100 * result.confidence)
    t = Table(
        title=f"GPU energy by kernel: {_fmt_e(result.total_energy_j)} in total",
        caption=f"±: half-width of the {conf} % interval. how: fit = regression over the counter's windows, "
        "int = power integrated over each call, rest = not explained by the fit; ? = not identifiable",
        box=box.SIMPLE_HEAD,
        show_lines=False,
    )
    t.add_column("kernel", overflow="fold", min_width=12, ratio=3)
    t.add_column("calls", justify="right")
    t.add_column("time", justify="right")
    t.add_column("mean", justify="right")
    t.add_column("energy", justify="right", no_wrap=True)
    t.add_column("share", justify="right")
    t.add_column("power", justify="right")
    t.add_column("how", no_wrap=True)
    kernels = list(result.kernels)
    shown, rest = kernels[:top], kernels[top:]

    def add(r: KernelRow, name: str, style: str | None = None) -> None:
        half = 0.5 * (r.energy_hi_j - r.energy_lo_j) if r.kind not in ("residual", "untraced") else None
        energy = _fmt_e(r.energy_j, half)
        t.add_row(
            name.replace("[", r"\["),
            str(r.calls) if r.calls else "",
            _fmt_t(r.time_s) if r.time_s else "",
            _fmt_t(r.mean_time_s) if r.calls and r.time_s else "",
            energy,
            f"{100 * r.share:.1f}%",
            f"{r.mean_power_w:.0f} W" if math.isfinite(r.mean_power_w) else "",
            _METHOD_SHORT.get(r.method, r.method) + ("" if r.identifiable else " ?"),
            style=style,
        )

    for r in shown:
        add(r, short_name(r.name, 80))
    if rest:
        e = sum(r.energy_j for r in rest)
        t.add_row(
            f"… {len(rest)} more kernels", str(sum(r.calls for r in rest)), _fmt_t(sum(r.time_s for r in rest)),
            "", _fmt_e(e), _share(e, result.total_energy_j), "", "", style="dim",
        )  # fmt: skip
    t.add_section()
    for r in result.unattributed:
        add(r, r.name, style="dim")
    return t


def register(app: typer.Typer) -> None:
    """Add this module's commands to app."""

    @app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    @handle_errors
    def run(
        command: Annotated[list[str], typer.Argument(metavar="-- COMMAND [ARGS]...", help="The program to run.")],
        gpu: Annotated[
            int, typer.Option("--gpu", "-g", help="GPU to measure (NVML index); the program sees only it.")
        ] = 0,
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="Run directory (default archline-runs/run-<time>).")
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing run directory.")] = False,
        no_kernels: Annotated[bool, typer.Option("--no-kernels", help="Whole-program energy only (no CUPTI).")] = False,
        tracer: Annotated[
            str,
            typer.Option(
                "--tracer",
                metavar="auto|inject|python",
                help="How kernels are recorded: inject = the program runs as a child with archline's CUPTI "
                "injection library (no Python work per kernel); python = in this interpreter with cupti-python "
                "(validated; costly for launch-bound programs); auto = inject where the library builds, else python.",
            ),
        ] = "auto",
        trace_duty: Annotated[
            str | None,
            typer.Option(
                "--trace-duty",
                metavar="ON/PERIOD",
                help="Trace kernels for ON of every PERIOD seconds (e.g. 0.3/6) to cut CUPTI's per-launch "
                "cost for launch-bound programs; rows then cover the traced time, so the program should run "
                "for minutes (injection tracer only; measured costs in docs/attribution.md).",
            ),
        ] = None,
        trace_duty_mode: Annotated[
            str,
            typer.Option(
                "--trace-duty-mode",
                metavar="detach|disable",
                help="How --trace-duty stops tracing: detach = take CUPTI out of the process (cuptiFinalize) "
                "until the next traced period, so untraced launches cost nothing; disable = only turn its "
                "records off (CUPTI stays attached, with part of its per-launch cost).",
            ),
        ] = "detach",
        top: Annotated[int, typer.Option("--top", help="Kernels shown on the terminal (the CSV has all).")] = 20,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print the result as JSON (the program's stdout goes to stderr).")
        ] = False,
    ) -> None:
        """Run a program and attribute the GPU's energy to each of its kernels.

        The program runs as a child process with archline's CUPTI injection library (--tracer
        inject, the default where the library can be built); with --tracer python, a Python
        program (a .py file, python script.py, python -m module, python -c code) runs inside
        this interpreter and cupti-python records its kernels. The run's notes say which tracer
        ran. The program's exit status is passed through.
        """
        if top < 0:
            raise InputError(f"--top must be ≥ 0 (got {top})")
        duty = parse_duty(trace_duty) if trace_duty is not None else None
        a, code, failure = run_program(
            command,
            gpu=gpu,
            out=out,
            force=force,
            trace=not no_kernels,
            tracer=tracer,
            quiet_stdout=as_json,
            duty_ms=duty,
            duty_mode=trace_duty_mode,
        )
        result = a.result
        run_dir = a.run_dir.path if a.run_dir is not None else None
        if as_json:
            payload: dict[str, Any] = {
                "run_dir": str(run_dir) if run_dir else None,
                "exit_code": code,
                "status": a.status,
                "tracer": a.info.get("tracer"),
                "notes": list(a.notes),
                "result": result.to_json() if result is not None else None,
            }
            print_json(payload)
        elif result is not None:
            console.print(render_table(result, top=top))
            if result.whole_program_only:
                console.print("[yellow]whole-program energy only: no per-kernel rows[/] (see notes)")
            for n in (*a.notes, *result.notes):
                console.print(f"[dim]note:[/] {escape(n)}", markup=True, highlight=False)
            console.print(f"run directory: {run_dir}")
        if code != 0:
            what = f" ({escape(failure)})" if failure else ""
            err_console.print(f"[bold red]archline: error:[/] the program exited with status {code}{what}")
            raise typer.Exit(code)

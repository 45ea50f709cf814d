"""CLI: ``archline run -- CMD ARGS``: run a program and attribute its GPU energy to its kernels."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from archline.cli._common import GpuSessions, console, deps, err_console, handle_errors, print_json
from archline.cli.run_multi import gpus_for_run, print_multi_run
from archline.cli.tables import Col, fit_table
from archline.core.activity import short_name
from archline.errors import InputError
from archline.measurement.attribute.ceiling import at_limit_warning
from archline.measurement.attribute.run import DUTY_MODES

if TYPE_CHECKING:  # the attribution pulls in scipy: imported when a command runs, not at CLI start
    from archline.records.attribution import AttributionResult, KernelRow

__all__ = ["DUTY_MODES", "parse_duty", "register", "render_table"]


def parse_duty(text: str) -> tuple[int, int]:
    """``"0.25/1"`` (seconds) → (250, 1000) ms; InputError unless 0 < ON < PERIOD, both ≥ 10 ms."""
    try:
        on_s, period_s = (float(x) for x in text.split("/"))
    except ValueError:
        raise InputError(
            f"--trace-duty: expected auto, full or ON/PERIOD in seconds, e.g. 0.25/1 (got {text!r})"
        ) from None
    on, period = round(on_s * 1e3), round(period_s * 1e3)
    if not (10 <= on < period):
        raise InputError(f"--trace-duty: need 10 ms ≤ ON < PERIOD (got {text!r})")
    return on, period


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
    title = f"GPU energy by kernel: {_fmt_e(result.total_energy_j)} in total"
    caption = (
        f"±: half-width of the {conf} % interval. how: fit = regression over the power buffer's or the "
        "counter's windows, int = power integrated over each call, rest = not explained by the fit; "
        "? = not identifiable; from = what set the estimate (data, prior, mixed)"
    )
    cols = [
        Col("kernel", "name"),
        Col("calls", drop=2),
        Col("time", drop=3),
        Col("mean", drop=4),
        Col("energy"),
        Col("share"),
        Col("power", drop=1),
        Col("how", "text"),
        Col("from", "text", drop=5),
    ]
    rows: list[list[str]] = []
    styles: list[str | None] = []
    kernels = list(result.kernels)
    shown, rest = kernels[:top], kernels[top:]

    def add(r: KernelRow, name: str, style: str | None = None) -> None:
        half = 0.5 * (r.energy_hi_j - r.energy_lo_j) if r.kind not in ("residual", "untraced") else None
        rows.append(
            [
                name.replace("[", r"\["),
                str(r.calls) if r.calls else "",
                _fmt_t(r.time_s) if r.time_s else "",
                _fmt_t(r.mean_time_s) if r.calls and r.time_s else "",
                _fmt_e(r.energy_j, half),
                f"{100 * r.share:.1f}%",
                f"{r.mean_power_w:.0f} W" if math.isfinite(r.mean_power_w) else "",
                _METHOD_SHORT.get(r.method, r.method) + ("" if r.identifiable else " ?"),
                r.dominated_by if r.kind in ("kernel", "memcpy", "memset", "program") else "",
            ]
        )
        styles.append(style)

    for r in shown:
        add(r, short_name(r.name, 80))
    if rest:
        e = sum(r.energy_j for r in rest)
        rows.append(
            [
                f"… {len(rest)} more kernels",
                str(sum(r.calls for r in rest)),
                _fmt_t(sum(r.time_s for r in rest)),
                "",
                _fmt_e(e),
                _share(e, result.total_energy_j),
                "",
                "",
                "",
            ]
        )
        styles.append("dim")
    last_kernel = len(rows) - 1
    for r in result.unattributed:
        add(r, r.name, style="dim")
    t, _ = fit_table(
        cols,
        rows,
        console=console,
        title=title,
        caption=caption,
        styles=styles,
        section_ends={last_kernel},
        box=box.SIMPLE_HEAD,
    )
    return t


def read_replay_priors(directory: Path) -> dict[str, Any]:
    """Kernel priors from a replay run directory (its ``replay.csv``, and the design in its ``replay.json``);
    bad input is an InputError naming the file."""
    from archline.report.replay import replay_priors

    path = directory / "replay.csv" if directory.is_dir() else directory
    if not path.is_file():
        raise InputError(f"{path}: file not found (give a run directory of archline replay)")
    if path.name == "replay.csv":
        priors = replay_priors(path.parent)  # a RunDirError (an InputError) names a bad file
    else:  # a replay table saved under another name: its rows, without a replay.json beside it
        from archline.measurement.attribute.prior import priors_from_replay
        from archline.records.rundir import read_csv

        priors = dict(priors_from_replay(read_csv(path)))
    if not priors:
        raise InputError(f"{path}: no kernel group with a positive isolated or in-step energy")
    if path.name == "replay.csv":
        from archline.report.replay import clock_warning, read_replay, state_warning

        summary, rows = read_replay(path.parent)
        for warn in (state_warning(summary), clock_warning(rows)):
            if warn is not None:
                err_console.print(f"archline: warning: {path.parent}: {warn}", soft_wrap=True, markup=False)
    return dict(priors)


def read_model_priors(model: Path, counts: Path) -> dict[str, Any]:
    """Kernel priors from a calibrated model and the program's counts (archline counts); bad input is an
    InputError naming the file; says on stderr how many kernels got one."""
    from archline.characterize.model_priors import read_model_priors as _read

    mp = _read(model, counts)
    err_console.print(
        f"archline: model priors for {mp.names} kernel names from {mp.launches} counted launches"
        + (f" ({mp.skipped} gave no energy)" if mp.skipped else ""),
        soft_wrap=True,
        markup=False,
    )
    return dict(mp.priors)


def _with_replay(replay: Path) -> Any:
    """The run's report writer, plus a copy of the replay whose priors it used (so its report can show it)."""
    from archline.records.replay import copy_replay
    from archline.report.attribution_run import write_report_files

    def render(directory: Path, *args: Any) -> dict[str, str]:
        return {**write_report_files(directory, *args), **copy_replay(replay, directory)}

    return render


def register(app: typer.Typer) -> None:
    """Add this module's commands to app."""

    @app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    @handle_errors
    def run(
        ctx: typer.Context,
        command: Annotated[list[str], typer.Argument(metavar="-- COMMAND [ARGS]...", help="The program to run.")],
        gpu: Annotated[
            str,
            typer.Option(
                "--gpu",
                "-g",
                help="GPU(s) to measure (NVML index): N, a list like 0,2, or all. With one, the program sees only "
                "it; with several, every process the program starts (torchrun's workers too) is traced and each "
                "GPU's kernels are attributed against its own sensors.",
            ),
        ] = "0",
        out: Annotated[
            Path | None,
            typer.Option("--out", "-o", "--output", help="Run directory (default archline-runs/run-<time>)."),
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
            str,
            typer.Option(
                "--trace-duty",
                metavar="auto|full|ON/PERIOD",
                help="auto: trace every kernel until the program launches more than 1333 kernels/s over 1 s, "
                "then 0.5 s of every 30 s (CUPTI detached in between), keeping CUPTI's cost under 3 %; "
                "full: every kernel throughout; ON/PERIOD: trace ON of every PERIOD seconds (e.g. 0.3/6). "
                "Duty-cycled rows cover the traced time (injection tracer only; costs in docs/attribution.md).",
            ),
        ] = "auto",
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
        prior_replay: Annotated[
            Path | None,
            typer.Option(
                "--prior-replay",
                metavar="DIR",
                help="A graph-replay run directory (archline replay) whose isolated energies become each "
                "kernel's prior; the table's 'from' column says whether data or prior set each row.",
            ),
        ] = None,
        prior_model: Annotated[
            Path | None,
            typer.Option(
                "--prior-model",
                metavar="RUN",
                help="A calibrated energy model of this GPU (an archline roofline run directory or its model file): "
                "with --prior-counts, each counted kernel's prior is the model's energy for its counts "
                "(kernels with a --prior-replay prior keep that one).",
            ),
        ] = None,
        prior_counts: Annotated[
            Path | None,
            typer.Option(
                "--prior-counts",
                metavar="CSV",
                help="The program's Nsight Compute counts per launch (archline counts), for --prior-model.",
            ),
        ] = None,
        power_ceiling: Annotated[
            float | None,
            typer.Option(
                "--power-ceiling",
                metavar="W",
                help="The most a kernel can draw while it runs in bursts on this board (W), instead of the "
                "burst measurement archline ships for boards of its name; 0: none, every row bounded by the "
                "power limit (docs/attribution.md, 'Power limit and burst ceiling').",
            ),
        ] = None,
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
        if power_ceiling is not None and not (power_ceiling >= 0 and math.isfinite(power_ceiling)):
            raise InputError(f"--power-ceiling must be a power in W ≥ 0 (got {power_ceiling})")
        duty = None if trace_duty in ("auto", "full") else parse_duty(trace_duty)
        from archline.measurement.attribute.program import check_tracer

        check_tracer(tracer)  # bad input before the GPU is asked for
        from archline.measurement.attribute.backend import nvml_backend
        from archline.measurement.attribute.run import run_program
        from archline.report.attribution_run import write_report_files

        if (prior_model is None) != (prior_counts is None):
            raise InputError("--prior-model and --prior-counts go together (the model, and the program's counts)")
        options = None
        render = write_report_files
        if prior_replay is not None or power_ceiling is not None or prior_model is not None:
            from archline.measurement.attribute.attribution import AttributionOptions

            priors: dict[str, Any] = {}
            if prior_model is not None and prior_counts is not None:
                priors.update(read_model_priors(prior_model, prior_counts))
            if prior_replay is not None:
                priors.update(read_replay_priors(prior_replay))  # a kernel graph replay measured keeps its energy
            options = AttributionOptions(priors=priors or None, power_ceiling_w=power_ceiling)
            if prior_replay is not None:
                render = _with_replay(prior_replay)
        d = deps(ctx)
        kw: dict[str, Any] = dict(
            out=out,
            force=force,
            trace=not no_kernels,
            tracer=tracer,
            quiet_stdout=as_json,
            duty_ms=duty,
            duty_mode=trace_duty_mode,
            duty_auto=trace_duty == "auto",
            render=render,
            options=options,
        )
        with GpuSessions(d) as sessions:  # one NVML session per GPU for the sensors and the device facts
            backend = factory() if (factory := d.attribution_backend) is not None else nvml_backend(sessions, d.clock)
            gpus, every = gpus_for_run(gpu, backend)
            if len(gpus) > 1:
                from archline.measurement.attribute.multi_run import run_program_gpus

                run, code = run_program_gpus(command, gpus=gpus, backend=backend, show_only=not every, **kw)
                print_multi_run(run, code, top=top, as_json=as_json, kernel_table=lambda r, k: render_table(r, top=k))
                return
            a, code, failure = run_program(command, gpu=gpus[0], backend=backend, **kw)
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
        warn = at_limit_warning(result.extra) if result is not None else None
        if result is not None and not as_json:
            for n in (*a.notes, *result.notes):
                if n != warn:  # that one is a warning on stderr, below
                    console.print(f"[dim]note:[/] {escape(n)}", markup=True, highlight=False)
            console.print(f"run directory: {run_dir}")
        if warn is not None:
            err_console.print(f"archline: warning: {warn}", soft_wrap=True, markup=False)
        if code != 0:
            what = f" ({escape(failure)})" if failure else ""
            err_console.print(f"[bold red]archline: error:[/] the program exited with status {code}{what}")
            raise typer.Exit(code)

"""CLI: ``archline replay script.py:function``: each kernel group's energy in one step, by CUDA-graph replay."""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from archline.cli._common import console, err_console, handle_errors, print_json
from archline.cli.tables import Col, fit_table
from archline.errors import InputError

__all__ = ["load_step", "register"]


def load_step(target: str) -> Callable[[], Any]:
    """``script.py:function`` → the step. The function is called once with no arguments: if it returns a
    callable, that is the step (a factory that builds the model and data); otherwise the function is."""
    path_s, sep, func = target.rpartition(":")
    if not sep or not path_s or not func:
        raise InputError(f"{target!r}: expected SCRIPT.py:FUNCTION (e.g. train.py:make_step)")
    path = Path(path_s)
    if not path.is_file():
        raise InputError(f"{path}: no such script")
    spec = importlib.util.spec_from_file_location(f"archline_replay_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # the user's script: any error it raises is reported in one line
        raise InputError(f"{path}: the script raised {type(exc).__name__}: {exc}") from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise InputError(f"{path}: has no function {func!r}")
    try:
        made = fn()
    except Exception as exc:  # the user's function: reported in one line
        raise InputError(f"{target}: calling it raised {type(exc).__name__}: {exc}") from None
    step: Callable[[], Any] = made if callable(made) else fn
    return step


def _design_arg(design: str | None) -> int | str | None:
    """``--design``: None, 'auto' or a number of configurations (InputError otherwise)."""
    if design is None or design == "auto":
        return design
    from archline.measurement.attribute.replay_context import MIN_CONFIGS

    try:
        n = int(design)
    except ValueError:
        raise InputError(f"--design must be a number of configurations or 'auto', not {design!r}") from None
    if n < MIN_CONFIGS:
        raise InputError(f"--design needs at least {MIN_CONFIGS} configurations, not {n}")
    return n


def _replicates_arg(value: str) -> int | str:
    """``--design-replicates``: ``auto`` or a count ≥ 0 (InputError otherwise)."""
    if value == "auto":
        return value
    try:
        n = int(value)
    except ValueError:
        raise InputError(f"--design-replicates must be a number of configurations or 'auto', not {value!r}") from None
    if n < 0:
        raise InputError(f"--design-replicates must be 0 or more, not {n}")
    return n


def register(app: typer.Typer) -> None:
    """Add ``archline replay``."""

    @app.command("replay")
    @handle_errors
    def replay(
        target: Annotated[str, typer.Argument(metavar="SCRIPT.py:FUNCTION", help="The step (or a factory of it).")],
        gpu: Annotated[int, typer.Option("--gpu", help="GPU index.")] = 0,
        top: Annotated[
            int,
            typer.Option(
                "--top",
                help="Groups measured one by one (largest in-step energies with --design, else longest by CUPTI "
                "busy time).",
            ),
        ] = 8,
        no_marginal: Annotated[bool, typer.Option("--no-marginal", help="Skip the marginal energies.")] = False,
        repeats: Annotated[
            int, typer.Option("--repeats", help="Run the whole measurement this many times (run-to-run spread).")
        ] = 1,
        design: Annotated[
            str | None,
            typer.Option(
                "--design",
                help="Also measure every group inside the step by a randomized design of this many on/off "
                "configurations ('auto': max(3 x groups, 40)).",
            ),
        ] = None,
        design_seed: Annotated[int | None, typer.Option("--design-seed", help="The design's RNG seed.")] = None,
        design_kind: Annotated[
            str,
            typer.Option(
                "--design-kind",
                help="halves: each group on in a random half of the configurations; prefix: random prefixes of "
                "the step (no kernel runs without the ones before it).",
            ),
        ] = "halves",
        design_p_on: Annotated[
            float,
            typer.Option(
                "--design-p-on",
                help="Share of the configurations each group is on in (halves design; its interval widens to "
                "match, docs/replay.md).",
            ),
        ] = 0.5,
        design_replicates: Annotated[
            str,
            typer.Option(
                "--design-replicates",
                help="Configurations the design measures twice, to tell one measurement's scatter from the "
                "neighbour dependence ('auto': a fifth of its measurements; 0: none).",
            ),
        ] = "auto",
        design_model: Annotated[
            str,
            typer.Option(
                "--design-model",
                help="links: a cost per broken producer-consumer link fitted beside the energies (the "
                "default); busy: also time each configuration kernel by kernel (CUPTI) and fit the energy of the "
                "kernels' busy time beyond theirs in the whole step (no better than links on a held-out "
                "transformer step, and fewer configurations per budget); additive: the energies alone.",
            ),
        ] = "links",
        no_prime: Annotated[
            bool,
            typer.Option(
                "--no-prime",
                help="Do not run the whole step, unmeasured, before each replay with nodes switched off (by "
                "default it fills the switched-off nodes' buffers; docs/replay.md).",
            ),
        ] = False,
        reuse_buffers: Annotated[
            bool,
            typer.Option(
                "--reuse-buffers",
                help="Capture as PyTorch does, its memory reused between the step's tensors (by default every "
                "tensor keeps its own buffer, so a switched-off node's consumers read the step's data).",
            ),
        ] = False,
        design_budget: Annotated[
            float, typer.Option("--design-budget", help="Seconds of measurement the design may take.")
        ] = 600.0,
        out: Annotated[Path, typer.Option("-o", "--out", "--output", help="Run directory.")] = Path("archline-replay"),
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing run directory.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    ) -> None:
        """Capture one call of a PyTorch step as a CUDA graph and measure each kernel group's energy by replay:
        alone, without it, and inside the step by a randomized design (docs/replay.md says what it measured on
        ResNet-50 and transformer training steps, and its limits)."""
        if top < 1:
            raise InputError("--top must be at least 1")
        if repeats < 1:
            raise InputError("--repeats must be at least 1")
        n_design = _design_arg(design)
        from archline.measurement.attribute.replay import DESIGN_KINDS

        if design_kind not in DESIGN_KINDS:
            raise InputError(f"--design-kind must be {' or '.join(DESIGN_KINDS)}, not {design_kind!r}")
        if not 0.0 < design_p_on < 1.0:
            raise InputError(f"--design-p-on must be strictly between 0 and 1, not {design_p_on:g}")
        if design_p_on != 0.5 and design_kind != "halves":
            raise InputError("--design-p-on applies to the halves design only (--design-kind halves)")
        reps = _replicates_arg(design_replicates)
        from archline.measurement.attribute.replay_context import DESIGN_MODELS

        if design_model not in DESIGN_MODELS:
            raise InputError(f"--design-model must be {' or '.join(DESIGN_MODELS)}, not {design_model!r}")
        if not design_budget > 0:
            raise InputError(f"--design-budget must be a number of seconds > 0, not {design_budget:g}")
        step = load_step(target)
        from archline.measurement.attribute.replay import run_replay
        from archline.measurement.attribute.replay_progress import ReplayProgress
        from archline.report.registry import render_run
        from archline.report.replay import design_text

        # where the minutes go, on stderr (stdout stays the table or the JSON)
        progress = ReplayProgress(time.monotonic, lambda line: err_console.print(line, markup=False, highlight=False))
        res = run_replay(
            step, gpu=gpu, top=top, marginal=not no_marginal, out=out, force=force, repeats=repeats,
            design=n_design, design_seed=design_seed, design_budget_s=design_budget, design_kind=design_kind,
            prime=not no_prime, keep_buffers=not reuse_buffers, design_p_on=design_p_on, design_replicates=reps,
            design_model=design_model, on_trial=progress,
        )  # fmt: skip
        rep = render_run(out)
        if as_json:
            print_json({**res.summary(), "rows": [r.to_row() for r in res.rows], "report": str(rep.markdown)})
            return
        body = []
        for r in res.rows:
            marg = "—" if r.marginal_j is None else f"{r.marginal_j:.4g} ± {r.marginal_sigma_j or 0:.2g}"
            iso = f"{r.energy_j:.4g} ± {r.energy_sigma_j:.2g}" if r.measurable else "not measured"
            iso = "—" if r.measurable and not math.isfinite(r.energy_j) else iso
            ctx = "—" if r.context_j is None else f"{r.context_j:.4g} ± {r.context_sigma_j or 0:.2g}"
            spread = "—" if r.run_spread_pct is None else f"{r.run_spread_pct:.2f}"
            time_ms = f"{1e3 * r.time_s:.4g}" if r.measurable else "—"
            body.append([escape(r.group), time_ms, iso, marg, spread] + [ctx] * (res.design is not None))
        cols = [
            Col("group", "name"), Col("time (ms)"), Col("isolated (J)"), Col("marginal (J)", drop=1),
            Col("spread (%)", drop=2),
        ] + [Col("in context (J)")] * (res.design is not None)  # fmt: skip
        title = f"one step: {res.step_energy_j:.4g} ± {res.step_sigma_j:.2g} J, {1e3 * res.step_time_s:.4g} ms"
        t, _ = fit_table(cols, body, console=console, title=title)
        console.print(t)
        console.print(
            f"sum of isolated energies: {res.sum_isolated_j:.4g} J ({res.sum_vs_step_pct:+.2f} % of the step)"
        )
        sw = res.switching
        console.print(f"nodes switched by '{sw.get('mode')}' ({sw.get('not_switchable_nodes', 0)} could not be)")
        for r in res.not_measurable:
            console.print(f"not measured: {escape(r.group[:60])}: {escape(r.reason)}")
        if res.design is not None:
            console.print(escape(design_text(res.design).strip()))
        for n in res.notes:
            if n.startswith("design "):
                console.print(escape(n))
        rr = res.reproducibility
        if rr is not None:
            from archline.measurement.attribute.replay_stats import unresolved_text

            console.print(
                f"run-to-run spread over {res.repeats} runs: median {rr['median_spread_pct']:.2f} %, "
                f"max {rr['max_spread_pct']:.2f} % ({escape(rr['worst_group'][:40])}): {rr['verdict']} "
                f"against {rr['target_pct']:g} %{escape(unresolved_text(rr))}; resolution {rr['resolution']}"
            )
        for w in rep.warnings:  # a step not restored between replays, groups measured with the clocks slowed
            err_console.print(f"archline: warning: {w}", soft_wrap=True, markup=False)
        console.print(f"report: {rep.markdown}")

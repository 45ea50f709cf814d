"""CLI: ``archline counts -o FILE -- CMD ARGS``: a program's Nsight Compute counts per launch, for model priors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from archline.cli._common import console, handle_errors
from archline.errors import InputError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``archline counts``."""

    @app.command(
        "counts",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    @handle_errors
    def counts(
        command: Annotated[list[str], typer.Argument(metavar="-- COMMAND [ARGS]...", help="The program to profile.")],
        out: Annotated[Path, typer.Option("--out", "-o", help="The CSV to write (ncu's raw page, a row a launch).")],
        gpu: Annotated[int | None, typer.Option("--gpu", "-g", help="Show the program this GPU alone.")] = None,
        launch_skip: Annotated[
            int,
            typer.Option(
                "--launch-skip", help="Launches to let run before profiling (of each configuration with --per-config)."
            ),
        ] = 0,
        launch_count: Annotated[
            int | None, typer.Option("--launch-count", help="Launches to profile (default: all in the range).")
        ] = None,
        from_start: Annotated[
            bool,
            typer.Option(
                "--from-start/--profiler-range",
                help="Profile from the program's start, or only between its cudaProfilerStart and Stop "
                "(torch.cuda.profiler.start()/stop() around one step).",
            ),
        ] = True,
        per_config: Annotated[
            int | None,
            typer.Option(
                "--per-config",
                metavar="N",
                help="Count N launches of each launch configuration (kernel, grid, block) instead of --launch-count "
                "in all: for loops of many launches of few kernels (decode). A kernel's prior then weights its "
                "configurations alike, not by how often they run.",
            ),
        ] = None,
        timeout_s: Annotated[float, typer.Option("--timeout", help="Give up after this many seconds.")] = 1800.0,
    ) -> None:
        """Count each kernel launch of a program with Nsight Compute (ncu), for `archline run --prior-model`.

        ncu replays every profiled launch several times, so profile few: one step of a training loop (with
        --profiler-range, or --launch-skip/--launch-count). Clocks are never touched (--clock-control none);
        caches are not flushed (--cache-control none: a launch's first pass meets what its predecessors left; ncu's
        later passes of it meet warmer ones). The CSV keeps the kernels' mangled names, as CUPTI traces them.
        """
        if not command:
            raise InputError("no program to profile: give it after --, e.g. archline counts -o c.csv -- python t.py")
        if not (timeout_s > 0):
            raise InputError(f"--timeout must be positive (got {timeout_s})")
        if per_config is not None and (per_config < 1 or launch_count is not None):
            raise InputError("--per-config takes a count ≥ 1 and replaces --launch-count")
        from archline.hw.ncu import profile_program

        n, metrics = profile_program(
            command,
            out,
            gpu=gpu,
            launch_skip=launch_skip,
            launch_count=per_config if per_config is not None else launch_count,
            profile_from_start=from_start,
            per_config=per_config is not None,
            timeout_s=timeout_s,
        )
        console.print(f"{n} launches, {len(metrics)} metrics: {out}", soft_wrap=True, markup=False)

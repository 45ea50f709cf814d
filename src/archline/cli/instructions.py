"""CLI: ``archline instructions``: energy per PTX instruction at ptxas -O3 and -O0, and the techniques compared."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from archline.cli._common import GpuSessions, console, deps, err_console, gpu_indices, handle_errors, progress_bar
from archline.cli.multi_gpu import fan_out
from archline.errors import InputError

if TYPE_CHECKING:
    from archline.characterize.kernels.instructions import InstructionPair, Shape

__all__ = ["parse_opt_levels", "register"]


def parse_opt_levels(text: str) -> list[int]:
    """``"0,3"`` → [0, 3]; each must be a ptxas level 0–4."""
    out: list[int] = []
    for part in text.split(","):
        p = part.strip()
        if not p:
            continue
        try:
            v = int(p)
        except ValueError:
            raise InputError(f"--opt: {p!r} is not an optimisation level (use integers 0–4, e.g. --opt 0,3)") from None
        if not 0 <= v <= 4:
            raise InputError(f"--opt: optimisation level {v} is outside 0–4")
        if v not in out:
            out.append(v)
    if not out:
        raise InputError("--opt: no optimisation level given (e.g. --opt 0,3)")
    return out


def parse_shapes(text: str) -> list[Shape]:
    """``full,single`` → the launch shapes, each checked against the suite's."""
    from archline.characterize.kernels.instructions import SHAPES

    out: list[Shape] = []
    for s in (p.strip() for p in text.split(",")):
        if not s:
            continue
        if s not in SHAPES:
            raise InputError(f"--shapes: unknown launch shape {s!r}; use one of {', '.join(SHAPES)}")
        out.append(s)
    if not out:
        raise InputError("--shapes: no launch shape given (e.g. --shapes full,single)")
    return out


def register(app: typer.Typer) -> None:
    """Add ``archline instructions``."""

    @app.command("instructions")
    @handle_errors
    def instructions(
        ctx: typer.Context,
        gpu: str = typer.Option("0", "--gpu", help="GPU index, a list like 0,2, or 'all' (one process per GPU)."),
        only: list[str] = typer.Option([], "--only", help="Glob(s) of instructions, e.g. 'add.*' or 'inst.fma.*'."),
        opt: str = typer.Option("3,0", "--opt", help="ptxas optimisation levels, comma-separated (0–4)."),
        shapes: str = typer.Option(
            "full,single", "--shapes", help="Launch shapes: full (every SM), single (1 thread)."
        ),
        output: Path = typer.Option(
            Path("archline-instructions"), "-o", "--output", "--out", help="Run directory to write."
        ),
        force: bool = typer.Option(False, "--force", help="Overwrite an existing run directory."),
        repeat_of: Path | None = typer.Option(
            None, "--repeat-of", help="An earlier run: report the agreement with it."
        ),
        techniques: bool = typer.Option(True, "--techniques/--no-techniques", help="Compare SMA, PAPI and MTSM."),
        target_s: float = typer.Option(0.5, "--target-s", help="Seconds measured per full-GPU kernel."),
    ) -> None:
        """Energy per PTX instruction (Arafa et al. §III): (E_total − E_overhead) / instructions.

        Every instruction runs as a loop of dependent instances, and again with those
        instructions removed (the overhead kernel), at each optimisation level and in two
        shapes: the paper's one thread, and the whole GPU.
        """
        from archline.characterize.instructions import repeat_diffs
        from archline.characterize.kernels.instructions import instruction_pairs

        levels = parse_opt_levels(opt)
        pairs = instruction_pairs(only or ["*"], shapes=parse_shapes(shapes))
        if repeat_of is not None:
            repeat_diffs([], repeat_of)  # read the earlier table now: fail before the measurement, not after
        if target_s <= 0:
            raise InputError("--target-s must be > 0")
        gpus = gpu_indices(gpu)
        if len(gpus) > 1:
            fan_out("instructions", gpus, output, force=force, report=False)
            return
        with GpuSessions(deps(ctx)) as sessions:
            _run(gpus[0], pairs, levels, output, force, repeat_of, techniques, target_s, sessions)


def _run(
    gpu: int,
    pairs: Sequence[InstructionPair],
    levels: Sequence[int],
    output: Path,
    force: bool,
    repeat_of: Path | None,
    techniques: bool,
    target_s: float,
    sessions: GpuSessions | None = None,
) -> None:
    from archline.characterize.instructions import measure_instructions
    from archline.report.instructions import render

    with progress_bar() as prog:
        task = prog.add_task("instructions", total=len(pairs) * len(levels))

        def started(name: str, i: int, n: int) -> None:
            prog.update(task, description=name, completed=i, total=n)

        res = measure_instructions(
            gpu,
            pairs,
            levels,
            output,
            force=force,
            repeat_of=repeat_of,
            techniques=techniques,
            target_s=target_s,
            say=lambda m: err_console.print(f"archline: {m}"),
            on_start=started,
            nvml=sessions,
        )
    rep = render(output)
    console.print(f"report: {rep.markdown}")
    if rep.html:
        console.print(f"        {rep.html}")
    if res.interrupted:
        err_console.print(f"archline: interrupted: {len(res.rows)} rows finished; {output} holds them")
        raise typer.Exit(130)

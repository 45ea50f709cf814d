"""CLI: ``archline kernels``: the benchmarks, what each needs, whether it runs on an architecture; their PTX."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.markup import escape

from archline.cli._common import console, handle_errors, print_para
from archline.cli.tables import Col, fit_table
from archline.errors import InputError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``archline kernels``."""

    @app.command("kernels")
    @handle_errors
    def kernels(
        arch: str = typer.Option(
            "sm_90", "--arch", help="Target: sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100 or sm_120."
        ),
        only: list[str] = typer.Option([], "--only", help="Glob(s), names or dotted prefixes, e.g. 'arith.*'."),
        emit: Path | None = typer.Option(None, "--emit", help="Write each runnable kernel's PTX to DIR/<name>.ptx."),
    ) -> None:
        """List the benchmark kernels: group, unit, what each needs, and whether it runs on --arch
        (the PTX target and ISA version it is built with) or why it is skipped.

        No GPU is needed. The PTX is sized for an H100 (132 SMs); the runner sizes grids for the
        real device. CUDA 13's ptxas no longer accepts Volta (sm_70): that needs an older toolkit.
        """
        from archline.characterize.kernels.archs import emit_ptx, kernel_rows
        from archline.characterize.kernels.catalogue import catalogue, select
        from archline.core.arch import parse_arch

        target = parse_arch(arch)
        if emit is not None:  # a folder that cannot be written is bad input, before the table
            try:
                emit.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"--emit {emit}: cannot create the folder ({exc.strerror or exc})") from None
            if not emit.is_dir() or not os.access(emit, os.W_OK):
                raise InputError(f"--emit {emit}: not a folder this user can write")
        specs = select(only) if only else catalogue()
        rows = kernel_rows(specs, target)
        cols = [
            Col("benchmark", "name"),
            Col("group", "text", drop=2),
            Col("unit", "text", drop=1),
            Col("needs", "text"),
            Col(f"on {target.name}", "text"),
        ]
        cells = [
            [
                r.name,
                r.group,
                r.unit,
                r.needs,
                f"{r.target}, PTX {r.ptx_isa}" if r.runnable else f"skip: {r.skip_reason}",
            ]
            for r in rows
        ]
        runnable = sum(r.runnable for r in rows)
        caption = (
            f"{len(rows)} benchmarks; {runnable} run on {target.name} ({target.family}, compute capability "
            f"{target.cc_text}), {len(rows) - runnable} skipped"
        )
        table, dropped = fit_table(cols, [[escape(c) for c in row] for row in cells], console=console)
        console.print(table)
        print_para(caption)
        if dropped:
            console.print(f"(left out at this width: {', '.join(dropped)})")
        if emit is not None:
            paths = emit_ptx(specs, target, emit)
            console.print(f"wrote {len(paths)} PTX files for {target.name} to {emit}")

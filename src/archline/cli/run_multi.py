"""CLI: what ``archline run --gpu all|0,2`` prints: each GPU's kernels, a table of the GPUs and their total."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer
from rich import box
from rich.markup import escape

from archline.cli._common import console, err_console, parse_gpus, print_json
from archline.cli.tables import Col, fit_table
from archline.errors import InputError
from archline.measurement.attribute.ceiling import at_limit_warning

if TYPE_CHECKING:
    from archline.measurement.attribute.backend import Backend
    from archline.measurement.attribute.multi_run import MultiRun
    from archline.records.attribution import AttributionResult

__all__ = ["gpus_for_run", "print_multi_run"]


def gpus_for_run(spec: str, backend: Backend) -> tuple[list[int], bool]:
    """The GPUs ``--gpu`` names (checked against the machine's where it says how many it has), and whether they
    are all it has (then the program is shown every GPU)."""
    count = backend.device_count() if backend.device_count is not None else None
    if count is None:
        if spec.strip().lower() == "all":
            raise InputError("--gpu all: this backend cannot say how many GPUs there are; name them (--gpu 0,1)")
        gpus = parse_gpus(spec, None)
        return gpus, False
    gpus = parse_gpus(spec, count)
    return gpus, sorted(gpus) == list(range(count))


def _num(v: Any, fmt: str, unit: str = "") -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return "—"
    return f"{v:{fmt}}{unit}"


def _ids(v: Any) -> str:
    return "" if v is None else str(v)


def _gpu_table(run: MultiRun) -> Any:
    cols = [
        Col("GPU", "text"),
        Col("UUID", "text", drop=3),
        Col("ranks", "text", drop=4),
        Col("energy"),
        Col("kernels"),
        Col("NCCL", drop=2),
        Col("ident.", drop=1),
        Col("status", "text", drop=5),
    ]
    rows = [
        [
            str(r["gpu"]),
            str(r["gpu_uuid"])[4:12],
            _ids(r["ranks"]),
            _num(r.get("energy_j"), ".4g", " J"),
            _num(r.get("kernel_energy_j"), ".4g", " J"),
            _num(r.get("comm_energy_j"), ".3g", " J"),
            _num(100 * r["identifiable_share"] if isinstance(r.get("identifiable_share"), float) else None, ".0f", "%"),
            str(r["status"]),
        ]
        for r in run.gpu_rows
    ]
    rows.append(["total", "", "", _num(run.total_energy_j, ".4g", " J"), "", "", "", ""])
    t, _ = fit_table(
        cols,
        rows,
        console=console,
        title="GPU energy per GPU (each attributed against its own sensors)",
        caption="energy: the GPU's energy counter over the span (= the sum of its rows); kernels: its kernel, "
        "copy and memset rows (NCCL included); ident.: share of kernel energy in identifiable rows",
        section_ends={len(rows) - 2},
        box=box.SIMPLE_HEAD,
    )
    return t


def print_multi_run(
    run: MultiRun, code: int, *, top: int, as_json: bool, kernel_table: Callable[[AttributionResult, int], Any]
) -> None:
    """Print the run (each GPU's ``kernel_table``, then the GPUs and their total, notes), or its JSON; exit with the
    program's status."""
    if as_json:
        print_json({"exit_code": code, **run.to_json()})
    else:
        for g, row in zip(run.gpus, run.gpu_rows, strict=True):
            result = g.attribution.result
            ranks = f", ranks {row['ranks']}" if row.get("ranks") is not None else ""
            console.print(
                f"\n[bold]GPU {g.target.index}[/] ({escape(g.target.name)}, {g.target.uuid[:12]}{ranks})",
                highlight=False,
            )
            if result is not None:
                console.print(kernel_table(result, top))
                if result.whole_program_only:
                    console.print("[yellow]whole-program energy only on this GPU: no per-kernel rows[/] (see notes)")
        console.print(_gpu_table(run))
        for n in run.notes:
            console.print(f"[dim]note:[/] {escape(n)}", markup=True, highlight=False)
        console.print(f"run directory: {run.run_dir.path} (each GPU's own: gpu<i>/)")
        console.print(f"report: archline report {run.run_dir.path}")
    for g in run.gpus:  # on stderr, with --json too
        result = g.attribution.result
        if result is not None and (warn := at_limit_warning(result.extra)) is not None:
            err_console.print(f"archline: warning: GPU {g.target.index}: {warn}", soft_wrap=True, markup=False)
    if code != 0:
        err_console.print(f"[bold red]archline: error:[/] the program exited with status {code}")
        raise typer.Exit(code)
